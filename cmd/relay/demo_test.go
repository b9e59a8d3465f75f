//go:build !nodemo

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/console"
	"github.com/relay-energy/relay/internal/manage"
)

// feedLine matches a line of the demo's feed and captures its transition and
// level; afterHold matches the line that tells what became of a held start,
// escalated the line of a start that escalation sent on to a sink;
// escalating captures the escalating alarm's place in the demo's banner.
var (
	feedLine   = regexp.MustCompile(`^\d\d:\d\d:\d\d  (START|END|INVALID|ACK|UNACK) +(urgent|severe|major|minor) +.* → `)
	afterHold  = regexp.MustCompile(` → . [a-z]+:[a-z-]+ after its \S+ hold`)
	escalated  = regexp.MustCompile(` → . [a-z]+:[a-z-]+ escalated: `)
	escalating = regexp.MustCompile(`(?m)^ +\+\S+ an urgent (\S+) at (.+ / \S+), routed to the console only,$`)
)

// The demo prints each transition once, on one line naming the sinks that
// have it, after a legend, and a summary whose counts match the lines when it
// stops at the end of --for.
func TestDemoPrintsOneLinePerTransitionAndASummary(t *testing.T) {
	var out, errb syncBuffer
	code := cmdDemo(context.Background(), []string{"--for", "2s", "--rate", "600", "--seed", "1"}, &out, &errb)
	text := out.String()
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, text, errb.String())
	}
	if !strings.Contains(text, "Each line is one alarm transition") {
		t.Errorf("no legend:\n%s", text)
	}
	head, summary, ok := strings.Cut(text, "\nsummary: ")
	if !ok {
		t.Fatalf("no summary:\n%s", text)
	}
	kinds, marks := checkFeedLines(t, head, escalatingAlarm(t, head))
	// The simulator starts one alarm of each level before the relay's first
	// poll.
	if kinds["START"] < 4 {
		t.Fatalf("%d START lines, want at least the 4 alarms ongoing from the start:\n%s", kinds["START"], text)
	}
	total := kinds["START"] + kinds["END"] + kinds["INVALID"]
	wantCounts := fmt.Sprintf("%d transition%s (%d start, %d end, %d invalid)\n", total, map[bool]string{true: "", false: "s"}[total == 1],
		kinds["START"], kinds["END"], kinds["INVALID"])
	if !strings.HasPrefix(summary, wantCounts) {
		t.Errorf("summary does not count the lines printed (%s):\n%s", strings.TrimSpace(wantCounts), summary)
	}
	checkSummary(t, summary, marks, 0)
	// Within 2 s the webhook's 30 s hold is not over: it has nothing yet.
	if marks["webhook:ops-webhook"]["✓"] != 0 || !strings.Contains(head, "⏸ webhook:ops-webhook (hold 30s)") {
		t.Errorf("the webhook should hold urgent and severe starts for 30s:\n%s", head)
	}
	if want := fmt.Sprintf("the webhook receiver verified %d signatures and refused 0", marks["webhook:ops-webhook"]["✓"]); !strings.Contains(summary, want) {
		t.Errorf("summary lacks %q:\n%s", want, summary)
	}
}

// On a short script, the demo shows alarm management: a storm at one
// station becomes one digest on the console, a transient that clears within
// the webhook's hold sends it nothing, and the silence command it prints
// works against it as printed.
func TestDemoShowsADigestAHoldAndASilence(t *testing.T) {
	sc := demoScript{
		// The transient's end must be detected within the hold for it to be
		// withheld as over (else, still ongoing then, the silence this test
		// adds for its station withholds it): 10 s leaves a busy machine
		// room, where 3 s did not.
		Hold: 10 * time.Second, TransientAt: 300 * time.Millisecond, TransientFor: 300 * time.Millisecond,
		EscalateAt: 300 * time.Millisecond, EscalateAfter: time.Minute,
		StormAt: time.Second, StormSize: 12, StormEnds: 300 * time.Millisecond,
		DigestThreshold: 10, DigestWindow: time.Minute,
	}
	d := startDemo(t, demoOptions{rate: 600, seed: 1, script: sc})

	// The silence command, run as printed, from "another terminal".
	cmdLine := d.wait("silence command", regexp.MustCompile(`(?m)^ +(RELAY_LISTEN=\S+ RELAY_ADMIN_TOKEN=\S+ go run \./cmd/relay silence add .*)$`))[1]
	silOut := runPrinted(t, cmdLine, "silence", cmdSilence)
	added := regexp.MustCompile(`^silence (\S+) added \(active\): station_ids=\S+, .*\(10m\), by you\n$`).FindStringSubmatch(silOut)
	if added == nil {
		t.Fatalf("the printed command answered %q", silOut)
	}
	var listOut, listErr syncBuffer
	if code := cmdSilence(d.ctx, []string{"list"}, &listOut, &listErr); code != 0 || !strings.Contains(listOut.String(), added[1]) ||
		!strings.Contains(listOut.String(), "trying silences") {
		t.Fatalf("relay silence list, with the same variables: exit %d\n%s%s", code, listOut.String(), listErr.String())
	}

	// The storm's digest on the console, and its alarms marked as digested.
	d.wait("digest", regexp.MustCompile(`(?m)^  │ \S+ DIGEST Alarm storm: 1\d alarms since .*\n  │   .*ongoing\)\n(?:.*\n)*?  │   every alarm is listed below`))
	d.wait("digested alarm", regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  START .* ≡ console:people`))
	// The transient, withheld from the webhook with its end.
	d.wait("hold-down line", regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  START +urgent .* → ⊘ webhook:ops-webhook after its 10s hold: over within it, neither its start nor its end sent \(hold\)$`))

	checkDemoConsoleLink(t, d)

	head, summary := d.stop()
	_, marks := checkFeedLines(t, head, escalatingAlarm(t, head))
	checkSummary(t, summary, marks, strings.Count(head, "neither its start nor its end"))
	if n := marks["console:people"]["≡"]; n < sc.StormSize {
		t.Errorf("%d transitions in the console's digest, want at least the storm's %d:\n%s", n, sc.StormSize, head)
	}
	if n := marks["webhook:ops-webhook"]["⊘"]; n < 1 {
		t.Errorf("nothing withheld from the webhook:\n%s", head)
	}
}

