package browsertest_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/relay-energy/relay/internal/browsertest"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/service"
	"github.com/relay-energy/relay/internal/testwait"
)

// A webhook receiver that refuses for good (HTTP 400) dead-letters an
// alarm's start; once the receiver is fixed, an administrator clicks
// Replay on the dead letter's row of the Dead letters page, and the
// receiver gets the start.
func TestReplayADeadLetterFromTheDeadLettersPage(t *testing.T) {
	t.Parallel()
	r := startRelay(t, hookRules)
	p := tab(t)
	r.hook.Down(notifytest.Answer{Status: http.StatusBadRequest})
	id := r.startAlarm(sim.AlarmSpec{Level: 0})
	var dead service.DeadLetterJSON
	testwait.For(t, 20*time.Second, "the start of "+id+" dead-lettered", func() bool {
		for _, d := range r.deadLetters("hook", false) {
			if d.OriginID == id && d.Transition == string(event.Start) {
				dead = d
				return true
			}
		}
		return false
	})
	r.hook.Up()

	r.login(p, adminToken, "ana")
	rowID := fmt.Sprintf("dl-hook-%d", dead.Seq)
	p.Do("the dead letter on its page", chromedp.Navigate(r.console("deadletters")), chromedp.WaitVisible(chromedp.CSS("tr#"+rowID)))
	p.Screenshot("dead letters")
	p.Do("replaying", browsertest.ClickNow(`//tr[@id="`+rowID+`"]//button[normalize-space()="Replay"]`))
	testwait.For(t, 20*time.Second, "the receiver getting the replayed start of "+id, func() bool { return r.hookGot(id, event.Start, true) })
	p.Do("the page after the replay", chromedp.WaitReady(chromedp.CSS(`nav[aria-label="pages"]`)))
	p.Screenshot("dead letters after the replay")
	for _, d := range r.deadLetters("hook", false) {
		if d.Seq == dead.Seq {
			t.Errorf("dead letter %d is still listed after its replay: %+v", d.Seq, d)
		}
	}
}
