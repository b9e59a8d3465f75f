package pagerduty_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/pagerduty"
	"github.com/relay-energy/relay/internal/notify/robot/robottest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact/redacttest"
)

const apiToken = "u+Ab3dEfGh1jKlMn0pQr"

var (
	_ notify.Listener   = (*pagerduty.Sink)(nil)
	_ notify.AckCarrier = (*pagerduty.Sink)(nil)
)

// ackEvent is the n-th ack (or unack) of the alarm origin by a Slack user.
func ackEvent(origin string, tr event.Transition, n int) event.Event {
	start := sinktest.Event(origin, 1, event.Start)
	a := event.Alarm{OriginID: origin, Level: 1, TenantID: start.Data.TenantID, StationID: start.Data.StationID,
		DeviceSN: start.Data.DeviceSN, OccurredAt: sinktest.Epoch.Add(-17 * time.Minute)}
	return event.NewAck(a, tr, n, event.AckInfo{By: "U1", Name: "Alice", Via: "slack", At: "2026-11-21T08:01:00.000Z"}, sinktest.Epoch)
}

func TestAnAckAcknowledgesTheAlertAndAnUnackSendsNothing(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := notifytest.NewPagerDuty(t, clk.Now, routingKey)
	s := build(t, "oncall", clk, notify.NewLimits(clk), api, "")
	if c, ok := s.(notify.AckCarrier); !ok || !c.CarriesAcks() {
		t.Fatal("the sink does not carry acks")
	}
	robottest.SendAll(t, clk, s, sinktest.Event("a1", 1, event.Start), ackEvent("a1", event.Ack, 1))
	// The Events API has no un-acknowledge: an unack succeeds without a
	// request, and so does an ack of an alert PagerDuty does not hold.
	robottest.SendAll(t, clk, s, ackEvent("a1", event.Unack, 1), ackEvent("gone", event.Ack, 1))
	got := api.Accepted()
	if len(got) != 3 || got[1].Action != "acknowledge" || got[1].DedupKey != "a1" || got[2].DedupKey != "gone" {
		t.Fatalf("PagerDuty got %+v, want a trigger and two acknowledges (a1, gone), nothing for the unack", got)
	}
	if in := api.Incidents(); len(in) != 1 || !in[0].Acked || in[0].Resolved {
		t.Errorf("incidents %+v, want the alert acknowledged", in)
	}
	cfg := sinktest.Decode(t, pagerduty.Type, "routing_key_env: PD_KEY\n", map[string]string{"PD_KEY": routingKey})
	unack := ackEvent("a1", event.Unack, 1)
	if reqs, err := cfg.Render(&unack); err != nil || len(reqs) != 0 {
		t.Errorf("the rendering of an unack is %v (%v), want no request", reqs, err)
	}
	ack := ackEvent("a1", event.Ack, 2)
	reqs, err := cfg.Render(&ack)
	if err != nil || len(reqs) != 1 || string(reqs[0].Body) != `{"routing_key":"$PD_KEY","event_action":"acknowledge","dedup_key":"a1"}` {
		t.Errorf("the rendering of an ack is %v (%v), want one acknowledge of dedup_key a1", reqs, err)
	}
}

// recorder is relay's alarm management as the listener sees it: it
// records each action and says it applied it.
type recorder struct{ acts chan notify.Action }

func newRecorder() *recorder { return &recorder{acts: make(chan notify.Action, 1000)} }

func (r *recorder) Act(_ context.Context, a notify.Action) (notify.ActionResult, error) {
	r.acts <- a
	return notify.ActionResult{Applied: a.Alarms, Text: "acknowledged"}, nil
}

// next returns the next action, failing t after 5 s of real time.
func (r *recorder) next(t *testing.T) notify.Action {
	t.Helper()
	select {
	case a := <-r.acts:
		return a
	case <-time.After(5 * time.Second):
		t.Fatal("no action within 5 s")
		return notify.Action{}
	}
}

// none fails t if an action is waiting.
func (r *recorder) none(t *testing.T) {
	t.Helper()
	select {
	case a := <-r.acts:
		t.Fatalf("unexpected action %+v", a)
	default:
	}
}

// reading is a sink of api that reads acknowledgements with apiToken, its
// listener running until the test ends.
type reading struct {
	log  *sinktest.LogBuffer
	clk  *clock.Fake
	api  *notifytest.PagerDuty
	sink notify.Sink
	rec  *recorder
	done chan error
	stop context.CancelFunc
}

