package sim

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// Stats counts what the simulator was asked, for tests and the demo.
type Stats struct {
	// Requests counts every arrival, including refused and unknown ones.
	Requests int
	// Violations counts requests refused by the per-IP rate limit.
	Violations int
	// Logins counts successful logins; LoginFailures counts refused ones.
	Logins        int
	LoginFailures int
	// Faults counts answers replaced or altered by an injected fault.
	Faults int
	// Endpoints breaks the counts down by endpoint name ("unknown" for paths
	// that are no endpoint).
	Endpoints map[string]EndpointStats
}

// EndpointStats counts the requests of one endpoint.
type EndpointStats struct {
	Requests   int
	Violations int
	Faults     int
	// Errors counts answers with a failure code other than a rate-limit
	// refusal or an injected fault: token, parameter and login errors.
	Errors int
}

// Arrival records one request as it arrived.
type Arrival struct {
	At       time.Time
	IP       string
	Endpoint string
	// Limited is true when the rate limit refused the request.
	Limited bool
}

// maxArrivals bounds the arrival log; older arrivals are forgotten.
const maxArrivals = 100_000

// traffic is the per-IP rate limiter and the request accounting.
type traffic struct {
	limit  int
	window time.Duration
	// spacing, when set, also refuses a data request arriving sooner than
	// that after the one admitted before it from its IP.
	spacing time.Duration

	mu       sync.Mutex
	admitted map[string][]time.Time // per IP, admitted arrivals inside the window
	lastData map[string]time.Time   // per IP, the last data request admitted (Spacing)
	stats    Stats
	arrivals []Arrival
}

func newTraffic(limit int, window, spacing time.Duration) *traffic {
	return &traffic{limit: limit, window: window, spacing: spacing, admitted: map[string][]time.Time{}, lastData: map[string]time.Time{}, stats: Stats{Endpoints: map[string]EndpointStats{}}}
}

// arrive records a request and decides whether the rate limit admits it; when
// it does not, retryAfter is how long until it would.
func (t *traffic) arrive(ip, endpoint string, now time.Time) (ok bool, retryAfter time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ok = true
	if t.limit > 0 {
		log := t.admitted[ip]
		cut := 0
		for cut < len(log) && !log[cut].After(now.Add(-t.window)) {
			cut++
		}
		log = log[cut:]
		switch {
		case len(log) >= t.limit:
			ok, retryAfter = false, log[0].Add(t.window).Sub(now)
		case t.spacing > 0 && endpoint != EndpointLogin && !t.lastData[ip].IsZero() && now.Sub(t.lastData[ip]) < t.spacing:
			ok, retryAfter = false, t.lastData[ip].Add(t.spacing).Sub(now)
		default:
			if endpoint != EndpointLogin {
				t.lastData[ip] = now
			}
			log = append(log, now)
		}
		if len(log) == 0 {
			delete(t.admitted, ip)
		} else {
			t.admitted[ip] = log
		}
	}
	es := t.stats.Endpoints[endpoint]
	es.Requests++
	t.stats.Requests++
	if !ok {
		es.Violations++
		t.stats.Violations++
	}
	t.stats.Endpoints[endpoint] = es
	if len(t.arrivals) >= maxArrivals {
		t.arrivals = slices.Delete(t.arrivals, 0, maxArrivals/10)
	}
	t.arrivals = append(t.arrivals, Arrival{At: now, IP: ip, Endpoint: endpoint, Limited: !ok})
	return ok, retryAfter
}

// outcome is how an admitted request was answered, for the counters.
type outcome int

const (
	outcomeOK outcome = iota
	outcomeError
	outcomeFault
	outcomeLogin
	outcomeLoginFailure
)

func (t *traffic) record(endpoint string, o outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	es := t.stats.Endpoints[endpoint]
	switch o {
	case outcomeError:
		es.Errors++
	case outcomeFault:
		es.Faults++
		t.stats.Faults++
	case outcomeLogin:
		t.stats.Logins++
	case outcomeLoginFailure:
		es.Errors++
		t.stats.LoginFailures++
	}
	t.stats.Endpoints[endpoint] = es
}

func (t *traffic) snapshot() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stats
	s.Endpoints = maps.Clone(t.stats.Endpoints)
	return s
}

func (t *traffic) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stats = Stats{Endpoints: map[string]EndpointStats{}}
	t.arrivals = nil
}

func (t *traffic) arrivalLog() []Arrival {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.arrivals)
}

// maxInWindow is the largest number of arrivals from one IP inside any
// window of length w (a half-open interval, as the limiter counts).
func maxInWindow(arrivals []Arrival, w time.Duration) int {
	byIP := map[string][]time.Time{}
	for _, a := range arrivals {
		byIP[a.IP] = append(byIP[a.IP], a.At)
	}
	best := 0
	for _, ts := range byIP {
		slices.SortFunc(ts, time.Time.Compare)
		i := 0
		for j := range ts {
			for ts[j].Sub(ts[i]) >= w {
				i++
			}
			best = max(best, j-i+1)
		}
	}
	return best
}
