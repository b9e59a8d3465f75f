package notify_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
)

// raSink answers the first attempt at each event as script says (503:
// retryable without Retry-After; 429: retryable, asks to wait 30 s; else
// delivered) and delivers every later attempt, recording when each came.
type raSink struct {
	clk    interface{ Now() time.Time }
	script map[string]int
	mu     sync.Mutex
	at     map[string][]time.Time
}

func (s *raSink) Name() string { return "pipe" }

func (s *raSink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	o := s.SendAll(ctx, []notify.Delivery{d})[0]
	return o.Result, o.Err
}

func (s *raSink) SendAll(_ context.Context, ds []notify.Delivery) []notify.Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]notify.Outcome, len(ds))
	for k, d := range ds {
		id := d.Entry.EventID
		s.at[id] = append(s.at[id], s.clk.Now())
		if len(s.at[id]) > 1 {
			continue
		}
		switch s.script[id] {
		case 503:
			out[k] = notify.Outcome{Result: notify.Result{Retry: true}, Err: errors.New("503 unavailable")}
		case 429:
			out[k] = notify.Outcome{Result: notify.Result{Retry: true, RetryAfter: 30 * time.Second}, Err: errors.New("429 slow down")}
		}
	}
	return out
}

// The destination answered one request of a run with a 503 (no
// Retry-After) and a later one with a 429 asking to wait 30 s: nothing may
// go to it again before those 30 s. The Deliverer retries the 503 after its
// backoff (1 s), then, once that went through, marks every later failure of
// the run stale and attempts it afresh at once: the 429's Retry-After is
// dropped and the destination is hit 1 s after it asked for 30.
func TestReviewRetryAfterBehindARetryableFailureWithoutOne(t *testing.T) {
	f := newFixture(t, "pipe")
	occurred := f.clk.Now().Add(-time.Minute)
	for _, id := range []string{"a", "b", "c", "d"} {
		f.apply(alarm(id, 1, event.StatusOngoing, occurred, time.Time{}))
	}
	sink := &raSink{clk: f.clk, script: map[string]int{"b:start": 503, "c:start": 429}, at: map[string][]time.Time{}}
	began := f.clk.Now()
	_, stop := f.runDeliverer(notify.Options{}, notify.Target{Sink: sink})
	f.driveUntil(1, began.Add(time.Hour), func() bool { return len(f.pending("pipe")) == 0 })
	stop()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	c := sink.at["c:start"]
	if len(c) != 2 {
		t.Fatalf("c:start attempted at %v, want twice", c)
	}
	for id, ts := range sink.at {
		for _, at := range ts[1:] {
			if at.Sub(c[0]) < 30*time.Second {
				t.Errorf("%s attempted again %s after the destination asked to wait 30 s", id, at.Sub(c[0]))
			}
		}
	}
}
