package browsertest_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/relay-energy/relay/internal/browsertest"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/testwait"
)

// consoleRules send every alarm to a console sink only.
const consoleRules = `sinks:
  - name: out
    type: console
routes:
  - name: all
    to: [out]
`

// button returns the selector of the button labelled text in alarm id's
// row on the Now page.
func button(id, text string) string {
	return `//tr[@id="alarm-` + id + `"]//button[normalize-space()="` + text + `"]`
}

// An administrator logs in through the form and sees an ongoing alarm with
// its Acknowledge button; a viewer logs in with the view token and sees the
// same alarm, read only, without a single action button.
func TestLoginAsAdministratorAndAsViewer(t *testing.T) {
	t.Parallel()
	r := startRelay(t, consoleRules)
	admin, viewer := tab(t), tab(t)
	id := r.startAlarm(sim.AlarmSpec{Level: 0})

	admin.Do("the login form", chromedp.Navigate(r.console("")), chromedp.WaitVisible(chromedp.ID("token")))
	admin.Screenshot("login")
	r.login(admin, adminToken, "ana")
	admin.Do("the alarm on Now", chromedp.WaitVisible(row(id)), chromedp.WaitVisible(button(id, "Acknowledge")))
	if who := browsertest.TextNow(admin, "who", "p.who"); !strings.Contains(who, "ana, administrator") {
		t.Errorf("the administrator's page says %q, want ana, administrator", who)
	}
	admin.Screenshot("now as administrator")

	r.login(viewer, viewToken, "vic")
	viewer.Do("the alarm on Now", chromedp.WaitVisible(row(id)))
	viewer.Screenshot("now as viewer")
	if who := browsertest.TextNow(viewer, "who", "p.who"); !strings.Contains(who, "viewer (read only)") {
		t.Errorf("the viewer's page says %q, want viewer (read only)", who)
	}
	// The only form a viewer can send that changes anything is Log out.
	if got := browsertest.Eval[[]string](viewer, `[...document.querySelectorAll('form[method="post"] button')].map(b => b.textContent.trim())`); len(got) != 1 || got[0] != "Log out" {
		t.Errorf("a viewer sees the action buttons %q, want Log out only", got)
	}
}

// ackRules post every alarm to Slack, with buttons.
const ackRules = `sinks:
  - name: oncall
    type: slack
    channel: ` + slackChannel + `
routes:
  - name: all
    to: [oncall]
`

// An administrator acknowledges an alarm by clicking Acknowledge in its row
// on the Now page: the row then offers Unacknowledge, and the alarm's
// Slack message is edited to say who acknowledged it.
func TestAcknowledgeFromTheNowPageEditsTheSlackMessage(t *testing.T) {
	t.Parallel()
	r := startRelay(t, ackRules)
	p := tab(t)
	id := r.startAlarm(sim.AlarmSpec{Level: 0})
	start := r.slackStart(id)

	r.login(p, adminToken, "ana")
	p.Do("the alarm on Now", chromedp.WaitVisible(button(id, "Acknowledge")))
	p.Screenshot("now before the acknowledgement")
	p.Do("acknowledging", browsertest.ClickNow(button(id, "Acknowledge")), chromedp.WaitVisible(button(id, "Unacknowledge")))
	p.Screenshot("now after the acknowledgement")
	if flash := browsertest.TextNow(p, "the flash", "p.flash"); !strings.Contains(flash, id) {
		t.Errorf("the page says %q after the acknowledgement, want a word about %s", flash, id)
	}
	testwait.For(t, 20*time.Second, "the Slack message of "+id+" edited with the acknowledgement", func() bool {
		m, ok := r.slack.Message(slackChannel, start.TS)
		b, _ := json.Marshal(m.Attachments)
		return ok && strings.Contains(string(b), "Acknowledged by")
	})
	edited := false
	for _, c := range r.slack.Calls() {
		edited = edited || (c.Method == notifytest.MethodUpdate && c.TS == start.TS && c.Error == "")
	}
	if !edited {
		t.Error("no chat.update of the start's message was recorded")
	}
}

// slackStart waits for the Slack message of alarm id's start and returns
// the call that posted it.
func (r *relay) slackStart(id string) notifytest.SlackCall {
	r.t.Helper()
	var start notifytest.SlackCall
	testwait.For(r.t, 20*time.Second, "the Slack message of "+id+"'s start", func() bool {
		for _, c := range r.slack.Calls() {
			b, _ := json.Marshal(c.Attachments)
			if c.Method == notifytest.MethodPostMessage && c.ThreadTS == "" && c.Error == "" && strings.Contains(c.Text+string(b), id) {
				start = c
				return true
			}
		}
		return false
	})
	return start
}
