package teams_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/robot/robottest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/teams"
)

const sig = "Jq2dHk7_x9LmN0pQ-rS3tUvWxYz4AbCdEfGhIjKlMnO"

// kit makes sinks and fake workflows of sig.
var kit = robottest.Kit[notifytest.TeamsMessage]{
	Type: teams.Type,
	Start: func(t *testing.T, clk *clock.Fake) robottest.Robot[notifytest.TeamsMessage] {
		return notifytest.NewTeams(t, sig, clk.Now)
	},
	// 4 requests a second, as Teams documents for incoming webhooks.
	Pace: notify.Window{N: notifytest.TeamsPerSecond, Per: time.Second},
}

func TestABurstOf30ToOneWorkflowKeeps4ASecondAndIsNeverThrottled(t *testing.T) {
	robottest.About(t, kit.Burst(t, 30, "burst%02d", "", "title: '{{.LevelName}} {{.OriginID}}'\n"), "burst%02d")
}

func TestRetryAfterOfAThrottledWorkflowIsWaitedOutByEverySinkOfIt(t *testing.T) {
	kit.Limited(t, robottest.Limit{Fill: notifytest.TeamsPerSecond, RetryAfter: time.Second, Said: []string{"429"}})
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
			s := kit.Build(t, "ops", clk, notify.NewLimits(clk), c.hook(flow), "")
			kit.DeadLetter(t, clk, s, c.wantInErr, sig, "OldHk7_x9LmN0pQ")
		})
	}
}

// TestEveryStatusIsClassified: the trigger's statuses, with a Retry-After
// on a 429.
func TestEveryStatusIsClassified(t *testing.T) {
	kit.Classify(t, "/workflows/x/triggers/manual/paths/invoke?api-version=1&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig="+sig, []robottest.Answer{
		{Status: http.StatusOK},
		{Status: http.StatusAccepted},
		{Status: http.StatusTooManyRequests, RetryAfterHeader: "12", Retry: true, RetryAfter: 12 * time.Second, WantInErr: "waits 12s"},
		{Status: http.StatusBadRequest, WantInErr: "refused the card"},
		{Status: http.StatusForbidden, WantInErr: "url_env"},
		{Status: http.StatusBadGateway, Retry: true, WantInErr: "502"},
	})
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
			ev := sinktest.Event("huge", 0, event.Start)
			ev.Data.EventDesc = strings.Repeat("逆变器过温 *x* \u0001 ", 700)
			ev.Data.DeviceName = strings.Repeat("PCS_1 ", 5000)
			got := kit.Rig(t, c.extra).Only(ev)
			if got.Size > teams.MaxBody {
				t.Fatalf("the card of %d bytes, want at most %d", got.Size, teams.MaxBody)
			}
			if !strings.Contains(got.Text(), "Alarm: huge") {
				t.Errorf("the cut card lost the alarm's facts")
			}
			if c.extra != "" && got.Size < teams.MaxBody-1024 {
				t.Errorf("body of %d bytes: the text was cut further than %d bytes need", got.Size, teams.MaxBody)
			}
		})
	}
}

func TestTheCardIsColouredByLevelAndUpstreamNamesCannotBreakIt(t *testing.T) {
	r := kit.Rig(t, "text: 'On {{.Event.Data.DeviceName}}'\n")
	evs := robottest.Shades()
	evs[0].Data.DeviceName = "- **PCS** [x](http://evil.example) {{DATE(2017-02-14T06:08:39Z, SHORT)}}\n# _y_ `c`"
	r.SendAll(evs...)
	var colours []string
	for _, m := range r.Fake.Accepted() {
		body := m.Card()["body"].([]any)
		colours = append(colours, fmt.Sprint(body[0].(map[string]any)["color"]))
	}
	if want := "Attention Warning Warning Accent Good Default"; strings.Join(colours, " ") != want {
		t.Errorf("title colours %q, want %q", strings.Join(colours, " "), want)
	}
	text := r.Fake.Accepted()[0].Text()
	want := `On \- \*\*PCS\*\* \[x\](http://evil.example) \{\{DATE(2017-02-14T06:08:39Z, SHORT)\}\} # \_y\_ ` + "\\`c\\`"
	if !strings.HasSuffix(text, want) {
		t.Errorf("card:\n%s\nwant it to end with:\n%s", text, want)
	}
}

func TestOptionsAreCheckedAtDecode(t *testing.T) {
	hook := "https://prod-12.westeurope.logic.azure.com:443/workflows/8e4f/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=" + sig
	robottest.Refused(t, teams.Type, []robottest.Refusal{
		{Name: "no url_env", YAML: "title: x\n", Env: nil, Want: "missing: a teams sink needs url_env"},
		{Name: "url_env unset", YAML: "url_env: U\n", Env: nil, Want: "U"},
		{Name: "retired connector", YAML: "url_env: U\n", Env: map[string]string{"U": "https://contoso.webhook.office.com/webhookb2/abc@def/IncomingWebhook/123/456"}, Want: "Office 365 connector"},
		{Name: "no sig", YAML: "url_env: U\n", Env: map[string]string{"U": strings.TrimSuffix(hook, "&sig="+sig)}, Want: "no sig parameter"},
		{Name: "bad template", YAML: "url_env: U\ntext: '{{.Nope'\n", Env: map[string]string{"U": hook}, Want: "bad template"},
		{Name: "unknown key", YAML: "url_env: U\nsecret_env: S\n", Env: map[string]string{"U": hook}, Want: `unknown key "secret_env"`},
	}, sig)
	cfg := sinktest.Decode(t, teams.Type, "url_env: U\n", map[string]string{"U": hook})
	if got, want := cfg.Target(), "https://prod-12.westeurope.logic.azure.com:443/workflows/8e4f/triggers/manual/paths/invoke?…"; got != want {
		t.Errorf("target %q, want %q", got, want)
	}
	if got, want := strings.Join(cfg.Summary(), ", "), "url_env: U, paced 4 per 1.1s and 80 per 1m1s"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}

// TestADigestCardListsWhatFitsAndLaterCardsTheRest: a digest of 100 alarms
// with long names is one card within MaxBody listing as many as fit behind
// its button; listing the digest as alarm management does (25 at a time)
// posts the others in later cards, so that each alarm is behind exactly one
// button.
func TestADigestCardListsWhatFitsAndLaterCardsTheRest(t *testing.T) {
	kit.Folds(t, teams.MaxBody, func(m notifytest.TeamsMessage) int { return m.Size }, notifytest.TeamsMessage.Hidden)
}
