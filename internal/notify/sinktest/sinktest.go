// Package sinktest is the conformance suite every sink type runs, as
// Alertmanager's notify/test runs RetryTests and AssertNotifyLeaksNoSecret
// for each of its notifiers. A sink package's test calls Run with a Harness
// that starts the vendor's fake; the suite then checks, against that fake
// and against answers it scripts itself:
//
//   - the status table: 2xx delivered; 408, 425, 429, 5xx and an unreachable
//     server retried; any other status (3xx included, never followed)
//     dead-lettered at once;
//   - Retry-After on a 429;
//   - no secret of the options in an error, a log line, Target, Host,
//     Summary or a rendering, even when the server echoes the whole request back;
//   - start and end pairing: the memory a start leaves lets the end refer to
//     it after a restart, and an end without memory is still delivered;
//   - ordering: messages reach the vendor in the order they are sent,
//     however the sink paces itself;
//   - for a sink that can show storm digests (notify.Digester), a digest of
//     60 alarms: posted, listed, 10 of them ended, every alarm and the
//     counts reaching the fake, the status table and no secret in errors;
//   - for a sink that sends reminders (notify.Reminder), a reminder of an
//     alarm after its start: one message with the note, nothing without the
//     memory a sink needs, the status table and no secret in errors;
//   - a golden rendering of a start, an end and an invalid at each level,
//     in testdata/render.golden of the sink's package (render-<rest>.golden
//     for a test named TestConformance<Rest>; go test -args -update-golden
//     rewrites it).
//
// Sinks that do not post over HTTP (NATS, the console, email) run every part
// but the HTTP ones.
package sinktest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
	"github.com/relay-energy/relay/internal/redact/redacttest"
	"github.com/relay-energy/relay/internal/rulefile"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/render.golden of the sink tested")

// Harness is what the suite needs of a sink type.
type Harness struct {
	// Type is the sink type under test.
	Type sinktype.Type
	// Start starts the vendor's fake for one test, on clk (the clock the
	// sink paces and signs with), and says how to configure a sink for it.
	Start func(t *testing.T, clk *clock.Fake) Vendor
}

// Vendor is a running fake of the vendor's service.
type Vendor struct {
	// URL is the fake's base URL (scheme://host:port), or "" for a sink that
	// does not post over HTTP. The suite puts servers of its own in front of
	// it, at other base URLs.
	URL string
	// Options returns the sink's options, as the YAML lines under the sink
	// without name and type, for a destination whose base URL is base, and
	// the environment variables they name.
	Options func(base string) (yaml string, env map[string]string)
	// Received returns one text per message the fake accepted, in order of
	// arrival; each holds the alarm's originId.
	Received func() []string
	// All, when set, returns what Received leaves out as well: thread
	// replies, edits. The storm digest part reads it (Received when unset)
	// to find every alarm of a digest and its counts.
	All func() []string
	// Deps, when set, adds what the sink needs to deps (a NATS connection,
	// a console writer, the Slack API URL at base).
	Deps func(deps *sinktype.Deps, base string)
	// CheckPair, when set, checks that what the fake received for the end of
	// an alarm points at its start (a thread reply, the same incident key).
	CheckPair func(t *testing.T, start, end *event.Event)
	// RenderOptions, when set, are the options of the golden rendering, for
	// a sink that does not post over HTTP and whose Options name the fake's
	// address (a random port), which RenderBase cannot stand in for. Unset,
	// the rendering uses Options(RenderBase), or Options("") without URL.
	RenderOptions func() (yaml string, env map[string]string)
	// Secrets, when set, are values of the options the vendor holds secret
	// whatever the sink declares (its AddSecrets): a credential in a URL's
	// path, as Discord's webhook URLs carry. No text the suite sees may
	// hold one.
	Secrets []string
}

