package manage_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/store"
)

// The seams of acknowledgement and escalation that issue 36 found: each
// test is one sequence an adversarial reviewer ran against the relay.

// stepRules page oncall (C2) directly at level 0 under directOptions, and
// escalate the people route's alarms to oncall after 10m: the step's sink
// is one a route also names.
func stepRules(directOptions string) string {
	return rulesHead + `
  - name: oncall
    type: slack
    channel: C2
time_intervals:
  - name: mondays
    time_intervals:
      - weekdays: [monday]
routes:` + busRoute + `
  - name: direct
    match: {levels: [0]}
    to: [oncall]
    continue: true
` + directOptions + `
  - name: people
    to: [people]
    escalate:
      - {after: 10m, to: [oncall]}
`
}

// escalationOf returns what Alarms says escalation did to origin.
func (s *scenario) escalationOf(origin string) []manage.EscalatedTo {
	s.t.Helper()
	alarms, err := s.mgr.Alarms()
	if err != nil {
		s.t.Fatal(err)
	}
	for _, a := range alarms {
		if a.OriginID == origin {
			return a.Escalation
		}
	}
	return nil
}

// Sequence 1, muted: a route pages oncall directly but is muted on
// Mondays; another escalates to oncall after 10m. The muted start does not
// count as oncall having the alarm: the step announces it there, saying it
// escalated, and its end follows.
func TestScenarioEscalationReachesAStepSinkWhoseStartWasMuted(t *testing.T) {
	s := newScenarioRules(t, stepRules("    mute_when: [mondays]"))
	a := s.starts("A", "S1", "D1", "E1", 0)
	s.apply(a)
	s.advance(5 * time.Second)
	if got := s.suppressed("oncall"); len(got) != 1 || !strings.Contains(got[0], "muted") {
		t.Fatalf("oncall's start at once: withheld %v, want muted", got)
	}
	s.advance(11 * time.Minute)
	s.escalate()
	if got := s.channel("C2"); len(got) != 1 || !mentions(got, "Escalated: unacknowledged for 10m") {
		t.Fatalf("after 11 minutes oncall got:%s\nwant the escalated start", dump(got))
	}
	if esc := s.escalationOf("A"); len(esc) != 1 || esc[0].Sink != "oncall" || esc[0].State != store.StartDelivered {
		t.Fatalf("GET /alarms shows escalation %+v, want oncall delivered", esc)
	}
	s.advance(16 * time.Hour)
	s.escalate()
	s.apply(s.ends(a))
	s.advance(time.Minute)
	if got := s.channel("C2"); countMentions(got, "Escalated") != 1 || !mentions(got[1:], "Resolved") {
		t.Fatalf("oncall got:%s\nwant the escalated start once, then its end", dump(got))
	}
}

// Sequence 1, held down: with hold: 40m on the direct route instead, the
// step releases the held start at 10 minutes, saying it escalated; it is
// not sent a second time when the hold would have ended.
func TestScenarioEscalationReleasesAStartHeldDown(t *testing.T) {
	s := newScenarioRules(t, stepRules("    hold: 40m"))
	s.apply(s.starts("A", "S1", "D1", "E1", 0))
	s.advance(9 * time.Minute)
	s.escalate()
	if got := s.channel("C2"); len(got) != 0 {
		t.Fatalf("oncall got the held start before the step:%s", dump(got))
	}
	s.advance(2 * time.Minute)
	s.escalate()
	if got := s.channel("C2"); len(got) != 1 || !mentions(got, "Escalated: unacknowledged for 10m") {
		t.Fatalf("after 11 minutes oncall got:%s\nwant the held start, released by the step and saying so", dump(got))
	}
	s.advance(40 * time.Minute)
	s.escalate()
	if got := s.channel("C2"); len(got) != 1 {
		t.Fatalf("after the hold oncall got:%s\nwant the start once", dump(got))
	}
}

