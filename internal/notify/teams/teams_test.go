package teams_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/notify/teams"
)

// build decodes the options of a sink posting to hook, plus extra lines,
// and builds it as name on clk, pacing with limits.
func build(t *testing.T, name string, clk *clock.Fake, limits *notify.Limits, hook, extra string) notify.Sink {
	t.Helper()
	return sinktest.Build(t, teams.Type, name, "url_env: TEAMS_URL\n"+extra, map[string]string{"TEAMS_URL": hook}, sinktype.Deps{Clock: clk, Limits: limits})
}

func send(t *testing.T, clk *clock.Fake, s notify.Sink, ev event.Event) (notify.Result, error) {
	t.Helper()
	return sinktest.SendEvent(t, clk, s, ev, nil)
}

func TestABurstOf30ToOneWorkflowKeeps4ASecondAndIsNeverThrottled(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	flow := notifytest.NewTeams(t, sig, clk.Now)
	limits := notify.NewLimits(clk)
	a := build(t, "ops", clk, limits, flow.URL(), "")
	b := build(t, "ops-urgent", clk, limits, flow.URL(), "title: '{{.LevelName}} {{.OriginID}}'\n")
	const n = 30
	for i := range n {
		s := a
		if i%2 == 0 {
			s = b
		}
		if _, err := send(t, clk, s, sinktest.Event(fmt.Sprintf("burst%02d", i), i%4, event.Start)); err != nil {
			t.Fatalf("alarm %d through %s: %v", i, s.Name(), err)
		}
	}
	msgs := flow.Messages()
	if len(msgs) != n {
		t.Fatalf("the workflow got %d requests, want %d", len(msgs), n)
	}
	for i, m := range msgs {
		if m.Status != http.StatusAccepted {
			t.Fatalf("request %d was refused: HTTP %d %s", i, m.Status, m.Code)
		}
		if i+4 < n {
			if gap := msgs[i+4].At.Sub(m.At); gap < time.Second {
				t.Fatalf("requests %d and %d arrived %s apart: 5 requests within a second", i, i+4, gap)
			}
		}
		if want := fmt.Sprintf("burst%02d", i); !strings.Contains(m.Text(), want) {
			t.Fatalf("request %d is not about %s:\n%s", i, want, m.Text())
		}
	}
}

func TestRetryAfterOfAThrottledWorkflowIsWaitedOutByEverySinkOfIt(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	flow := notifytest.NewTeams(t, sig, clk.Now)
	// Another relay (limits of its own) uses up the workflow's second.
	other := build(t, "elsewhere", clk, notify.NewLimits(clk), flow.URL(), "")
	for i := range notifytest.TeamsPerSecond {
		if _, err := send(t, clk, other, sinktest.Event(fmt.Sprintf("other%d", i), 3, event.Start)); err != nil {
			t.Fatal(err)
		}
	}
	limits := notify.NewLimits(clk)
	s := build(t, "ops", clk, limits, flow.URL(), "")
	sibling := build(t, "ops-copy", clk, limits, flow.URL(), "")
	res, err := send(t, clk, s, sinktest.Event("throttled", 0, event.Start))
	if err == nil || !res.Retry || res.RetryAfter != time.Second {
		t.Fatalf("a 5th message in a second: retry %v after %s (%v), want a retry after the Retry-After of 1s", res.Retry, res.RetryAfter, err)
	}
	if !strings.Contains(err.Error(), "429") || !strings.HasPrefix(err.Error(), `teams sink "ops": post of throttled:start: `) {
		t.Errorf("the error does not name the sink, the event and the status: %v", err)
	}
	throttledAt := clk.Now()
	if _, err := send(t, clk, sibling, sinktest.Event("after", 0, event.Start)); err != nil {
		t.Fatalf("the next message: %v", err)
	}
	msgs := flow.Messages()
	last := msgs[len(msgs)-1]
	if last.Status != http.StatusAccepted || last.At.Sub(throttledAt) != res.RetryAfter {
		t.Fatalf("after the 429: the last request HTTP %d %s after it, want 202 after %s", last.Status, last.At.Sub(throttledAt), res.RetryAfter)
	}
	if len(msgs) != notifytest.TeamsPerSecond+2 {
		t.Errorf("%d requests, want %d: the sibling sent while the workflow was throttled", len(msgs), notifytest.TeamsPerSecond+2)
	}
}