// The demo's urgent battery alarm goes to the console only. Acknowledged
// with the command the demo prints when it starts, run as printed, it does
// not escalate: the console and the feed show the acknowledgement, and the
// escalation's time passes with nothing sent to the webhook. Taken back
// (relay unack), it escalates at once: the feed shows the start reaching the
// webhook, unacknowledged for 30 s, and its end following it there. The
// simulator and the relay run 10 times faster than the wall clock, the route
// as in the real demo.
func TestDemoEscalatesAnUrgentAlarmUnlessAcknowledgedWithTheCommandItPrints(t *testing.T) {
	const speed = 10
	sc := demoScript{
		Hold: 30 * time.Second, TransientAt: time.Second, TransientFor: time.Second,
		EscalateAt: time.Second, EscalateAfter: 30 * time.Second, EscalateFor: 65 * time.Second,
		DigestThreshold: 10, DigestWindow: time.Minute,
	}
	clk := clock.NewScaled(time.Now().UTC().Truncate(time.Second), speed)
	d := startDemo(t, demoOptions{rate: 60, seed: 1, script: sc, clock: clk})

	m := d.wait("acknowledge command", regexp.MustCompile(`(?m)^  ack       the urgent BMS_6002 at (.+ / \S+) started; unless acknowledged\n +within 30s it escalates to the webhook\. .*\n +(RELAY_LISTEN=\S+ RELAY_ADMIN_TOKEN=\S+ go run \./cmd/relay ack (\S+) .*)$`))
	seen := clk.Now()
	place, cmdLine, origin := regexp.QuoteMeta(m[1]), m[2], m[3]
	if out := runPrinted(t, cmdLine, "ack", cmdAck); out != origin+": Acknowledged.\n" {
		t.Fatalf("the printed command answered %q", out)
	}
	d.wait("the console's ACK line", regexp.MustCompile(`(?m)^  │ \S+ ACK +urgent +`+place+`  BMS_6002 .*  by you via api — on my way  \(alarm `+regexp.QuoteMeta(origin)+`\)$`))
	d.wait("the feed's ACK line", regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  ACK +urgent +`+place+`  BMS_6002 .*  by you via api: on my way  → (✓ nats:bus ✓ console:people|✓ console:people ✓ nats:bus)$`))

	// Past the step's time and an escalation pass after it, nothing went to
	// the webhook.
	for due := seen.Add(sc.EscalateAfter + manage.EscalateEvery + time.Second); clk.Now().Before(due); {
		time.Sleep(50 * time.Millisecond)
	}
	if text := d.out.String(); escalated.MatchString(text) || strings.Contains(text, "Escalated") {
		t.Fatalf("escalated although acknowledged:\n%s", text)
	}

	// Taken back, it escalates at the next pass.
	var unOut, unErr syncBuffer
	if code := cmdUnack(d.ctx, []string{origin, "--by", "you"}, &unOut, &unErr); code != 0 {
		t.Fatalf("relay unack, with the same variables: exit %d\n%s%s", code, unOut.String(), unErr.String())
	}
	d.wait("the feed's UNACK line", regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  UNACK +urgent +`+place+`  BMS_6002 .*  by you via api  → `))
	d.wait("escalation line", regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  START +urgent +`+place+`  BMS_6002 \S.*  → ✓ webhook:ops-webhook escalated: unacknowledged for 30s$`))
	d.wait("end at the webhook", regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  END +urgent +`+place+`  BMS_6002 .* after 1m5s  → ✓ nats:bus ✓ console:people ✓ webhook:ops-webhook$`))

	head, summary := d.stop()
	_, marks := checkFeedLines(t, head, escalatingAlarm(t, head))
	checkSummary(t, summary, marks, strings.Count(head, "neither its start nor its end"))
	if !strings.Contains(summary, "  1 start escalated to a sink, 1 acknowledgement, 1 taken back\n") {
		t.Errorf("the summary does not count the escalation and the acknowledgements:\n%s", summary)
	}
}

