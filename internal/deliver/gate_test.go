package deliver_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/webhook"
)

// holdGate holds the starts of the alarms named in hold until their
// time, and withholds the entries of the alarms in quiet. The real gate is
// internal/manage; this one exercises the loop's side of the contract.
type holdGate struct {
	mu    sync.Mutex
	hold  map[string]time.Time
	quiet map[string]bool
	asked []string
}

func (g *holdGate) Decide(_ context.Context, sink string, d *notify.Delivery) (deliver.Verdict, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, d.EventID)
	if g.quiet[d.OriginID] {
		return deliver.Verdict{Suppress: "silence", Memory: map[string]string{"why": "test"}}, nil
	}
	if d.Event.Data.Transition == event.Start {
		return deliver.Verdict{Until: g.hold[d.OriginID]}, nil
	}
	return deliver.Verdict{}, nil
}

func (g *holdGate) Manages(string) bool { return true }

func (g *holdGate) Digest(context.Context, notify.Sink, []notify.Delivery) (deliver.DigestOutcome, notify.Result, error) {
	panic("no digests here")
}

// An alarm held back waits with its later entries while the loop goes on
// with other alarms; it goes out when its hold is over, start before end. A
// withheld entry leaves the outbox into the suppressed log.
func TestGateHoldsOneAlarmWithoutHoldingTheOthers(t *testing.T) {
	f := delivertest.New(t, "ops")
	rcv := notifytest.NewReceiver(t, "")
	gate := &holdGate{hold: map[string]time.Time{"held": delivertest.T0.Add(2 * time.Minute)}, quiet: map[string]bool{"muted": true}}
	f.RunDeliverer(deliver.Options{Gate: gate, Batch: 2},
		deliver.Target{Sink: delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL(), Concurrency: 1})})
	f.Start("held", 0)
	f.Finish("held", 0, event.StatusEnded, f.Clock.Now().Add(-time.Minute))
	f.Start("muted", 1)
	f.Start("free-1", 1)
	f.Start("free-2", 2)
	f.Settle(1)
	if got := delivertest.Join(delivertest.EventIDs(t, rcv.Accepted())); got != "free-1:start free-2:start" {
		t.Fatalf("delivered %q while one alarm is held, want the two free starts", got)
	}
	if got := delivertest.Join(f.Pending("ops")); got != "held:start held:end" {
		t.Fatalf("pending %q, want the held alarm's entries", got)
	}
	sup, err := f.Store.Suppressed("ops")
	if err != nil || len(sup) != 1 || sup[0].EventID != "muted:start" || sup[0].Reason != "silence" {
		t.Fatalf("suppressed log = %+v, %v", sup, err)
	}
	if m, _ := f.Store.Memory("ops", "muted"); m["why"] != "test" {
		t.Errorf("memory of the withheld alarm = %v", m)
	}
	f.DriveUntil(1, delivertest.T0.Add(3*time.Minute), func() bool { return len(rcv.Accepted()) == 4 })
	if got := delivertest.Join(delivertest.EventIDs(t, rcv.Accepted())); got != "free-1:start free-2:start held:start held:end" {
		t.Fatalf("delivered %q, want the held alarm after its hold, start first", got)
	}
	if now := f.Clock.Now(); now.Before(delivertest.T0.Add(2 * time.Minute)) {
		t.Errorf("the held start went out at %s, before its hold ended", now)
	}
	gate.mu.Lock()
	asked := strings.Join(gate.asked, " ")
	gate.mu.Unlock()
	if strings.Contains(asked, "held:end") && strings.Index(asked, "held:end") < strings.LastIndex(asked, "held:start") {
		t.Errorf("the gate was asked about the end before the start went out: %s", asked)
	}
}
