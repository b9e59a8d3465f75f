package manage_test

import (
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/store"
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

// renameOncall restarts the relay on the same rules with the sink oncall
// renamed pager (its channel, C2, kept), as a reload or an upgrade does,
// and records the rename (store.Store.AdoptSinks).
func (s *scenario) renameOncall() {
	s.t.Helper()
	s.halt()
	renamed := strings.ReplaceAll(strings.ReplaceAll(stepRules("    hold: 40m"), "name: oncall", "name: pager"), "[oncall]", "[pager]")
	r, err := route.Parse("rules.yaml", []byte(renamed), nil)
	if err != nil {
		s.t.Fatal(err)
	}
	s.rules = r
	s.start()
	if got := s.adopt(); len(got) != 1 || got[0].To != "pager" {
		s.t.Fatalf("AdoptSinks = %+v, want oncall renamed pager", got)
	}
}

// An escalation step released oncall's start from its 40-minute hold, but
// Slack failed the post; the sink is renamed (same channel) before the
// retry. The step's note is kept under the old name only: the start, now
// pager's, is held down again until 40 minutes, and arrives without its
// "Escalated" note, as issue 36's item 1 described.
func TestScenarioAStartEscalationReleasedStaysReleasedWhenItsSinkIsRenamed(t *testing.T) {
	s := newScenarioRules(t, stepRules("    hold: 40m"))
	s.adopt()
	s.apply(s.starts("A", "S1", "D1", "E1", 0))
	s.advance(11 * time.Minute)
	for range 3 {
		s.slack.Fail(notifytest.MethodPostMessage, notifytest.SlackFailure{Status: 503})
	}
	s.escalate()
	if got := s.channel("C2"); len(got) != 0 {
		t.Fatalf("C2 got:%s\nwant nothing yet: Slack failed the post", dump(got))
	}
	s.renameOncall()
	s.advance(5 * time.Minute)
	if got := s.channel("C2"); len(got) != 1 || !mentions(got, "Escalated: unacknowledged for 10m") {
		t.Fatalf("16 minutes in, C2 got:%s\nwant the start the step released, saying it escalated", dump(got))
	}
}

// After a sink an escalation step reached is renamed, GET /alarms says
// what became of the alarm there under the name the rules now use; it does
// not show the old name as pending, a page that never comes.
func TestScenarioAlarmsShowsTheEscalationOfARenamedSinkAsItIs(t *testing.T) {
	s := newScenarioRules(t, stepRules("    hold: 40m"))
	s.adopt()
	s.apply(s.starts("A", "S1", "D1", "E1", 0))
	s.advance(11 * time.Minute)
	s.escalate()
	if esc := s.escalationOf("A"); len(esc) != 1 || esc[0].Sink != "oncall" || esc[0].State != store.StartDelivered {
		t.Fatalf("GET /alarms shows escalation %+v, want oncall delivered", esc)
	}
	s.renameOncall()
	if esc := s.escalationOf("A"); len(esc) != 1 || esc[0].Sink != "pager" || esc[0].State != store.StartDelivered {
		t.Fatalf("after the rename GET /alarms shows escalation %+v, want pager delivered", esc)
	}
}

// GET /alarms shows an alarm's acknowledgement state "when someone acted on
// it" (docs/design.md §8, "Ops API"), with the actions applied and refused.
// A click ack_by refused on an alarm nobody acknowledged is such an action:
// with the history split in two (applied, refused), the alarm has no "ack"
// at all, and the refused click is seen only by asking for the alarm alone.
func TestScenarioAlarmsShowsAClickRefusedOnAnAlarmNobodyAcknowledged(t *testing.T) {
	s := newScenarioRules(t, strings.Replace(ackRules, "    repeat: 10m\n", "    repeat: 10m\n    ack_by: [slack:U1]\n", 1))
	s.apply(s.starts("A", "S1", "D1", "E1", 0))
	if res := s.act(notify.Acknowledge, "U9", "A"); !res.NotAllowed {
		t.Fatalf("U9's click: %+v, want refused", res)
	}
	alarms, err := s.mgr.Alarms()
	if err != nil || len(alarms) != 1 {
		t.Fatalf("Alarms = %+v, %v", alarms, err)
	}
	if a := alarms[0].Ack; a == nil || len(a.History) != 1 || a.History[0].Actor.ID != "U9" {
		t.Fatalf("GET /alarms shows A's ack %+v, want its history with U9's refused click", a)
	}
}
