package dedupe

import (
	"slices"
	"testing"

	"github.com/relay-energy/relay/internal/event"
)

// TestARenamedSinkKeepsItsMemoryAndOutbox: a Slack sink renamed in the rules,
// with the same channel, keeps the thread of each alarm and its pending
// entries under the new name; sinks of other destinations, or still named,
// keep theirs.
func TestARenamedSinkKeepsItsMemoryAndOutbox(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	if _, err := s.AdoptSinks(map[string]string{"oncall": "slack:C1", "bus": "", "team": "slack:C2"}); err != nil {
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
	renamed, err := s.AdoptSinks(map[string]string{"pager": "slack:C1", "bus": "", "crew": "slack:C3"})
	if err != nil {
		t.Fatal(err)
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
	if err != nil || depth["pager"] != 1 || depth["oncall"] != 0 || depth["team"] != 2 || depth["bus"] != 2 {
		t.Fatalf("depth = %v, %v", depth, err)
	}
	if got, _ := s.Pending("team", 10); len(got) != 2 {
		t.Errorf("team's outbox moved: %v", entryIDs(got))
	}

	// Applying the same rules again moves nothing.
	if again, err := s.AdoptSinks(map[string]string{"pager": "slack:C1", "bus": "", "crew": "slack:C3"}); err != nil || len(again) != 0 {
		t.Fatalf("second adoption: %+v, %v", again, err)
	}
}
