//go:build !nodemo

package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// feedLine matches a line of the demo's feed and captures its transition.
var feedLine = regexp.MustCompile(`^\d\d:\d\d:\d\d  (START|END|INVALID) +(urgent|severe|major|minor) +.* → `)

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

	kinds := map[string]int{}
	seen := map[string]bool{}
	marks := map[string]int{}
	for _, line := range strings.Split(head, "\n") {
		if strings.Contains(line, "<-") || strings.HasPrefix(line, "detected") || strings.Contains(line, "console") {
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
		kinds[m[1]]++
		_, sinks, _ := strings.Cut(line, " → ")
		if !strings.Contains(sinks, "nats:bus") {
			t.Errorf("the bus is missing from %q", line)
		}
		if urgent := m[2] == "urgent" || m[2] == "severe"; urgent != strings.Contains(sinks, "webhook:ops-webhook") {
			t.Errorf("the webhook should get urgent and severe alarms only: %q", line)
		}
		marks["nats:bus"] += strings.Count(sinks, "✓ nats:bus")
		marks["webhook:ops-webhook"] += strings.Count(sinks, "✓ webhook:ops-webhook")
	}
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
	for sink, n := range marks {
		re := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(sink) + ` +(\d+) +0 +0 +0$`)
		m := re.FindStringSubmatch(summary)
		if m == nil {
			t.Errorf("summary has no row of %s with no failure, dead letter or undelivered event:\n%s", sink, summary)
			continue
		}
		if got, _ := strconv.Atoi(m[1]); got != n {
			t.Errorf("summary: %s delivered %d, the lines show %d", sink, got, n)
		}
	}
	if want := fmt.Sprintf("the webhook receiver verified %d signatures and refused 0", marks["webhook:ops-webhook"]); !strings.Contains(summary, want) {
		t.Errorf("summary lacks %q:\n%s", want, summary)
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
