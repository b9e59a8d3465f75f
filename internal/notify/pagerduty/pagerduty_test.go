package pagerduty_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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

// kit makes sinks of routingKey and fake Events APIs that know it.
var kit = robottest.Kit[notifytest.PagerDutyEvent]{
	Type:    pagerduty.Type,
	Options: func(hook, extra string) (string, map[string]string) { return options(hook, routingKey, extra) },
	Start: func(t *testing.T, clk *clock.Fake) robottest.Robot[notifytest.PagerDutyEvent] {
		return notifytest.NewPagerDuty(t, clk.Now, routingKey)
	},
	// About 120 events a minute per routing key, as PagerDuty documents it.
	Pace: notify.Window{N: 120, Per: time.Minute},
}

// options are the options of a sink sending to url with key, plus extra
// lines.
func options(url, key, extra string) (string, map[string]string) {
	return "routing_key_env: PD_KEY\nurl: " + url + "\n" + extra, map[string]string{"PD_KEY": key}
}

// build builds a sink sending to api with routingKey on clk, pacing with
// limits.
func build(t *testing.T, name string, clk *clock.Fake, limits *notify.Limits, api *notifytest.PagerDuty, extra string) notify.Sink {
	t.Helper()
	return kit.Build(t, name, clk, limits, api.URL(), extra)
}

func TestAnAlarmIsOneIncidentTriggeredAtItsStartAndResolvedAtItsEnd(t *testing.T) {
	for _, end := range []event.Transition{event.End, event.Invalid} {
		t.Run(string(end), func(t *testing.T) {
			clk := clock.NewFake(sinktest.Epoch)
			api := notifytest.NewPagerDuty(t, clk.Now, routingKey)
			s := build(t, "oncall", clk, notify.NewLimits(clk), api, "")
			for _, tr := range []event.Transition{event.Start, end} {
				res, err := robottest.Send(t, clk, s, sinktest.Event("1862223400000000001", 1, tr))
				if err != nil {
					t.Fatalf("%s: %v", tr, err)
				}
				if res.Memory != nil {
					t.Errorf("%s: memory %v, want none: the dedup_key is the alarm's own", tr, res.Memory)
				}
			}
			got := api.Accepted()
			if len(got) != 2 || got[0].Action != "trigger" || got[1].Action != "resolve" ||
				got[0].DedupKey != "1862223400000000001" || got[1].DedupKey != got[0].DedupKey {
				t.Fatalf("PagerDuty got %+v, want a trigger then a resolve of dedup_key 1862223400000000001", got)
			}
			if got[0].Severity != "error" {
				t.Errorf("a severe alarm has severity %q, want error", got[0].Severity)
			}
			in := api.Incidents()
			if len(in) != 1 || in[0].Triggers != 1 || !in[0].Resolved {
				t.Errorf("incidents %+v, want one, opened once and resolved", in)
			}
		})
	}
}

func TestTheTriggerSaysWhatWhereAndHowGrave(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := notifytest.NewPagerDuty(t, clk.Now, routingKey)
	s := build(t, "oncall", clk, notify.NewLimits(clk), api, "")
	for level := range 4 {
		if _, err := robottest.Send(t, clk, s, sinktest.Event(fmt.Sprintf("lvl%d", level), level, event.Start)); err != nil {
			t.Fatal(err)
		}
	}
	got := api.Accepted()
	for i, want := range []string{"critical", "error", "warning", "info"} {
		if got[i].Severity != want {
			t.Errorf("level %d: severity %q, want %q", i, got[i].Severity, want)
		}
	}
	pl, _ := got[0].Body["payload"].(map[string]any)
	details, _ := pl["custom_details"].(map[string]any)
	for k, want := range map[string]any{
		"summary": "URGENT alarm: E1023 Grid overvoltage <phase A> & *B* at North Park_1 [PV] / Inverter #3",
		"source":  "Inverter #3 (SN0001)", "component": "North Park_1 [PV] (5001)", "group": "7001", "class": "Store_PCS",
		"timestamp": "2026-11-21T07:43:00.000Z",
	} {
		if pl[k] != want {
			t.Errorf("payload.%s = %v, want %v", k, pl[k], want)
		}
	}
	if got[0].Body["client"] != "relay" || details["originId"] != "lvl0" || details["alarm"] == nil {
		t.Errorf("client %v, custom_details %v: want relay, and the event's data with the upstream record", got[0].Body["client"], details)
	}
}

