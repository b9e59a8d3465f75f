package store

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// The tests of this file were written for mutants that survived the
// package's other tests (docs/development.md, "Mutation testing"): each
// checks what an operator would notice if the mutated line were wrong.

// ackAt enqueues an acknowledgement of origin to sinks in one alarm
// transaction.
func ackAt(t *testing.T, s *Store, origin string, sinks ...string) {
	t.Helper()
	_, err := s.UpdateAlarm(origin, func(tx *AlarmTx) error {
		rec, _, err := tx.Record()
		if err != nil {
			return err
		}
		ev := event.NewAck(rec, event.Ack, 1, event.AckInfo{By: "U1", Via: "slack", At: event.FormatTime(tx.Now())}, tx.Tracked().FirstSeen)
		for _, sink := range sinks {
			if err := tx.Enqueue(sink, &ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// drained empties the wake channel of sink and reports whether it held a
// signal.
func drained(s *Store, sink string) bool {
	select {
	case <-s.Wake(sink):
		return true
	default:
		return false
	}
}

// An acknowledgement enqueued in an alarm's transaction wakes its sink's
// delivery at once (not at the next poll) and counts in the outbox depth
// the relay_outbox metric shows; one beside a dead start is parked and
// counted nowhere; one beside a dropped start is counted as dropped, once.
// A transaction that also changes the alarm's set (a Join) wakes the same.
func TestAnAlarmTransactionWakesItsSinksAndCountsWhatItDropped(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a"), ongoing("b")}}, to("bus", "chat", "pager"))
	es, err := s.Pending("chat", 10)
	if err != nil || len(es) != 2 {
		t.Fatalf("chat's outbox: %v, %v", es, err)
	}
	if err := s.DeadLetter(es[0], "refused"); err != nil {
		t.Fatal(err)
	}
	ps, err := s.Pending("pager", 10)
	if err != nil || len(ps) != 2 {
		t.Fatalf("pager's outbox: %v, %v", ps, err)
	}
	if err := s.DeadLetter(ps[0], "refused"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DropDeadLetters(DeadLetterFilter{Sink: "pager", EventID: "a"}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Depth()
	if err != nil {
		t.Fatal(err)
	}
	for _, sink := range []string{"bus", "chat", "pager"} {
		drained(s, sink)
	}
	ackAt(t, s, "a", "bus", "chat", "pager")
	if !drained(s, "bus") {
		t.Fatal("an acknowledgement enqueued for the bus did not wake its delivery")
	}
	after, err := s.Depth()
	if err != nil {
		t.Fatal(err)
	}
	for sink, want := range map[string]int{"bus": 1, "chat": 0, "pager": 0} {
		if got := after[sink] - before[sink]; got != want {
			t.Errorf("%s's outbox depth changed by %d, want %d (depth %v, then %v)", sink, got, want, before, after)
		}
	}
	if got := pendingIDs(t, s, "bus"); !slices.Equal(got, []string{"a:start", "b:start", "a:ack"}) {
		t.Fatalf("bus's outbox: %v", got)
	}
	counts := s.DroppedCounts()
	if n := counts[[2]string{"pager", DropStartDropped}]; n != 1 {
		t.Errorf("counted %d entries dropped beside pager's dropped start, want 1: %v", n, counts)
	}
	for k, n := range counts {
		if k[0] != "pager" {
			t.Errorf("counted %d dropped at %s as %q: the ack there is parked or delivered, not dropped", n, k[0], k[1])
		}
	}
	// A step's start and the Join that records it, in one transaction,
	// wake the step's sink too.
	drained(s, "oncall")
	_, err = s.UpdateAlarm("b", func(tx *AlarmTx) error {
		rec, _, err := tx.Record()
		if err != nil {
			return err
		}
		start := event.New(rec, event.Start, tx.Tracked().FirstSeen, false)
		if err := tx.Enqueue("oncall", &start); err != nil {
			return err
		}
		return tx.Join("oncall")
	})
	if err != nil {
		t.Fatal(err)
	}
	if !drained(s, "oncall") {
		t.Fatal("a start enqueued with a Join did not wake its sink's delivery")
	}
}

// Adopt alone, in a transaction of its own, fixes the set of an alarm from
// before the ledger: after a reopen and a rules change, its end goes where
// the rules routed it at the adoption.
func TestAnAdoptionIsWrittenByItself(t *testing.T) {
	s, clk, path := newStore(t, Options{EndsByRules: true})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a")}}, to("bus", "chat"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, Options{Clock: clk})
	if _, err := s.UpdateAlarm("a", func(tx *AlarmTx) error { return tx.Adopt([]string{"bus", "chat"}) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, Options{Clock: clk})
	apply(t, s, Batch{Observed: []event.Alarm{rec("a", event.StatusEnded, clk.Now())}}, to("bus"))
	if got := pendingIDs(t, s, "chat"); !slices.Equal(got, []string{"a:start", "a:end"}) {
		t.Fatalf("chat's outbox: %v; the adopted set sends the end where the start went", got)
	}
}

// A replay of the dead starts of two alarms sends both, and each alarm's
// end then goes out behind its start instead of being parked beside a
// start that is no longer dead.
func TestAReplayedStartTakesItsEndAgain(t *testing.T) {
	s, clk, _ := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a"), ongoing("b")}}, to("chat"))
	es, err := s.Pending("chat", 10)
	if err != nil || len(es) != 2 {
		t.Fatalf("chat's outbox: %v, %v", es, err)
	}
	for _, e := range es {
		if err := s.DeadLetter(e, "refused"); err != nil {
			t.Fatal(err)
		}
	}
	out, refused, err := s.ReplayDeadLetters(DeadLetterFilter{Sink: "chat"})
	if err != nil || len(out) != 2 || len(refused) != 0 {
		t.Fatalf("replay: %d replayed, refused %v, %v; want both starts", len(out), refused, err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{rec("a", event.StatusEnded, clk.Now()), rec("b", event.StatusEnded, clk.Now())}}, to("chat"))
	if got := pendingIDs(t, s, "chat"); !slices.Equal(got, []string{"a:start", "b:start", "a:end", "b:end"}) {
		t.Fatalf("chat's outbox: %v; want both starts, then both ends", got)
	}
	if dead, err := s.DeadLetters("chat"); err != nil || len(dead) != 0 {
		t.Fatalf("chat's dead letters: %v, %v; want none", dead, err)
	}
}

// Dropping every dead letter drops those of every alarm at every sink, and
// each alarm's end that comes later is dropped beside its start, at each
// sink, instead of reaching a sink that never had the start.
func TestDroppingEveryDeadLetterDropsEachAlarmsEndEverywhere(t *testing.T) {
	s, clk, _ := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a"), ongoing("b")}}, to("chat", "pager"))
	for _, sink := range []string{"chat", "pager"} {
		es, err := s.Pending(sink, 10)
		if err != nil || len(es) != 2 {
			t.Fatalf("%s's outbox: %v, %v", sink, es, err)
		}
		for _, e := range es {
			if err := s.DeadLetter(e, "refused"); err != nil {
				t.Fatal(err)
			}
		}
	}
	dropped, err := s.DropDeadLetters(DeadLetterFilter{})
	if err != nil || len(dropped) != 4 {
		t.Fatalf("dropped %d dead letters, %v; want the 4 starts", len(dropped), err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{rec("a", event.StatusEnded, clk.Now()), rec("b", event.StatusEnded, clk.Now())}}, to("chat", "pager"))
	for _, sink := range []string{"chat", "pager"} {
		if got := pendingIDs(t, s, sink); len(got) != 0 {
			t.Errorf("%s's outbox: %v; the ends of dropped starts go nowhere", sink, got)
		}
		if dead, err := s.DeadLetters(sink); err != nil || len(dead) != 0 {
			t.Errorf("%s's dead letters: %v, %v", sink, dead, err)
		}
		if n := s.DroppedCounts()[[2]string{sink, DropStartDropped}]; n != 2 {
			t.Errorf("%s: counted %d ends dropped beside dropped starts, want 2", sink, n)
		}
		sup, err := s.Suppressed(sink)
		if err != nil || len(sup) != 2 {
			t.Fatalf("%s's suppressed log: %+v, %v", sink, sup, err)
		}
		for _, d := range sup {
			// The log says who dropped the start, and when.
			if !strings.Contains(d.Reason, "its start was dropped by an operator at "+clk.Now().UTC().Format(time.RFC3339)) {
				t.Errorf("%s at %s recorded as %q", d.EventID, sink, d.Reason)
			}
		}
	}
}

// A renamed sink is renamed in every alarm's set that names it, whatever
// the other sinks of the set: each alarm's end goes to the new name.
func TestARenameReachesEverySetThatNamesTheSink(t *testing.T) {
	s, clk, _ := newStore(t, Options{})
	if _, _, err := s.AdoptSinks(map[string]string{"chat": "slack:C1", "bus": "nats:energy"}); err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a")}}, to("bus", "chat"))
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("b")}}, to("chat"))
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("c")}}, to("chat", "bus"))
	if _, _, err := s.AdoptSinks(map[string]string{"team": "slack:C1", "bus": "nats:energy"}); err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{rec("a", event.StatusEnded, clk.Now()), rec("b", event.StatusEnded, clk.Now()), rec("c", event.StatusEnded, clk.Now())}}, to("bus"))
	if got := pendingIDs(t, s, "team"); !slices.Equal(got, []string{"a:start", "b:start", "c:start", "a:end", "b:end", "c:end"}) {
		t.Fatalf("team's outbox: %v; want every start and every end", got)
	}
}

