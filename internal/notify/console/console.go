// Package console is the console sink type: one readable line per event on
// relay's standard output, for the demo and for a first look at the rules.
package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/relay-energy/relay/internal/redact"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/termtext"
)

// Sink writes one readable line per event, such as
//
//	2026-11-21T08:00:00Z START  urgent  ST-1/INV-0042  E1023 Grid overvoltage  (alarm 123)
//	2026-11-21T08:02:00Z ACK    urgent  ST-1/INV-0042  E1023 Grid overvoltage  by Alice Li (U123) via slack — on my way  (alarm 123)
//	2026-11-21T09:05:00Z END    urgent  ST-1/INV-0042  E1023 Grid overvoltage  after 1h 5m  (alarm 123)
//
// The time is the occurrence for a start, the recovery for an end or
// invalid, and when someone acknowledged the alarm (or took that back,
// UNACK) for an ack. A start people can acknowledge is followed by an
// indented line with the command that does it (sinktype.AckLine): the
// console has no buttons. Text from the upstream and from people is
// escaped (termtext.Escape), so that a name cannot break the line, move the
// cursor or recolour the terminal.
type Sink struct {
	name string
	mu   sync.Mutex
	w    io.Writer
}

// NewConsole returns a console sink writing to w (the demo passes stdout).
func New(name string, w io.Writer) (*Sink, error) {
	if name == "" {
		return nil, errors.New("console sink: no name")
	}
	if w == nil {
		return nil, fmt.Errorf("console sink %q: no writer", name)
	}
	return &Sink{name: name, w: w}, nil
}

// Name returns the sink's name.
func (s *Sink) Name() string { return s.name }

// Send writes the event's lines in one Write. A failed write is retried.
func (s *Sink) Send(_ context.Context, d notify.Delivery) (notify.Result, error) {
	ev, err := d.Decoded()
	if err != nil {
		return notify.Result{}, fmt.Errorf("console sink %q: %w", s.name, err)
	}
	return s.writeText(Text(ev), d.EventID)
}

// CarriesAcks reports that the console writes a line when someone
// acknowledges an alarm, or takes that back. It keeps no memory of the
// start, so it writes that line for every ack and unack it is handed.
func (s *Sink) CarriesAcks() bool { return true }

// Remind writes one line saying that ev's alarm is still ongoing, headed
// REMIND, the time being the reminder's and the note (such as "Reminder,
// ongoing for 4h") leading the alarm's name:
//
//	2026-11-21T12:00:00Z REMIND urgent  ST-1/INV-0042  Reminder, ongoing for 4h: E1023 Grid overvoltage  (alarm 123)
func (s *Sink) Remind(_ context.Context, ev *event.Event, _ map[string]string) (notify.Result, error) {
	return s.writeText(line(ev, "REMIND")+"\n", "the reminder of "+ev.Data.OriginID)
}

// KeepsNoMemory reports that a console sink remembers nothing of its
// starts, so that alarm management reminds it of alarms it has no memory of.
func (s *Sink) KeepsNoMemory() bool { return true }

// writeText writes text, what names, in one Write, so that other output
// cannot cut into it. A failed write is retried.
func (s *Sink) writeText(text, what string) (notify.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := io.WriteString(s.w, text); err != nil {
		return notify.Result{Retry: true}, fmt.Errorf("console sink %q: writing %s: %w", s.name, what, err)
	}
	return notify.Result{}, nil
}

// Text returns what the console writes for an event: its line and, for a
// start people can acknowledge, an indented line with the command that
// does it, each ended by a newline.
func Text(ev *event.Event) string {
	text := Line(ev) + "\n"
	if ack := sinktype.AckLine(ev); ack != "" {
		text += "  " + termtext.Escape(ack) + "\n"
	}
	return text
}

// Line returns the console line of an event, without a newline.
func Line(ev *event.Event) string {
	return line(ev, strings.ToUpper(string(ev.Data.Transition)))
}

// line is the console line of ev headed by label.
func line(ev *event.Event, label string) string {
	at := ev.Time
	if t, err := time.Parse(time.RFC3339Nano, ev.Time); err == nil {
		at = t.UTC().Format(time.RFC3339)
	}
	// Where: the station's name reads better than its id; the id stands in
	// when the upstream sent no name.
	station := ev.Data.StationName
	if strings.TrimSpace(station) == "" {
		station = ev.Data.StationID
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-6s %-6s  %s / %s  %s", at, label, ev.Data.LevelName,
		termtext.Escape(station), termtext.Escape(ev.Data.DeviceSN), termtext.Escape(sinktype.What(ev)))
	if ev.Data.Transition != event.Start && ev.Data.DurationMs > 0 {
		fmt.Fprintf(&b, "  after %s", sinktype.HumanDuration(time.Duration(ev.Data.DurationMs)*time.Millisecond))
	}
	if ev.Data.Inferred {
		b.WriteString("  inferred")
	}
	if a := ev.Data.Ack; a != nil && (ev.Data.Transition == event.Ack || ev.Data.Transition == event.Unack) {
		b.WriteString("  by " + termtext.Escape(who(a)) + " via " + termtext.Escape(a.Via))
		if a.Comment != "" {
			b.WriteString(" — " + termtext.Escape(sinktype.Truncate(a.Comment, sinktype.MaxValue)))
		}
	}
	fmt.Fprintf(&b, "  (alarm %s)", termtext.Escape(ev.Data.OriginID))
	return b.String()
}

// who names the person of an acknowledgement: "Alice Li (U123)", or the id
// alone when the chat gave no name.
func who(a *event.AckInfo) string {
	if a.Name != "" && a.Name != a.By {
		return a.Name + " (" + a.By + ")"
	}
	return a.By
}

// Type is the console sink type.
var Type = sinktype.Type{
	Name:   "console",
	Doc:    "writes one readable line per event to relay's standard output",
	Decode: func(*sinktype.Decoder) sinktype.Config { return options{} },
}

type options struct{}

func (options) Target() string           { return "stdout" }
func (options) Summary() []string        { return nil }
func (options) Host(sinktype.Env) string { return "stdout" }
func (options) AddSecrets(*redact.Set)   {}
func (options) Destination() string      { return "" }

func (options) Build(_ context.Context, name string, deps sinktype.Deps) (notify.Sink, error) {
	return New(name, deps.Console)
}

func (options) Probe(context.Context, sinktype.Deps) (string, error) { return "writes to stdout", nil }

func (options) Render(ev *event.Event) ([]sinktype.Request, error) {
	return []sinktype.Request{{What: "stdout", Body: []byte(Text(ev))}}, nil
}