// checkDemoConsoleLink opens the operator console with the one-time link
// the demo printed at its start, once the escalating alarm started: the
// link opens a session, the Now page lists that alarm with the
// administrator's buttons, and the link opens nothing a second time.
func checkDemoConsoleLink(t *testing.T, d *demoRun) {
	t.Helper()
	link := d.wait("console link", regexp.MustCompile(`(?m)^  console   the operator console, in your browser: (http://\S+/console/login/once/\S+)\n +\(a one-time link, for 10m; afterwards http://\S+/console/ with the admin token \S+\)$`))[1]
	origin := d.wait("acknowledge command", regexp.MustCompile(`(?m)^ +RELAY_LISTEN=\S+ RELAY_ADMIN_TOKEN=\S+ go run \./cmd/relay ack (\S+) `))[1]
	browser := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Jar: jar, Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	get := func(c *http.Client, u string) (*http.Response, string) {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	c := browser()
	resp, _ := get(c, link)
	linkURL, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || resp.Cookies()[0].Name != console.SessionCookieName(false, linkURL.Host) {
		t.Fatalf("the demo's console link: %s with cookies %v, want 303 and the session cookie", resp.Status, resp.Cookies())
	}
	nowPage, _, _ := strings.Cut(link, "login/once/")
	resp, page := get(c, nowPage)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="alarm-`+origin+`"`) || !strings.Contains(page, ">Acknowledge</button>") {
		t.Fatalf("the Now page after the demo's link: %s, want the escalating alarm %s with the buttons:\n%s", resp.Status, origin, page)
	}
	if resp, _ := get(browser(), link); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("the demo's console link, a second time: %s with cookies %v, want 401 and no session", resp.Status, resp.Cookies())
	}
}

// demoRun is a demo running in the background.
type demoRun struct {
	t         *testing.T
	ctx       context.Context
	cancel    context.CancelFunc
	out, errb syncBuffer
	done      chan error
}

// startDemo runs the demo with o until the test ends or stop.
func startDemo(t *testing.T, o demoOptions) *demoRun {
	t.Helper()
	d := &demoRun{t: t, done: make(chan error, 1)}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	go func() { d.done <- runDemo(d.ctx, &d.out, &d.errb, o) }()
	t.Cleanup(func() {
		d.cancel()
		if d.done != nil {
			<-d.done
		}
	})
	return d
}

// wait returns the submatches of re in the demo's output once it shows, and
// fails the test when it does not within 60 s or the demo stops before.
func (d *demoRun) wait(what string, re *regexp.Regexp) []string {
	d.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(d.out.String()); m != nil {
			return m
		}
		select {
		case err := <-d.done:
			d.done = nil
			d.t.Fatalf("the demo stopped (%v) before printing %s:\n%s\nstderr:\n%s", err, what, d.out.String(), d.errb.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	d.t.Fatalf("no %s within 60s:\n%s\nstderr:\n%s", what, d.out.String(), d.errb.String())
	return nil
}

// stop stops the demo and returns its output up to the summary, and the
// summary.
func (d *demoRun) stop() (head, summary string) {
	d.t.Helper()
	d.cancel()
	err := <-d.done
	d.done = nil
	if err != nil {
		d.t.Fatalf("the demo: %v\n%s", err, d.errb.String())
	}
	head, summary, ok := strings.Cut(d.out.String(), "\nsummary: ")
	if !ok {
		d.t.Fatalf("no summary:\n%s", d.out.String())
	}
	return head, summary
}

// runPrinted runs a command the demo printed for "another terminal", as
// written: its variables set, then relay's command sub with its arguments.
// It returns what the command wrote, and fails the test when it fails.
func runPrinted(t *testing.T, cmdLine, sub string, cmd command) string {
	t.Helper()
	if strings.ContainsAny(cmdLine, "\\$`") {
		t.Fatalf("the printed command needs a shell's escapes or expansions: %q", cmdLine)
	}
	words, err := shellWords(cmdLine)
	if err != nil {
		t.Fatalf("%q: %v", cmdLine, err)
	}
	var args []string
	for i, w := range words {
		name, value, ok := strings.Cut(w, "=")
		if !ok || !regexp.MustCompile(`^[A-Z_]+$`).MatchString(name) {
			if want := []string{"go", "run", "./cmd/relay", sub}; len(words) < i+len(want) || !slices.Equal(words[i:i+len(want)], want) {
				t.Fatalf("the printed command does not run relay %s: %q", sub, cmdLine)
			}
			args = words[i+4:]
			break
		}
		t.Setenv(name, value)
	}
	var out, errb syncBuffer
	if code := cmd(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("the printed command %q: exit %d\n%s%s", cmdLine, code, out.String(), errb.String())
	}
	return out.String()
}

