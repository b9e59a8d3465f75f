package notify

import (
	"fmt"
	"net/http"
)

// Fence says whether this process may still send for its tenant: nil while
// it may, otherwise why not. A replica's fence is its lease's check
// (docs/design.md §14): once the lease is past its validity on the monotonic
// clock, every send is refused, also in a process that was paused and has
// just resumed. A fence that has refused must keep refusing. A nil Fence
// never refuses.
type Fence func() error

// Check returns the fence's refusal, or nil when f is nil or allows.
func (f Fence) Check() error {
	if f == nil {
		return nil
	}
	return f()
}

// FencedTransport returns a RoundTripper that asks fence immediately before
// each request and sends it with next (http.DefaultTransport when nil) only
// when fence allows; a refused request fails with the fence's error and
// reaches nobody. This is the last check before the wire for every HTTP
// sink: it comes after the sink's own pacing, and before each request of a
// send that makes several (a thread reply and the edit of its start, a
// digest and its list). With a nil fence it returns next itself.
func FencedTransport(fence Fence, next http.RoundTripper) http.RoundTripper {
	if fence == nil {
		return next
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return &fencedTransport{fence: fence, next: next}
}

type fencedTransport struct {
	fence Fence
	next  http.RoundTripper
}

// RoundTrip sends req when the fence allows.
func (t *fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.fence(); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("not sent: %w", err)
	}
	return t.next.RoundTrip(req)
}
