package browsertest

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"
)

// The environment variables the browser tests read.
const (
	// EnvChromium is the path of the Chromium to run instead of the
	// chromium found on the PATH.
	EnvChromium = "RELAY_CHROMIUM"
	// EnvAxe is the path of axe-core's axe.min.js.
	EnvAxe = "RELAY_AXE_JS"
	// EnvScreenshots is a folder that keeps the screenshots; without it they
	// go to the test's temporary folder, removed after the test.
	EnvScreenshots = "RELAY_SCREENSHOTS"
)

// The messages of what is missing, for a skip outside CI and a failure in it.
const (
	MissingChromium = "browser tests need Debian's chromium package: apt-get install chromium (or set " + EnvChromium + " to a Chromium binary)"
	MissingAxe      = "the accessibility check needs axe-core: npm install --no-save --prefix DIR axe-core@4 and " + EnvAxe + "=DIR/node_modules/axe-core/axe.min.js (.ci/run does both)"
)

// ErrNoChromium is why Start could not start Chromium when it did not find
// it; its text says what to install.
var ErrNoChromium = errors.New(MissingChromium)

// Width and Height are the size of a tab's viewport: a control-room
// screen's 1280x800, which the README's picture has too.
const Width, Height = 1280, 800

// Timeout bounds each step a Tab runs: a navigation, a click, a wait.
const Timeout = 20 * time.Second

// Browser is one headless Chromium shared by the tests of a package: start
// it once, open a Tab per test, and close it when the package's tests are
// over (in TestMain).
type Browser struct {
	err         error
	ctx         context.Context
	cancelAlloc context.CancelFunc
	cancelCtx   context.CancelFunc
	dir         string
}

// Start starts Chromium headless, with a fresh profile and none of its
// background connections (a closed network refuses them). It trusts the
// certificates trusted besides the system's (a test's TLS server, such as
// httptest's), by their public keys, in this browser only. It does not
// fail: what went wrong, Chromium missing included, is reported by the
// first Tab, which skips or fails its test.
func Start(trusted ...*x509.Certificate) *Browser {
	path, err := chromiumPath()
	if err != nil {
		return &Browser{err: err}
	}
	dir, err := os.MkdirTemp("", "relay-chromium-")
	if err != nil {
		return &Browser{err: fmt.Errorf("browsertest: a profile folder for Chromium: %w", err)}
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(Width, Height),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter"),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
	}
	if len(trusted) > 0 {
		keys := make([]string, len(trusted))
		for i, c := range trusted {
			sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
			keys[i] = base64.StdEncoding.EncodeToString(sum[:])
		}
		opts = append(opts, chromedp.Flag("ignore-certificate-errors-spki-list", strings.Join(keys, ",")))
	}
	b := &Browser{dir: dir}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// Chromium's own complaints (an event this cdproto does not know)
	// are no test's business; what fails an action is returned by it.
	ctx, cancelCtx := chromedp.NewContext(allocCtx, chromedp.WithErrorf(func(string, ...any) {}))
	b.ctx, b.cancelAlloc, b.cancelCtx = ctx, cancelAlloc, cancelCtx
	// The first run starts Chromium, which lives as long as the context
	// it runs in: ctx, not one with a timeout.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int]("1")); err != nil {
		b.Close()
		return &Browser{err: fmt.Errorf("browsertest: starting %s failed: %w", path, err)}
	}
	return b
}

// chromiumPath returns RELAY_CHROMIUM or the chromium on the PATH.
func chromiumPath() (string, error) {
	if p := os.Getenv(EnvChromium); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %v", ErrNoChromium, EnvChromium, p, err)
		}
		return p, nil
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		return "", ErrNoChromium
	}
	return p, nil
}

// Close stops Chromium and removes its profile.
func (b *Browser) Close() {
	if b.cancelCtx != nil {
		b.cancelCtx()
		b.cancelAlloc()
	}
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}

// InCI reports whether the tests run in CI (CI=true, which .ci/run sets),
// where a missing tool fails the browser tests instead of skipping them.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing skips t with why outside CI and fails it in CI.
func Missing(t testing.TB, why string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s (CI=true: the browser tests may not be skipped)", why)
	}
	t.Skip(why)
}

// Tab opens a tab of its own for t, with cookies of its own, closed when t
// ends. Without Chromium it skips t (outside CI) or fails it. A tab fails t
// at its end when a page broke the Content-Security-Policy or logged an
// error (a resource it failed to load or refused).
func (b *Browser) Tab(t testing.TB) *Tab {
	t.Helper()
	if b.err != nil {
		if errors.Is(b.err, ErrNoChromium) {
			Missing(t, b.err.Error())
		}
		t.Fatal(b.err)
	}
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	return openTab(t, ctx, cancel)
}

