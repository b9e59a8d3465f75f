package browsertest_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/relay-energy/relay/internal/browsertest"
	"github.com/relay-energy/relay/internal/isa"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// stormSize is a storm big enough to cross the report's flood line: more
// alarms started within an hour than isa.FloodPerHour.
const stormSize = isa.FloodPerHour + 10

// With the Now page open, a storm starts upstream: its alarms appear in the
// page's table by server-sent events, without a reload. The Report then
// draws the hour of the storm above its flood line.
func TestAStormArrivesLiveAndCrossesTheFloodLine(t *testing.T) {
	t.Parallel()
	r := startRelay(t, consoleRules)
	p := tab(t)
	first := r.startAlarm(sim.AlarmSpec{Level: 0})
	r.login(p, adminToken, "ana")
	p.Do("the first alarm on Now", chromedp.WaitVisible(row(first)))
	p.Screenshot("now before the storm")

	t.Run("the storm arrives live on Now", func(t *testing.T) {
		p := p.In(t)
		// A reload would lose this mark.
		p.Do("marking the page", chromedp.Evaluate[chromedp.Void](`window.relayNotReloaded = true`))
		storm := r.up.Storm(stormSize)
		want := len(storm) + 1
		browsertest.Run(p, fmt.Sprintf("the %d alarms of the storm on the page", len(storm)),
			chromedp.Poll[bool](fmt.Sprintf(`document.querySelectorAll("#alarms > tr[id^='alarm-']").length >= %d`, want),
				chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(browsertest.Timeout)))
		if !browsertest.Eval[bool](p, `window.relayNotReloaded === true`) {
			t.Fatal("the page was reloaded: the storm did not arrive by the live update")
		}
		shown := browsertest.Eval[[]string](p, `[...document.querySelectorAll("#alarms > tr[id^='alarm-']")].map(tr => tr.id.slice(6))`)
		for _, id := range append(storm, first) {
			if !slices.Contains(shown, id) {
				t.Errorf("alarm %s of the storm is not on the page", id)
			}
		}
		// The count is read in the page, in one evaluation, until it says
		// the storm: a live update replaces it with the rows, and a node
		// found before a swap reads empty after it.
		ctx, cancel := context.WithTimeout(p.Context(), browsertest.Timeout)
		defer cancel()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`(c => c !== null && c.textContent.includes("%d"))(document.getElementById("count"))`, want),
			chromedp.WithPollingMutation())); err != nil {
			count := browsertest.Eval[string](p, `(c => c ? c.textContent : "")(document.getElementById("count"))`)
			t.Errorf("the count says %q, want %d ongoing alarms", count, want)
		}
		p.Screenshot("now during the storm")
	})

	t.Run("the report draws the storm above the flood line", func(t *testing.T) {
		p := p.In(t)
		p.Do("the report", chromedp.Navigate(r.console("report")), chromedp.WaitVisible(chromedp.CSS(".flood-line")))
		p.Screenshot("report")
		label := browsertest.Eval[string](p, `(s => s ? s.textContent : "")(document.querySelector(".flood-line").closest("svg"))`)
		if !strings.Contains(strings.ToLower(label), "flood") {
			t.Errorf("the chart with the flood line says %q, want a title or label naming the flood", label)
		}
		// The bars are the chart's filled rectangles, not its frame or
		// background; one of them reaches above the flood line.
		above := browsertest.Eval[int](p, `(() => {
			const line = document.querySelector(".flood-line"), svg = line.closest("svg");
			const top = line.getBoundingClientRect().top, h = svg.getBoundingClientRect().height;
			return [...svg.querySelectorAll("rect")].filter(r => r.getAttribute("fill") !== "none" &&
				r.getBoundingClientRect().height < 0.9 * h && r.getBoundingClientRect().top < top).length;
		})()`)
		if above == 0 {
			t.Errorf("no bar of the chart reaches above the flood line after a storm of %d alarms", stormSize)
		}
	})
}
