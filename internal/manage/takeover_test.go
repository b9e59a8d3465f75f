package manage_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/jsbackend"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/store"
)

// takeover is another replica taking the tenant over: the lease holder's
// deliveries stop with its lease, the next holder (a greater fence) opens
// the state from JetStream on a file of its own and runs alarm management
// and the deliveries. It returns the old holder's alarm management, whose
// store stays open, as a replica's does until it notices the lease is
// gone.
func (s *scenario) takeover() *manage.Manager {
	s.t.Helper()
	s.stop()
	s.stop = nil
	old, oldMgr := s.store, s.mgr
	s.t.Cleanup(func() { _ = old.Close() })
	s.start()
	return oldMgr
}

// TestScenarioTakeoverKeepsTheChain: on JetStream state (three servers),
// the first lease holder takes an alarm's first escalation step and
// records an acknowledgement of another alarm; the lease moves to a second
// replica, which restores the state. The new holder takes the second step
// when it is due by the stored first-seen time, once, and the first step
// not again; the acknowledged alarm does not escalate there; an escalation
// pass of the old holder after the takeover is refused and sends nothing;
// the alarm's end reaches every sink it was escalated to.
func TestScenarioTakeoverKeepsTheChain(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs a JetStream cluster of three servers")
	}
	cluster := natstest.StartCluster(t, 3)
	nc := cluster.Connect()
	t.Cleanup(nc.Close)
	var fence uint64
	s := newScenarioOn(t, clock.NewFake(t0), ackRules, nil, func() store.Backend {
		fence++
		b, err := jsbackend.New(nc, jsbackend.Options{Tenant: "takeover", Fence: fence,
			Holder: fmt.Sprintf("replica-%d", fence), Replicas: 3})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
	a := s.starts("A", "S1", "D1", "E1", 0)
	b := s.starts("B", "S1", "D2", "E2", 0)
	s.apply(a, b)
	s.advance(5 * time.Minute)
	if res := s.act(notify.Acknowledge, "U1", "B"); !slices.Equal(res.Applied, []string{"B"}) {
		t.Fatalf("ack of B on the first holder: %+v", res)
	}
	s.advance(6 * time.Minute) // 11m
	s.escalate()
	if got := s.channel("C2"); len(got) != 1 || !mentions(got, "E1", "Escalated: unacknowledged for 10m") {
		t.Fatalf("the first holder's step at 11m:%s\nwant A's start, escalated", dump(got))
	}

	old := s.takeover()
	if ack, err := s.mgr.Acknowledgement("B"); err != nil || !ack.Acknowledged || ack.By != "U1" {
		t.Fatalf("B on the new holder: %+v, %v; want acknowledged by U1", ack, err)
	}
	s.escalate()
	s.advance(18 * time.Minute) // 29m
	s.escalate()
	if got := s.channel("C2"); len(got) != 1 {
		t.Fatalf("the new holder took the first step again:%s", dump(got))
	}
	if got := s.channel("C3"); len(got) != 0 {
		t.Fatalf("boss was paged before 30m:%s", dump(got))
	}

	s.advance(2 * time.Minute) // 31m
	if err := old.Escalate(context.Background()); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the old holder's escalation after the takeover = %v, want ErrFenced", err)
	}
	s.escalate()
	s.escalate()
	if got := s.channel("C3"); len(got) != 1 || !mentions(got, "E1", "Escalated: unacknowledged for 30m") {
		t.Fatalf("boss at 31m:%s\nwant A's start once, escalated after 30m", dump(got))
	}
	if got := slices.Concat(s.channel("C2"), s.channel("C3")); mentions(got, "E2") {
		t.Fatalf("B, acknowledged on the old holder, escalated on the new one:%s", dump(got))
	}
	for _, c := range s.slack.Calls() {
		if c.Channel == "C3" && c.Error == "" && !c.At.Equal(t0.Add(31*time.Minute)) {
			t.Errorf("boss was paged at %s, want at 31m", c.At.Sub(t0))
		}
	}
	raw, err := s.store.Get("escalate", "A")
	if err != nil {
		t.Fatal(err)
	}
	var steps struct {
		Done map[string]time.Time `json:"done"`
	}
	if err := json.Unmarshal(raw, &steps); err != nil {
		t.Fatalf("A's escalation %s: %v", raw, err)
	}
	want := map[string]time.Time{"people/600": t0.Add(11 * time.Minute), "people/1800": t0.Add(31 * time.Minute)}
	if len(steps.Done) != 2 || !steps.Done["people/600"].Equal(want["people/600"]) || !steps.Done["people/1800"].Equal(want["people/1800"]) {
		t.Fatalf("A's steps done %v, want %v", steps.Done, want)
	}

	s.apply(s.ends(a))
	s.settle()
	for _, ch := range []string{"C2", "C3"} {
		if got := s.channel(ch); !mentions(got, "chat.update", "Resolved", "E1") {
			t.Errorf("%s, escalated to, got%s\nwant the end too", ch, dump(got))
		}
	}
}