// Run runs the conformance suite for h.
func Run(t *testing.T, h Harness) {
	t.Run("golden rendering", func(t *testing.T) { golden(t, h) })
	t.Run("no secret in target, summary or rendering", func(t *testing.T) { renderingHoldsNoSecret(t, h) })
	t.Run("start and end pair", func(t *testing.T) { pairing(t, h) })
	t.Run("order", func(t *testing.T) { order(t, h) })
	t.Run("status table", func(t *testing.T) { statusTable(t, h) })
	t.Run("retry-after", func(t *testing.T) { retryAfter(t, h) })
	t.Run("unreachable", func(t *testing.T) { unreachable(t, h) })
	t.Run("no secret in errors or logs", func(t *testing.T) { errorsHoldNoSecret(t, h) })
	t.Run("failing template sends the default", func(t *testing.T) { templateFallback(t, h) })
	t.Run("storm digest", func(t *testing.T) { digest(t, h) })
	t.Run("reminder", func(t *testing.T) { remind(t, h) })
}

// Epoch is the time the suite's fake clock starts at.
var Epoch = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

// Decode decodes the options of a sink of typ from yamlText (the lines under
// the sink, without name and type), reading variables from env, and fails t
// on any problem.
func Decode(t testing.TB, typ sinktype.Type, yamlText string, env map[string]string) sinktype.Config {
	t.Helper()
	cfg, err := DecodeErr(typ, yamlText, env)
	if err != nil {
		t.Fatalf("options of a %s sink:\n%s\n%v", typ.Name, yamlText, err)
	}
	return cfg
}

// DecodeErr decodes as Decode does and returns the problems, for tests of
// what a sink type refuses.
func DecodeErr(typ sinktype.Type, yamlText string, env map[string]string) (sinktype.Config, error) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(yamlText), &n); err != nil {
		return nil, err
	}
	r := rulefile.NewReader("rules.yaml", func(k string) (string, bool) { v, ok := env[k]; return v, ok }, 10_000)
	var root *yaml.Node
	if len(n.Content) > 0 {
		root = n.Content[0]
	}
	pairs, _ := r.Mapping(root, "sinks[0]", nil)
	cfg, _ := sinktype.Decode(typ, r, "sinks[0]", 1, pairs, []string{"name", "type", "max_age", "max_retry_after"})
	if err := r.Err(); err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, fmt.Errorf("%s: Decode returned no options and no problem", typ.Name)
	}
	return cfg, nil
}

// Build decodes yamlText as the options of a sink of typ, as Decode does,
// and builds the sink called name with deps, failing t on any problem.
func Build(t testing.TB, typ sinktype.Type, name, yamlText string, env map[string]string, deps sinktype.Deps) notify.Sink {
	t.Helper()
	s, err := Decode(t, typ, yamlText, env).Build(context.Background(), name, deps)
	if err != nil {
		t.Fatalf("build a %s sink: %v", typ.Name, err)
	}
	return s
}

// SendEvent makes one attempt at ev, with the alarm's memory, as Send does.
func SendEvent(t testing.TB, clk *clock.Fake, s notify.Sink, ev event.Event, memory map[string]string) (notify.Result, error) {
	t.Helper()
	return Send(t, clk, s, Delivery(t, ev, memory))
}

// Event returns the transition tr of alarm origin at level, with every
// field set as the upstream sends it.
func Event(origin string, level int, tr event.Transition) event.Event {
	occurred := Epoch.Add(-17 * time.Minute)
	a := event.Alarm{
		OriginID: origin, Status: event.StatusOngoing, Level: level, EventCode: "E1023",
		EventDesc: "Grid overvoltage <phase A> & *B*", EventType: "fault", TenantID: "1001",
		StationID: "5001", StationName: "North Park_1 [PV]", SystemID: "7001", DeviceSN: "SN0001",
		DeviceName: "Inverter #3", DeviceTemplateCode: "Store_PCS", OccurredAt: occurred,
		Raw: []byte(`{"id":"` + origin + `"}`),
	}
	if tr == event.Start {
		return event.New(a, tr, occurred.Add(4*time.Second), false)
	}
	a.Status, a.RecoveredAt = event.StatusEnded, Epoch
	return event.New(a, tr, Epoch.Add(5*time.Second), false)
}

// Delivery returns the delivery of ev with memory, as the Deliverer makes it.
func Delivery(t testing.TB, ev event.Event, memory map[string]string) notify.Delivery {
	t.Helper()
	body, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return notify.Delivery{EventID: ev.ID, OriginID: ev.Data.OriginID, Level: ev.Data.Level, Body: body,
		EnqueuedAt: Epoch, Event: &ev, Memory: memory, Attempt: 1}
}

