package sim

import (
	"fmt"
	"sync"
	"time"
)

// FaultKind is a way an answer can go wrong.
type FaultKind int

// The fault kinds InjectFault accepts.
const (
	// FaultServerError answers with HTTP Fault.Status (default 503) and a
	// plain-text body.
	FaultServerError FaultKind = iota + 1
	// FaultEnvelope answers HTTP 200 with the failure envelope C0001.
	FaultEnvelope
	// FaultMalformedJSON answers HTTP 200 with a body that is not JSON.
	FaultMalformedJSON
	// FaultTruncated serves the request and then sends only the first half
	// of the body, with the Content-Length of the whole, so a real client
	// sees an unexpected end of the body.
	FaultTruncated
	// FaultDelay waits Fault.Delay of real time (the request's context
	// cuts it short) and then serves the request normally.
	FaultDelay
	// FaultRateLimited answers as the rate limit does, without counting a
	// violation.
	FaultRateLimited
	// FaultExpiredToken answers A0230, whatever the token.
	FaultExpiredToken
	// FaultDropAlarm is a paging glitch: the next getAlarmList page that
	// has records omits one of them while total stays the same. It only
	// applies to getAlarmList.
	FaultDropAlarm
)

var faultNames = map[FaultKind]string{
	FaultServerError: "server error", FaultEnvelope: "envelope C0001", FaultMalformedJSON: "malformed JSON",
	FaultTruncated: "truncated body", FaultDelay: "delay", FaultRateLimited: "rate limited",
	FaultExpiredToken: "expired token", FaultDropAlarm: "drop alarm",
}

// String names the kind.
func (k FaultKind) String() string {
	if n, ok := faultNames[k]; ok {
		return n
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// Fault is a fault to inject into the answers of one endpoint.
type Fault struct {
	Kind FaultKind
	// Count is how many requests it affects: 0 means one, a negative count
	// means every request until ClearFaults.
	Count int
	// Delay is the wait of FaultDelay.
	Delay time.Duration
	// Status is the HTTP status of FaultServerError; default 503.
	Status int
}

// faults holds the injected faults: a queue per endpoint, applied in order,
// each for its Count requests.
type faults struct {
	mu     sync.Mutex
	queues map[string][]Fault
	drops  int // pending FaultDropAlarm pages; negative means always
}

func newFaults() *faults { return &faults{queues: map[string][]Fault{}} }

func (f *faults) inject(endpoint string, ft Fault) error {
	if _, ok := faultNames[ft.Kind]; !ok {
		return fmt.Errorf("sim: unknown fault kind %d", int(ft.Kind))
	}
	if endpoint != AnyEndpoint && !knownEndpoint(endpoint) {
		return fmt.Errorf("sim: unknown endpoint %q", endpoint)
	}
	if ft.Count == 0 {
		ft.Count = 1
	}
	if ft.Kind == FaultServerError && ft.Status == 0 {
		ft.Status = 503
	}
	if ft.Kind == FaultServerError && (ft.Status < 500 || ft.Status > 599) {
		return fmt.Errorf("sim: server error status %d is not 5xx", ft.Status)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if ft.Kind == FaultDropAlarm {
		if endpoint != EndpointAlarmList && endpoint != AnyEndpoint {
			return fmt.Errorf("sim: %v only applies to %s", ft.Kind, EndpointAlarmList)
		}
		if ft.Count < 0 || f.drops < 0 {
			f.drops = -1
		} else {
			f.drops += ft.Count
		}
		return nil
	}
	f.queues[endpoint] = append(f.queues[endpoint], ft)
	return nil
}

// take returns the fault for the next request to endpoint, if any: the head
// of the endpoint's own queue, else of the AnyEndpoint queue.
func (f *faults) take(endpoint string) (Fault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, key := range []string{endpoint, AnyEndpoint} {
		q := f.queues[key]
		if len(q) == 0 {
			continue
		}
		ft := q[0]
		if q[0].Count > 0 {
			q[0].Count--
			if q[0].Count == 0 {
				q = q[1:]
			}
		}
		if len(q) == 0 {
			delete(f.queues, key)
		} else {
			f.queues[key] = q
		}
		return ft, true
	}
	return Fault{}, false
}

// takeDrop reports whether the page being answered should lose a record.
func (f *faults) takeDrop() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.drops < 0:
		return true
	case f.drops > 0:
		f.drops--
		return true
	}
	return false
}

func (f *faults) clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queues = map[string][]Fault{}
	f.drops = 0
}
