package service

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/pagerduty"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/testwait"
)

// chainSpeed is how much faster than the wall clock the relay and the
// simulator run in the tests of acknowledgements that stop an escalation
// chain and reminders in Feishu: the shortest repeat, 10 minutes, takes 4 s,
// and an escalation step 5 minutes after an alarm's first sight 2 s.
const chainSpeed = 150

// startChainService runs the relay with rules against up, on clk, the
// variables of env seen by the rules file, its console sinks writing to
// console.
func startChainService(t *testing.T, clk clock.Clock, up *sim.Server, rules string, env map[string]string, console io.Writer) *ackService {
	t.Helper()
	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "rules.yaml")
	writeFile(t, rulesPath, rules)
	appID, secret := up.Credentials()
	all := map[string]string{
		"RELAY_BASE_URL": up.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": secret,
		"RELAY_RATE_LIMIT": "60", "RELAY_STATE_PATH": filepath.Join(dir, "relay.db"), "RELAY_RULES": rulesPath,
		"RELAY_ADMIN_TOKEN": ackAdminToken, "RELAY_LISTEN": "127.0.0.1:0", "RELAY_SHUTDOWN_GRACE": "1s",
	}
	for k, v := range env {
		all[k] = v
	}
	cfg, err := config.Load(context.Background(), envconfig.MapLookuper(all))
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the relay's log:\n%s", logs.String())
		}
	})
	ops, _ := startRun(t, Options{Config: cfg, Clock: clk, Console: console, Logger: NewLogger(&logs, "debug", "text", nil),
		Lookup: func(k string) (string, bool) { v, ok := all[k]; return v, ok }})
	return &ackService{t: t, up: up, ops: ops}
}

// ongoing reads GET /alarms on the ops listener: the ongoing alarms by id,
// with the sinks escalation announced each to.
func (s *ackService) ongoing() map[string]manage.AlarmState {
	s.t.Helper()
	var ans AckAnswer
	s.getJSON("/alarms", &ans)
	out := map[string]manage.AlarmState{}
	for _, a := range ans.Alarms {
		out[a.OriginID] = a
	}
	return out
}

// passPasses waits until the clock went past the end of the pass of
// alarm management's schedule under way now, and past the reminders it
// sends: what a pass decides of one alarm it decides of the others, in an
// order of its own, so an alarm's verdict is known only once the pass is
// over.
func passPasses(t *testing.T, clk clock.Clock) {
	t.Helper()
	until := clk.Now().Add(manage.TickEvery + 2*manage.EscalateEvery)
	testwait.For(t, 10*time.Second, "the schedule's pass to end", func() bool { return clk.Now().After(until) })
}

const (
	feishuAppID     = "cli_a1b2c3d4e5f60718"
	feishuAppSecret = "Zq8sW3eR5tY7uI9oP1aS3dF5gH7jK9lX"
	feishuOncall    = "oc_5ad11d72b830411d72b836c20"
	feishuBoss      = "oc_9bb22e83c941522e83c947d31"
	feishuAllowed   = "ou_7d8a6e6df7621556ce0d21922b676706"
	feishuOther     = "ou_1f2e3d4c5b6a79880f1e2d3c4b5a6978"
)

// feishuCards returns the cards the app's bot sent to chat (not the
// updates), in order.
func feishuCards(api *notifytest.FeishuApp, chat string) []notifytest.FeishuAppCall {
	var out []notifytest.FeishuAppCall
	for _, c := range api.Calls() {
		if c.Method == http.MethodPost && c.Code == 0 && c.ChatID == chat {
			out = append(out, c)
		}
	}
	return out
}

// feishuCardsOf returns the cards sent to chat whose text names alarm id.
func feishuCardsOf(api *notifytest.FeishuApp, chat, id string) []notifytest.FeishuAppCall {
	var out []notifytest.FeishuAppCall
	for _, c := range feishuCards(api, chat) {
		if strings.Contains(notifytest.CardText(c.Card), id) {
			out = append(out, c)
		}
	}
	return out
}