// Send makes one attempt, moving clk from deadline to deadline while the
// sink waits for its pace, so that pacing takes no real time.
func Send(t testing.TB, clk *clock.Fake, s notify.Sink, d notify.Delivery) (notify.Result, error) {
	t.Helper()
	return Call(t, clk, "Send of "+d.EventID, func(ctx context.Context) (notify.Result, error) { return s.Send(ctx, d) })
}

// Call runs f, one call of a sink named by what, moving clk from deadline
// to deadline while the sink waits for its pace, as Send does.
func Call(t testing.TB, clk *clock.Fake, what string, f func(ctx context.Context) (notify.Result, error)) (notify.Result, error) {
	t.Helper()
	type out struct {
		res notify.Result
		err error
	}
	done := make(chan out, 1)
	// No deadline: a limiter compares its waits, on clk, with the
	// deadline, in real time. A watchdog bounds the call instead.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		res, err := f(ctx)
		done <- out{res, err}
	}()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	watchdog := time.NewTimer(30 * time.Second)
	defer watchdog.Stop()
	for {
		select {
		case <-watchdog.C:
			t.Fatalf("%s did not return within 30 s of real time", what)
		case o := <-done:
			return o.res, o.err
		case <-tick.C:
			if clk.Waiters() > 0 {
				if next, ok := clk.NextDeadline(); ok {
					clk.Set(next)
				}
			}
		}
	}
}

// fixture is one sink under test with the servers in front of its fake.
type fixture struct {
	t      *testing.T
	h      Harness
	clk    *clock.Fake
	vendor Vendor
	front  *front
	cfg    sinktype.Config
	env    map[string]string
	logs   *bytes.Buffer
	logMu  *sync.Mutex
	deps   sinktype.Deps
}

// newHTTPFixture is newFixture for the parts about HTTP: it skips t for a
// sink that does not post over HTTP.
func newHTTPFixture(t *testing.T, h Harness) *fixture {
	t.Helper()
	f := newFixture(t, h)
	if f.front == nil {
		t.Skip("the sink does not post over HTTP")
	}
	return f
}

// extremes are the extremes of the status table: a 500 is retried, a 400
// is not.
var extremes = []struct {
	code  int
	retry bool
}{{500, true}, {400, false}}

// assertNoSecret fails t for a secret of f, or a piece of one, in any of
// texts: the first 12 characters of each secret that is not a URL (a URL's
// scheme and host are no secret; AddURL adds its secret parts on their
// own).
func (f *fixture) assertNoSecret(t *testing.T, texts map[string]string) {
	t.Helper()
	secrets := f.secrets()
	redacttest.AssertNoSecret(t, secrets, texts)
	for where, text := range texts {
		for _, sec := range secrets {
			if len(sec) >= 16 && !strings.Contains(sec, "/") && strings.Contains(text, sec[:12]) {
				t.Errorf("%s holds a piece of a secret, %q:\n%s", where, sec[:12], text)
			}
		}
	}
}

func newFixture(t *testing.T, h Harness) *fixture {
	t.Helper()
	return newFixtureWith(t, h, "")
}

