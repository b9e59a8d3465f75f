package browsertest_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/relay-energy/relay/internal/browsertest"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/service"
	"github.com/relay-energy/relay/internal/testwait"
)

// hookRules send every alarm to the webhook receiver.
const hookRules = `sinks:
  - name: hook
    type: webhook
    url: {{hook}}
routes:
  - name: all
    to: [hook]
`

// An administrator silences an alarm from its row on the Now page: the
// Silence link opens the silence form with the alarm's matchers filled in,
// and Add silence adds it. When the same alarm point (device and event)
// starts again upstream, its start is withheld from the webhook, which the
// store records as withheld.
func TestASilenceAddedFromAnAlarmWithholdsItsNextStart(t *testing.T) {
	t.Parallel()
	r := startRelay(t, hookRules)
	p := tab(t)
	first := r.startAlarm(sim.AlarmSpec{Level: 1})
	a, _ := r.up.Alarm(first)
	testwait.For(t, 20*time.Second, "the webhook receiving the start of "+first, func() bool { return r.hookGot(first, event.Start, true) })

	r.login(p, adminToken, "ana")
	p.Do("the alarm on Now", chromedp.WaitVisible(row(first)))
	p.Do("the Silence link of "+first,
		browsertest.ClickNow(`//tr[@id="alarm-`+first+`"]//a[normalize-space()="Silence"]`),
		chromedp.WaitVisible(`//button[normalize-space()="Add silence"]`))
	if url := browsertest.Run(p, "the form's address", chromedp.Location()); !strings.HasSuffix(url, "/console/silences/new?alarm="+first) {
		t.Errorf("the Silence link led to %s, want silences/new?alarm=%s", url, first)
	}
	// The form names the alarm's device and event among its matchers.
	form := browsertest.Eval[string](p, `[...document.querySelectorAll("main form input, main form textarea, main form select")].map(e => e.value).join("\n")`)
	for _, want := range []string{a.DeviceSN, a.EventCode} {
		if !strings.Contains(form, want) {
			t.Errorf("the silence form's fields do not hold %s of the alarm:\n%s", want, form)
		}
	}
	p.Screenshot("silence form")
	p.Do("adding the silence",
		chromedp.Click(`//button[normalize-space()="Add silence"]`),
		chromedp.WaitVisible(chromedp.CSS(`tr[id^="silence-"]`)))
	p.Screenshot("silences")
	var ans service.SilencesAnswer
	r.getJSON("/silences", &ans)
	if len(ans.Silences) != 1 || ans.Silences[0].State != "active" {
		t.Fatalf("GET /silences: %+v, want the one active silence added from the page", ans)
	}

	// The alarm ends, and its point raises it again.
	if err := r.up.EndAlarm(first, r.clk.Now()); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the relay seeing the end of "+first, func() bool {
		var ongoing service.AckAnswer
		r.getJSON("/alarms", &ongoing)
		return !slices.ContainsFunc(ongoing.Alarms, func(s manage.AlarmState) bool { return s.OriginID == first })
	})
	again := r.startAlarm(sim.AlarmSpec{DeviceSN: a.DeviceSN, EventCode: a.EventCode, Level: a.Level})
	testwait.For(t, 20*time.Second, "the start of "+again+" withheld from the webhook", func() bool {
		return slices.ContainsFunc(r.deadLetters("hook", true), func(d service.DeadLetterJSON) bool {
			return d.OriginID == again && d.Transition == string(event.Start)
		})
	})
	if r.hookGot(again, event.Start, false) {
		t.Errorf("the webhook was sent the start of %s, which the silence covers", again)
	}
}
