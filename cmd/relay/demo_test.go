//go:build !nodemo

package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// feedLine matches a line of the demo's feed and captures its transition and
// level; afterHold matches the line that tells what became of a held start.
var (
	feedLine  = regexp.MustCompile(`^\d\d:\d\d:\d\d  (START|END|INVALID) +(urgent|severe|major|minor) +.* → `)
	afterHold = regexp.MustCompile(` → . [a-z]+:[a-z-]+ after its \S+ hold`)
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
	kinds, marks := checkFeedLines(t, head)
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
		Hold: 3 * time.Second, TransientAt: 300 * time.Millisecond, TransientFor: 300 * time.Millisecond,
		StormAt: time.Second, StormSize: 12, StormEnds: 300 * time.Millisecond,
		DigestThreshold: 10, DigestWindow: time.Minute,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan error, 1)
	go func() { done <- runDemo(ctx, &out, &errb, demoOptions{rate: 600, seed: 1, script: sc}) }()

	waitForOutput := func(what string, re *regexp.Regexp) []string {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if m := re.FindStringSubmatch(out.String()); m != nil {
				return m
			}
			select {
			case err := <-done:
				t.Fatalf("the demo stopped (%v) before printing %s:\n%s\nstderr:\n%s", err, what, out.String(), errb.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
		t.Fatalf("no %s within 60s:\n%s\nstderr:\n%s", what, out.String(), errb.String())
		return nil
	}

	// The silence command, run as printed, from "another terminal".
	cmdLine := waitForOutput("silence command", regexp.MustCompile(`(?m)^ +(RELAY_LISTEN=\S+ RELAY_ADMIN_TOKEN=\S+ go run \./cmd/relay silence add .*)$`))[1]
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
			if want := []string{"go", "run", "./cmd/relay", "silence"}; len(words) < i+len(want) || !slices.Equal(words[i:i+len(want)], want) {
				t.Fatalf("the printed command does not run relay silence: %q", cmdLine)
			}
			args = words[i+4:]
			break
		}
		t.Setenv(name, value)
	}
	var silOut, silErr syncBuffer
	if code := cmdSilence(ctx, args, &silOut, &silErr); code != 0 {
		t.Fatalf("the printed command %q: exit %d\n%s%s", cmdLine, code, silOut.String(), silErr.String())
	}
	added := regexp.MustCompile(`^silence (\S+) added \(active\): station_ids=\S+, .*\(10m\), by you\n$`).FindStringSubmatch(silOut.String())
	if added == nil {
		t.Fatalf("the printed command answered %q", silOut.String())
	}
	silOut = syncBuffer{}
	if code := cmdSilence(ctx, []string{"list"}, &silOut, &silErr); code != 0 || !strings.Contains(silOut.String(), added[1]) ||
		!strings.Contains(silOut.String(), "trying silences") {
		t.Fatalf("relay silence list, with the same variables: exit %d\n%s%s", code, silOut.String(), silErr.String())
	}

	// The storm's digest on the console, and its alarms marked as digested.
	waitForOutput("digest", regexp.MustCompile(`(?m)^  │ \S+ DIGEST Alarm storm: 1\d alarms since .*\n  │   .*ongoing\)\n(?:.*\n)*?  │   every alarm is listed below`))
	waitForOutput("digested alarm", regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  START .* ≡ console:people`))
	// The transient, withheld from the webhook with its end.
	waitForOutput("hold-down line", regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  START +urgent .* → ⊘ webhook:ops-webhook after its 3s hold: over within it, neither its start nor its end sent \(hold\)$`))

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the demo: %v\n%s", err, errb.String())
	}
	head, summary, ok := strings.Cut(out.String(), "\nsummary: ")
	if !ok {
		t.Fatalf("no summary:\n%s", out.String())
	}
	_, marks := checkFeedLines(t, head)
	checkSummary(t, summary, marks, strings.Count(head, "neither its start nor its end"))
	if n := marks["console:people"]["≡"]; n < sc.StormSize {
		t.Errorf("%d transitions in the console's digest, want at least the storm's %d:\n%s", n, sc.StormSize, head)
	}
	if n := marks["webhook:ops-webhook"]["⊘"]; n < 1 {
		t.Errorf("nothing withheld from the webhook:\n%s", head)
	}
}

// checkFeedLines checks the feed's lines in head: each transition once, the
// bus and the console on every one, the webhook on urgent and severe ones
// only. It counts the transitions by kind, and the marks each sink got, in
// the lines and in those after a hold.
func checkFeedLines(t *testing.T, head string) (kinds map[string]int, marks map[string]map[string]int) {
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
		if afterHold.MatchString(line) {
			continue
		}
		kinds[m[1]]++
		if !strings.Contains(sinks, "✓ nats:bus") {
			t.Errorf("the bus is missing from %q", line)
		}
		if !strings.Contains(sinks, "console:people") {
			t.Errorf("the console is missing from %q", line)
		}
		if urgent := m[2] == "urgent" || m[2] == "severe"; urgent != strings.Contains(sinks, "webhook:ops-webhook") {
			t.Errorf("the webhook should get urgent and severe alarms only: %q", line)
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
