package browsertest_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/relay-energy/relay/internal/browsertest"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/testwait"
)

// eventsPath is the path of the Now page's live-update stream.
const eventsPath = "/console/events"

// streams are the live-update streams a tab's pages open, as its network
// log shows them.
type streams struct {
	mu     sync.Mutex
	opened []network.RequestID
	ended  map[network.RequestID]bool
}

// watchStreams records the live-update streams p's pages open and when
// each ends. Call it before p loads a page.
func watchStreams(t *testing.T, p *browsertest.Tab) *streams {
	t.Helper()
	s := &streams{ended: map[network.RequestID]bool{}}
	if err := chromedp.Listen(p.Context(), func(ev any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			if e.Request != nil && strings.HasSuffix(strings.SplitN(e.Request.URL, "?", 2)[0], eventsPath) {
				s.opened = append(s.opened, e.RequestID)
			}
		case *network.EventLoadingFinished:
			s.ended[e.RequestID] = true
		case *network.EventLoadingFailed:
			s.ended[e.RequestID] = true
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(p.Context(), network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("the tab's network log: %v", err)
	}
	return s
}

// count returns how many streams the tab opened.
func (s *streams) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.opened)
}

// openSince returns the stream opened after the first n that is still open,
// if there is one.
func (s *streams) openSince(n int) (network.RequestID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.opened[min(n, len(s.opened)):] {
		if !s.ended[id] {
			return id, true
		}
	}
	return "", false
}

// hasEnded reports whether stream id ended.
func (s *streams) hasEnded(id network.RequestID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended[id]
}

// An operator has the Now page open in two tabs of one browser (one
// session, by its cookie) and logs out in the second: the first tab's live
// update stream ends then, not at the store's next change (there is none:
// the upstream fails every poll meanwhile), and the first tab goes to the
// login form by itself.
func TestLogoutInASecondTabEndsTheFirstTabsLiveUpdates(t *testing.T) {
	t.Parallel()
	r := startRelay(t, consoleRules)
	first := tab(t)
	id := r.startAlarm(sim.AlarmSpec{Level: 0})
	live := watchStreams(t, first)
	r.login(first, adminToken, "ana")
	first.Do("the alarm on Now in the first tab", chromedp.WaitVisible(row(id)))

	// The upstream fails every request from now on: the relay's polls
	// change nothing in its store (not even their watermarks), so no write
	// of the store ends the stream in place of the logout. Three refused
	// requests let a poll under way when it began finish.
	faults := r.up.Stats().Faults
	if err := r.up.InjectFault(sim.AnyEndpoint, sim.Fault{Kind: sim.FaultServerError, Count: -1}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, browsertest.Timeout, "three polls refused by the upstream", func() bool { return r.up.Stats().Faults >= faults+3 })
	// The page is loaded again, so that its stream starts with no change
	// of the store left to tell.
	n := live.count()
	first.Do("the Now page in the first tab again", chromedp.Navigate(r.console("")), chromedp.WaitVisible(row(id)))
	var stream network.RequestID
	testwait.For(t, browsertest.Timeout, "the first tab's live-update stream", func() bool {
		var ok bool
		stream, ok = live.openSince(n)
		return ok
	})

	second := first.Sibling(t)
	second.Do("the Now page in the second tab, with the first tab's session", chromedp.Navigate(r.console("")), chromedp.WaitVisible(row(id)))
	// After the logout the first tab's page asks for the stream again and
	// is refused, which its log says.
	first.Expect(eventsPath)
	second.Do("logging out in the second tab", chromedp.Click(`//button[normalize-space()="Log out"]`), chromedp.WaitVisible(chromedp.ID("token")))
	loggedOut := time.Now()
	second.Screenshot("the second tab after its logout")

	testwait.For(t, browsertest.Timeout, "the first tab's live-update stream to end after the logout", func() bool { return live.hasEnded(stream) })
	t.Logf("the first tab's stream ended %v after the logout", time.Since(loggedOut).Round(time.Millisecond))
	first.Do("the first tab on the login form", chromedp.WaitVisible(chromedp.ID("token")))
	t.Logf("the first tab showed the login form %v after the logout", time.Since(loggedOut).Round(time.Millisecond))
	first.Screenshot("the first tab after the logout in the second")
}
