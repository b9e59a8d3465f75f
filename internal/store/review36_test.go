package store

import (
	"slices"
	"testing"

	"github.com/relay-energy/relay/internal/event"
)

// A relay is upgraded from a file written before the ledger and, in the
// same rollout, its rules gain a sink (chat) that also matches the alarms
// already ongoing. AdoptLedger gives those alarms the sinks the new rules
// route them to, chat included, though their starts went to the bus alone
// (the store still holds the sinks of the rules last applied, which had no
// chat): their ends then reach chat, which never got the starts.
func TestAdoptLedgerSendsNoEndToASinkTheUpgradedRulesAdded(t *testing.T) {
	s, clk, path := newStore(t, Options{EndsByRules: true})
	if _, _, err := s.AdoptSinks(map[string]string{"bus": "nats:alarms"}); err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a")}}, to("bus"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, Options{Clock: clk})
	// The service at start: AdoptLedger, then AdoptSinks, with the new
	// rules.
	dests := map[string]string{"bus": "nats:alarms", "chat": "slack:C1"}
	if _, _, err := s.AdoptLedger(to("bus", "chat"), dests); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AdoptSinks(dests); err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{rec("a", event.StatusEnded, clk.Now())}}, to("bus", "chat"))
	if got := pendingIDs(t, s, "bus"); !slices.Equal(got, []string{"a:start", "a:end"}) {
		t.Fatalf("bus's outbox: %v; want a's start, then its end", got)
	}
	if got := pendingIDs(t, s, "chat"); len(got) != 0 {
		t.Fatalf("chat's outbox: %v; chat never got a's start, and gets its end", got)
	}
}

// Issue 36's item 2 as its reporters wrote it, against AlarmTx: an alarm
// recorded before the ledger, escalated to oncall (its start enqueued
// there, oncall joined so that its end goes there too), keeps its end at
// the sinks the rules route it to. Join now refuses such an alarm
// (ErrNoLedger) unless Adopt came first, which the reporters' test, written
// before Adopt existed, does not call: the step fails instead.
func TestJoinOfAnAlarmFromBeforeTheLedgerSendsItsEndThereToo(t *testing.T) {
	s, clk, path := newStore(t, Options{EndsByRules: true})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a")}}, to("bus", "chat"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, Options{Clock: clk})
	_, err := s.UpdateAlarm("a", func(tx *AlarmTx) error {
		rec, _, err := tx.Record()
		if err != nil {
			return err
		}
		ev := event.New(rec, event.Start, tx.Tracked().FirstSeen, false)
		if err := tx.Enqueue("oncall", &ev); err != nil {
			return err
		}
		return tx.Join("oncall")
	})
	if err != nil {
		t.Fatalf("the escalation step's transaction: %v", err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{rec("a", event.StatusEnded, clk.Now())}}, to("bus", "chat"))
	for _, sink := range []string{"bus", "chat", "oncall"} {
		if got := pendingIDs(t, s, sink); !slices.Contains(got, "a:end") {
			t.Errorf("%s's outbox: %v; want a's end", sink, got)
		}
	}
}
