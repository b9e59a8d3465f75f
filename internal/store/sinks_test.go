package store

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// TestARenamedSinkKeepsItsMemoryAndOutbox: a Slack sink renamed in the rules,
// with the same channel, keeps the thread of each alarm and its pending
// entries under the new name; a sink still named keeps its own; a sink of
// another destination under a new name is not a rename: the old one is
// removed, and what waited for it is recorded as dropped, never sent.
func TestARenamedSinkKeepsItsMemoryAndOutbox(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	if _, _, err := s.AdoptSinks(map[string]string{"oncall": "slack:C1", "bus": "", "team": "slack:C2"}); err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{urgent(ongoing("u1")), urgent(ongoing("u2"))}}, func(*event.Event) []string {
		return []string{"oncall", "team", "bus"}
	})
	es, err := s.Pending("oncall", 1)
	if err != nil || len(es) != 1 {
		t.Fatal(es, err)
	}
	if err := s.Delivered(es[0], map[string]string{"ts": "1700000000.000100", "channel": "C1"}); err != nil {
		t.Fatal(err)
	}

	// oncall becomes pager (same channel); team moves to another channel
	// under a new name, which is not a rename.
	renamed, removed, err := s.AdoptSinks(map[string]string{"pager": "slack:C1", "bus": "", "crew": "slack:C3"})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0].Sink != "team" || !slices.Equal(entryIDs(removed[0].Dropped), []string{"u1:start", "u2:start"}) {
		t.Fatalf("removed = %+v, want team with its two starts dropped", removed)
	}
	if sup, _ := s.Suppressed("team"); len(sup) != 2 || !strings.HasPrefix(sup[0].Reason, DroppedPrefix) {
		t.Fatalf("team's suppressed log = %+v, want its two starts dropped", sup)
	}
	if got := s.DroppedCounts()[[2]string{"team", DropSinkRemoved}]; got != 2 {
		t.Fatalf("dropped count of team = %d, want 2", got)
	}
	if len(renamed) != 1 || renamed[0] != (Renamed{From: "oncall", To: "pager", Destination: "slack:C1", Memories: 1, Entries: 1}) {
		t.Fatalf("renamed = %+v, want oncall to pager with 1 memory and 1 entry", renamed)
	}
	if m, err := s.Memory("pager", "u1"); err != nil || m["ts"] != "1700000000.000100" {
		t.Fatalf("pager's memory of u1 = %v, %v; want the thread of oncall", m, err)
	}
	if m, _ := s.Memory("oncall", "u1"); m != nil {
		t.Errorf("oncall still has memory %v", m)
	}
	pending, err := s.Pending("pager", 10)
	if err != nil || !slices.Equal(entryIDs(pending), []string{"u2:start"}) {
		t.Fatalf("pager's outbox = %v, %v; want oncall's pending u2:start", entryIDs(pending), err)
	}
	depth, err := s.Depth()
	if err != nil || depth["pager"] != 1 || depth["oncall"] != 0 || depth["team"] != 0 || depth["bus"] != 2 {
		t.Fatalf("depth = %v, %v", depth, err)
	}

	// Their ends follow: pager's thread, team's drop.
	apply(t, s, Batch{Observed: []event.Alarm{urgent(rec("u1", event.StatusEnded, t0.Add(time.Minute)))}}, func(*event.Event) []string {
		return []string{"crew"}
	})
	if got, _ := s.Pending("pager", 10); !slices.Equal(entryIDs(got), []string{"u2:start", "u1:end"}) {
		t.Fatalf("pager's outbox = %v, want u1's end after u2's start", entryIDs(got))
	}
	if got, _ := s.Pending("crew", 10); len(got) != 0 {
		t.Fatalf("crew got %v: an end of an alarm it never saw", entryIDs(got))
	}
	if sup, _ := s.Suppressed("team"); len(sup) != 3 || sup[2].EventID != "u1:end" {
		t.Fatalf("team's suppressed log = %+v, want u1's end dropped too", sup)
	}

	// Applying the same rules again moves nothing.
	if again, gone, err := s.AdoptSinks(map[string]string{"pager": "slack:C1", "bus": "", "crew": "slack:C3"}); err != nil || len(again) != 0 || len(gone) != 0 {
		t.Fatalf("second adoption: %+v, %+v, %v", again, gone, err)
	}
}

