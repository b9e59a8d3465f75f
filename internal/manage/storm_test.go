package manage_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A storm of 700 starts routed to one Slack channel: at most 10 top-level
// messages in its first 10 minutes, every alarm reachable from them (listed
// in a digest's thread), every end reflected (the digest's counts, and the
// end listed in its thread); the bus still gets all 700 starts.
func TestStorm700ToOneSlackChannel(t *testing.T) {
	if testing.Short() {
		t.Skip("a storm of 700 alarms")
	}
	s := newScenarioRules(t, `
sinks:
  - name: people
    type: slack
    channel: C1
  - name: bus
    type: nats
    subject: "alarms.{{.Transition}}"
    jetstream: true
    create_stream: STORM
routes:`+busRoute+`
  - name: people
    to: [people]
`)
	recs := make([]record, 700)
	for i := range recs {
		recs[i] = s.starts(fmt.Sprintf("storm-%03d", i), fmt.Sprintf("S%d", i%7), fmt.Sprintf("DEV-%03d", i), "E_GRID", i%4)
	}
	// The poller reads a storm a page at a time: 500, then 200 a slot later.
	s.apply(recs[:500]...)
	s.advance(6 * time.Second)
	s.apply(recs[500:]...)
	s.advance(2 * time.Minute)
	// 300 of them end over the next minutes.
	for i := 0; i < 300; i += 100 {
		var ends []record
		for _, r := range recs[i : i+100] {
			ends = append(ends, s.ends(r))
		}
		s.apply(ends...)
		s.advance(time.Minute)
	}
	s.advance(3 * time.Minute) // 10 minutes since the storm began, give or take the pace

	lines := s.slackLines()
	if n := s.topLevel(); n > 10 {
		t.Fatalf("%d top-level messages in the storm's first 10 minutes, want at most 10", n)
	}
	replies := strings.Join(filter(lines, "reply "), "\n")
	for _, r := range recs {
		if !strings.Contains(replies, r.device) {
			t.Fatalf("alarm %s (%s) is not reachable from the top-level messages", r.id, r.device)
		}
	}
	for _, r := range recs[:300] {
		if !mentions(filter(lines, "reply "), r.device, "resolved") {
			t.Fatalf("the end of %s (%s) is not reflected in the digest's thread", r.id, r.device)
		}
	}
	updates := filter(lines, "update ")
	if len(updates) == 0 || !strings.Contains(updates[len(updates)-1], "700 alarms") || !strings.Contains(updates[len(updates)-1], "400 ongoing") {
		t.Fatalf("the digest's last update does not show 700 alarms, 400 ongoing: %v", updates[max(0, len(updates)-1):])
	}
	t.Logf("Slack: %d top-level messages, %d thread replies, %d updates; %d calls in all",
		s.topLevel(), len(filter(lines, "reply ")), len(updates), len(lines))
	// The stream holds every transition: 700 starts, 300 ends.
	js, err := jetstream.New(s.conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, "STORM")
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter("alarms.>"))
		if err != nil {
			t.Fatal(err)
		}
		got := info.State.Subjects
		if got["alarms.start"] == 700 && got["alarms.end"] == 300 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the stream holds %v, want 700 starts and 300 ends", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// filter returns the lines that start with prefix.
func filter(lines []string, prefix string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}
