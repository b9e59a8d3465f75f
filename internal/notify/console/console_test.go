package console_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/notify/console"
	"github.com/relay-energy/relay/internal/testwait"

	"github.com/relay-energy/relay/internal/event"
)

func TestConsoleLine(t *testing.T) {
	at := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	a := delivertest.Alarm("123", 0, event.StatusOngoing, at, time.Time{})
	ended := a
	ended.Status, ended.RecoveredAt = event.StatusEnded, at.Add(65*time.Minute)
	minor := a
	minor.Level, minor.EventDesc = 3, "Fan\nfault"
	noName := a
	noName.StationName = ""
	for _, tc := range []struct {
		name string
		ev   event.Event
		want string
	}{
		{"start", event.New(a, event.Start, at, false),
			"2026-11-21T08:00:00Z START  urgent  Solar Park North / INV-0042  E1023 Grid overvoltage  (alarm 123)"},
		{"end", event.New(ended, event.End, at, false),
			"2026-11-21T09:05:00Z END    urgent  Solar Park North / INV-0042  E1023 Grid overvoltage  after 1h 5m  (alarm 123)"},
		{"inferred end", event.New(ended, event.End, at, true),
			"2026-11-21T09:05:00Z END    urgent  Solar Park North / INV-0042  E1023 Grid overvoltage  after 1h 5m  inferred  (alarm 123)"},
		{"invalid", event.New(ended, event.Invalid, at, false),
			"2026-11-21T09:05:00Z INVALID urgent  Solar Park North / INV-0042  E1023 Grid overvoltage  after 1h 5m  (alarm 123)"},
		{"the station id stands in for a missing name", event.New(noName, event.Start, at, false),
			"2026-11-21T08:00:00Z START  urgent  ST-1 / INV-0042  E1023 Grid overvoltage  (alarm 123)"},
		{"control characters are escaped, so they cannot break the line", event.New(minor, event.Start, at, false),
			`2026-11-21T08:00:00Z START  minor   Solar Park North / INV-0042  E1023 Fan\nfault  (alarm 123)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := console.Line(&tc.ev); got != tc.want {
				t.Fatalf("\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// runConsole runs a relay whose one sink, "console", writes to out; stop
// stops its deliverer.
func runConsole(t *testing.T, out io.Writer) (f *delivertest.Fixture, stop func()) {
	t.Helper()
	f = delivertest.New(t, "console")
	sink, err := console.New("console", out)
	if err != nil {
		t.Fatal(err)
	}
	_, stop = f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: sink})
	return f, stop
}

// An upstream alarm whose names hold an escape sequence, a carriage return and
// a bidi override reaches the console escaped, with its Chinese text readable.
func TestConsoleSinkEscapesTerminalControlsInUpstreamText(t *testing.T) {
	var out strings.Builder
	f, stop := runConsole(t, &out)
	a := delivertest.Alarm("a\x1b[2J1", 0, event.StatusOngoing, f.Clock.Now().Add(-time.Minute), time.Time{})
	a.EventDesc = "\x1b[31mOver-temperature\x1b[0m\rall clear \u202e电池过温"
	a.StationName = "北区储能站\b\b"
	a.DeviceSN = "BMS-0003\u2028"
	f.Apply(a)
	testwait.For(t, 5*time.Second, "the console line", func() bool { return len(f.Pending("console")) == 0 })
	stop()
	want := `2026-11-21T07:59:00Z START  urgent  北区储能站\b\b / BMS-0003\u2028  E1023 \x1b[31mOver-temperature\x1b[0m\rall clear \u202e电池过温  (alarm a\x1b[2J1)` + "\n"
	if got := out.String(); got != want {
		t.Fatalf("console output\n got %q\nwant %q", got, want)
	}
}

func TestConsoleSinkWritesOneLinePerEvent(t *testing.T) {
	var out strings.Builder
	f, stop := runConsole(t, &out)
	f.Start("a1", 1)
	f.Start("a2", 2)
	testwait.For(t, 5*time.Second, "both lines", func() bool { return len(f.Pending("console")) == 0 })
	stop()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "START  severe  Solar Park North / INV-0042") || !strings.HasSuffix(lines[1], "(alarm a2)") {
		t.Fatalf("console output:\n%s", out.String())
	}

	broken, err := console.New("console", failingWriter{})
	if err != nil {
		t.Fatal(err)
	}
	f.Start("a3", 0)
	res, err := broken.Send(context.Background(), f.Delivery("console"))
	if err == nil || !res.Retry {
		t.Fatalf("Send on a broken writer = %+v, %v; want a retryable error", res, err)
	}
}
