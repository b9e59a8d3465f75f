package store

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// atLevel returns a with level.
func atLevel(a event.Alarm, level int) event.Alarm {
	a.Level = level
	return a
}

// pendingIDs lists the event ids waiting in sink's outbox.
func pendingIDs(t *testing.T, s *Store, sink string) []string {
	t.Helper()
	es, err := s.Pending(sink, 100)
	if err != nil {
		t.Fatal(err)
	}
	return entryIDs(es)
}

// TestAnEndGoesWhereItsStartWentWhateverItsLevelBecame is sequence 4 of the
// delivery ledger's issue: an alarm that starts urgent and is downgraded
// before it ends still closes in the urgent channel (its thread or incident
// would stay open forever), and one that rises is announced there as a start
// at its new level before its end: "Resolved" never comes for an alarm the
// channel did not see.
func TestAnEndGoesWhereItsStartWentWhateverItsLevelBecame(t *testing.T) {
	s, clk, _ := newStore(t, Options{})
	// byLevel: every event to bus, urgent ones to oncall too.
	apply(t, s, Batch{Observed: []event.Alarm{atLevel(ongoing("down"), 0), atLevel(ongoing("up"), 2)}}, byLevel)
	clk.Advance(time.Minute)
	apply(t, s, Batch{Observed: []event.Alarm{atLevel(ongoing("down"), 2), atLevel(ongoing("up"), 0)}}, byLevel)
	clk.Advance(time.Minute)
	apply(t, s, Batch{Observed: []event.Alarm{
		atLevel(rec("down", event.StatusEnded, clk.Now()), 2),
		atLevel(rec("up", event.StatusEnded, clk.Now()), 0),
	}}, byLevel)

	if got, want := pendingIDs(t, s, "oncall"), []string{"down:start", "up:start", "down:end", "up:end"}; !slices.Equal(got, want) {
		t.Fatalf("oncall's outbox = %v, want %v: down closes where it started, up is announced when it rose", got, want)
	}
	if got, want := pendingIDs(t, s, "bus"), []string{"down:start", "up:start", "down:end", "up:end"}; !slices.Equal(got, want) {
		t.Fatalf("bus's outbox = %v, want %v", got, want)
	}
	es, _ := s.Pending("oncall", 100)
	if ev, err := s.Event(es[1]); err != nil || ev.Data.Level != 0 {
		t.Fatalf("up's start at oncall: %+v, %v; want it at its new level 0", ev, err)
	}
	if sinks, ok, err := s.StartSinks("up"); err != nil || !ok || !slices.Equal(sinks, []string{"bus", "oncall"}) {
		t.Fatalf("ledger of up = %v, %v, %v; want bus then oncall", sinks, ok, err)
	}
}

// TestAnEndIgnoresRouteEditsMadeAfterItsStart: a reload that changes the
// routes between an alarm's start and its end changes where later starts go,
// never where the end goes.
func TestAnEndIgnoresRouteEditsMadeAfterItsStart(t *testing.T) {
	s, clk, _ := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1")}}, to("pager"))
	clk.Advance(time.Minute)
	apply(t, s, Batch{Observed: []event.Alarm{rec("a1", event.StatusEnded, clk.Now()), ongoing("a2")}}, to("chat"))
	if got := pendingIDs(t, s, "pager"); !slices.Equal(got, []string{"a1:start", "a1:end"}) {
		t.Fatalf("pager = %v, want a1's start and end", got)
	}
	if got := pendingIDs(t, s, "chat"); !slices.Equal(got, []string{"a2:start"}) {
		t.Fatalf("chat = %v, want only a2's start: it never saw a1", got)
	}
}

// TestEndsByRulesRoutesEndsAsBeforeTheLedger: the test-only switch gives
// back the behaviour the ledger replaced, which the whole-relay simulation
// uses to show that its invariants catch the defects.
func TestEndsByRulesRoutesEndsAsBeforeTheLedger(t *testing.T) {
	s, clk, _ := newStore(t, Options{EndsByRules: true})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1")}}, to("pager"))
	clk.Advance(time.Minute)
	apply(t, s, Batch{Observed: []event.Alarm{rec("a1", event.StatusEnded, clk.Now())}}, to("chat"))
	if got := pendingIDs(t, s, "chat"); !slices.Equal(got, []string{"a1:end"}) {
		t.Fatalf("chat = %v, want the end routed by the rules", got)
	}
}

// TestASilentlyRecordedAlarmEndsNowhere: an alarm recorded without a start
// at the first run (RELAY_BOOTSTRAP=record) was announced nowhere, so its
// end goes nowhere; if its level rises to where a route it did not match
// before takes it, it is announced there, and ends there.
func TestASilentlyRecordedAlarmEndsNowhere(t *testing.T) {
	s, clk, _ := newStore(t, Options{Bootstrap: BootstrapRecord})
	old := ongoing("old")
	old.OccurredAt = t0.Add(-48 * time.Hour)
	rises := atLevel(ongoing("rises"), 2)
	rises.OccurredAt = old.OccurredAt
	apply(t, s, Batch{Observed: []event.Alarm{old, rises}, CompleteCurrent: true, FirstListing: true}, byLevel)
	clk.Advance(time.Minute)
	apply(t, s, Batch{Observed: []event.Alarm{atLevel(rises, 0)}}, byLevel)
	clk.Advance(time.Minute)
	apply(t, s, Batch{Observed: []event.Alarm{
		rec("old", event.StatusEnded, clk.Now()),
		atLevel(rec("rises", event.StatusEnded, clk.Now()), 0),
	}}, byLevel)
	if got := pendingIDs(t, s, "bus"); len(got) != 0 {
		t.Fatalf("bus = %v, want nothing: neither alarm was announced there", got)
	}
	if got := pendingIDs(t, s, "oncall"); !slices.Equal(got, []string{"rises:start", "rises:end"}) {
		t.Fatalf("oncall = %v, want rises announced when it became urgent, then its end", got)
	}
}