// A start that becomes a dead letter takes every entry of its alarm waiting
// behind it into the dead letters, parked beside it, and out of the outbox
// depth.
func TestADeadStartParksEveryEntryWaitingBehindIt(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a")}}, to("chat"))
	ackAt(t, s, "a", "chat")
	_, err := s.UpdateAlarm("a", func(tx *AlarmTx) error {
		rec, _, err := tx.Record()
		if err != nil {
			return err
		}
		ev := event.NewAck(rec, event.Unack, 2, event.AckInfo{By: "U1", Via: "slack", At: event.FormatTime(tx.Now())}, tx.Tracked().FirstSeen)
		return tx.Enqueue("chat", &ev)
	})
	if err != nil {
		t.Fatal(err)
	}
	es, err := s.Pending("chat", 10)
	if err != nil || len(es) != 3 {
		t.Fatalf("chat's outbox: %v, %v", es, err)
	}
	if err := s.DeadLetter(es[0], "refused"); err != nil {
		t.Fatal(err)
	}
	if got := pendingIDs(t, s, "chat"); len(got) != 0 {
		t.Fatalf("chat's outbox: %v; want both acks parked beside the dead start", got)
	}
	if d, err := s.Depth(); err != nil || d["chat"] != 0 {
		t.Fatalf("chat's outbox depth %v, %v; want 0", d, err)
	}
	dead, err := s.DeadLetters("chat")
	if err != nil || len(dead) != 3 {
		t.Fatalf("chat's dead letters: %+v, %v; want the start and both acks", dead, err)
	}
}