// Sequence 1, dead-lettered: a step sink whose start is a dead letter
// cannot be given the alarm out of order; the step is taken, and the
// operator sees at that alarm and sink why it did not reach it.
func TestScenarioEscalationToASinkWhoseStartIsADeadLetterSaysWhy(t *testing.T) {
	s := newScenarioRules(t, rulesHead+`
  - name: oncall
    type: slack
    channel: C2
routes:`+busRoute+`
  - name: direct
    match: {levels: [0]}
    to: [oncall]
    continue: true
  - name: urgent
    match: {levels: [0]}
    to: [bus]
    escalate:
      - {after: 10m, to: [oncall]}
`)
	s.slack.Fail(notifytest.MethodPostMessage, notifytest.SlackFailure{Error: "channel_not_found"})
	s.apply(s.starts("A", "S1", "D1", "E1", 0))
	s.settle()
	s.advance(11 * time.Minute)
	s.escalate()
	esc := s.escalationOf("A")
	if len(esc) != 1 || esc[0].Sink != "oncall" || esc[0].State != store.StartDead || !strings.Contains(esc[0].Reason, "channel_not_found") {
		t.Fatalf("GET /alarms shows escalation %+v, want oncall's start a dead letter, with the reason", esc)
	}
	if got := s.channel("C2"); len(got) != 0 {
		t.Fatalf("oncall got:%s\nwant nothing before the dead letter is replayed", dump(got))
	}
}

// Sequence 1, chattering: a device that chatters has its starts withheld
// at oncall; an escalation step still pages oncall with the one alarm that
// stayed unacknowledged.
func TestScenarioEscalationReachesAStepSinkWhoseStartWasWithheldAsChattering(t *testing.T) {
	s := newScenarioRules(t, stepRules(""))
	for i := range 3 {
		r := s.starts(fmt.Sprintf("C%d", i), "S1", "D1", "E1", 0)
		s.apply(r)
		s.advance(time.Minute)
		s.apply(s.ends(r))
	}
	s.apply(s.starts("A", "S1", "D1", "E1", 0))
	s.advance(time.Minute)
	if got := s.suppressed("oncall"); !slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(l, "A:start: chattering") }) {
		t.Fatalf("oncall withheld %v, want A's start withheld as chattering", got)
	}
	s.advance(11 * time.Minute)
	s.escalate()
	s.advance(time.Minute)
	if got := s.channel("C2"); !mentions(got, "Escalated: unacknowledged for 10m") {
		t.Fatalf("oncall got:%s\nwant A's escalated start", dump(got))
	}
}

// Sequence 2: an alarm recorded before the delivery ledger (its end routed
// by the rules) that escalates keeps its end wherever the rules sent its
// start, and gets one at the step's sink too.
func TestScenarioEscalatingAnAlarmFromBeforeTheLedgerKeepsItsEnds(t *testing.T) {
	s := newScenarioRules(t, ackRules)
	s.halt()
	old, err := store.Open(s.path, store.Options{Clock: s.clk, LockTimeout: time.Second, EndsByRules: true})
	if err != nil {
		t.Fatal(err)
	}
	a := s.starts("A", "S1", "D1", "E1", 0)
	// As a relay before the ledger recorded it: no sink set.
	if _, err := old.Apply(context.Background(), store.Batch{Observed: []event.Alarm{a.alarm()}, DetectedAt: s.clk.Now()},
		func(ev *event.Event) []string { return s.rules.SinksFor(ev) }); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s.start()
	s.settle()
	s.advance(11 * time.Minute)
	s.escalate()
	s.apply(s.ends(a))
	s.settle()
	if ids := s.waitBus(2); !slices.Contains(ids, "A:end") {
		t.Fatalf("the bus got %v: want A's end after its escalation", ids)
	}
	for _, ch := range []string{"C1", "C2"} {
		if got := s.channel(ch); !mentions(got, "Resolved") {
			t.Fatalf("%s got:%s\nwant A's end", ch, dump(got))
		}
	}
}

