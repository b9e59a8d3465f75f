package browsertest_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/relay-energy/relay/internal/browsertest"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/service"
	"github.com/relay-energy/relay/internal/testwait"
)

// a11yRules send every alarm to a webhook receiver (which refuses the urgent
// ones' route: dead letters to show) and have a maintenance window (its next
// occurrences to show) that matches no station of the fleet.
const a11yRules = `sinks:
  - name: hook
    type: webhook
    url: {{hook}}
  - name: out
    type: console
routes:
  - name: all
    to: [hook, out]
time_intervals:
  - name: sunday-night
    time_intervals:
      - weekdays: [sunday]
        times: [{ start_time: '01:00', end_time: '03:00' }]
        location: Europe/Berlin
maintenance:
  - name: sunday-service
    when: [sunday-night]
    match: { station_ids: ["no-such-station"] }
`

// Every page of the console, filled (alarms of each level, one
// acknowledged, a silence, a dead letter, a report), the pages below them
// (an alarm's events, the silence form, a dead letter) and the login form
// have no serious or critical accessibility violation as axe-core finds
// them in the browser.
func TestEveryPageHasNoSeriousAccessibilityViolation(t *testing.T) {
	t.Parallel()
	axe := browsertest.AxeSource(t)
	r := startRelay(t, a11yRules)
	p := tab(t)
	r.hook.Queue(notifytest.Answer{Status: http.StatusBadRequest})
	var ids []string
	for level := range 4 {
		ids = append(ids, r.startAlarm(sim.AlarmSpec{Level: level}))
	}
	r.postJSON("/silences", `{"match": {"levels": ["minor"]}, "duration": "2h", "author": "ana", "comment": "a silence to show"}`)
	var dead []service.DeadLetterJSON
	testwait.For(t, 20*time.Second, "a dead letter", func() bool { dead = r.deadLetters("hook", false); return len(dead) > 0 })
	r.postJSON("/alarms/"+ids[0]+"/ack", `{"by": "ana", "comment": "on it"}`)

	p.Do("the login form", chromedp.Navigate(r.console("login")), chromedp.WaitVisible(chromedp.ID("token")))
	p.Screenshot("login")
	p.Axe(axe, "login")
	r.login(p, adminToken, "ana")
	// Each page, and the pages below them, by the navigation's page.
	for _, page := range []struct{ name, nav, path string }{
		{"Now", "Now", ""},
		{"History", "History", "history"},
		{"Alarm events", "History", "history/" + ids[1]},
		{"Silences", "Silences", "silences"},
		{"Add a silence", "Silences", "silences/new?alarm=" + ids[2]},
		{"Dead letters", "Dead letters", "deadletters"},
		{"Dead letter", "Dead letters", fmt.Sprintf("deadletters/%s/%d", dead[0].Sink, dead[0].Seq)},
		{"Report", "Report", "report"},
		{"System", "System", "system"},
	} {
		t.Run(page.name, func(t *testing.T) {
			p := p.In(t)
			p.Do("the "+page.name+" page", chromedp.Navigate(r.console(page.path)),
				chromedp.WaitVisible(`//nav//a[@aria-current="page"][normalize-space()="`+page.nav+`"]`))
			p.Screenshot(page.name)
			p.Axe(axe, page.name)
		})
	}
}
