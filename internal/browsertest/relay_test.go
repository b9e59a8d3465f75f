package browsertest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/browsertest"
	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/service"
)

// The relay's secrets in these tests.
const (
	adminToken = "admin-browser-0123456789abcdef"
	viewToken  = "view-browser-0123456789abcdef"
	slackToken = "xoxb-browser-token"
	appToken   = "xapp-1-browser-token"
	// slackChannel is where the Slack sink oncall posts.
	slackChannel = "C0PAGER"
)

// Chromium starts at the first test that needs it (none in -short mode)
// and serves every test of the package; TestMain stops it.
var (
	browserOnce sync.Once
	browser     *browsertest.Browser
)

func TestMain(m *testing.M) {
	code := m.Run()
	if browser != nil {
		browser.Close()
	}
	os.Exit(code)
}

// tab opens a tab of the package's Chromium for t. Open it after
// startRelay: the tab then closes before the relay stops, and its page
// logs no failed request to a relay that is gone.
func tab(t *testing.T) *browsertest.Tab {
	t.Helper()
	browserOnce.Do(func() { browser = browsertest.Start() })
	return browser.Tab(t)
}

// relay is the whole relay of a test: the upstream simulator, a Slack fake
// with Socket Mode (so that messages carry buttons and are edited), a
// webhook receiver, and the service with its ops listener and console,
// on a clock ten times faster than the wall clock.
type relay struct {
	t     *testing.T
	clk   clock.Clock
	up    *sim.Server
	slack *notifytest.Slack
	hook  *notifytest.Receiver
	// ops is the ops listener's address.
	ops string
}

// startRelay runs the relay with the rules text, in which {{hook}} stands
// for the webhook receiver's URL, until the test ends. Its console has an
// admin and a viewer token.
func startRelay(t *testing.T, rules string) *relay {
	t.Helper()
	return startRelayBehind(t, rules, nil)
}

// startRelayBehind is startRelay with the upstream the relay polls put
// behind front, which is given the simulator and returns the URL to poll
// (nil: the simulator's own).
func startRelayBehind(t *testing.T, rules string, front func(*sim.Server) string) *relay {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the relay and Chromium")
	}
	clk := clock.NewScaled(time.Now().UTC().Truncate(time.Second), 10)
	r := &relay{t: t, clk: clk, up: sim.StartTest(t, sim.Options{Clock: clk, RateLimit: 600})}
	r.slack = notifytest.NewSlack(t, slackToken)
	r.slack.SocketMode(t, appToken)
	r.hook = notifytest.NewReceiver(t, "")

	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rulesPath, []byte(strings.ReplaceAll(rules, "{{hook}}", r.hook.URL())), 0o600); err != nil {
		t.Fatal(err)
	}
	appID, secret := r.up.Credentials()
	upstream := r.up.URL()
	if front != nil {
		upstream = front(r.up)
	}
	cfg, err := config.Load(context.Background(), envconfig.MapLookuper(map[string]string{
		"RELAY_BASE_URL": upstream, "RELAY_APP_ID": appID, "RELAY_APP_SECRET": secret,
		"RELAY_RATE_LIMIT": "600", "RELAY_STATE_PATH": filepath.Join(dir, "relay.db"), "RELAY_RULES": rulesPath,
		"RELAY_SLACK_TOKEN": slackToken, "RELAY_SLACK_APP_TOKEN": appToken, "RELAY_SLACK_API_URL": r.slack.APIURL(),
		"RELAY_ADMIN_TOKEN": adminToken, "RELAY_VIEW_TOKEN": viewToken,
		"RELAY_LISTEN": "127.0.0.1:0", "RELAY_SHUTDOWN_GRACE": "1s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	var logs sinktest.LogBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the relay's log:\n%s", logs.String())
		}
	})
	ready := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- service.Run(ctx, service.Options{Config: cfg, Clock: clk, Console: io.Discard,
			Logger: service.NewLogger(&logs, "debug", "text", nil), Ready: func(a string) { ready <- a }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the relay stopped with %v", err)
		}
	})
	select {
	case r.ops = <-ready:
	case err := <-done:
		t.Fatalf("the relay stopped at its start: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the relay's ops listener never came up")
	}
	return r
}

// console returns the URL of the console's page path ("" for Now).
func (r *relay) console(path string) string { return "http://" + r.ops + "/console/" + path }

// login logs p in through the console's form with token, as name.
func (r *relay) login(p *browsertest.Tab, token, name string) {
	r.t.Helper()
	loginAt(p, r.console("login"), token, name)
}

// loginAt logs p in through the login form at the address form with token,
// as name.
func loginAt(p *browsertest.Tab, form, token, name string) {
	p.Do("logging in through the form at "+form,
		chromedp.Navigate(form),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.SendKeys(chromedp.ID("name"), name),
		chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="pages"]`)),
	)
}

// startAlarm starts the alarm spec chooses on the simulator and returns
// its originId.
func (r *relay) startAlarm(spec sim.AlarmSpec) string {
	r.t.Helper()
	id, err := r.up.StartAlarm(spec)
	if err != nil {
		r.t.Fatal(err)
	}
	return id
}

// row returns the selector of alarm id's row on the Now page.
func row(id string) chromedp.CSS { return chromedp.CSS("tr#alarm-" + id) }

// getJSON decodes the answer of GET path on the ops listener, with the
// admin token, into v.
func (r *relay) getJSON(path string, v any) {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+r.ops+path, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		r.t.Fatalf("GET %s: %s %s %v", path, resp.Status, b, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		r.t.Fatalf("GET %s answered %s: %v", path, b, err)
	}
}

// postJSON sends body as JSON to path on the ops listener, with the admin
// token, and fails the test unless it is answered 2xx.
func (r *relay) postJSON(path, body string) {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+r.ops+path, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		r.t.Fatalf("POST %s %s: %s %s", path, body, resp.Status, b)
	}
}

// deadLetters returns the dead letters of sink, or with withheld the
// entries alarm management withheld from it, as the ops listener lists
// them.
func (r *relay) deadLetters(sink string, withheld bool) []service.DeadLetterJSON {
	r.t.Helper()
	path := "/deadletters?sink=" + sink
	if withheld {
		path = "/deadletters/withheld?sink=" + sink
	}
	var ans service.DeadLettersAnswer
	r.getJSON(path, &ans)
	return ans.DeadLetters
}

// hookGot reports whether the webhook receiver was sent, and with
// accepted accepted, the transition tr of alarm id.
func (r *relay) hookGot(id string, tr event.Transition, accepted bool) bool {
	for _, q := range r.hook.Requests() {
		var ev event.Event
		if json.Unmarshal(q.Body, &ev) == nil && ev.Data.OriginID == id && ev.Data.Transition == tr &&
			(!accepted || q.Status/100 == 2) {
			return true
		}
	}
	return false
}
