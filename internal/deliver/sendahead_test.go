package deliver_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/store"
)

// While a run goes out, the loop reads the next page of the outbox and asks
// alarm management about it: a run's decisions (a read of the sinks'
// memories, a decode of each event, the gate's verdicts) no longer leave
// the destination idle between runs.
func TestTheNextRunIsDecidedWhileARunIsSent(t *testing.T) {
	f := delivertest.New(t, "pipe")
	occurred := f.Clock.Now().Add(-time.Minute)
	for i := range 6 {
		f.Apply(delivertest.Alarm(fmt.Sprintf("a%d", i), 1, event.StatusOngoing, occurred, time.Time{}))
	}
	gate := &timedGate{clk: f.Clock, want: "a3:start", asked: make(chan struct{})}
	sink := &slowSink{clk: f.Clock, now: f.Clock.Now, gate: gate, at: map[string]time.Time{}}
	f.RunDeliverer(deliver.Options{Gate: gate, Batch: 3}, deliver.Target{Sink: sink})
	f.DriveUntil(1, f.Clock.Now().Add(time.Hour), func() bool { return len(f.Pending("pipe")) == 0 })
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.runs != 2 {
		t.Errorf("%d runs, want 2 of 3", sink.runs)
	}
	if !sink.overlapped {
		t.Error("the gate was asked about the second run (a3 to a5) only after the first run was sent")
	}
}

// A run decided on while the run before it was sent does not go out as
// decided when that run failed: the run before is retried first (the
// destination asked to wait 30 s, and nothing reaches it before), and the
// next run is decided on again afterwards, so that a silence that began
// during the wait withholds it.
func TestARunReadWhileTheRunBeforeFailsIsDecidedAgainAfterTheRetry(t *testing.T) {
	f := delivertest.New(t, "pipe")
	occurred := f.Clock.Now().Add(-time.Minute)
	for _, id := range []string{"a", "b", "c", "d"} {
		f.Apply(delivertest.Alarm(id, 1, event.StatusOngoing, occurred, time.Time{}))
	}
	sink := &scriptSink{clk: f.Clock, script: map[string]int{"a:start": 429}, at: map[string][]time.Time{}}
	began := f.Clock.Now()
	gate := &timedGate{clk: f.Clock, from: began.Add(10 * time.Second)}
	_, stop := f.RunDeliverer(deliver.Options{Batch: 2, Gate: gate}, deliver.Target{Sink: sink})
	f.DriveUntil(1, began.Add(time.Hour), func() bool { return len(f.Pending("pipe")) == 0 })
	stop()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	a := sink.at["a:start"]
	if len(a) != 2 || a[1].Sub(a[0]) < 30*time.Second {
		t.Fatalf("a:start attempted at %v: want a second attempt at least 30 s (its Retry-After) after the first", a)
	}
	for _, id := range []string{"c:start", "d:start"} {
		if at := sink.at[id]; len(at) != 0 {
			t.Errorf("%s sent %s after a:start's first attempt, on a verdict made before the silence began at 10 s", id, at[0].Sub(a[0]))
		}
	}
	withheld, err := f.Store.ListWithheld(store.DeadLetterFilter{Sink: "pipe"})
	if err != nil {
		t.Fatal(err)
	}
	if len(withheld) != 2 {
		t.Errorf("%d entries withheld, want 2 (c and d)", len(withheld))
	}
}

// countingRunGate sends everything as it comes, deciding on runs at once,
// and counts how it was asked.
type countingRunGate struct {
	mu             sync.Mutex
	decides, runs  int
	decidedEntries int
}

func (g *countingRunGate) Manages(string) bool { return true }

func (g *countingRunGate) Decide(context.Context, string, *notify.Delivery) (deliver.Verdict, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.decides++
	return deliver.Verdict{}, nil
}

func (g *countingRunGate) DecideRun(_ context.Context, _ string, ds []*notify.Delivery) ([]deliver.Verdict, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.runs++
	g.decidedEntries += len(ds)
	return make([]deliver.Verdict, len(ds)), nil
}

func (g *countingRunGate) Digest(context.Context, notify.Sink, []notify.Delivery) (deliver.DigestOutcome, notify.Result, error) {
	panic("no digests here")
}

// A run gate is asked about the head of the outbox together with the run
// behind it: alarm management writes what it decided (the chattering
// histories) in one commit a run, not in one for the head and one for the
// rest.
func TestARunGateDecidesOnTheHeadWithItsRun(t *testing.T) {
	f := delivertest.New(t, "pipe")
	occurred := f.Clock.Now().Add(-time.Minute)
	for i := range 6 {
		f.Apply(delivertest.Alarm(fmt.Sprintf("a%d", i), 1, event.StatusOngoing, occurred, time.Time{}))
	}
	gate := &countingRunGate{}
	sink := &runSink{notes: map[string]string{}, bycmd: map[string]string{}}
	f.RunDeliverer(deliver.Options{Gate: gate, Batch: 3}, deliver.Target{Sink: sink})
	f.DriveUntil(1, f.Clock.Now().Add(time.Hour), func() bool { return len(f.Pending("pipe")) == 0 })
	gate.mu.Lock()
	defer gate.mu.Unlock()
	if gate.decides != 0 || gate.runs != 2 || gate.decidedEntries != 6 {
		t.Errorf("the gate was asked %d times about one entry and %d times about runs (%d entries), want 0 and 2 (6)", gate.decides, gate.runs, gate.decidedEntries)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.runs != 2 || sink.sends != 0 {
		t.Errorf("%d runs and %d single sends, want 2 runs of 3", sink.runs, sink.sends)
	}
}