// TestFeishuAppClickStopsEscalationAndRemindersThroughTheRunningService:
// the relay runs with a Feishu app's bot posting urgent alarms to the
// on-call group, reminding every 10 minutes, escalating to the boss's group
// after 5, and only ou_allowed may acknowledge. Two urgent alarms of the
// simulator, A then B, get their cards with buttons. A click of Acknowledge
// on A's card by someone ack_by does not name is answered with an error
// toast and changes nothing (no acknowledgement, the card untouched, the
// refusal recorded); a click by ou_allowed acknowledges A (the ops API
// shows who, via feishu), is answered with a success toast, and A's card is
// updated to say who, without buttons. B, which nobody acknowledged and was
// first seen after A, escalates to the boss's group and gets a reminder in
// the on-call group; A, whose step and reminder fell due no later, gets
// neither.
func TestFeishuAppClickStopsEscalationAndRemindersThroughTheRunningService(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for a few seconds")
	}
	clk := clock.NewScaled(time.Now().UTC().Truncate(time.Second), chainSpeed)
	up := sim.StartTest(t, sim.Options{Clock: clk, RateLimit: 60})
	api := notifytest.NewFeishuApp(t, feishuAppID, feishuAppSecret, feishuOncall, feishuBoss)
	s := startChainService(t, clk, up, fmt.Sprintf(`sinks:
  - name: oncall
    type: feishu
    app_id_env: FEISHU_APP_ID
    app_secret_env: FEISHU_APP_SECRET
    chat_id: %[1]s
    api_url: %[3]s
  - name: boss
    type: feishu
    app_id_env: FEISHU_APP_ID
    app_secret_env: FEISHU_APP_SECRET
    chat_id: %[2]s
    api_url: %[3]s
routes:
  - name: urgent
    match: { levels: [0] }
    to: [oncall]
    ack_by: [feishu:%[4]s]
    repeat: 10m
    escalate:
      - {after: 5m, to: [boss]}
`, feishuOncall, feishuBoss, api.URL(), feishuAllowed),
		map[string]string{"FEISHU_APP_ID": feishuAppID, "FEISHU_APP_SECRET": feishuAppSecret}, io.Discard)

	a, err := up.StartAlarm(sim.AlarmSpec{Level: 0})
	if err != nil {
		t.Fatal(err)
	}
	var startA notifytest.FeishuAppCall
	testwait.For(t, 20*time.Second, "the card of "+a, func() bool {
		cards := feishuCardsOf(api, feishuOncall, a)
		if len(cards) > 0 {
			startA = cards[0]
		}
		return len(cards) > 0
	})
	b, err := up.StartAlarm(sim.AlarmSpec{Level: 0})
	if err != nil {
		t.Fatal(err)
	}
	ackValue := notifytest.CardButtons(startA.Card)["Acknowledge"]
	if ackValue == nil {
		t.Fatalf("A's card has no Acknowledge button: %v", notifytest.CardButtons(startA.Card))
	}
	api.WaitConnected(1)

	// Someone ack_by does not name clicks Acknowledge.
	_, refused := api.PushCardAction(notifytest.FeishuClick{OpenID: feishuOther, MessageID: startA.MessageID, Value: ackValue})
	answer := func(frame string) notifytest.FeishuWSResponse {
		t.Helper()
		for n := 1; ; n++ {
			for _, r := range api.WaitResponses(n) {
				if r.MessageID == frame {
					return r
				}
			}
		}
	}
	if r := answer(refused); r.ToastType != "error" || !strings.Contains(r.Toast, "not allowed") {
		t.Fatalf("%s was answered %q %q, want an error toast saying not allowed", feishuOther, r.ToastType, r.Toast)
	}
	if got := s.alarm(a); got.Acknowledged || !slices.Equal(got.results(), []string{feishuOther + " ack not allowed"}) {
		t.Fatalf("A after %s's click: %+v, want unacknowledged, the refusal recorded", feishuOther, got)
	}

	// ou_allowed clicks it.
	_, allowed := api.PushCardAction(notifytest.FeishuClick{OpenID: feishuAllowed, MessageID: startA.MessageID, Value: ackValue})
	if r := answer(allowed); r.ToastType != "success" {
		t.Fatalf("%s was answered %q %q, want a success toast", feishuAllowed, r.ToastType, r.Toast)
	}
	if got := s.alarm(a); !got.Acknowledged || got.By != feishuAllowed || got.Via != "feishu" {
		t.Fatalf("A after %s's click: %+v, want acknowledged by them via feishu", feishuAllowed, got)
	}
	testwait.For(t, 10*time.Second, "A's card updated to show who acknowledged it", func() bool {
		card := api.Card(startA.MessageID)
		return strings.Contains(notifytest.CardText(card), "Acknowledged") && len(notifytest.CardButtons(card)) == 0
	})
	if text := notifytest.CardText(api.Card(startA.MessageID)); !strings.Contains(text, "<at id="+feishuAllowed+"></at>") {
		t.Errorf("A's card reads %q, want it to mention who acknowledged it", text)
	}

	// B, first seen after A and acknowledged by nobody, escalates, then is
	// reminded of: A's step and reminder fell due no later.
	testwait.For(t, 20*time.Second, "B escalated to the boss's group", func() bool { return len(feishuCardsOf(api, feishuBoss, b)) > 0 })
	if text := notifytest.CardText(feishuCardsOf(api, feishuBoss, b)[0].Card); !strings.Contains(text, "Escalated: unacknowledged for 5m") {
		t.Errorf("B's escalated card reads %q, want how long it waited", text)
	}
	testwait.For(t, 20*time.Second, "a reminder of B", func() bool { return len(feishuCardsOf(api, feishuOncall, b)) > 1 })
	if text := notifytest.CardText(feishuCardsOf(api, feishuOncall, b)[1].Card); !strings.Contains(text, "Reminder, ongoing for") {
		t.Errorf("B's second card reads %q, want a reminder", text)
	}
	passPasses(t, clk)
	if cards := feishuCardsOf(api, feishuBoss, a); len(cards) != 0 {
		t.Errorf("A, acknowledged, escalated to the boss's group: %q", notifytest.CardText(cards[0].Card))
	}
	if cards := feishuCardsOf(api, feishuOncall, a); len(cards) != 1 {
		t.Errorf("A, acknowledged, got %d cards in the on-call group, want its start only: %q", len(cards), notifytest.CardText(cards[len(cards)-1].Card))
	}
	patches := 0
	for _, c := range api.Calls() {
		if c.Method == http.MethodPatch && c.MessageID == startA.MessageID {
			patches++
		}
	}
	if patches != 1 {
		t.Errorf("A's card was updated %d times, want once: for the acknowledgement, not for the refused click", patches)
	}
	alarms := s.ongoing()
	if got := alarms[a]; !got.Acknowledged || len(got.Escalated) != 0 {
		t.Errorf("GET /alarms shows A %+v, want acknowledged and escalated nowhere", got)
	}
	if got := alarms[b]; got.Acknowledged || !slices.Equal(got.Escalated, []string{"boss"}) {
		t.Errorf("GET /alarms shows B %+v, want unacknowledged and escalated to boss", got)
	}
}

