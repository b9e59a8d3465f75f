package deliver_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
)

// verdictGate is a RunGate that gives each start the verdict of its
// alarm's number (a0001 is 1) and counts the deliveries the loop prepared
// for it: each is an event decoded (when the store's cache no longer holds
// it) and a memory read. It stops at the first verdict that does not send
// its entry as it is, as alarm management does.
type verdictGate struct {
	verdict func(n int) deliver.Verdict

	mu       sync.Mutex
	prepared int
	heads    map[string]bool
}

func (g *verdictGate) Manages(string) bool { return true }

func (g *verdictGate) of(d *notify.Delivery) deliver.Verdict {
	n, _ := strconv.Atoi(strings.TrimPrefix(d.OriginID, "a"))
	return g.verdict(n)
}

func (g *verdictGate) Decide(_ context.Context, _ string, d *notify.Delivery) (deliver.Verdict, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.prepared++
	g.heads[d.OriginID] = true
	return g.of(d), nil
}

func (g *verdictGate) DecideRun(_ context.Context, _ string, ds []*notify.Delivery) ([]deliver.Verdict, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.prepared += len(ds)
	g.heads[ds[0].OriginID] = true
	var out []deliver.Verdict
	for _, d := range ds {
		v := g.of(d)
		out = append(out, v)
		if v.Suppress != "" || v.Digest || !v.Until.IsZero() {
			break
		}
	}
	return out, nil
}

func (g *verdictGate) Digest(context.Context, notify.Sink, []notify.Delivery) (deliver.DigestOutcome, notify.Result, error) {
	return deliver.DigestOutcome{}, notify.Result{}, nil
}

// TestAPipelinedLoopPreparesAFewEntriesPerStartTheGateDoesNotSend: a loop
// of a sink that pipelines asks alarm management about the head of its
// outbox and the run behind it at once, having decoded the event and read
// the memory of each entry of that run: up to the whole page. When the head
// is withheld (a silence or a maintenance window over a storm), held (a
// route's hold-down) or sent alone (every other start withheld), the run
// behind it was prepared for nothing, and the next head prepares it again:
// a page of n such starts cost about n²/2 entries prepared, half a million
// for 1,000 starts, 2 million for a page of 2,000, each a decode of its
// event once the store's cache of 8,192 events no longer holds it (a storm,
// a restart). The loop prepares a few entries per start.
func TestAPipelinedLoopPreparesAFewEntriesPerStartTheGateDoesNotSend(t *testing.T) {
	const starts = 1000
	for _, c := range []struct {
		name    string
		verdict func(n int) deliver.Verdict
		done    func(f *delivertest.Fixture, g *verdictGate) bool
	}{
		{"every start withheld", func(int) deliver.Verdict { return deliver.Verdict{Suppress: "silenced"} }, nil},
		{"every other start withheld", func(n int) deliver.Verdict {
			if n%2 == 1 {
				return deliver.Verdict{Suppress: "silenced"}
			}
			return deliver.Verdict{}
		}, nil},
		{"every start held", func(int) deliver.Verdict { return deliver.Verdict{Until: delivertest.T0.Add(time.Hour)} },
			func(f *delivertest.Fixture, g *verdictGate) bool {
				return len(g.heads) == starts && f.Clock.Waiters() > 0
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := delivertest.New(t, "pipe")
			occurred := f.Clock.Now().Add(-time.Minute)
			var recs []event.Alarm
			for i := range starts {
				recs = append(recs, delivertest.Alarm(fmt.Sprintf("a%04d", i), 1, event.StatusOngoing, occurred, time.Time{}))
			}
			f.Apply(recs...)
			gate := &verdictGate{verdict: c.verdict, heads: map[string]bool{}}
			sink := &pipeSink{seen: map[string]map[string]string{}, rnd: rand.New(rand.NewPCG(1, 2))}
			_, stop := f.RunDeliverer(deliver.Options{Gate: gate}, deliver.Target{Sink: sink, MaxAge: 24 * time.Hour})
			done := c.done
			if done == nil {
				done = func(f *delivertest.Fixture, _ *verdictGate) bool { return len(f.Pending("pipe")) == 0 }
			}
			for began := time.Now(); ; time.Sleep(20 * time.Millisecond) {
				gate.mu.Lock()
				ok := done(f, gate)
				gate.mu.Unlock()
				if ok {
					break
				}
				if time.Since(began) > 3*time.Minute {
					t.Fatalf("not done in 3 minutes: %d entries prepared", gate.prepared)
				}
			}
			stop()
			gate.mu.Lock()
			defer gate.mu.Unlock()
			if gate.prepared > 8*starts {
				t.Errorf("%d starts: the loop prepared %d entries for the gate, %.0f a start; want a few", starts, gate.prepared, float64(gate.prepared)/starts)
			}
		})
	}
}