// escalatingAlarm returns how the feed names the demo's escalating alarm,
// "station / device  code", from its banner.
func escalatingAlarm(t *testing.T, head string) string {
	t.Helper()
	m := escalating.FindStringSubmatch(head)
	if m == nil {
		t.Fatalf("the banner does not tell of the escalating alarm:\n%s", head)
	}
	return m[2] + "  " + m[1] + " "
}

// checkFeedLines checks the feed's lines in head: each transition once, the
// bus and the console on every one, the webhook on urgent and severe ones
// only, but for the start of the escalating alarm (esc names it as the feed
// does), which reaches the webhook only by escalation, and for
// acknowledgements, which the webhook does not carry. It counts the
// transitions by kind, and the marks each sink got, in the lines and in
// those after a hold or an escalation.
func checkFeedLines(t *testing.T, head, esc string) (kinds map[string]int, marks map[string]map[string]int) {
	t.Helper()
	kinds = map[string]int{}
	marks = map[string]map[string]int{}
	seen := map[string]bool{}
	sinkMark := regexp.MustCompile(`([✓✗…≡⊘⏸]) ([a-z]+:[a-z-]+)`)
	for _, line := range strings.Split(head, "\n") {
		if strings.Contains(line, "<-") || strings.HasPrefix(line, "detected") {
			t.Errorf("a line of the old feed: %q", line)
		}
		m := feedLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if seen[line] {
			t.Errorf("printed twice: %q", line)
		}
		seen[line] = true
		_, sinks, _ := strings.Cut(line, " → ")
		for _, sm := range sinkMark.FindAllStringSubmatch(sinks, -1) {
			if marks[sm[2]] == nil {
				marks[sm[2]] = map[string]int{}
			}
			marks[sm[2]][sm[1]]++
		}
		if afterHold.MatchString(line) || escalated.MatchString(line) {
			continue
		}
		if !strings.Contains(sinks, "✓ nats:bus") {
			t.Errorf("the bus is missing from %q", line)
		}
		if !strings.Contains(sinks, "console:people") {
			t.Errorf("the console is missing from %q", line)
		}
		webhook := m[2] == "urgent" || m[2] == "severe"
		switch {
		case m[1] == "ACK" || m[1] == "UNACK":
			webhook = false
		case m[1] == "START" && m[2] == "urgent" && strings.Contains(line, esc):
			webhook = false
			kinds[m[1]]++
		default:
			kinds[m[1]]++
		}
		if webhook != strings.Contains(sinks, "webhook:ops-webhook") {
			t.Errorf("the webhook should get urgent and severe alarms only, the escalating one by escalation: %q", line)
		}
	}
	return kinds, marks
}

// checkSummary checks that the summary's row of each sink counts the marks
// the lines gave it, with no failed attempt or dead letter. Each of the
// swallowed transients (a line says its start and end were withheld) may
// have one more entry withheld: its end, when its own line marked it held.
func checkSummary(t *testing.T, summary string, marks map[string]map[string]int, swallowed int) {
	t.Helper()
	for _, sink := range []string{"nats:bus", "webhook:ops-webhook", "console:people"} {
		re := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(sink) + ` +(\d+) +(\d+) +(\d+) +0 +0 +\d+$`)
		m := re.FindStringSubmatch(summary)
		if m == nil {
			t.Errorf("summary has no row of %s with no failure or dead letter:\n%s", sink, summary)
			continue
		}
		for i, mark := range []string{"✓", "≡", "⊘"} {
			got, _ := strconv.Atoi(m[i+1])
			want, slack := marks[sink][mark], 0
			if mark == "⊘" && sink == "webhook:ops-webhook" {
				slack = swallowed
			}
			if got < want || got > want+slack {
				t.Errorf("summary: %s has %d in its column %d, the lines show %d %s (and %d transients withheld)", sink, got, i+1, want, mark, slack)
			}
		}
	}
}

// syncBuffer collects what the demo's goroutines write.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
