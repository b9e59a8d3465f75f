package manage_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/isa"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
)

// ackRules are the sinks of rulesHead, a second Slack channel that
// escalation reaches, and a route that reminds and escalates twice.
const ackRules = rulesHead + `
  - name: oncall
    type: slack
    channel: C2
  - name: boss
    type: slack
    channel: C3
routes:` + busRoute + `
  - name: people
    to: [people]
    repeat: 10m
    escalate:
      - {after: 10m, to: [oncall]}
      - {after: 30m, to: [boss]}
`

// escalate runs Escalate as the service does every few seconds, and lets
// the loops settle.
func (s *scenario) escalate() {
	s.t.Helper()
	if err := s.mgr.Escalate(context.Background()); err != nil {
		s.t.Fatalf("escalate: %v", err)
	}
	s.settle()
}

// act applies an action from Slack user id on alarm ids.
func (s *scenario) act(kind notify.ActionKind, id string, alarms ...string) notify.ActionResult {
	s.t.Helper()
	res, err := s.mgr.Act(context.Background(), notify.Action{Kind: kind, Sink: "people", Alarms: alarms,
		Actor: notify.Actor{Via: "slack", ID: id, Name: "user " + id}, Ref: "click-" + id})
	if err != nil {
		s.t.Fatalf("act %s by %s: %v", kind, id, err)
	}
	s.settle()
	return res
}

// channel returns the lines of the fake Slack's calls to channel.
func (s *scenario) channel(ch string) []string {
	var out []string
	for _, c := range s.slack.Calls() {
		if c.Channel == ch && c.Error == "" && c.Status < 300 {
			out = append(out, c.Method+" "+c.Text+" "+attachmentText(c))
		}
	}
	return out
}

func attachmentText(c notifytest.SlackCall) string {
	var b strings.Builder
	for _, a := range c.Attachments {
		b.WriteString(a.Title + " " + a.Text + " " + a.Pretext + " ")
		for _, f := range a.Fields {
			b.WriteString(f.Title + " " + f.Value + " ")
		}
	}
	return b.String()
}

// An unacknowledged alarm escalates step by step, the start it sends
// saying how long it waited; acknowledging it from a chat stops the later
// steps and the reminders, and its end still reaches every sink it was
// announced to. The acknowledgement reaches the bus as an ack event.
func TestScenarioAcknowledgementStopsEscalationAndReminders(t *testing.T) {
	s := newScenarioRules(t, ackRules)
	a := s.starts("A", "S1", "D1", "E1", 0)
	s.apply(a)
	s.advance(9 * time.Minute)
	s.escalate()
	if got := s.channel("C2"); len(got) != 0 {
		t.Fatalf("oncall got messages before the first step:%s", dump(got))
	}
	s.advance(2 * time.Minute) // 11m
	s.escalate()
	s.tick() // a reminder at 10m
	if got := s.channel("C2"); len(got) != 1 || !mentions(got, "Escalated: unacknowledged for 10m") {
		t.Fatalf("after 11 minutes oncall got:%s\nwant one start saying it escalated after 10m", dump(got))
	}
	if got := s.channel("C1"); !mentions(got, "Reminder") {
		t.Fatalf("people got no reminder at 10m:%s", dump(got))
	}
	s.escalate() // again: a step is taken once
	if got := s.channel("C2"); len(got) != 1 {
		t.Fatalf("a second pass escalated again:%s", dump(got))
	}
	res := s.act(notify.Acknowledge, "U1", "A")
	if !slices.Equal(res.Applied, []string{"A"}) || res.NotAllowed {
		t.Fatalf("ack: %+v", res)
	}
	// The same click again, and a second person at once: nothing changes,
	// and the first actor stays.
	if res := s.act(notify.Acknowledge, "U1", "A"); len(res.Applied) != 0 || !strings.Contains(res.Text, "already acknowledged by user U1") {
		t.Fatalf("the click delivered twice: %+v", res)
	}
	if res := s.act(notify.Acknowledge, "U2", "A"); len(res.Applied) != 0 {
		t.Fatalf("a second person: %+v", res)
	}
	if ack, err := s.mgr.Acknowledgement("A"); err != nil || !ack.Acknowledged || ack.By != "U1" || ack.Via != "slack" {
		t.Fatalf("acknowledgement = %+v, %v; want by U1 via slack", ack, err)
	}
	remindersBefore := countMentions(s.channel("C1"), "Reminder")
	s.advance(25 * time.Minute) // 36m: past the second step, two reminders' time
	s.escalate()
	s.tick()
	if got := s.channel("C3"); len(got) != 0 {
		t.Fatalf("boss was paged after the acknowledgement:%s", dump(got))
	}
	if n := countMentions(s.channel("C1"), "Reminder"); n != remindersBefore {
		t.Fatalf("%d reminders after the acknowledgement, want none (repeat_until defaults to acknowledged)", n-remindersBefore)
	}
	s.apply(s.ends(a))
	s.settle()
	for _, ch := range []string{"C1", "C2"} {
		if got := s.channel(ch); len(got) < 2 {
			t.Fatalf("%s did not get the end:%s", ch, dump(got))
		}
	}
	ids := s.busIDs()
	if !slices.Contains(ids, "A:ack") || slices.Index(ids, "A:ack") > slices.Index(ids, "A:end") {
		t.Fatalf("the bus got %v: want A:start, A:ack, A:end in order", ids)
	}
	acks, err := manage.FirstAcks(s.store)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := isa.FromStore(s.store, s.rules, s.clk.Now(), 24*time.Hour, acks)
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Routes[1]; f.Acknowledged != 1 || f.ClearedUnacknowledged != 0 || f.MedianTimeToAckSeconds != (11*time.Minute).Seconds() {
		t.Fatalf("report of route %s: %d acknowledged after %g s, %d cleared unacknowledged; want 1 after 660 s, 0",
			f.Route, f.Acknowledged, f.MedianTimeToAckSeconds, f.ClearedUnacknowledged)
	}
}

