package manage_test

import (
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/silence"
)

// The review of issue 36's work: each test is one sequence that still
// breaks a promise of acknowledgement and escalation.

// A silence with notify_on_expire withheld the alarm's start from oncall;
// it ends, and the escalation pass (every 5 s) runs before the service
// takes the expired silence (every 30 s). The step announces the alarm to
// oncall, whose start was withheld; Slack asks it to wait a little. The
// silence's announcement then puts the withheld start back as well: oncall
// is paged twice for one alarm.
func TestScenarioEscalationAfterASilenceEndsPagesOnceWhenTheSilenceAnnouncesItToo(t *testing.T) {
	s := newScenarioRules(t, stepRules(""))
	m, err := route.ParseMatch("--match", []byte(`{station_ids: [S1]}`))
	if err != nil {
		t.Fatal(err)
	}
	sil, err := s.silences.Add(silence.Silence{Match: m.Match, EndsAt: s.clk.Now().Add(15 * time.Minute), Author: "ana",
		Comment: "works at S1", NotifyOnExpire: true})
	if err != nil {
		t.Fatal(err)
	}
	s.apply(s.starts("A", "S1", "D1", "E1", 0))
	s.advance(5 * time.Second)
	if got := s.suppressed("oncall"); len(got) != 1 || !strings.Contains(got[0], "silence") {
		t.Fatalf("oncall withheld %v, want A's start withheld by the silence", got)
	}
	s.advance(16 * time.Minute)
	s.slack.Fail(notifytest.MethodPostMessage, notifytest.SlackFailure{Status: 429, RetryAfter: "20"})
	s.escalate()
	if _, err := s.silences.TakeExpired(s.clk.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.mgr.Reannounce([]string{sil.ID}); err != nil {
		t.Fatal(err)
	}
	s.advance(2 * time.Minute)
	got := s.channel("C2")
	if n := countMentions(got, notifytest.MethodPostMessage); n != 1 {
		t.Fatalf("oncall got %d posts of A:%s\nwant one page", n, dump(got))
	}
}