func TestWhatTheWorkflowRefusesIsDeadLetteredWithWhatToFix(t *testing.T) {
	cases := []struct {
		name      string
		hook      func(flow *notifytest.Teams) string
		wantInErr []string
	}{
		{"wrong sig", func(f *notifytest.Teams) string { return strings.Replace(f.URL(), "sig=Jq2", "sig=Old", 1) },
			[]string{"401", "DirectApiInvalidAuthorizationSignature", "url_env"}},
		{"deleted workflow", func(f *notifytest.Teams) string {
			return strings.Replace(f.URL(), "/workflows/8e4f", "/workflows/0000", 1)
		},
			[]string{"404", "WorkflowNotFound", "url_env"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(sinktest.Epoch)
			flow := notifytest.NewTeams(t, sig, clk.Now)
			s := build(t, "ops", clk, notify.NewLimits(clk), c.hook(flow), "")
			res, err := send(t, clk, s, sinktest.Event("refused", 0, event.Start))
			if err == nil || res.Retry {
				t.Fatalf("retry %v (%v), want a dead letter", res.Retry, err)
			}
			for _, w := range c.wantInErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
			notifytest.AssertNoSecret(t, []string{sig, "OldHk7_x9LmN0pQ"}, map[string]string{"error": err.Error()})
		})
	}
}

func TestEveryStatusIsClassified(t *testing.T) {
	cases := []struct {
		status     int
		header     string
		retry      bool
		retryAfter time.Duration
		wantInErr  string
	}{
		{http.StatusOK, "", false, 0, ""},
		{http.StatusAccepted, "", false, 0, ""},
		{http.StatusTooManyRequests, "12", true, 12 * time.Second, "waits 12s"},
		{http.StatusBadRequest, "", false, 0, "refused the card"},
		{http.StatusForbidden, "", false, 0, "url_env"},
		{http.StatusBadGateway, "", true, 0, "502"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if c.header != "" {
					w.Header().Set("Retry-After", c.header)
				}
				w.WriteHeader(c.status)
			}))
			t.Cleanup(srv.Close)
			clk := clock.NewFake(sinktest.Epoch)
			hook := srv.URL + "/workflows/x/triggers/manual/paths/invoke?api-version=1&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=" + sig
			s := build(t, "ops", clk, notify.NewLimits(clk), hook, "")
			res, err := send(t, clk, s, sinktest.Event("code", 0, event.Start))
			if (err == nil) != (c.wantInErr == "") || res.Retry != c.retry || res.RetryAfter != c.retryAfter {
				t.Fatalf("retry %v after %s (%v), want retry %v after %s", res.Retry, res.RetryAfter, err, c.retry, c.retryAfter)
			}
			if err != nil && !strings.Contains(err.Error(), c.wantInErr) {
				t.Errorf("the error does not say %q: %v", c.wantInErr, err)
			}
		})
	}
}

func TestAHugeAlarmStillSendsACardWithinTeamsSize(t *testing.T) {
	for _, c := range []struct {
		name  string
		extra string
	}{
		{"default card", ""},
		{"templated text", "text: '{{.Event.Data.EventDesc}} {{.Event.Data.EventDesc}}'\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(sinktest.Epoch)
			flow := notifytest.NewTeams(t, sig, clk.Now)
			s := build(t, "ops", clk, notify.NewLimits(clk), flow.URL(), c.extra)
			ev := sinktest.Event("huge", 0, event.Start)
			ev.Data.EventDesc = strings.Repeat("逆变器过温 *x* \u0001 ", 700)
			ev.Data.DeviceName = strings.Repeat("PCS_1 ", 5000)
			if _, err := send(t, clk, s, ev); err != nil {
				t.Fatal(err)
			}
			got := flow.Accepted()
			if len(got) != 1 || got[0].Size > teams.MaxBody {
				t.Fatalf("%d accepted, the first of %d bytes, want one of at most %d", len(got), got[0].Size, teams.MaxBody)
			}
			if !strings.Contains(got[0].Text(), "Alarm: huge") {
				t.Errorf("the cut card lost the alarm's facts")
			}
			if c.extra != "" && got[0].Size < teams.MaxBody-1024 {
				t.Errorf("body of %d bytes: the text was cut further than %d bytes need", got[0].Size, teams.MaxBody)
			}
		})
	}
}