// ack_by: a person the route does not name changes nothing and is told so;
// the chain goes on. A named person, or one in a named group, may.
func TestScenarioNotAllowedChangesNothing(t *testing.T) {
	s := newScenarioRules(t, strings.Replace(ackRules, "    repeat: 10m\n", "    repeat: 10m\n    ack_by: [slack:U1, slack:S9]\n", 1))
	s.apply(s.starts("A", "S1", "D1", "E1", 0))
	res := s.act(notify.Acknowledge, "U2", "A")
	if !res.NotAllowed || len(res.Applied) != 0 || !strings.Contains(res.Text, "not allowed") {
		t.Fatalf("U2's ack: %+v, want not allowed", res)
	}
	if ack, _ := s.mgr.Acknowledgement("A"); ack.Acknowledged || len(ack.History) != 1 || ack.History[0].Result != "not allowed" {
		t.Fatalf("after a refused ack: %+v; want unacknowledged, the refusal recorded", ack)
	}
	s.advance(11 * time.Minute)
	s.escalate()
	if got := s.channel("C2"); len(got) != 1 {
		t.Fatalf("the chain stopped for a refused ack:%s", dump(got))
	}
	res, err := s.mgr.Act(context.Background(), notify.Action{Kind: notify.Acknowledge, Alarms: []string{"A"},
		Actor: notify.Actor{Via: "slack", ID: "U7", Groups: []string{"S9"}}})
	if err != nil || len(res.Applied) != 1 {
		t.Fatalf("a member of the named group: %+v, %v", res, err)
	}
}

// The chain's timers are in the store: a restart between two steps keeps
// when each is due, and takes none twice.
func TestScenarioRestartKeepsTheChainsTiming(t *testing.T) {
	s := newScenarioRules(t, ackRules)
	a := s.starts("A", "S1", "D1", "E1", 0)
	s.apply(a)
	s.advance(11 * time.Minute)
	s.escalate()
	s.restart()
	s.escalate()
	if got := s.channel("C2"); len(got) != 1 {
		t.Fatalf("after a restart oncall got:%s", dump(got))
	}
	s.advance(18 * time.Minute) // 29m
	s.restart()
	s.escalate()
	if got := s.channel("C3"); len(got) != 0 {
		t.Fatalf("boss was paged before 30m:%s", dump(got))
	}
	s.advance(2 * time.Minute) // 31m
	s.escalate()
	if got := s.channel("C3"); len(got) != 1 || !mentions(got, "Escalated: unacknowledged for 30m") {
		t.Fatalf("boss at 31m after two restarts:%s", dump(got))
	}
}