func TestARefusedEventIsDeadLetteredWithPagerDutysReasons(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := notifytest.NewPagerDuty(t, clk.Now, routingKey)
	unknown := "UnknownKeyUnknownKeyUnknownKey00"
	text, env := options(api.URL(), unknown, "")
	s := sinktest.Build(t, pagerduty.Type, "oncall", text, env, sinktype.Deps{Clock: clk, Limits: notify.NewLimits(clk)})
	res, err := robottest.Send(t, clk, s, sinktest.Event("a1", 0, event.Start))
	if err == nil || res.Retry {
		t.Fatalf("retry %v (%v), want a dead letter", res.Retry, err)
	}
	for _, want := range []string{`pagerduty sink "oncall"`, "trigger of a1:start", "HTTP 400", "invalid event", "Invalid routing key", "routing_key_env"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	redacttest.AssertNoSecret(t, []string{unknown}, map[string]string{"error": err.Error()})
}

func TestA429WithoutRetryAfterHoldsEverySinkOfTheRoutingKeyBack30s(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := notifytest.NewPagerDuty(t, clk.Now, routingKey)
	// Another sender spends the routing key's minute.
	for range 120 {
		resp, err := http.Post(api.URL(), "application/json", strings.NewReader(`{"routing_key":"`+routingKey+`","event_action":"resolve","dedup_key":"other"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	clk.Advance(35 * time.Second)
	limits := notify.NewLimits(clk)
	a := build(t, "a", clk, limits, api, "")
	b := build(t, "b", clk, limits, api, "")
	res, err := robottest.Send(t, clk, a, sinktest.Event("r1", 0, event.Start))
	if err == nil || !res.Retry || res.RetryAfter != pagerduty.RateLimitWait {
		t.Fatalf("retry %v after %s (%v), want a retry after %s", res.Retry, res.RetryAfter, err, pagerduty.RateLimitWait)
	}
	if !strings.Contains(err.Error(), "HTTP 429") {
		t.Errorf("error does not name the 429: %v", err)
	}
	sent := clk.Now()
	if _, err := robottest.Send(t, clk, b, sinktest.Event("r2", 0, event.Start)); err != nil {
		t.Fatalf("the other sink of the routing key, after the wait: %v", err)
	}
	got := api.Accepted()
	if last := got[len(got)-1]; last.DedupKey != "r2" || last.At.Sub(sent) < pagerduty.RateLimitWait {
		t.Errorf("the other sink sent %s after the 429 (%+v), want it held back %s", last.At.Sub(sent), last, pagerduty.RateLimitWait)
	}
}

func TestABurstFromTwoSinksOfOneRoutingKeyStaysWithin120AMinute(t *testing.T) {
	kit.Burst(t, 300, "b%03d", "", "")
}

func TestTheTitleTemplateWritesTheSummaryCutTo1024Characters(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := notifytest.NewPagerDuty(t, clk.Now, routingKey)
	s := build(t, "oncall", clk, notify.NewLimits(clk), api,
		"title: '{{.LevelName}} {{.EventCode}} on {{.DeviceSN}}{{if eq .OriginID \"long\"}}{{range 400}}ééé{{end}}{{end}}'\n")
	for _, origin := range []string{"short", "long"} {
		if _, err := robottest.Send(t, clk, s, sinktest.Event(origin, 2, event.Start)); err != nil {
			t.Fatalf("%s: %v", origin, err)
		}
	}
	got := api.Accepted()
	if got[0].Summary != "major E1023 on SN0001" {
		t.Errorf("summary %q, want the template's", got[0].Summary)
	}
	if n := utf8.RuneCountInString(got[1].Summary); n != pagerduty.MaxSummary || !strings.HasSuffix(got[1].Summary, "…") {
		t.Errorf("a long summary has %d characters, want it cut to %d ending with …", n, pagerduty.MaxSummary)
	}
}

func TestAnOriginIdOver255CharactersStillPairsItsTriggerAndResolve(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := notifytest.NewPagerDuty(t, clk.Now, routingKey)
	s := build(t, "oncall", clk, notify.NewLimits(clk), api, "")
	long := strings.Repeat("9", 300)
	for _, tr := range []event.Transition{event.Start, event.End} {
		if _, err := robottest.Send(t, clk, s, sinktest.Event(long, 0, tr)); err != nil {
			t.Fatalf("%s: %v", tr, err)
		}
	}
	in := api.Incidents()
	if len(in) != 1 || !in[0].Resolved || len(in[0].DedupKey) > pagerduty.MaxDedupKey || !strings.HasPrefix(in[0].DedupKey, "999") {
		t.Errorf("incidents %+v, want one resolved, keyed by at most 255 characters starting with the originId", in)
	}
}

func TestOptionsAreCheckedAtLoad(t *testing.T) {
	robottest.Refused(t, pagerduty.Type, []robottest.Refusal{
		{Name: "no routing key", YAML: "url: https://events.pagerduty.com/v2/enqueue\n", Env: nil, Want: "missing: a pagerduty sink needs routing_key_env"},
		{Name: "a key of the wrong length", YAML: "routing_key_env: PD_KEY\n", Env: map[string]string{"PD_KEY": "tooShortKey123"}, Want: "holds 14 characters, not the 32"},
		{Name: "a variable not set", YAML: "routing_key_env: PD_KEY\n", Env: nil, Want: "PD_KEY is not set"},
		{Name: "a text template", YAML: "routing_key_env: PD_KEY\ntext: hello\n", Env: map[string]string{"PD_KEY": routingKey}, Want: `unknown key "text"`},
		{Name: "a bad url", YAML: "routing_key_env: PD_KEY\nurl: events.pagerduty.com\n", Env: map[string]string{"PD_KEY": routingKey}, Want: "want an http:// or https:// URL"},
	}, "tooShortKey123")
}