// TestDeadLettersFollowARenamedSink is sequence 2 of the delivery ledger's
// issue: after a rename, the dead letters of the sink are under its new
// name, so that a replay puts them in the outbox its delivery loop reads.
func TestDeadLettersFollowARenamedSink(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	if _, _, err := s.AdoptSinks(map[string]string{"oncall": "slack:C1"}); err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1")}}, to("oncall"))
	es, _ := s.Pending("oncall", 10)
	if err := s.DeadLetter(es[0], "channel_not_found"); err != nil {
		t.Fatal(err)
	}
	renamed, _, err := s.AdoptSinks(map[string]string{"pager": "slack:C1"})
	if err != nil || len(renamed) != 1 || renamed[0].DeadLetters != 1 {
		t.Fatalf("renamed %+v, %v; want oncall to pager with its dead letter", renamed, err)
	}
	replayed, refused, err := s.ReplayDeadLetters(DeadLetterFilter{Sink: "pager"})
	if err != nil || len(replayed) != 1 || len(refused) != 0 {
		t.Fatalf("replay at pager: %+v, refused %+v, %v", replayed, refused, err)
	}
	if got := pendingIDs(t, s, "pager"); !slices.Equal(got, []string{"a1:start"}) {
		t.Fatalf("pager = %v, want the replayed start", got)
	}
	if got := pendingIDs(t, s, "oncall"); len(got) != 0 {
		t.Fatalf("oncall, a name nothing delivers, holds %v", got)
	}
	// The end follows the renamed sink too.
	apply(t, s, Batch{Observed: []event.Alarm{rec("a1", event.StatusEnded, t0)}}, to("bus"))
	if got := pendingIDs(t, s, "pager"); !slices.Equal(got, []string{"a1:start", "a1:end"}) {
		t.Fatalf("pager = %v, want a1's end after its start", got)
	}
}

// TestReplayRefusesWhatWouldBreakAPair: a start whose alarm is over without
// its end beside it (a store of before the ledger, whose end went out
// alone), an alarm with entries still waiting (the delivery loop owns their
// order) and a sink the rules do not name are refused, each with why; a
// drop of a start drops the end parked beside it and every later end.
func TestReplayRefusesWhatWouldBreakAPair(t *testing.T) {
	s, clk, _ := newStore(t, Options{})
	if _, _, err := s.AdoptSinks(map[string]string{"ops": ""}); err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("lone"), ongoing("busy"), ongoing("drop")}}, to("ops"))
	es, _ := s.Pending("ops", 10)
	for _, e := range es {
		if err := s.DeadLetter(e, "HTTP 400"); err != nil {
			t.Fatal(err)
		}
	}
	// lone's end went out alone, as before the ledger: its parked end is
	// dropped from the dead letters by hand.
	clk.Advance(time.Minute)
	apply(t, s, Batch{Observed: []event.Alarm{rec("lone", event.StatusEnded, clk.Now())}}, to("ops"))
	if err := s.update(func(tx *txn, _ map[string]int) error {
		return eachDead(tx, DeadLetterFilter{EventID: "lone:end"}, func(b *bucket, d DeadLetter) error { return b.Delete(seqKey(d.Seq)) })
	}); err != nil {
		t.Fatal(err)
	}
	// busy has a start waiting again in the outbox.
	if _, err := s.Enqueue("ops", Entry{EventID: "busy:start", OriginID: "busy", Transition: event.Start, Body: es[1].Body}); err != nil {
		t.Fatal(err)
	}
	_, refused, err := s.ReplayDeadLetters(DeadLetterFilter{EventID: "lone"})
	if err != nil || len(refused) != 1 || !strings.Contains(refused[0].Why, "is over") {
		t.Fatalf("replay of lone: refused %+v, %v; want it refused as over", refused, err)
	}
	_, refused, err = s.ReplayDeadLetters(DeadLetterFilter{EventID: "busy"})
	if err != nil || len(refused) != 1 || !strings.Contains(refused[0].Why, "still wait") {
		t.Fatalf("replay of busy: refused %+v, %v; want it refused while its entries wait", refused, err)
	}

	dropped, err := s.DropDeadLetters(DeadLetterFilter{EventID: "drop:start"})
	if err != nil || len(dropped) != 1 {
		t.Fatalf("drop: %+v, %v", dropped, err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{rec("drop", event.StatusEnded, clk.Now())}}, to("ops"))
	if got := pendingIDs(t, s, "ops"); slices.Contains(got, "drop:end") {
		t.Fatalf("ops = %v: the end of a dropped start went out", got)
	}
	sup, _ := s.Suppressed("ops")
	if len(sup) != 1 || sup[0].EventID != "drop:end" || !strings.Contains(sup[0].Reason, DropStartDropped) {
		t.Fatalf("suppressed log %+v, want drop's end recorded as dropped", sup)
	}

	if _, _, err := s.AdoptSinks(map[string]string{"web": ""}); err != nil {
		t.Fatal(err)
	}
	_, refused, err = s.ReplayDeadLetters(DeadLetterFilter{Sink: "ops"})
	if err != nil || len(refused) == 0 || !strings.Contains(refused[len(refused)-1].Why, "not in the rules") {
		t.Fatalf("replay at a removed sink: refused %+v, %v", refused, err)
	}
}
