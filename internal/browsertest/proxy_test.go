package browsertest_test

import (
	"io"
	"log"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/relay-energy/relay/internal/browsertest"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// startTLSProxy puts the relay's ops listener behind a TLS-terminating
// reverse proxy, as an ingress does, until the test ends, and returns it.
// The proxy passes the browser's Host header on and says nothing of the
// scheme (no X-Forwarded-Proto): the console is left to its defaults.
func startTLSProxy(t *testing.T, r *relay) *httptest.Server {
	t.Helper()
	ops, err := url.Parse("http://" + r.ops)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(ops)
	// A closed tab cancels its event stream: not news. A request the
	// proxy could not pass on shows in the page as a 502.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	proxy := httptest.NewTLSServer(rp)
	t.Cleanup(proxy.Close)
	return proxy
}

// Behind a TLS-terminating reverse proxy, with the console's defaults (no
// origin or proxy configured), an administrator logs in at the proxy's
// https address, acknowledges an alarm on the Now page and logs out, all
// through the proxy; the login form and the Now page have no serious
// accessibility violation there either.
func TestLoginAcknowledgeAndLogOutBehindATLSProxy(t *testing.T) {
	t.Parallel()
	r := startRelay(t, consoleRules)
	proxy := startTLSProxy(t, r)
	// A browser of its own, which trusts the proxy's certificate.
	b := browsertest.Start(proxy.Certificate())
	t.Cleanup(b.Close)
	p := b.Tab(t)
	id := r.startAlarm(sim.AlarmSpec{Level: 0})
	consoleURL := proxy.URL + "/console/"

	p.Do("the login form through the proxy", chromedp.Navigate(consoleURL+"login"), chromedp.WaitVisible(chromedp.ID("token")))
	p.Screenshot("login behind the proxy")
	t.Run("axe-core on the login form", func(t *testing.T) { p.In(t).Axe(browsertest.AxeSource(t), "login behind the proxy") })

	loginAt(p, consoleURL+"login", adminToken, "ana")
	if url := browsertest.Run(p, "the address after the login", chromedp.Location()); url != consoleURL {
		t.Errorf("the login led to %s, want the proxy's %s", url, consoleURL)
	}
	p.Do("the alarm on Now", chromedp.WaitVisible(button(id, "Acknowledge")))
	p.Screenshot("now behind the proxy")
	t.Run("axe-core on Now", func(t *testing.T) { p.In(t).Axe(browsertest.AxeSource(t), "Now behind the proxy") })

	p.Do("acknowledging", browsertest.ClickNow(button(id, "Acknowledge")), chromedp.WaitVisible(button(id, "Unacknowledge")))
	p.Screenshot("now behind the proxy after the acknowledgement")
	if flash := browsertest.TextNow(p, "the flash", "p.flash"); !strings.Contains(flash, id) {
		t.Errorf("the page says %q after the acknowledgement, want a word about %s", flash, id)
	}

	// A live update the page asks for while the logout goes through is
	// refused (403): the session it names is over.
	p.Expect("/console/rows")
	p.Expect(eventsPath)
	p.Do("logging out", chromedp.Click(`//button[normalize-space()="Log out"]`), chromedp.WaitVisible(chromedp.ID("token")))
	if url := browsertest.Run(p, "the address after the logout", chromedp.Location()); url != consoleURL+"login" {
		t.Errorf("the logout led to %s, want the proxy's %slogin", url, consoleURL)
	}
	// The session is over: the Now page sends the browser to the login form.
	p.Do("Now after the logout", chromedp.Navigate(consoleURL), chromedp.WaitVisible(chromedp.ID("token")))
	p.Screenshot("login behind the proxy after the logout")
}