// An alarm that clears unacknowledged ends its chain: no later step, and
// its end reaches the sinks escalation announced it to.
func TestScenarioClearedUnacknowledgedEndsTheChain(t *testing.T) {
	s := newScenarioRules(t, ackRules)
	a := s.starts("A", "S1", "D1", "E1", 0)
	s.apply(a)
	s.advance(11 * time.Minute)
	s.escalate()
	s.apply(s.ends(a))
	s.advance(30 * time.Minute)
	s.escalate()
	if got := s.channel("C3"); len(got) != 0 {
		t.Fatalf("boss was paged for an alarm that cleared:%s", dump(got))
	}
	if got := s.channel("C2"); len(got) < 2 {
		t.Fatalf("oncall, escalated to, did not get the end:%s", dump(got))
	}
	if ack, _ := s.mgr.Acknowledgement("A"); ack.Acknowledged {
		t.Fatal("a cleared alarm reads as acknowledged")
	}
	if res := s.act(notify.Acknowledge, "U1", "A"); len(res.Applied) != 0 || !strings.Contains(res.Text, "over") {
		t.Fatalf("acknowledging a cleared alarm: %+v", res)
	}
	// relay report counts it so.
	acks, err := manage.FirstAcks(s.store)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := isa.FromStore(s.store, s.rules, s.clk.Now(), 24*time.Hour, acks)
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Routes[1]; f.Route != "people" || f.Alarms != 1 || f.ClearedUnacknowledged != 1 || f.Acknowledged != 0 {
		t.Fatalf("report of route %s: %d alarms, %d cleared unacknowledged, %d acknowledged; want 1, 1, 0",
			f.Route, f.Alarms, f.ClearedUnacknowledged, f.Acknowledged)
	}
}

// Shelving from a chat silences the alarm's point: the chain waits while
// it is shelved, and goes on when the shelving ends; "until cleared" ends
// its silence when the alarm does.
func TestScenarioShelvingPausesTheChain(t *testing.T) {
	s := newScenarioRules(t, ackRules)
	a := s.starts("A", "S1", "D1", "E1", 0)
	s.apply(a)
	res, err := s.mgr.Act(context.Background(), notify.Action{Kind: notify.Shelve, ShelveFor: time.Hour, Alarms: []string{notify.AlarmRef("A")},
		Actor: notify.Actor{Via: "slack", ID: "U1"}})
	if err != nil || len(res.Applied) != 1 {
		t.Fatalf("shelve: %+v, %v", res, err)
	}
	s.advance(31 * time.Minute)
	s.escalate()
	if got := slices.Concat(s.channel("C2"), s.channel("C3")); len(got) != 0 {
		t.Fatalf("a shelved alarm escalated:%s", dump(got))
	}
	s.advance(30 * time.Minute) // the shelving is over
	s.escalate()
	if len(s.channel("C2")) != 1 || len(s.channel("C3")) != 1 {
		t.Fatalf("after the shelving the chain did not go on: C2%s\nC3%s", dump(s.channel("C2")), dump(s.channel("C3")))
	}
	b := s.starts("B", "S1", "D2", "E2", 0)
	s.apply(b)
	if _, err := s.mgr.Act(context.Background(), notify.Action{Kind: notify.Shelve, Alarms: []string{"B"},
		Actor: notify.Actor{Via: "slack", ID: "U1"}}); err != nil {
		t.Fatal(err)
	}
	if n := len(s.silences.List(false)); n != 1 {
		t.Fatalf("%d silences after shelving B until cleared, want 1", n)
	}
	s.apply(s.ends(b))
	s.escalate()
	if n := len(s.silences.List(false)); n != 0 {
		t.Fatalf("%d silences active after B cleared, want its shelving ended", n)
	}
}

func countMentions(lines []string, word string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, word) {
			n++
		}
	}
	return n
}

