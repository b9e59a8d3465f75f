package manage_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/store"
)

// The tests of this file were written for mutants that survived the
// package's other tests (docs/development.md, "Mutation testing"): each
// checks what an operator would notice if the mutated line were wrong.

// timeToAck returns the samples relay_time_to_acknowledge_seconds holds,
// by route, as count and sum.
func timeToAck(t *testing.T, reg *prometheus.Registry) map[string][2]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "relay_time_to_acknowledge_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[label(m, "route")] = [2]float64{float64(m.GetSummary().GetSampleCount()), m.GetSummary().GetSampleSum()}
		}
	}
	return out
}

// counter returns the value of the counter name in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// The time to acknowledge is measured once per alarm, at its first
// acknowledgement, under the first route its start matched; an
// acknowledgement withdrawn and made again is not measured again. Each
// acknowledgement event the bus gets has the next number of the alarm's
// acknowledgement events. An alarm no route matches is measured too, under
// no route.
func TestTheFirstAcknowledgementIsMeasuredOnceUnderItsRoute(t *testing.T) {
	s := newScenario(t, `
routes:
  - name: urgent
    match: {levels: [urgent]}
    to: [people, bus]
`)
	reg := prometheus.NewPedanticRegistry()
	s.metrics = manage.NewMetrics(reg)
	s.restart()
	s.apply(s.starts("A", "S1", "D1", "E1", 0), s.starts("Q", "S1", "D2", "E2", 3))
	s.advance(3 * time.Minute)
	s.act(notify.Acknowledge, "U1", "A")
	s.advance(time.Minute)
	s.act(notify.Unacknowledge, "U1", "A")
	s.act(notify.Acknowledge, "U2", "A")
	if _, err := s.mgr.Act(context.Background(), notify.Action{Kind: notify.Acknowledge, Alarms: []string{"Q"},
		Actor: notify.Actor{Via: "api", ID: "li.wei"}, Ref: "api"}); err != nil {
		t.Fatal(err)
	}
	got := timeToAck(t, reg)
	if got["urgent"] != [2]float64{1, 180} {
		t.Errorf("time to acknowledge under urgent: %v samples and sum; want 1 sample of 180 s", got["urgent"])
	}
	if got[""] != [2]float64{1, 240} {
		t.Errorf("time to acknowledge under no route: %v; want 1 sample of 240 s (Q, matched by no route)", got[""])
	}
	ids := s.waitBus(4)
	if !slices.Equal(ids[1:], []string{"A:ack", "A:unack.2", "A:ack.3"}) {
		t.Errorf("the bus got %v; want A's start, then its acknowledgement events numbered in order", ids)
	}
}

// The ops API's acknowledgement of an alarm (GET /alarms/{id}/ack) shows
// what its escalation steps did, as GET /alarms does.
func TestAnAcknowledgementShowsItsEscalation(t *testing.T) {
	s := newScenarioRules(t, ackRules)
	s.apply(s.starts("A", "S1", "D1", "E1", 0))
	s.advance(11 * time.Minute)
	s.escalate()
	ack, err := s.mgr.Acknowledgement("A")
	if err != nil {
		t.Fatal(err)
	}
	if len(ack.Escalation) != 1 || ack.Escalation[0].Sink != "oncall" {
		t.Fatalf("the acknowledgement shows escalation %+v; want the step to oncall", ack.Escalation)
	}
}