// Sibling opens another tab for t in p's browser context: it shares p's
// cookies, as a second tab of the same operator's browser does. It closes
// when t ends.
func (p *Tab) Sibling(t testing.TB) *Tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(p.ctx)
	return openTab(t, ctx, cancel)
}

// openTab sets up the tab of ctx, a new target, for t: its screenshots'
// folder, its log and its viewport.
func openTab(t testing.TB, ctx context.Context, cancel context.CancelFunc) *Tab {
	t.Helper()
	p := &Tab{t: t, tabState: &tabState{ctx: ctx, dir: os.Getenv(EnvScreenshots)}}
	if p.dir != "" {
		p.dir = filepath.Join(p.dir, strings.ReplaceAll(t.Name(), "/", "-"))
		if err := os.MkdirAll(p.dir, 0o755); err != nil {
			t.Fatalf("%s: %v", EnvScreenshots, err)
		}
	} else {
		p.dir = t.TempDir()
	}
	if err := chromedp.Listen(ctx, p.logged); err != nil {
		cancel()
		t.Fatalf("browsertest: opening a tab: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(Width, Height)); err != nil {
		cancel()
		t.Fatalf("browsertest: the tab's viewport: %v", err)
	}
	if _, err := chromedp.Call(ctx, log.Enable, struct{}{}); err != nil {
		cancel()
		t.Fatalf("browsertest: the tab's log: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, e := range p.problems {
			t.Error(e)
		}
	})
	return p
}

// Tab is one browser tab of a test.
type Tab struct {
	t testing.TB
	*tabState
}

// tabState is what a Tab's views for subtests share.
type tabState struct {
	ctx context.Context
	dir string

	mu       sync.Mutex
	n        int // screenshots taken
	problems []string
	// expected are what the page's expected errors hold (Expect).
	expected []string
}

// Expect tells the tab that its page will log errors whose text or address
// holds what, because of what the test does (a request refused after a
// logout): they do not fail the test.
func (p *Tab) Expect(what string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expected = append(p.expected, what)
}

// In returns the tab as seen by t, a subtest of the test that opened it:
// its failures fail t.
func (p *Tab) In(t testing.TB) *Tab { return &Tab{t: t, tabState: p.tabState} }

// logged keeps the page's Content-Security-Policy violations and the
// errors it logs: a resource it failed to load or refused (a style sheet
// at a wrong path), a failed request.
func (p *tabState) logged(ev any) {
	e, ok := ev.(*log.EventEntryAdded)
	if !ok || e.Entry == nil {
		return
	}
	var problem string
	switch {
	case strings.Contains(e.Entry.Text, "Content Security Policy") && e.Entry.URL == "":
		// A script the test evaluated (axe-core sets styles while it
		// checks colour contrast) has no URL; it is not the page's.
		return
	case strings.Contains(e.Entry.Text, "Content Security Policy"):
		problem = "the page broke its Content-Security-Policy: "
	case strings.HasSuffix(e.Entry.URL, "/favicon.ico"):
		// The console has no icon; Chromium asks for one anyway.
		return
	case e.Entry.Level == log.EntryLevelError:
		problem = "the page logged an error: "
	default:
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.expected {
		if strings.Contains(e.Entry.Text, w) || strings.Contains(e.Entry.URL, w) {
			return
		}
	}
	p.problems = append(p.problems, problem+e.Entry.Text+" ("+e.Entry.URL+")")
}

// Context returns the tab's chromedp context, for what Do and Run do not
// cover.
func (p *Tab) Context() context.Context { return p.ctx }

// Do runs steps in the tab within Timeout, failing the test with what and
// the error when one fails.
func (p *Tab) Do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, Timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.t.Fatalf("%s: %v\n%s", what, err, p.where())
	}
}

// ClickNow clicks the element xpath selects in one evaluation in the page,
// as soon as there is one. chromedp.Click finds the node first and clicks
// it after: a live update that swaps the rows in between makes it click a
// detached node, which does nothing and says nothing. The evaluation runs
// between the page's own tasks, so it clicks the element in the page.
func ClickNow(xpath string) chromedp.Action[chromedp.Void] {
	q, _ := json.Marshal(xpath)
	js := `(e => { if (!e) return false; e.click(); return true })(document.evaluate(` + string(q) +
		`, document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue)`
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond))(ctx, t)
		return chromedp.Void{}, err
	}
}