func startReading(t *testing.T, prepare func(r *reading)) *reading {
	t.Helper()
	r := &reading{clk: clock.NewFake(sinktest.Epoch), rec: newRecorder(), done: make(chan error, 1), log: &sinktest.LogBuffer{}}
	r.api = notifytest.NewPagerDuty(t, r.clk.Now, routingKey)
	r.api.SetAPITokens(apiToken)
	text, env := options(r.api.URL(), routingKey, "api_token_env: PD_API\napi_url: "+r.api.Base()+"\n")
	env["PD_API"] = apiToken
	r.sink = sinktest.Build(t, pagerduty.Type, "oncall", text, env, sinktype.Deps{Clock: r.clk, Limits: notify.NewLimits(r.clk),
		Logger: slog.New(slog.NewTextHandler(r.log, nil))})
	if prepare != nil {
		prepare(r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { r.done <- r.sink.(notify.Listener).Listen(ctx, r.rec) }()
	t.Cleanup(func() {
		cancel()
		if err := <-r.done; err != nil {
			t.Errorf("Listen returned %v when its context ended, want nil", err)
		}
	})
	return r
}

// trigger sends the starts of origins.
func (r *reading) trigger(t *testing.T, origins ...string) {
	t.Helper()
	for _, o := range origins {
		robottest.SendAll(t, r.clk, r.sink, sinktest.Event(o, 0, event.Start))
	}
}

// polled waits until the listener sleeps after a poll, and checks that it
// sleeps for wait.
func (r *reading) polled(t *testing.T, wait time.Duration) {
	t.Helper()
	if !r.clk.BlockUntil(1, 5*time.Second) {
		t.Fatal("the listener did not wait for its next poll")
	}
	if next, _ := r.clk.NextDeadline(); next.Sub(r.clk.Now()) != wait {
		t.Fatalf("the next poll is in %s, want %s", next.Sub(r.clk.Now()), wait)
	}
}

func TestAnAcknowledgementInPagerDutyAcknowledgesTheAlarmOnce(t *testing.T) {
	r := startReading(t, func(r *reading) {
		r.trigger(t, "a1", "a2")
		r.api.Acknowledge("a1", "PUSER01", "Alice Li")
	})
	a := r.rec.next(t)
	in := r.api.Incidents()[0]
	want := notify.Action{Kind: notify.Acknowledge, Sink: "oncall", Alarms: []string{"a1"},
		Actor: notify.Actor{Via: "pagerduty", ID: "PUSER01", Name: "Alice Li"}, Ref: in.ID + "@" + in.Acks[0].At.UTC().Format(time.RFC3339)}
	if fmt.Sprint(a) != fmt.Sprint(want) {
		t.Fatalf("action\n got %+v\nwant %+v", a, want)
	}
	r.polled(t, pagerduty.PollEvery)
	// relay's own acknowledge event (someone acknowledged in Slack) is an
	// acknowledgement by the service: not handed back.
	robottest.SendAll(t, r.clk, r.sink, ackEvent("a2", event.Ack, 1))
	r.clk.Advance(pagerduty.PollEvery)
	r.polled(t, pagerduty.PollEvery)
	r.rec.none(t)
	// A second person acknowledging a1 is handed over; a1's first is not
	// handed over again.
	r.clk.Advance(time.Second)
	r.api.Acknowledge("a1", "PUSER02", "Bob")
	r.clk.Advance(pagerduty.PollEvery - time.Second)
	if a := r.rec.next(t); a.Actor.ID != "PUSER02" || a.Alarms[0] != "a1" {
		t.Fatalf("action %+v, want Bob's acknowledgement of a1", a)
	}
	r.polled(t, pagerduty.PollEvery)
	r.rec.none(t)
	for _, req := range r.api.RESTRequests() {
		if req.Auth != "Token token="+apiToken || req.Status != 200 {
			t.Errorf("request %+v, want Token token=<key> answered 200", req)
		}
		if req.Path == "/incidents" && (!strings.Contains(req.Query, "statuses%5B%5D=acknowledged") || !strings.Contains(req.Query, "limit=100")) {
			t.Errorf("GET /incidents?%s, want acknowledged incidents, 100 a page", req.Query)
		}
	}
}

func TestEveryPageOfAcknowledgedIncidentsIsRead(t *testing.T) {
	const n = 230
	r := startReading(t, func(r *reading) {
		for i := range n {
			o := fmt.Sprintf("p%03d", i)
			r.trigger(t, o)
			r.api.Acknowledge(o, "PUSER01", "Alice Li")
		}
	})
	seen := map[string]bool{}
	for range n {
		seen[r.rec.next(t).Alarms[0]] = true
	}
	if len(seen) != n {
		t.Fatalf("%d alarms acknowledged, want %d", len(seen), n)
	}
	r.polled(t, pagerduty.PollEvery)
	var offsets []string
	for _, req := range r.api.RESTRequests() {
		q, err := url.ParseQuery(req.Query)
		if err != nil {
			t.Fatal(err)
		}
		offsets = append(offsets, q.Get("offset"))
	}
	if got := strings.Join(offsets, ","); !strings.HasPrefix(got, "0,100,200") || len(offsets) != 3 {
		t.Errorf("offsets read %s, want 0,100,200", got)
	}
}

// PagerDuty's reference says incidents with child alerts may have no
// incident_key, and grouping puts several alerts in one incident: their
// alerts name the alarms.
func TestAGroupedIncidentWithoutIncidentKeyAcknowledgesEachOfItsAlarms(t *testing.T) {
	r := startReading(t, func(r *reading) {
		r.trigger(t, "g1", "g2", "g3")
		r.api.HideIncidentKeys()
		r.api.Merge("g1", "g2")
		r.api.Acknowledge("g1", "PUSER01", "Alice Li")
	})
	if a := r.rec.next(t); strings.Join(a.Alarms, ",") != "g1,g2" {
		t.Fatalf("alarms %v, want g1 and g2, the alerts of the incident", a.Alarms)
	}
	r.polled(t, pagerduty.PollEvery)
	r.rec.none(t)
}

func TestA429WaitsWhatPagerDutyAsks(t *testing.T) {
	r := startReading(t, func(r *reading) {
		r.trigger(t, "a1")
		r.api.Acknowledge("a1", "PUSER01", "Alice Li")
		r.api.Throttle(1, 90)
	})
	r.polled(t, 90*time.Second)
	r.rec.none(t)
	r.clk.Advance(90 * time.Second)
	if a := r.rec.next(t); a.Alarms[0] != "a1" {
		t.Fatalf("action %+v after the wait, want a1's acknowledgement", a)
	}
	log := r.log.String()
	if !strings.Contains(log, "HTTP 429") {
		t.Errorf("the log does not say PagerDuty asked to wait:\n%s", log)
	}
	redacttest.AssertNoSecret(t, []string{apiToken, routingKey}, map[string]string{"log": log})
}

func TestARefusedAPIKeyStopsTheListenerWithWhatToFix(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := notifytest.NewPagerDuty(t, clk.Now, routingKey)
	api.SetAPITokens("another-token-altogether")
	text, env := options(api.URL(), routingKey, "api_token_env: PD_API\napi_url: "+api.Base()+"\n")
	env["PD_API"] = apiToken
	s := sinktest.Build(t, pagerduty.Type, "oncall", text, env, sinktype.Deps{Clock: clk})
	err := s.(notify.Listener).Listen(context.Background(), newRecorder())
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "api_token_env") {
		t.Fatalf("Listen returned %v, want the 401 and what to fix", err)
	}
	cfg := sinktest.Decode(t, pagerduty.Type, text, env)
	_, perr := cfg.Probe(context.Background(), sinktype.Deps{Clock: clk})
	if perr == nil {
		t.Error("the probe took a refused API key")
	}
	redacttest.AssertNoSecret(t, []string{apiToken, routingKey}, map[string]string{"listen": err.Error(), "probe": fmt.Sprint(perr),
		"listen key": s.(notify.Listener).ListenKey(), "summary": strings.Join(cfg.Summary(), "; ")})
}

func TestSinksOfOneAPIKeyShareOnePoller(t *testing.T) {
	key := func(extra string, env map[string]string) string {
		text, e := options("https://events.pagerduty.com/v2/enqueue", routingKey, extra)
		for k, v := range env {
			e[k] = v
		}
		return sinktest.Build(t, pagerduty.Type, "s", text, e, sinktype.Deps{}).(notify.Listener).ListenKey()
	}
	none := key("", nil)
	a := key("api_token_env: PD_API\n", map[string]string{"PD_API": apiToken})
	b := key("api_token_env: OTHER\n", map[string]string{"OTHER": apiToken})
	c := key("api_token_env: PD_API\n", map[string]string{"PD_API": "another-token"})
	if none != "" || a == "" || a != b || a == c || !strings.HasPrefix(a, "pagerduty-api:") {
		t.Errorf("listen keys: none %q, a %q, b %q (same key), c %q (another)", none, a, b, c)
	}
}

func TestAPIOptionsAreCheckedAtLoad(t *testing.T) {
	robottest.Refused(t, pagerduty.Type, []robottest.Refusal{
		{Name: "api_url alone", YAML: "routing_key_env: PD_KEY\napi_url: https://api.pagerduty.com\n", Env: map[string]string{"PD_KEY": routingKey}, Want: "set api_token_env too"},
		{Name: "relay's own variable", YAML: "routing_key_env: PD_KEY\napi_token_env: RELAY_ADMIN_TOKEN\n", Env: map[string]string{"PD_KEY": routingKey, "RELAY_ADMIN_TOKEN": apiToken}, Want: "RELAY_"},
		{Name: "unset", YAML: "routing_key_env: PD_KEY\napi_token_env: PD_API\n", Env: map[string]string{"PD_KEY": routingKey}, Want: "PD_API is not set"},
	}, apiToken)
}