// A state written when one history held every action, with refused clicks
// in it, keeps them among the refused: 25 more refused clicks leave the 20
// latest refused shown.
func TestRefusedClicksOfAnOlderStateCountAmongTheRefused(t *testing.T) {
	s := newScenarioRules(t, strings.Replace(ackRules, "    repeat: 10m\n", "    repeat: 10m\n    ack_by: [slack:U1]\n", 1))
	s.apply(s.starts("A", "S1", "D1", "E1", 0))
	at := s.clk.Now()
	old, err := json.Marshal(map[string]any{"history": []map[string]any{
		{"kind": "ack", "actor": map[string]string{"via": "slack", "id": "U0"}, "at": at, "result": "not allowed"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.store.Put(store.KV{NS: "ack", Key: "A", Value: old}); err != nil {
		t.Fatal(err)
	}
	for range 25 {
		if res := s.act(notify.Acknowledge, "U9", "A"); !res.NotAllowed {
			t.Fatalf("a click by a person ack_by does not name: %+v", res)
		}
	}
	ack, err := s.mgr.Acknowledgement("A")
	if err != nil {
		t.Fatal(err)
	}
	applied, others := 0, 0
	for _, h := range ack.History {
		if h.Result == "applied" {
			applied++
		} else {
			others++
		}
	}
	if applied != 0 || others != 20 {
		t.Fatalf("history shows %d applied and %d others; want none applied and the 20 latest others", applied, others)
	}
}

// A shelving from a chat silences the alarm's point, its device's and no
// other device's, with the person's comment in the silence's; a click
// refused by ack_by is answered with why.
func TestAShelvingSilencesThePointWithItsComment(t *testing.T) {
	s := newScenarioRules(t, strings.Replace(ackRules, "    repeat: 10m\n", "    repeat: 10m\n    ack_by: [slack:U1]\n", 1))
	s.apply(s.starts("A", "S1", "D1", "E1", 0))
	shelve := func(id, comment string) notify.ActionResult {
		t.Helper()
		res, err := s.mgr.Act(context.Background(), notify.Action{Kind: notify.Shelve, Sink: "people", Alarms: []string{"A"},
			Actor: notify.Actor{Via: "slack", ID: id}, Ref: "click-" + id, ShelveFor: time.Hour, Comment: comment})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := shelve("U9", ""); !res.NotAllowed || !strings.HasPrefix(res.Text, "You are not allowed to act on this alarm") {
		t.Fatalf("a shelving by a person ack_by does not name: %+v; want it refused, saying so", res)
	}
	shelve("U1", "crew on site")
	sils := s.silences.List(false)
	if len(sils) != 1 {
		t.Fatalf("silences %+v; want the shelving's", sils)
	}
	if c := sils[0].Comment; !strings.HasSuffix(c, "(alarm A): crew on site") {
		t.Errorf("the silence's comment %q; want the alarm and the person's comment", c)
	}
	if got := sils[0].Match.DeviceSNs; !slices.Equal(got, []string{"D1"}) {
		t.Errorf("the silence matches devices %v; want the alarm's, D1", got)
	}
}

// GET /alarms shows, per alarm, the sinks an escalation step announced it
// to with the step and when it was taken; the acknowledgement of an alarm
// acknowledged and withdrawn, with both actions; and no acknowledgement for
// an alarm whose stored one does not decode.
func TestAlarmsShowEscalationStepsAndWithdrawnAcknowledgements(t *testing.T) {
	s := newScenarioRules(t, ackRules)
	s.apply(s.starts("A", "S1", "D1", "E1", 0), s.starts("B", "S1", "D2", "E1", 0), s.starts("C", "S1", "D3", "E1", 0))
	if err := s.store.Put(store.KV{NS: "ack", Key: "C", Value: []byte("{not json")}); err != nil {
		t.Fatal(err)
	}
	s.act(notify.Acknowledge, "U1", "B")
	s.act(notify.Unacknowledge, "U1", "B")
	s.advance(11 * time.Minute)
	stepAt := s.clk.Now()
	s.escalate()
	alarms, err := s.mgr.Alarms()
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]manage.AlarmState{}
	for _, a := range alarms {
		byID[a.OriginID] = a
	}
	a := byID["A"]
	if !slices.Equal(a.Escalated, []string{"oncall"}) || len(a.Escalation) != 1 {
		t.Fatalf("A: escalated %v, escalation %+v; want announced to oncall", a.Escalated, a.Escalation)
	}
	if e := a.Escalation[0]; e.Sink != "oncall" || e.At.Sub(stepAt) > 10*time.Second || e.At.Before(stepAt) {
		t.Errorf("A's step %+v; want oncall's, taken at %s", e, stepAt.Format(time.TimeOnly))
	}
	if b := byID["B"]; b.Acknowledged || b.Ack == nil || len(b.Ack.History) != 2 {
		t.Errorf("B, acknowledged and withdrawn: acknowledged %v, %+v; want its two actions shown", b.Acknowledged, b.Ack)
	}
	if c := byID["C"]; c.Ack != nil {
		t.Errorf("C, whose stored acknowledgement does not decode: %+v; want none shown", c.Ack)
	}
}

// A step is taken at its after exactly, not a pass later; a later step
// naming the same sink again leaves the first step shown for it, with the
// time it was taken, and shows the new sink under its own step.
func TestEachSinkShowsTheFirstStepThatNamedIt(t *testing.T) {
	s := newScenario(t, `
  - name: oncall
    type: slack
    channel: C2
  - name: boss
    type: slack
    channel: C3
routes:`+busRoute+`
  - name: people
    to: [people]
    escalate:
      - {after: 10m, to: [oncall]}
      - {after: 30m, to: [oncall, boss]}
`)
	reg := prometheus.NewPedanticRegistry()
	s.metrics = manage.NewMetrics(reg)
	s.restart()
	t0 := s.clk.Now()
	s.apply(s.starts("A", "S1", "D1", "E1", 0))
	s.advance(10 * time.Minute)
	s.escalate()
	if got := s.escalationOf("A"); len(got) != 1 || got[0].Sink != "oncall" || got[0].Step != "people/600" {
		t.Fatalf("at 10 min: %+v; want the first step, to oncall, taken at its after", got)
	}
	s.advance(20 * time.Minute)
	s.escalate()
	got := s.escalationOf("A")
	want := map[string][2]string{"boss": {"people/1800", "30m"}, "oncall": {"people/600", "10m"}}
	if len(got) != 2 {
		t.Fatalf("at 30 min: %+v; want oncall and boss", got)
	}
	if n := counter(t, reg, "relay_escalations_total"); n != 2 {
		t.Errorf("relay_escalations_total = %v; want 2, oncall then boss", n)
	}
	for _, e := range got {
		w := want[e.Sink]
		if after, _ := time.ParseDuration(w[1]); e.Step != w[0] || e.At.Sub(t0) < after || e.At.Sub(t0) > after+10*time.Second {
			t.Errorf("%s shown as step %q taken %s after the start; want %s, %s after", e.Sink, e.Step, e.At.Sub(t0), w[0], w[1])
		}
	}
}

// A step whose sink already got the alarm's start from a route announces
// nothing there: GET /alarms lists the sink under the step, not among
// those the alarm was escalated to.
func TestAStepFindingTheStartDeliveredAnnouncesNothing(t *testing.T) {
	s := newScenario(t, `
  - name: oncall
    type: slack
    channel: C2
routes:`+busRoute+`
  - name: people
    to: [people, oncall]
    escalate:
      - {after: 10m, to: [oncall]}
`)
	s.apply(s.starts("A", "S1", "D1", "E1", 0))
	s.advance(11 * time.Minute)
	s.escalate()
	alarms, err := s.mgr.Alarms()
	if err != nil || len(alarms) != 1 {
		t.Fatalf("alarms %+v, %v", alarms, err)
	}
	a := alarms[0]
	if len(a.Escalated) != 0 || len(a.Escalation) != 1 || a.Escalation[0].State != store.StartDelivered {
		t.Fatalf("escalated to %v, escalation %+v; want oncall under the step, delivered by the route, not announced", a.Escalated, a.Escalation)
	}
}

// A state written when the escalation of an alarm kept its notes inside it
// (before they were kept per sink) is upgraded when the relay starts: GET
// /alarms shows the alarm escalated to the sink its note names.
func TestNotesOfAnOlderEscalationStateAreKeptPerSink(t *testing.T) {
	s := newScenarioRules(t, ackRules)
	s.apply(s.starts("A", "S1", "D1", "E1", 0))
	old, err := json.Marshal(map[string]any{
		"done":  map[string]time.Time{"people/600": s.clk.Now()},
		"notes": map[string]string{"oncall": "Escalated: unacknowledged for 10m"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.store.Put(store.KV{NS: "escalate", Key: "A", Value: old}); err != nil {
		t.Fatal(err)
	}
	s.restart()
	alarms, err := s.mgr.Alarms()
	if err != nil || len(alarms) != 1 {
		t.Fatalf("alarms %+v, %v", alarms, err)
	}
	if a := alarms[0]; !slices.Equal(a.Escalated, []string{"oncall"}) {
		t.Fatalf("escalated to %v, escalation %+v; want oncall, as the older state's note says", a.Escalated, a.Escalation)
	}
}