// Sequence 3: a person allowed to shelve the minor alarm (its route names
// nobody in ack_by) shelves it; its level rises to urgent, whose route
// names only U1. The shelving does not keep the urgent start from oncall,
// nor hold its escalation.
func TestScenarioShelvingAtALevelDoesNotHoldTheAlarmOnceItRises(t *testing.T) {
	s := newScenarioRules(t, rulesHead+`
  - name: oncall
    type: slack
    channel: C2
  - name: boss
    type: slack
    channel: C3
routes:`+busRoute+`
  - name: minor
    match: {levels: [3]}
    to: [people]
  - name: urgent
    match: {levels: [0]}
    to: [oncall]
    ack_by: [slack:U1]
    escalate:
      - {after: 10m, to: [boss]}
`)
	a := s.starts("A", "S1", "D1", "E1", 3)
	s.apply(a)
	res, err := s.mgr.Act(context.Background(), notify.Action{Kind: notify.Shelve, Sink: "people", Alarms: []string{notify.AlarmRef("A")},
		Actor: notify.Actor{Via: "slack", ID: "U9"}, Ref: "click-U9"})
	if err != nil || len(res.Applied) != 1 {
		t.Fatalf("U9 shelving the minor alarm: %+v, %v; want it applied (no ack_by on the minor route)", res, err)
	}
	a.level = 0
	s.apply(a)
	s.advance(time.Minute)
	if got := s.channel("C2"); len(got) != 1 {
		t.Fatalf("oncall got:%s\nwant the urgent start: U9 may not act on urgent alarms", dump(got))
	}
	s.advance(10 * time.Minute)
	s.escalate()
	s.advance(time.Minute)
	if got := s.channel("C3"); !mentions(got, "Escalated") {
		t.Fatalf("boss got:%s\nwant the escalation: U9's shelving does not hold it", dump(got))
	}
	// U1, whom the urgent route names, may shelve it at every level.
	b := s.starts("B", "S1", "D2", "E2", 3)
	s.apply(b)
	if res := s.act(notify.Shelve, "U1", "B"); len(res.Applied) != 1 {
		t.Fatalf("U1 shelving: %+v", res)
	}
	b.level = 0
	s.apply(b)
	s.advance(time.Minute)
	if got := s.suppressed("oncall"); !slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(l, "B:start: silence") }) {
		t.Fatalf("oncall withheld %v: want B's urgent start withheld by U1's shelving", got)
	}
}

// Sequence 4: an acknowledgement queued while its start was still being
// retried is not delivered once that start became a dead letter: it is
// parked beside the start, and a replay sends them in order.
func TestScenarioAnAcknowledgementDoesNotFollowAStartThatBecameADeadLetter(t *testing.T) {
	s := newScenarioRules(t, `
sinks:
  - name: people
    type: slack
    channel: C1
    max_age: 5m
  - name: bus
    type: nats
    subject: "alarms.{{.Transition}}"
routes:`+busRoute+`
  - name: people
    to: [people]
`)
	s.slack.Fail(notifytest.MethodPostMessage, notifytest.SlackFailure{Status: 503})
	s.apply(s.starts("A", "S1", "D1", "E1", 0))
	s.settle()
	if res := s.act(notify.Acknowledge, "U1", "A"); len(res.Applied) != 1 {
		t.Fatalf("ack: %+v", res)
	}
	for range 10 {
		s.slack.Fail(notifytest.MethodPostMessage, notifytest.SlackFailure{Status: 503})
	}
	s.advance(10 * time.Minute)
	for _, c := range s.slack.Calls() {
		if c.Method == notifytest.MethodUpdate {
			t.Fatalf("Slack got %s of a message whose start is a dead letter", c.Method)
		}
	}
	dead, err := s.store.DeadLetters("people")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range dead {
		ids = append(ids, d.EventID)
	}
	if !slices.Equal(ids, []string{"A:start", "A:ack"}) {
		t.Fatalf("dead letters of people: %v; want the start and the ack parked beside it", ids)
	}
	if _, refused, err := s.store.ReplayDeadLetters(store.DeadLetterFilter{Sink: "people"}); err != nil || len(refused) != 0 {
		t.Fatalf("replay: %v, refused %v", err, refused)
	}
	s.advance(time.Minute)
	if got := s.channel("C1"); len(got) != 2 || !strings.HasPrefix(got[0], notifytest.MethodPostMessage) || !strings.HasPrefix(got[1], notifytest.MethodUpdate) {
		t.Fatalf("after the replay C1 got:%s\nwant the start, then the ack's edit", dump(got))
	}
}