// A start dropped from the outbox of a sink the rules removed is recorded
// as dropped: when a sink of that name comes back, the alarm's end is
// dropped there too, not sent without its start.
func TestAnEndDoesNotFollowAStartDroppedWithItsSink(t *testing.T) {
	s, clk, _ := newStore(t, Options{})
	if _, _, err := s.AdoptSinks(map[string]string{"chat": "slack:C1", "bus": "nats:energy"}); err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a")}}, to("bus", "chat"))
	if _, removed, err := s.AdoptSinks(map[string]string{"bus": "nats:energy"}); err != nil || len(removed) != 1 {
		t.Fatalf("removed %+v, %v; want chat with a's start", removed, err)
	}
	if _, _, err := s.AdoptSinks(map[string]string{"chat": "slack:C1", "bus": "nats:energy"}); err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{rec("a", event.StatusEnded, clk.Now())}}, to("bus", "chat"))
	if got := pendingIDs(t, s, "chat"); len(got) != 0 {
		t.Fatalf("chat's outbox: %v; a's start was dropped with the sink, so is its end", got)
	}
	if got := pendingIDs(t, s, "bus"); !slices.Equal(got, []string{"a:start", "a:end"}) {
		t.Fatalf("bus's outbox: %v", got)
	}
}

// An upgrade in which a sink was renamed (the same destination under a new
// name) keeps the renamed sink in the adopted set of an alarm from before
// the ledger: its end reaches the channel that got its start. The adoption
// is done once: a second start of the relay adopts and records nothing
// again.
func TestAdoptLedgerKeepsARenamedSinkAndRunsOnce(t *testing.T) {
	s, clk, path := newStore(t, Options{EndsByRules: true})
	if _, _, err := s.AdoptSinks(map[string]string{"bus": "nats:alarms", "chat": "slack:C1"}); err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a"), ongoing("b")}}, to("bus", "chat"))
	es, err := s.Pending("chat", 10)
	if err != nil || len(es) != 2 {
		t.Fatalf("chat's outbox: %v, %v", es, err)
	}
	if err := s.DeadLetter(es[1], "channel_not_found"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, Options{Clock: clk})
	dests := map[string]string{"bus": "nats:alarms", "team": "slack:C1"}
	if alarms, dead, err := s.AdoptLedger(to("bus", "team"), dests); err != nil || alarms != 2 || dead != 1 {
		t.Fatalf("AdoptLedger = %d alarms, %d dead starts, %v; want 2 and 1", alarms, dead, err)
	}
	if _, _, err := s.AdoptSinks(dests); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, Options{Clock: clk})
	if alarms, dead, err := s.AdoptLedger(to("bus", "team"), dests); err != nil || alarms != 0 || dead != 0 {
		t.Fatalf("a second AdoptLedger = %d alarms, %d dead starts, %v; want nothing done", alarms, dead, err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{rec("a", event.StatusEnded, clk.Now())}}, to("bus"))
	if got := pendingIDs(t, s, "team"); !slices.Equal(got, []string{"a:start", "a:end"}) {
		t.Fatalf("team's outbox: %v; want a's start, then its end", got)
	}
}