// TextNow returns the text of the first element the CSS selector css
// finds, found and read in one evaluation in the page as soon as there is
// one with text. chromedp.Text finds the node first and reads it after: a
// navigation or a live update in between leaves it asking for a node the
// page no longer has ("No node with given id found").
func TextNow(p *Tab, what, css string) string {
	p.t.Helper()
	q, _ := json.Marshal(css)
	js := `(e => e ? e.innerText.trim() : "")(document.querySelector(` + string(q) + `))`
	return Run(p, what, chromedp.Poll[string](js, chromedp.WithPollingInterval(50*time.Millisecond)))
}

// where describes the page for a failure: its address and its text, and
// a screenshot's path.
func (p *Tab) where() string {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	url, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		return "the tab does not answer: " + err.Error()
	}
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if len(text) > 2000 {
		text = text[:2000] + "…"
	}
	shot := ""
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		path := filepath.Join(p.dir, "failure.png")
		if os.WriteFile(path, png, 0o644) == nil {
			shot = "; screenshot " + path
		}
	}
	return fmt.Sprintf("the page at %s%s shows:\n%s", url, shot, text)
}

// Run runs a in tab p within Timeout and returns its value, failing the
// test with what and the error when it fails.
func Run[T any](p *Tab, what string, a chromedp.Action[T]) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, Timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		p.t.Fatalf("%s: %v\n%s", what, err, p.where())
	}
	return v
}

// Eval evaluates the JavaScript expression js in the page and returns its
// value (a DevTools evaluation, which the page's CSP does not block).
func Eval[T any](p *Tab, js string) T {
	p.t.Helper()
	return Run(p, "evaluating "+js, chromedp.Evaluate[T](js))
}

// Screenshot writes a full-page PNG of the page as the next numbered file
// named name, logs its path and returns it.
func (p *Tab) Screenshot(name string) string {
	p.t.Helper()
	png := Run(p, "screenshot "+name, chromedp.FullScreenshot(100))
	p.mu.Lock()
	p.n++
	n := p.n
	p.mu.Unlock()
	path := filepath.Join(p.dir, fmt.Sprintf("%02d-%s.png", n, fileName(name)))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	p.t.Logf("screenshot %s: %s", name, path)
	return path
}

var notFileName = regexp.MustCompile(`[^a-z0-9]+`)

// fileName turns a page's name into a file's.
func fileName(name string) string {
	return strings.Trim(notFileName.ReplaceAllString(strings.ToLower(name), "-"), "-")
}

// AxeSource returns axe-core's script from RELAY_AXE_JS; without it, it
// skips t outside CI and fails it in CI.
func AxeSource(t testing.TB) string {
	t.Helper()
	path := os.Getenv(EnvAxe)
	if path == "" {
		Missing(t, MissingAxe)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		Missing(t, fmt.Sprintf("%s (%s: %v)", MissingAxe, EnvAxe, err))
	}
	return string(b)
}

// Violation is an accessibility rule the page breaks, as axe-core reports
// it.
type Violation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// axeRun runs axe-core on the whole document and returns its violations,
// each with the elements that break it.
const axeRun = `axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(r.violations.map(v => ({
	id: v.id, impact: v.impact || "", help: v.help,
	nodes: v.nodes.map(n => n.target.join(" ") + ": " + (n.failureSummary || "").replace(/\s+/g, " "))
}))))`

// Axe runs axe-core (its script src, from AxeSource) in the page, named
// page in the messages, and fails the test on every serious or critical
// violation; minor and moderate ones are logged.
func (p *Tab) Axe(src, page string) {
	p.t.Helper()
	if !Eval[bool](p, `typeof axe === "object"`) {
		p.Do("injecting axe-core into "+page, chromedp.Evaluate[chromedp.Void](src))
	}
	out := Run(p, "axe-core on "+page, chromedp.Evaluate[string](axeRun, chromedp.EvalAwaitPromise))
	var vs []Violation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		p.t.Fatalf("axe-core on %s answered %s: %v", page, out, err)
	}
	for _, v := range vs {
		msg := fmt.Sprintf("%s: axe-core %s violation %s (%s):\n  %s", page, v.Impact, v.ID, v.Help, strings.Join(v.Nodes, "\n  "))
		if v.Impact == "serious" || v.Impact == "critical" {
			p.t.Error(msg)
		} else {
			p.t.Log(msg)
		}
	}
}