// Sequence 6: clicks refused for ack_by, however many, evict neither the
// acknowledgements applied (so that the same PagerDuty acknowledgement,
// handed over again after a restart, is still recognised) nor the audit
// trail of what was done.
func TestScenarioRefusedClicksEvictNoAppliedAcknowledgement(t *testing.T) {
	s := newScenarioRules(t, strings.Replace(ackRules, "    repeat: 10m\n", "    repeat: 10m\n    ack_by: [pagerduty:PU1]\n", 1))
	s.apply(s.starts("A", "S1", "D1", "E1", 0))
	pd := func(ref string) notify.ActionResult {
		t.Helper()
		res, err := s.mgr.Act(context.Background(), notify.Action{Kind: notify.Acknowledge, Alarms: []string{"A"},
			Actor: notify.Actor{Via: "pagerduty", ID: "PU1"}, Ref: ref})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := pd("P1@08:01"); len(res.Applied) != 1 {
		t.Fatalf("PagerDuty's acknowledgement: %+v", res)
	}
	if _, err := s.mgr.Act(context.Background(), notify.Action{Kind: notify.Unacknowledge, Alarms: []string{"A"},
		Actor: notify.Actor{Via: "api", ID: "li.wei"}, Ref: "api"}); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if res := s.act(notify.Acknowledge, fmt.Sprintf("U%d", 100+i), "A"); !res.NotAllowed {
			t.Fatalf("a click by a person ack_by does not name: %+v", res)
		}
	}
	s.restart()
	if res := pd("P1@08:01"); len(res.Applied) != 0 {
		t.Fatalf("the same acknowledgement handed over again after 50 refused clicks and a restart: %+v; want it recognised", res)
	}
	ack, err := s.mgr.Acknowledgement("A")
	if err != nil {
		t.Fatal(err)
	}
	var applied []string
	for _, h := range ack.History {
		if h.Result == "applied" {
			applied = append(applied, string(h.Kind)+" by "+h.Actor.ID)
		}
	}
	if !slices.Equal(applied, []string{"ack by PU1", "unack by li.wei"}) {
		t.Fatalf("the audit trail's applied actions: %v; want the ack by PU1 and the unack by li.wei", applied)
	}
}

// Sequence 5: Acknowledge all clicked in a chat whose sink the listener was
// not told (a bot's listener run for another sink of the bot) names no
// sink, only where the message is: the digest is found there, and its
// alarms are acknowledged.
func TestScenarioAcknowledgeAllFindsTheDigestWhereTheListenerSaysItIs(t *testing.T) {
	s := newScenario(t, `
routes:`+busRoute+`
  - name: people
    to: [people]
`)
	var recs []record
	for i := range 30 {
		recs = append(recs, s.starts(fmt.Sprintf("F%02d", i), "S1", fmt.Sprintf("D%02d", i), "E1", 0))
	}
	s.apply(recs...)
	s.advance(2 * time.Minute)
	mem, err := s.store.Memory("people", "F29")
	if err != nil || mem[store.MemoryDigest] == "" {
		t.Fatalf("F29's memory at people: %v, %v; want the digest it joined", mem, err)
	}
	people, _ := s.rules.Sink("people")
	click := notify.Action{Kind: notify.Acknowledge, Digest: mem[store.MemoryDigest], Actor: notify.Actor{Via: "telegram", ID: "42"}, Ref: "q1"}
	if res, err := s.mgr.Act(context.Background(), click); err != nil || len(res.Applied) != 0 {
		t.Fatalf("a click naming no sink nor destination: %+v, %v; want no such alarm", res, err)
	}
	click.Destinations = []string{"telegram:-100999", people.Destination()}
	res, err := s.mgr.Act(context.Background(), click)
	if err != nil || len(res.Applied) == 0 || !slices.Contains(res.Applied, "F29") {
		t.Fatalf("Acknowledge all with the message's destination: %+v, %v; want the digest's alarms acknowledged", res, err)
	}
}
