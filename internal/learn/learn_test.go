package learn

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/store"
)

var t0 = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

func newUpstream(t *testing.T) *Upstream {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "relay.db"), store.Options{Clock: clock.NewFake(t0), LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return New(Config{Store: st, Clock: clock.NewFake(t0)})
}

// TestLatenessQuantilesAreWithinABucket: the sketch's p50 and p99 are at
// or above the true quantile and within a fifth of it; alarms seen before
// they occurred are counted apart.
func TestLatenessQuantilesAreWithinABucket(t *testing.T) {
	u := newUpstream(t)
	for i := range 1000 {
		late := time.Duration(i+1) * time.Second // 1 s to 1000 s
		u.FirstSeen(t0, t0.Add(late))
	}
	u.FirstSeen(t0, t0.Add(-90*time.Second))
	l := u.Facts().Lateness
	for _, q := range []struct {
		name      string
		got, want time.Duration
	}{{"p50", l.P50, 500 * time.Second}, {"p99", l.P99, 990 * time.Second}} {
		if q.got < q.want || q.got > q.want*6/5 {
			t.Errorf("%s = %s; want %s to %s", q.name, q.got, q.want, q.want*6/5)
		}
	}
	if l.Max != 1000*time.Second || l.Samples != 1001 || l.Ahead != 1 || l.MaxAhead != 90*time.Second {
		t.Errorf("lateness %+v; want max 1000s, 1001 samples, 1 ahead by 90s", l)
	}
}

// TestARefutedOrderNeedsTenTimesTheEvidence: an order refuted once holds
// again only after ten times the evidence that made it hold first.
func TestARefutedOrderNeedsTenTimesTheEvidence(t *testing.T) {
	u := newUpstream(t)
	// Two rows, the first recovered later but occurred earlier: in
	// recovery order, not in occurrence order.
	page := []event.Alarm{
		{OccurredAt: t0, RecoveredAt: t0.Add(10 * time.Minute)},
		{OccurredAt: t0.Add(time.Minute), RecoveredAt: t0.Add(2 * time.Minute)},
	}
	feed := func(n int) {
		for range n {
			u.RecoveredPage(t0, t0.Add(time.Hour), page)
		}
	}
	feed(orderEvidence)
	if s := u.Facts().RecoveryOrder.State; s != Holds {
		t.Fatalf("after %d pairs: %s; want holds", orderEvidence, s)
	}
	u.RecoveredPage(t0, t0.Add(time.Hour), []event.Alarm{page[1], page[0]})
	if s := u.Facts().RecoveryOrder.State; s != Refuted {
		t.Fatalf("after a pair out of order: %s; want refuted", s)
	}
	feed(relearnFactor*orderEvidence - 1)
	if s := u.Facts().RecoveryOrder.State; s != Refuted {
		t.Fatalf("one pair short of relearning: %s; want refuted", s)
	}
	feed(1)
	if s := u.Facts().RecoveryOrder.State; s != Holds {
		t.Fatalf("after relearning: %s; want holds", s)
	}
	if s := u.Facts().OccurrenceOrder.State; s != Refuted {
		t.Fatalf("occurrence order: %s; want refuted", s)
	}
}

// TestRatesFollowTheTransitionsDetected: an account whose alarms start and
// end once a minute is learned at about 60 an hour after two and a half, a
// quiet one at under one, and one that went quiet two hours ago at
// its new rate; before any evidence both are one in two minutes.
func TestRatesFollowTheTransitionsDetected(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "relay.db"), store.Options{Clock: clock.NewFake(t0), LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	clk := clock.NewFake(t0)
	busy := New(Config{Store: st, Clock: clk})
	quiet := New(Config{Store: st, Clock: clk})
	if r := busy.Rates(); r.StartsPerHour != 30 || r.EndsPerHour != 30 || r.Starts != 0 {
		t.Fatalf("rates before any evidence: %+v; want 30 an hour each", r)
	}
	for range 150 {
		clk.Advance(time.Minute)
		busy.Transitions(1, 1)
	}
	within := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 0.1*want {
			t.Errorf("%s = %.2f an hour; want %.2f ± 10%%", name, got, want)
		}
	}
	r := busy.Rates()
	within("busy starts", r.StartsPerHour, 60)
	within("busy ends", r.EndsPerHour, 60)
	if r.Over != 90*time.Minute || r.Starts != 91 {
		t.Errorf("busy counted %d starts over %s; want 91 over 1h30m (the hour before this one, and this one so far)", r.Starts, r.Over)
	}
	if q := quiet.Rates(); q.StartsPerHour > 0.75 || q.Starts != 0 {
		t.Errorf("quiet: %+v; want no start counted, under 0.75 an hour", q)
	}
	quiet.Transitions(1, 0)
	if q := quiet.Facts().Rates; q.Starts != 1 || q.EndsPerHour >= q.StartsPerHour {
		t.Errorf("quiet after a start: %+v; want one start counted and more starts than ends", q)
	}
	// The busy account goes quiet: two hours later its old rate is gone.
	clk.Advance(2 * time.Hour)
	if r := busy.Rates(); r.Starts != 0 || r.StartsPerHour > 1 {
		t.Errorf("busy two hours after its last alarm: %+v; want nothing counted", r)
	}
}