const (
	pagerDutyRoutingKey = "R0UT1NGKEY0123456789abcdef012345"
	pagerDutyAPIToken   = "u+Ab3dEfGh1jKlMn0pQr"
	pagerDutyAllowed    = "PUSER01"
	pagerDutyOther      = "PUSER99"
)

// acknowledgement reads GET /alarms/{id} on the ops listener, with the
// admin token.
func (s *ackService) acknowledgement(id string) manage.Acknowledgement {
	s.t.Helper()
	var ans AckAnswer
	s.getJSON("/alarms/"+id, &ans)
	if ans.Alarm == nil {
		s.t.Fatalf("GET /alarms/%s shows no alarm", id)
	}
	return *ans.Alarm
}

// TestPagerDutyAcknowledgementIsReadBackAndStopsEscalationThroughTheRunningService:
// the relay runs with a PagerDuty sink that reads acknowledgements back
// with a REST API key, urgent alarms escalating to a console after 2
// minutes, and only the PagerDuty user PUSER01 may acknowledge. Two urgent
// alarms of the simulator, A then B, trigger incidents. PUSER01
// acknowledges A's incident in PagerDuty: within one poll interval relay
// shows A acknowledged by them via pagerduty; relay's own acknowledge of A
// reaches PagerDuty and is not read back as another acknowledgement.
// PUSER99, whom ack_by does not name, acknowledges B's: relay records the
// refusal and B stays unacknowledged. B, first seen after A, escalates to
// the console; A, whose step fell due no later, does not.
func TestPagerDutyAcknowledgementIsReadBackAndStopsEscalationThroughTheRunningService(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for a few seconds")
	}
	// 60 times faster than the wall clock: the 2 minutes of the step take
	// 2 s, a poll interval half a second.
	clk := clock.NewScaled(time.Now().UTC().Truncate(time.Second), 60)
	up := sim.StartTest(t, sim.Options{Clock: clk, RateLimit: 60})
	pd := notifytest.NewPagerDuty(t, clk.Now, pagerDutyRoutingKey)
	pd.SetAPITokens(pagerDutyAPIToken)
	var console syncBuffer
	s := startChainService(t, clk, up, fmt.Sprintf(`sinks:
  - name: pager
    type: pagerduty
    routing_key_env: PD_ROUTING_KEY
    url: %s
    api_token_env: PD_API_TOKEN
    api_url: %s
  - name: boss
    type: console
routes:
  - name: urgent
    match: { levels: [0] }
    to: [pager]
    ack_by: [pagerduty:%s]
    escalate:
      - {after: 2m, to: [boss]}
`, pd.URL(), pd.Base(), pagerDutyAllowed),
		map[string]string{"PD_ROUTING_KEY": pagerDutyRoutingKey, "PD_API_TOKEN": pagerDutyAPIToken}, &console)

	incident := func(id string) (notifytest.PagerDutyIncident, bool) {
		for _, in := range pd.Incidents() {
			if in.DedupKey == id {
				return in, true
			}
		}
		return notifytest.PagerDutyIncident{}, false
	}
	a, err := up.StartAlarm(sim.AlarmSpec{Level: 0})
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the incident of "+a, func() bool { _, ok := incident(a); return ok })
	b, err := up.StartAlarm(sim.AlarmSpec{Level: 0})
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the incident of "+b, func() bool { _, ok := incident(b); return ok })

	ackedAt := clk.Now()
	if !pd.Acknowledge(a, pagerDutyAllowed, "Alice Li") || !pd.Acknowledge(b, pagerDutyOther, "Mallory") {
		t.Fatal("the fake holds no open incident of A or B")
	}
	testwait.For(t, 10*time.Second, "A acknowledged in relay", func() bool { return s.acknowledgement(a).Acknowledged })
	got := s.acknowledgement(a)
	if got.By != pagerDutyAllowed || got.Name != "Alice Li" || got.Via != "pagerduty" {
		t.Fatalf("A: %+v, want acknowledged by %s (Alice Li) via pagerduty", got, pagerDutyAllowed)
	}
	// Within a poll interval, and the little real time between: at this
	// speed, 15 s of the clock are a quarter of a second.
	if got.At == nil || got.At.Sub(ackedAt) > pagerduty.PollEvery+15*time.Second {
		t.Errorf("A acknowledged in relay at %v, %v after PagerDuty: want within the poll interval, %v", got.At, got.At.Sub(ackedAt), pagerduty.PollEvery)
	}
	testwait.For(t, 10*time.Second, "the refusal of B's acknowledgement recorded", func() bool { return len(s.acknowledgement(b).History) > 0 })
	if got := s.acknowledgement(b); got.Acknowledged || len(got.History) != 1 || got.History[0].Actor.ID != pagerDutyOther || got.History[0].Result != "not allowed" {
		t.Fatalf("B after %s acknowledged it in PagerDuty: %+v, want unacknowledged, the refusal recorded", pagerDutyOther, got)
	}
	// relay's acknowledge goes to PagerDuty, which the reader does not hand
	// back as another acknowledgement.
	testwait.For(t, 10*time.Second, "relay's acknowledge of A in PagerDuty", func() bool {
		in, _ := incident(a)
		return slices.ContainsFunc(in.Acks, func(x notifytest.PagerDutyAck) bool { return x.Type == "service_reference" })
	})

	testwait.For(t, 20*time.Second, "B escalated to the console", func() bool {
		return strings.Contains(console.String(), "(alarm "+b+")")
	})
	passPasses(t, clk)
	if out := console.String(); !strings.Contains(out, "Escalated: unacknowledged for 2m") || strings.Contains(out, "(alarm "+a+")") {
		t.Errorf("the console, the escalation step's sink, reads:\n%s\nwant B's escalated start, and nothing of A, which was acknowledged", out)
	}
	if got := s.acknowledgement(a); len(got.History) != 1 || got.History[0].Result != "applied" {
		t.Errorf("A's history: %+v, want one acknowledgement, applied", got.History)
	}
	alarms := s.ongoing()
	if got := alarms[a]; !got.Acknowledged || len(got.Escalated) != 0 {
		t.Errorf("GET /alarms shows A %+v, want acknowledged and escalated nowhere", got)
	}
	if got := alarms[b]; got.Acknowledged || !slices.Equal(got.Escalated, []string{"boss"}) {
		t.Errorf("GET /alarms shows B %+v, want unacknowledged and escalated to boss", got)
	}
}
