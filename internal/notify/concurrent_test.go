package notify_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
)

// distinctRun returns n deliveries of distinct alarms, d0:start to d<n-1>:start.
func distinctRun(n int) []notify.Delivery {
	ds := make([]notify.Delivery, n)
	for i := range ds {
		origin := fmt.Sprintf("d%d", i)
		ds[i] = notify.Delivery{EventID: origin + ":start", OriginID: origin, Attempt: 1}
	}
	return ds
}

// startLog records the order in which attempts started.
type startLog struct {
	mu      sync.Mutex
	started []string
}

func (r *startLog) start(d notify.Delivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, d.EventID)
}

func (r *startLog) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.started)
}

func deliveryIDs(ds []notify.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.EventID
	}
	return out
}

// Every delivery of a run is attempted once, never more than limit at once;
// with limit 1, strictly one after the other, in order. The attempts here wait for
// each other by limit, so that the limit is reached, not merely respected.
func TestSendConcurrentlyHasAtMostLimitInFlight(t *testing.T) {
	for _, limit := range []int{1, 3, 8} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			ds := distinctRun(24)
			rec := &startLog{}
			gate := notifytest.NewGate(limit)
			out := notify.SendConcurrently(context.Background(), ds, limit, "the test destination",
				func(_ context.Context, d notify.Delivery) (notify.Result, error) {
					rec.start(d)
					if !gate.Pass(10 * time.Second) {
						t.Errorf("%s: waited 10 s for %d attempts in flight", d.EventID, limit)
					}
					return notify.Result{Memory: map[string]string{"id": d.EventID}}, nil
				})
			if most := gate.Most(); most != limit {
				t.Errorf("at most %d attempts in flight, want %d", most, limit)
			}
			got, want := rec.ids(), deliveryIDs(ds)
			if limit > 1 {
				// Attempts in flight together start in any order.
				slices.Sort(got)
				slices.Sort(want)
			}
			if !slices.Equal(got, want) {
				t.Errorf("attempts started in the order %v, want %v", got, want)
			}
			for i, o := range out {
				if o.Err != nil || o.Result.Memory["id"] != ds[i].EventID {
					t.Errorf("outcome %d = %+v, want the success of %s", i, o, ds[i].EventID)
				}
			}
		})
	}
}

// A 429 with Retry-After in the middle of a run stops it: the attempts not
// started are not made, and their outcomes are retryable after the same
// wait, saying why.
func TestSendConcurrentlyStopsTheRunAtARetryableFailure(t *testing.T) {
	for _, tc := range []struct {
		name    string
		res     notify.Result
		wantErr string
	}{
		{"Retry-After", notify.Result{Retry: true, RetryAfter: 30 * time.Second}, "not attempted: https://hooks.example/in asked to wait 30s when sent d3:start"},
		{"no Retry-After", notify.Result{Retry: true}, "not attempted: https://hooks.example/in failed d3:start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := distinctRun(8)
			rec := &startLog{}
			out := notify.SendConcurrently(context.Background(), ds, 1, "https://hooks.example/in",
				func(_ context.Context, d notify.Delivery) (notify.Result, error) {
					rec.start(d)
					if d.EventID == "d3:start" {
						return tc.res, errors.New("HTTP 429")
					}
					return notify.Result{}, nil
				})
			if got, want := strings.Join(rec.ids(), " "), "d0:start d1:start d2:start d3:start"; got != want {
				t.Fatalf("attempted %q, want %q and nothing after the failure", got, want)
			}
			for i, o := range out {
				switch {
				case i < 3:
					if o.Err != nil {
						t.Errorf("outcome %d: %v, want a delivery", i, o.Err)
					}
				case i == 3:
					if o.Err == nil || o.Result.Retry != tc.res.Retry || o.Result.RetryAfter != tc.res.RetryAfter {
						t.Errorf("outcome 3 = %+v, want the failure as sent", o)
					}
				default:
					var na *notify.NotAttemptedError
					if !errors.As(o.Err, &na) || o.Err.Error() != tc.wantErr {
						t.Errorf("outcome %d error = %v, want a *NotAttemptedError %q", i, o.Err, tc.wantErr)
					}
					if !o.Result.Retry || o.Result.RetryAfter != tc.res.RetryAfter {
						t.Errorf("outcome %d: retry %v after %s, want a retry after %s", i, o.Result.Retry, o.Result.RetryAfter, tc.res.RetryAfter)
					}
				}
			}
		})
	}
}

// A failure that is final concerns its own delivery: the run goes on.
func TestSendConcurrentlyFinalFailureStopsNothing(t *testing.T) {
	ds := distinctRun(6)
	out := notify.SendConcurrently(context.Background(), ds, 2, "the test destination",
		func(_ context.Context, d notify.Delivery) (notify.Result, error) {
			if d.EventID == "d1:start" {
				return notify.Result{}, errors.New("HTTP 400")
			}
			return notify.Result{}, nil
		})
	for i, o := range out {
		if (o.Err != nil) != (i == 1) || o.Result.Retry {
			t.Errorf("outcome %d = %+v, want only d1:start failed, for good", i, o)
		}
	}
}

// A run whose context has ended attempts nothing more.
func TestSendConcurrentlyAttemptsNothingOnceCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	attempts := 0
	out := notify.SendConcurrently(ctx, distinctRun(5), 4, "the test destination",
		func(context.Context, notify.Delivery) (notify.Result, error) {
			attempts++
			return notify.Result{}, nil
		})
	if attempts != 0 {
		t.Fatalf("%d attempts after the context ended, want none", attempts)
	}
	for i, o := range out {
		if !o.Result.Retry || !errors.Is(o.Err, context.Canceled) || !strings.HasPrefix(o.Err.Error(), "not attempted: ") {
			t.Errorf("outcome %d = %+v, want a retryable not attempted: context canceled", i, o)
		}
	}
}

// Without deliveries, nothing is attempted and nothing is answered.
func TestSendConcurrentlyOfNothing(t *testing.T) {
	out := notify.SendConcurrently(context.Background(), nil, 8, "the test destination",
		func(context.Context, notify.Delivery) (notify.Result, error) {
			t.Error("an attempt without a delivery")
			return notify.Result{}, nil
		})
	if len(out) != 0 {
		t.Fatalf("%d outcomes of no delivery", len(out))
	}
}
