package manage_test

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A replica whose lease ran out sends neither the reminder nor the daily
// summary that are due at its tick: nothing reaches Slack, the tick says
// why, and the next holder's tick sends both.
func TestAFencedTickSendsNoReminderNorDailySummary(t *testing.T) {
	s := newScenarioRules(t, remindersRules)
	s.apply(s.starts("long", "S1", "D1", "E1", 0))
	s.advance(5 * time.Second)
	s.tick() // the daily summary counts from now
	// Tuesday 09:01: a reminder and the summary of the stale alarm are due.
	s.advance(25*time.Hour + time.Minute)
	before := s.slackLines()

	lost := errors.New("lease lost: no renewal succeeded within 10s")
	s.fence = func() error { return lost }
	s.restart()
	err := s.tickErr()
	if !errors.Is(err, lost) || !strings.Contains(err.Error(), "reminder") || !strings.Contains(err.Error(), "daily summary") {
		t.Errorf("the fenced tick returned %v, want the fence's refusal of the reminder and of the daily summary", err)
	}
	if after := s.slackLines(); len(after) != len(before) {
		t.Fatalf("the fenced tick sent%s", dump(after[len(before):]))
	}

	s.fence = nil
	s.restart()
	s.tick()
	lines := s.slackLines()[len(before):]
	if !mentions(lines, "reply", "Reminder, ongoing for", "E1") || len(filter(lines, "post :rotating_light: Daily summary")) != 1 {
		t.Fatalf("the next holder's tick sent%s\nwant the reminder and the daily summary", dump(lines))
	}
}