// TestReplayKeepsEachAlarmsOrder: the start of u1 was dead-lettered, and its
// end, which came later, is parked beside it instead of going out alone;
// replaying the start puts both back in order, and other entries keep their
// places. Drop deletes what it selects.
func TestReplayKeepsEachAlarmsOrder(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	toOncall := func(*event.Event) []string { return []string{"oncall"} }
	apply(t, s, Batch{Observed: []event.Alarm{urgent(ongoing("u1")), urgent(ongoing("u2"))}}, toOncall)
	es, err := s.Pending("oncall", 10)
	if err != nil || len(es) != 2 {
		t.Fatal(es, err)
	}
	if err := s.DeadLetter(es[0], "invalid_auth"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeadLetter(es[1], "invalid_auth"); err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{urgent(rec("u1", event.StatusEnded, t0.Add(time.Minute))), urgent(ongoing("u3"))}}, toOncall)
	if got, _ := s.Pending("oncall", 10); !slices.Equal(entryIDs(got), []string{"u3:start"}) {
		t.Fatalf("outbox before replay: %v, want u1's end parked beside its start", entryIDs(got))
	}
	if found, _ := s.FindDeadLetters(DeadLetterFilter{EventID: "u2"}); len(found) != 1 || found[0].EventID != "u2:start" {
		t.Fatalf("find by originId: %+v", found)
	}

	replayed, refused, err := s.ReplayDeadLetters(DeadLetterFilter{Sink: "oncall", EventID: "u1:start"})
	if err != nil || len(replayed) != 2 || len(refused) != 0 {
		t.Fatalf("replayed %+v, refused %+v, %v; want u1's start and end", replayed, refused, err)
	}
	got, _ := s.Pending("oncall", 10)
	if want := []string{"u3:start", "u1:start", "u1:end"}; !slices.Equal(entryIDs(got), want) {
		t.Fatalf("outbox after replay: %v, want %v", entryIDs(got), want)
	}
	if depth, _ := s.Depth(); depth["oncall"] != 3 {
		t.Fatalf("depth %v, want 3", depth)
	}
	if counts, _ := s.DeadLetterCounts(); counts["oncall"] != 1 {
		t.Fatalf("dead letters left %v, want u2's", counts)
	}
	dropped, err := s.DropDeadLetters(DeadLetterFilter{Since: t0.Add(-time.Hour)})
	if err != nil || len(dropped) != 1 || dropped[0].EventID != "u2:start" {
		t.Fatalf("dropped %+v, %v", dropped, err)
	}
	if left, _ := s.FindDeadLetters(DeadLetterFilter{}); len(left) != 0 {
		t.Fatalf("left %+v", left)
	}
}

// TestARenamedSinksWithheldRecordsSurviveItsNextOnes: the suppressed log
// moves with a renamed sink, renumbered after its new outbox, so that the
// next entry withheld under the new name does not overwrite the record of
// one withheld under the old (the whole-relay simulation found the loss).
func TestARenamedSinksWithheldRecordsSurviveItsNextOnes(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	if _, _, err := s.AdoptSinks(map[string]string{"oncall": "slack:C1"}); err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1")}}, to("oncall"))
	es, _ := s.Pending("oncall", 10)
	if err := s.Settle([]Delivery{{Entry: es[0], Suppressed: "silence"}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AdoptSinks(map[string]string{"pager": "slack:C1"}); err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a2")}}, to("pager"))
	es, _ = s.Pending("pager", 10)
	if err := s.Settle([]Delivery{{Entry: es[0], Suppressed: "silence"}}, nil); err != nil {
		t.Fatal(err)
	}
	sup, err := s.Suppressed("pager")
	if err != nil || len(sup) != 2 || sup[0].EventID != "a1:start" || sup[1].EventID != "a2:start" {
		t.Fatalf("pager's suppressed log = %+v, %v; want a1's and a2's starts", sup, err)
	}
}
