package feed_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/feed"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

// Every event goes to the bus; urgent and severe ones to ops as well.
const rulesYAML = `
sinks:
  - {name: bus, type: nats, jetstream: true}
  - {name: ops, type: webhook, url: "http://127.0.0.1:9/alarms"}
routes:
  - {name: all, to: [bus], continue: true}
  - {name: urgent, match: {levels: [0, 1]}, to: [ops]}
`

var t0 = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

func newFeed(t *testing.T, clk clock.Clock) (*feed.Feed, *syncBuilder) {
	t.Helper()
	rules, err := route.Parse("rules.yaml", []byte(rulesYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuilder{}
	return feed.New(out, feed.Options{Rules: rules, Clock: clk, Location: time.UTC, Wait: 10 * time.Second}), out
}

func alarm(origin string, level int) event.Alarm {
	return event.Alarm{
		OriginID: origin, Status: event.StatusOngoing, Level: level, EventCode: "E1023", EventDesc: "Grid overvoltage",
		TenantID: "T1", StationID: "ST-1", StationName: "Solar Park", DeviceSN: "INV-1", OccurredAt: t0,
	}
}

func start(origin string, level int) event.Event {
	return event.New(alarm(origin, level), event.Start, t0, false)
}

func end(origin string, level int, after time.Duration) event.Event {
	a := alarm(origin, level)
	a.Status, a.RecoveredAt = event.StatusEnded, t0.Add(after)
	return event.New(a, event.End, t0.Add(after), false)
}

func report(sink string, ev event.Event, fate deliver.Fate, attempts int) deliver.Report {
	return deliver.Report{Sink: sink, Entry: store.Entry{Sink: sink, EventID: ev.ID, OriginID: ev.Data.OriginID,
		Transition: ev.Data.Transition}, Fate: fate, Attempts: attempts}
}

func TestOneLinePerTransitionOnceEverySinkHasIt(t *testing.T) {
	f, out := newFeed(t, clock.NewFake(t0))
	s1, e2 := start("a1", 0), end("a2", 3, 65*time.Second)

	// The bus delivered a1's start before the poller's callback told of it.
	f.Report(report("bus", s1, deliver.Delivered, 1))
	f.Events([]event.Event{s1, e2})
	f.Report(report("ops", s1, deliver.Retrying, 1))
	if got := out.String(); got != "" {
		t.Fatalf("lines before every sink has the event:\n%s", got)
	}
	f.Report(report("ops", s1, deliver.Delivered, 2))
	f.Report(report("bus", e2, deliver.DeadLettered, 3))

	want := "08:00:00  START    urgent  Solar Park / INV-1  E1023 Grid overvoltage  → ✓ nats:bus ✓ webhook:ops (2 attempts)\n" +
		"08:01:05  END      minor   Solar Park / INV-1  E1023 Grid overvoltage  after 1m5s  → ✗ nats:bus (3 attempts)\n"
	if got := out.String(); got != want {
		t.Fatalf("feed\n got:\n%s\nwant:\n%s", got, want)
	}
	f.Close()
	wantSummary := `
summary: 2 transitions (1 start, 1 end, 0 invalid)
  SINK         DELIVERED  DIGESTED  WITHHELD  FAILED ATTEMPTS  DEAD LETTERS  NOT DELIVERED
  nats:bus             1         0         0                0             1              0
  webhook:ops          1         0         0                1             0              0
`
	if got := strings.TrimPrefix(out.String(), want); got != wantSummary {
		t.Errorf("summary\n got:\n%s\nwant:\n%s", got, wantSummary)
	}
}

func TestALineWaitsForItsDeliveriesAtMostWait(t *testing.T) {
	clk := clock.NewFake(t0)
	f, out := newFeed(t, clk)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	s1 := start("a1", 1)
	f.Events([]event.Event{s1})
	f.Report(report("bus", s1, deliver.Delivered, 1))
	f.Report(report("ops", s1, deliver.Retrying, 1))
	if !clk.BlockUntil(1, 5*time.Second) {
		t.Fatal("Run did not wait on the clock")
	}
	// Run looks every quarter of the wait: the line is out between 10s and
	// 12.5s after the transition.
	clk.Advance(9 * time.Second)
	if !clk.BlockUntil(1, 5*time.Second) {
		t.Fatal("Run did not wait on the clock again")
	}
	if got := out.String(); got != "" {
		t.Fatalf("printed before the wait was over:\n%s", got)
	}
	clk.Advance(3500 * time.Millisecond)
	want := "08:00:00  START    severe  Solar Park / INV-1  E1023 Grid overvoltage  → ✓ nats:bus … webhook:ops\n"
	deadline := time.Now().Add(5 * time.Second)
	for out.String() == "" && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	if got := out.String(); got != want {
		t.Fatalf("feed\n got: %q\nwant: %q", got, want)
	}
	// The delivery that comes later is counted, not printed again.
	f.Report(report("ops", s1, deliver.Delivered, 2))
	cancel()
	wg.Wait()
	f.Close()
	if got := strings.Count(out.String(), "START"); got != 1 {
		t.Fatalf("%d START lines, want 1:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), "  webhook:ops          1         0         0                1             0              0\n") {
		t.Fatalf("summary does not count the late delivery:\n%s", out.String())
	}
}

func TestCloseWritesWhatIsStillPendingAndTheSummary(t *testing.T) {
	f, out := newFeed(t, clock.NewFake(t0))
	s1 := start("a1", 2)
	f.Events([]event.Event{s1})
	f.Close()
	for _, want := range []string{
		"08:00:00  START    major   Solar Park / INV-1  E1023 Grid overvoltage  → … nats:bus\n",
		"summary: 1 transition (1 start, 0 end, 0 invalid)",
		"  nats:bus             0         0         0                0             0              1\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestUpstreamTextIsEscaped(t *testing.T) {
	f, out := newFeed(t, clock.NewFake(t0))
	a := alarm("a1", 3)
	a.StationName, a.DeviceSN, a.EventDesc = "北区储能站\x1b[2J", "BMS\r-3", "\x1b[31mOver-temperature \u202e过温"
	ev := event.New(a, event.Start, t0, false)
	f.Events([]event.Event{ev})
	f.Report(report("bus", ev, deliver.Delivered, 1))
	want := `08:00:00  START    minor   北区储能站\x1b[2J / BMS\r-3  E1023 \x1b[31mOver-temperature \u202e过温  → ✓ nats:bus` + "\n"
	if got := out.String(); got != want {
		t.Fatalf("feed\n got: %q\nwant: %q", got, want)
	}
}

// syncBuilder is a strings.Builder safe for the feed's goroutines.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