func TestTheCardIsColouredByLevelAndUpstreamNamesCannotBreakIt(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	flow := notifytest.NewTeams(t, sig, clk.Now)
	s := build(t, "ops", clk, notify.NewLimits(clk), flow.URL(), "text: 'On {{.Event.Data.DeviceName}}'\n")
	var evs []event.Event
	for level := range 4 {
		evs = append(evs, sinktest.Event(fmt.Sprintf("c%d", level), level, event.Start))
	}
	evs = append(evs, sinktest.Event("c0", 0, event.End), sinktest.Event("c1", 1, event.Invalid))
	evs[0].Data.DeviceName = "- **PCS** [x](http://evil.example) {{DATE(2017-02-14T06:08:39Z, SHORT)}}\n# _y_ `c`"
	for _, ev := range evs {
		if _, err := send(t, clk, s, ev); err != nil {
			t.Fatal(err)
		}
	}
	var colours []string
	for _, m := range flow.Accepted() {
		body := m.Card()["body"].([]any)
		colours = append(colours, fmt.Sprint(body[0].(map[string]any)["color"]))
	}
	if want := "Attention Warning Warning Accent Good Default"; strings.Join(colours, " ") != want {
		t.Errorf("title colours %q, want %q", strings.Join(colours, " "), want)
	}
	text := flow.Accepted()[0].Text()
	want := `On \- \*\*PCS\*\* \[x\](http://evil.example) \{\{DATE(2017-02-14T06:08:39Z, SHORT)\}\} # \_y\_ ` + "\\`c\\`"
	if !strings.HasSuffix(text, want) {
		t.Errorf("card:\n%s\nwant it to end with:\n%s", text, want)
	}
}

func TestOptionsAreCheckedAtDecode(t *testing.T) {
	hook := "https://prod-12.westeurope.logic.azure.com:443/workflows/8e4f/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=" + sig
	cases := []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"no url_env", "title: x\n", nil, "missing: a teams sink needs url_env"},
		{"url_env unset", "url_env: U\n", nil, "U"},
		{"retired connector", "url_env: U\n", map[string]string{"U": "https://contoso.webhook.office.com/webhookb2/abc@def/IncomingWebhook/123/456"}, "Office 365 connector"},
		{"no sig", "url_env: U\n", map[string]string{"U": strings.TrimSuffix(hook, "&sig="+sig)}, "no sig parameter"},
		{"bad template", "url_env: U\ntext: '{{.Nope'\n", map[string]string{"U": hook}, "bad template"},
		{"unknown key", "url_env: U\nsecret_env: S\n", map[string]string{"U": hook}, `unknown key "secret_env"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := sinktest.DecodeErr(teams.Type, c.yaml, c.env)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a problem saying %q", err, c.want)
			}
			if strings.Contains(err.Error(), sig) {
				t.Fatalf("the problem shows the sig: %v", err)
			}
		})
	}
	cfg := sinktest.Decode(t, teams.Type, "url_env: U\n", map[string]string{"U": hook})
	if got, want := cfg.Target(), "https://prod-12.westeurope.logic.azure.com:443/workflows/8e4f/triggers/manual/paths/invoke?…"; got != want {
		t.Errorf("target %q, want %q", got, want)
	}
	if got, want := strings.Join(cfg.Summary(), ", "), "url_env: U, paced 4 per 1.1s and 80 per 1m1s"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}