// newFixtureWith is newFixture with extra option lines.
func newFixtureWith(t *testing.T, h Harness, extra string) *fixture {
	t.Helper()
	f := &fixture{t: t, h: h, clk: clock.NewFake(Epoch), logs: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	f.vendor = h.Start(t, f.clk)
	base := ""
	if f.vendor.URL != "" {
		f.front = newFront(t, f.vendor.URL)
		base = f.front.srv.URL
	}
	var text string
	text, f.env = f.vendor.Options(base)
	f.cfg = Decode(t, h.Type, text+extra, f.env)
	f.deps = sinktype.Deps{
		Clock: f.clk, Logger: slog.New(slog.NewTextHandler(lockedWriter{f.logMu, f.logs}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		HTTP: &http.Client{}, Limits: notify.NewLimits(f.clk),
	}
	if f.vendor.Deps != nil {
		f.vendor.Deps(&f.deps, base)
	}
	f.deps = f.deps.Defaults()
	return f
}

func (f *fixture) build() notify.Sink {
	f.t.Helper()
	s, err := f.cfg.Build(context.Background(), "conformance", f.deps)
	if err != nil {
		f.t.Fatalf("build: %v", err)
	}
	return s
}

func (f *fixture) send(s notify.Sink, ev event.Event, memory map[string]string) (notify.Result, error) {
	return SendEvent(f.t, f.clk, s, ev, memory)
}

// secrets are the secret values of the options, and every value of the
// variables they name.
func (f *fixture) secrets() []string {
	set := redact.New()
	f.cfg.AddSecrets(set)
	out := slices.Clone(f.vendor.Secrets)
	for _, v := range f.env {
		if len(v) >= 4 {
			out = append(out, v)
		}
	}
	for _, s := range set.Values() {
		if len(s) >= 4 && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func (f *fixture) log() string {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	return f.logs.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// front is a server in front of the vendor's fake: it passes requests on,
// or answers with a scripted status, or echoes the whole request back.
type front struct {
	srv   *httptest.Server
	proxy *httputil.ReverseProxy
	mu    sync.Mutex
	mode  string // "pass", "status", "echo"
	code  int
	hdr   http.Header
	pad   int // bytes of filler before an echo
	hits  int // requests served
}

func newFront(t *testing.T, target string) *front {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	f := &front{proxy: httputil.NewSingleHostReverseProxy(u), mode: "pass"}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// echo makes the front answer code and echo each request after pad bytes.
func (f *front) echo(code, pad int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode, f.code, f.hdr, f.pad = "echo", code, nil, pad
}

func (f *front) set(mode string, code int, hdr http.Header) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode, f.code, f.hdr = mode, code, hdr
}

// served returns how many requests the front has served.
func (f *front) served() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits
}

func (f *front) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	mode, code, hdr := f.mode, f.code, f.hdr
	f.hits++
	f.mu.Unlock()
	switch mode {
	case "pass":
		f.proxy.ServeHTTP(w, r)
		return
	case "echo":
		f.mu.Lock()
		pad := f.pad
		f.mu.Unlock()
		notifytest.WriteEcho(w, r, code, pad)
		return
	}
	for k, v := range hdr {
		w.Header()[k] = v
	}
	if code >= 300 && code < 400 {
		w.Header().Set("Location", "http://redirected.invalid/")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"ok":false,"error":"scripted %d","errcode":%d,"code":%d,"description":"scripted","error_code":%d}`, code, code, code, code)
}

// RenderBase is the base URL the golden rendering configures HTTP sinks
// with, so that the rendering does not depend on a test server's port.
const RenderBase = "https://vendor.example"

// renderConfig decodes the options for RenderBase.
func (f *fixture) renderConfig() sinktype.Config {
	base := ""
	if f.vendor.URL != "" {
		base = RenderBase
	}
	text, env := f.vendor.Options(base)
	if f.vendor.RenderOptions != nil {
		text, env = f.vendor.RenderOptions()
	}
	return Decode(f.t, f.h.Type, text, env)
}

func golden(t *testing.T, h Harness) {
	f := newFixture(t, h)
	cfg := f.renderConfig()
	var b strings.Builder
	for _, tr := range []event.Transition{event.Start, event.End, event.Invalid} {
		for level := 0; level <= 3; level++ {
			ev := Event("1862223400000000001", level, tr)
			reqs, err := cfg.Render(&ev)
			if err != nil {
				t.Fatalf("render %s at level %d: %v", tr, level, err)
			}
			if len(reqs) == 0 {
				t.Fatalf("render %s at level %d: no request", tr, level)
			}
			fmt.Fprintf(&b, "=== %s, level %d (%s)\n", tr, level, event.LevelName(level))
			for _, r := range reqs {
				fmt.Fprintf(&b, "--- %s\n%s\n", r.What, bytes.TrimRight(r.Body, "\n"))
			}
		}
	}
	// One golden file per conformance test: render.golden for
	// TestConformance, render-<rest>.golden for TestConformance<Rest>.
	top, _, _ := strings.Cut(t.Name(), "/")
	name := "render.golden"
	if rest := strings.TrimPrefix(top, "TestConformance"); rest != "" && rest != top {
		name = "render-" + strings.ToLower(rest) + ".golden"
	}
	checkGolden(t, name, b.String())
}

// checkGolden compares got with testdata/name, which -update-golden
// rewrites first.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run go test -args -update-golden to write it, then read it", err)
	}
	if got != string(want) {
		t.Errorf("rendering differs from %s (go test -args -update-golden rewrites it):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff shows the first lines where want and got differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\nwant %q\n got %q", i+1, wl, gl)
		}
	}
	return "(same lines)"
}

func renderingHoldsNoSecret(t *testing.T, h Harness) {
	f := newFixture(t, h)
	texts := map[string]string{
		"Target":  f.cfg.Target(),
		"Host":    f.cfg.Host(f.deps.Env),
		"Summary": strings.Join(f.cfg.Summary(), ", "),
	}
	for _, tr := range []event.Transition{event.Start, event.End} {
		ev := Event("a1", 1, tr)
		reqs, err := f.cfg.Render(&ev)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range reqs {
			texts[fmt.Sprintf("rendering of the %s, request %d", tr, i)] = r.What + "\n" + string(r.Body)
		}
	}
	redacttest.AssertNoSecret(t, f.secrets(), texts)
}

func pairing(t *testing.T, h Harness) {
	f := newFixture(t, h)
	start, end := Event("p1", 1, event.Start), Event("p1", 1, event.End)
	res, err := f.send(f.build(), start, nil)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	// A restart builds the sink anew; the memory comes from the store.
	if _, err := f.send(f.build(), end, res.Memory); err != nil {
		t.Fatalf("end after a restart, with the start's memory %v: %v", res.Memory, err)
	}
	if f.vendor.CheckPair != nil {
		f.vendor.CheckPair(t, &start, &end)
	}
	// An end whose start never reached the sink (rules changed, the start
	// was dead-lettered) is still delivered, on its own.
	lone := Event("p2", 2, event.End)
	if _, err := f.send(f.build(), lone, nil); err != nil {
		t.Fatalf("end without memory: %v", err)
	}
	got := f.vendor.Received()
	if len(got) < 3 || !strings.Contains(got[len(got)-1], "p2") {
		t.Fatalf("the fake received %d messages, the last not the lone end of p2:\n%s", len(got), strings.Join(got, "\n"))
	}
}

func order(t *testing.T, h Harness) {
	f := newFixture(t, h)
	s := f.build()
	const n = 6
	memory := map[string]map[string]string{}
	var want []string
	for _, tr := range []event.Transition{event.Start, event.End} {
		for i := range n {
			origin := fmt.Sprintf("ord%02d", i)
			res, err := f.send(s, Event(origin, i%4, tr), memory[origin])
			if err != nil {
				t.Fatalf("%s of %s: %v", tr, origin, err)
			}
			if res.Memory != nil {
				memory[origin] = res.Memory
			}
			want = append(want, origin)
		}
	}
	got := f.vendor.Received()
	if len(got) != len(want) {
		t.Fatalf("the fake received %d messages, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Fatalf("message %d is not about %s (sent in this order: %v):\n%s", i, w, want, got[i])
		}
	}
}

func statusTable(t *testing.T, h Harness) {
	f := newHTTPFixture(t, h)
	s := f.build()
	for _, c := range []struct {
		code  int
		retry bool
	}{
		{301, false}, {302, false}, {307, false}, {400, false}, {401, false}, {403, false}, {404, false}, {410, false},
		{413, false}, {422, false}, {408, true}, {425, true}, {429, true}, {500, true}, {502, true}, {503, true}, {504, true},
	} {
		f.front.set("status", c.code, nil)
		res, err := f.send(s, Event(fmt.Sprintf("st%d", c.code), 0, event.Start), nil)
		if err == nil {
			t.Errorf("HTTP %d: delivered, want an error", c.code)
			continue
		}
		if res.Retry != c.retry {
			t.Errorf("HTTP %d: retry = %v, want %v (%v)", c.code, res.Retry, c.retry, err)
		}
		if !strings.Contains(err.Error(), fmt.Sprint(c.code)) {
			t.Errorf("HTTP %d: the error does not name the status: %v", c.code, err)
		}
	}
	f.front.set("pass", 0, nil)
	if _, err := f.send(s, Event("st200", 0, event.Start), nil); err != nil {
		t.Errorf("the vendor's own answer: %v", err)
	}
}

func retryAfter(t *testing.T, h Harness) {
	f := newHTTPFixture(t, h)
	f.front.set("status", http.StatusTooManyRequests, http.Header{"Retry-After": {"7"}})
	res, err := f.send(f.build(), Event("ra", 0, event.Start), nil)
	if err == nil || !res.Retry || res.RetryAfter != 7*time.Second {
		t.Fatalf("429 with Retry-After: 7: retry %v after %s (%v), want a retry after 7s", res.Retry, res.RetryAfter, err)
	}
}

func unreachable(t *testing.T, h Harness) {
	f := newHTTPFixture(t, h)
	s := f.build()
	f.front.srv.Close()
	res, err := f.send(s, Event("down", 0, event.Start), nil)
	if err == nil || !res.Retry {
		t.Fatalf("unreachable server: retry %v (%v), want a retried error", res.Retry, err)
	}
	redacttest.AssertNoSecret(t, f.secrets(), map[string]string{"error": err.Error(), "log": f.log()})
}

func errorsHoldNoSecret(t *testing.T, h Harness) {
	f := newHTTPFixture(t, h)
	s := f.build()
	texts := map[string]string{}
	// Filler before the echo moves each secret across every point where an
	// error may cut a quoted answer (Post's 200 characters, a sink's own
	// cut of what its vendor said), 4 bytes at a time, so that a secret
	// cleaned only after the cut leaves a piece of 12 characters or more.
	// The answer itself is data and reaches the sink as received: each
	// quote is cleaned before it is cut.
	for pad := 0; pad <= 300; pad += 4 {
		for _, code := range []int{400, 500} {
			f.front.echo(code, pad)
			for _, tr := range []event.Transition{event.Start, event.End} {
				_, err := f.send(s, Event("leak", 0, tr), map[string]string{})
				if err == nil {
					t.Fatalf("HTTP %d echo: delivered, want an error", code)
				}
				texts[fmt.Sprintf("error of the %s at HTTP %d after %d bytes", tr, code, pad)] = err.Error()
			}
		}
	}
	texts["log"] = f.log()
	f.assertNoSecret(t, texts)
}

// slowTemplate passes on the sample events, whose names are short, and
// exceeds the step bound on an event whose device name is long.
// Two nested ranges take about 400 steps on a sample and 90,000, over the
// bound of 10,000, on a device name of 300 characters.
const slowTemplate = `{{range len .Event.Data.DeviceName}}{{range len $.Event.Data.DeviceName}}{{end}}{{end}}x`

func templateFallback(t *testing.T, h Harness) {
	if !slices.Contains(h.Type.Keys(), "title") {
		t.Skip("the sink has no message templates")
	}
	extra := "\ntitle: '" + slowTemplate + "'\n"
	if slices.Contains(h.Type.Keys(), "text") {
		extra += "text: '" + slowTemplate + "'\n"
	}
	f := newFixtureWith(t, h, extra)
	var mu sync.Mutex
	var failed []string
	f.deps.TemplateFailed = func(sink string, ev *event.Event, err error) {
		mu.Lock()
		defer mu.Unlock()
		failed = append(failed, fmt.Sprintf("%s %s: %v", sink, ev.ID, err))
	}
	ev := Event("tmpl1", 0, event.Start)
	ev.Data.DeviceName = strings.Repeat("d", 300)
	if _, err := f.send(f.build(), ev, nil); err != nil {
		t.Fatalf("an event whose template fails was not sent with the default: %v", err)
	}
	got := f.vendor.Received()
	if len(got) != 1 || !strings.Contains(got[0], "tmpl1") {
		t.Fatalf("the fake received %q, want the default message about tmpl1", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failed) == 0 || !strings.Contains(failed[0], "conformance tmpl1:start") || !strings.Contains(failed[0], "exceeds its bounds") {
		t.Fatalf("TemplateFailed was told %q, want the sink, the event and the bound", failed)
	}
}

// LogBuffer is a log that a sink's goroutines (a listener, a poller) write
// while the test reads it.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
