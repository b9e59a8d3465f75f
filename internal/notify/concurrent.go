package notify

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// NotAttemptedError is the error of a delivery that SendConcurrently did not
// attempt, because an earlier attempt of its run failed in a way worth
// retrying: the destination asked to wait, or failed. The delivery is
// retryable; sending it at once would only meet the same answer.
type NotAttemptedError struct {
	// Destination names where the requests go, without credentials.
	Destination string
	// After is the event id of the failed attempt.
	After string
	// Wait is the Retry-After that attempt was answered with; zero when
	// none.
	Wait time.Duration
	// Cause is the context's error when the run was cancelled instead.
	Cause error
}

func (e *NotAttemptedError) Error() string {
	switch {
	case e.Cause != nil:
		return fmt.Sprintf("not attempted: %v", e.Cause)
	case e.Wait > 0:
		return fmt.Sprintf("not attempted: %s asked to wait %s when sent %s", e.Destination, e.Wait, e.After)
	default:
		return fmt.Sprintf("not attempted: %s failed %s", e.Destination, e.After)
	}
}

// Unwrap returns the context's error of a cancelled run, nil otherwise.
func (e *NotAttemptedError) Unwrap() error { return e.Cause }

// SendConcurrently makes one attempt at each of ds with send, taking them in
// order with at most limit in flight (at least one), and returns one
// Outcome per delivery, in order: the body of a Pipeliner's SendAll for a
// sink whose destination takes requests in parallel and that paces nothing
// itself.
//
// Retry-After and backoff stay per destination: once an attempt fails with
// Result.Retry set, no further attempt of the run starts. The deliveries not
// started get a retryable Outcome carrying that attempt's RetryAfter, with a
// *NotAttemptedError naming dest (which must hold no secret); attempts in
// flight complete. A failure that is final (Retry false) concerns its own
// delivery only and stops nothing. When ctx ends, the deliveries not started
// are not attempted either. send is called from several goroutines at once.
func SendConcurrently(ctx context.Context, ds []Delivery, limit int, dest string,
	send func(context.Context, Delivery) (Result, error)) []Outcome {
	out := make([]Outcome, len(ds))
	var (
		mu      sync.Mutex
		next    int
		stopped *NotAttemptedError
	)
	// take returns the index of the next delivery to attempt, or false when
	// none is left or the run stopped.
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if stopped == nil && ctx.Err() != nil {
			stopped = &NotAttemptedError{Destination: dest, Cause: ctx.Err()}
		}
		if stopped != nil || next == len(ds) {
			return 0, false
		}
		next++
		return next - 1, true
	}
	work := func() {
		for {
			i, ok := take()
			if !ok {
				return
			}
			res, err := send(ctx, ds[i])
			out[i] = Outcome{Result: res, Err: err}
			if err != nil && res.Retry {
				mu.Lock()
				if stopped == nil {
					stopped = &NotAttemptedError{Destination: dest, After: ds[i].EventID, Wait: res.RetryAfter}
				}
				mu.Unlock()
			}
		}
	}
	var wg sync.WaitGroup
	for range min(max(limit, 1), len(ds)) {
		wg.Go(work)
	}
	wg.Wait()
	for i := next; i < len(ds); i++ {
		out[i] = Outcome{Result: Result{Retry: true, RetryAfter: stopped.Wait}, Err: stopped}
	}
	return out
}