// The same click handed over again after the alarm changed since (a
// PagerDuty acknowledgement read back after a restart, once someone took it
// back) changes nothing; a new click does.
func TestScenarioAClickIsAppliedOnce(t *testing.T) {
	s := newScenarioRules(t, ackRules)
	s.apply(s.starts("A", "S1", "D1", "E1", 0))
	click := func(ref string, kind notify.ActionKind) notify.ActionResult {
		t.Helper()
		res, err := s.mgr.Act(context.Background(), notify.Action{Kind: kind, Alarms: []string{"A"},
			Actor: notify.Actor{Via: "pagerduty", ID: "PU1"}, Ref: ref})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := click("P1@08:01", notify.Acknowledge); len(res.Applied) != 1 {
		t.Fatalf("first ack: %+v", res)
	}
	if res := click("api", notify.Unacknowledge); len(res.Applied) != 1 {
		t.Fatalf("unack: %+v", res)
	}
	if res := click("P1@08:01", notify.Acknowledge); len(res.Applied) != 0 || !strings.Contains(res.Text, "applied before") {
		t.Fatalf("the same acknowledgement handed over again: %+v", res)
	}
	if res := click("P1@08:05", notify.Acknowledge); len(res.Applied) != 1 {
		t.Fatalf("a new acknowledgement: %+v", res)
	}
}

// "Shelve until cleared" delivered twice (a retried envelope, or two
// people at once) leaves one silence of the point, and it ends when the
// alarm clears: none is left muting the point for 90 days.
func TestScenarioShelveUntilClearedTwiceEndsWithTheAlarm(t *testing.T) {
	s := newScenarioRules(t, ackRules)
	b := s.starts("B", "S1", "D2", "E2", 0)
	s.apply(b)
	for _, who := range []string{"U1", "U1", "U2"} {
		if _, err := s.mgr.Act(context.Background(), notify.Action{Kind: notify.Shelve, Alarms: []string{notify.AlarmRef("B")},
			Actor: notify.Actor{Via: "slack", ID: who}, Ref: "click-" + who}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.silences.List(false)); n != 1 {
		t.Errorf("%d silences active after three clicks of Shelve until cleared, want 1", n)
	}
	s.apply(s.ends(b))
	s.escalate()
	if got := s.silences.List(false); len(got) != 0 {
		t.Fatalf("after B cleared, %d silences still mute its point: %+v", len(got), got)
	}
}

// A webhook escalated to gets the start's bytes with data.escalation: the
// step's route and after, and how long the alarm waited; a start routed
// there by the rules has none.
func TestScenarioEscalatedStartSaysSoInItsBytes(t *testing.T) {
	const secret = "whsec_c2NlbmFyaW8tZXNjYWxhdGlvbi1zZWNyZXQ="
	hook := notifytest.NewReceiver(t, secret)
	s := newScenarioWith(t, clock.NewFake(t0), rulesHead+"  - name: ops\n    type: webhook\n    url: "+hook.URL()+"\n    secret_env: HOOK_SECRET\n"+`
routes:`+busRoute+`
  - name: people
    match: {levels: [0]}
    to: [people]
    escalate:
      - {after: 10m, to: [ops]}
  - name: minor
    match: {levels: [3]}
    to: [ops]
`, map[string]string{"HOOK_SECRET": secret})
	s.apply(s.starts("A", "S1", "D1", "E1", 0), s.starts("M", "S1", "D2", "E2", 3))
	s.advance(10*time.Minute + time.Second)
	s.escalate()
	got := map[string]*event.Escalation{}
	for _, r := range hook.Requests() {
		ev, err := event.Unmarshal(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		got[ev.ID] = ev.Data.Escalation
	}
	esc, ok := got["A:start"]
	if !ok || esc == nil || esc.Route != "people" || esc.AfterMs != 600000 || esc.WaitedMs < 600000 {
		t.Fatalf("A's start at the webhook: %+v (present %v); want the people route's 10m step and the wait", esc, ok)
	}
	if esc, ok := got["M:start"]; !ok || esc != nil {
		t.Fatalf("M's start, routed by the rules: %+v (present %v); want no escalation", esc, ok)
	}
}
