package manage_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/store"
)

// blockedRules page oncall directly, muted on Mondays from 09:00, and
// escalate to it after 10 min: with oncall's channel missing, its start is
// a dead letter and the step at 08:11 is blocked (found by an adversarial
// review of the blocked step's note).
const blockedRules = rulesHead + `
  - name: oncall
    type: slack
    channel: C2
time_intervals:
  - name: later
    time_intervals:
      - weekdays: [monday]
        times: [{start_time: '09:00', end_time: '18:00'}]
routes:` + busRoute + `
  - name: direct
    match: {levels: [0]}
    to: [oncall]
    mute_when: [later]
    continue: true
  - name: urgent
    match: {levels: [0]}
    to: [bus]
    escalate:
      - {after: 10m, to: [oncall]}
`

// blockedStep starts alarm A under rules and takes the step that finds
// oncall's start dead.
func blockedStep(t *testing.T, rules string) (*scenario, record) {
	t.Helper()
	s := newScenarioRules(t, rules)
	s.slack.Fail(notifytest.MethodPostMessage, notifytest.SlackFailure{Error: "channel_not_found"})
	a := s.starts("A", "S1", "D1", "E1", 0)
	s.apply(a)
	s.settle()
	s.advance(11 * time.Minute)
	s.escalate()
	if esc := s.escalationOf("A"); len(esc) != 1 || esc[0].State != store.StartDead {
		t.Fatalf("escalation %+v; want oncall's start dead", esc)
	}
	return s, a
}

// replay replays oncall's dead letters, lets a minute pass, and returns
// what oncall's channel got.
func (s *scenario) replay() []string {
	s.t.Helper()
	s.slack.Fail(notifytest.MethodPostMessage, notifytest.SlackFailure{})
	if _, refused, err := s.store.ReplayDeadLetters(store.DeadLetterFilter{Sink: "oncall"}); err != nil || len(refused) != 0 {
		s.t.Fatalf("replay: %v, refused %v", err, refused)
	}
	s.advance(time.Minute)
	return s.channel("C2")
}

// A replay of the dead start the step could not reach, made after someone
// acknowledged the alarm, is the route's own start again: the mute holds
// it, and nobody is paged "unacknowledged".
func TestAReplayedBlockedStartAfterAnAcknowledgementObeysTheMute(t *testing.T) {
	s, _ := blockedStep(t, blockedRules)
	if res := s.act(notify.Acknowledge, "U1", "A"); len(res.Applied) != 1 {
		t.Fatalf("ack: %+v", res)
	}
	s.advance(time.Hour) // 09:11 on Monday: the direct route is muted
	if got := s.replay(); len(got) != 0 {
		t.Fatalf("oncall got, during the mute, for an acknowledged alarm:%s", dump(got))
	}
	if sup := s.suppressed("oncall"); !slices.ContainsFunc(sup, func(l string) bool { return strings.HasPrefix(l, "A:start: muted") }) {
		t.Fatalf("oncall's suppressed log %v; want A's start muted", sup)
	}
}

// Nor does a replay made after the alarm ended, whether or not the hourly
// pruning of state has run.
func TestAReplayedBlockedStartOfAnEndedAlarmObeysTheMute(t *testing.T) {
	for _, prune := range []bool{false, true} {
		s, a := blockedStep(t, blockedRules)
		s.advance(time.Hour)
		s.apply(s.ends(a))
		s.settle()
		if prune {
			if err := s.mgr.PruneState(); err != nil {
				t.Fatal(err)
			}
		}
		if got := s.replay(); len(got) != 0 {
			t.Fatalf("pruned %v: oncall got, during the mute, for an alarm over:%s", prune, dump(got))
		}
	}
}

// A replay while the alarm is still unacknowledged is the step's page: it
// goes out as escalated, and GET /alarms then lists oncall among the sinks
// the alarm was escalated to.
func TestAReplayedBlockedStartIsTheStepsPage(t *testing.T) {
	s, _ := blockedStep(t, blockedRules)
	s.advance(time.Hour) // muted: the page goes out all the same
	got := s.replay()
	if !mentions(got, "Escalated") {
		t.Fatalf("oncall got:%s; want the escalated start", dump(got))
	}
	alarms, err := s.mgr.Alarms()
	if err != nil || len(alarms) != 1 {
		t.Fatalf("alarms %+v, %v", alarms, err)
	}
	if a := alarms[0]; !slices.Equal(a.Escalated, []string{"oncall"}) {
		t.Fatalf("escalated to %v, escalation %+v; want oncall once its replayed start went out", a.Escalated, a.Escalation)
	}
}
