package sinktype

import (
	"fmt"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// The words and figures the default messages of chat sinks are made of, so
// that an alarm reads the same in every channel.

// MaxValue bounds each upstream value (a description, a name) in bytes in
// the default texts, so that one huge value cannot push the alarm's id and
// outcome out of a message that a vendor's size limit cuts.
const MaxValue = 256

// What names the alarm: "E1023 Grid overvoltage".
// A note of alarm management (a chattering count, a reminder) comes first:
// "Chattering, 3 starts in 10m: E021 Grid over-voltage".
func What(ev *event.Event) string {
	what := strings.TrimSpace(Truncate(ev.Data.EventCode, MaxValue) + " " + Truncate(ev.Data.EventDesc, MaxValue))
	if ev.Data.Note != "" {
		return ev.Data.Note + ": " + what
	}
	return what
}

// Where names the place: "Station A / Inverter 42".
func Where(ev *event.Event) string {
	station := Truncate(FirstNonEmpty(ev.Data.StationName, ev.Data.StationID), MaxValue)
	device := Truncate(FirstNonEmpty(ev.Data.DeviceName, ev.Data.DeviceSN), MaxValue)
	return strings.Trim(station+" / "+device, " /")
}

// Station is the station's name and id: "North Park (5001)", or the id.
func Station(ev *event.Event) string {
	id := Truncate(ev.Data.StationID, MaxValue)
	if ev.Data.StationName != "" {
		return Truncate(ev.Data.StationName, MaxValue) + " (" + id + ")"
	}
	return id
}

// Device is the device's name and serial number: "PCS 1 (SN0001)", or the
// serial number.
func Device(ev *event.Event) string {
	sn := Truncate(ev.Data.DeviceSN, MaxValue)
	if ev.Data.DeviceName != "" {
		return Truncate(ev.Data.DeviceName, MaxValue) + " (" + sn + ")"
	}
	return sn
}

// Outcome is "Resolved" for an end and "Cancelled" for an invalid (an alarm
// the upstream withdrew); "" for a start.
func Outcome(ev *event.Event) string {
	switch ev.Data.Transition {
	case event.End:
		return "Resolved"
	case event.Invalid:
		return "Cancelled"
	}
	return ""
}

// Mark is the emoji that carries a message's level where a channel shows no
// colour (a notification, a chat list): a circle by level for a start
// (red, orange, yellow, blue), a check mark for an end, a cross for a
// cancellation.
func Mark(ev *event.Event) string { return Shade(ev, "✅", "✖️", "🔴", "🟠", "🟡", "🔵") }

// Shade picks what marks ev in a channel (a colour, an emoji): end for an
// end, invalid for a cancellation, and for a start ByLevel of byLevel.
func Shade(ev *event.Event, end, invalid string, byLevel ...string) string {
	switch ev.Data.Transition {
	case event.End:
		return end
	case event.Invalid:
		return invalid
	}
	return ByLevel(ev.Data.Level, byLevel...)
}

// ByLevel returns the one of byLevel that level indexes (0 is urgent), and
// the last for any level past them.
func ByLevel(level int, byLevel ...string) string {
	if level >= 0 && level < len(byLevel) {
		return byLevel[level]
	}
	return byLevel[len(byLevel)-1]
}

// Headline is the one line of a message: "SEVERE alarm: E1023 Grid
// overvoltage at Station A / Inverter 42", or for an end "Resolved: SEVERE
// alarm E1023 ... at ...".
func Headline(ev *event.Event) string {
	level := strings.ToUpper(ev.Data.LevelName)
	if ev.Data.Transition == event.Start {
		return fmt.Sprintf("%s alarm: %s at %s", level, What(ev), Where(ev))
	}
	return fmt.Sprintf("%s: %s alarm %s at %s", Outcome(ev), level, What(ev), Where(ev))
}

// Ended says when and after how long an alarm ended: "at 2026-11-21
// 08:17:00 UTC, after 17m", with "(inferred)" when its recovery record was
// never found.
func Ended(ev *event.Event) string {
	s := "at " + ReadableTime(FirstNonEmpty(ev.Data.RecoveredAt, ev.Time))
	if ev.Data.DurationMs > 0 {
		s += ", after " + HumanDuration(time.Duration(ev.Data.DurationMs)*time.Millisecond)
	}
	if ev.Data.Inferred {
		s += " (inferred: the alarm left the upstream list and its recovery record was not found)"
	}
	return s
}

// Fields are the facts of an alarm as label and value, in the order every
// chat sink shows them; an end adds its outcome.
func Fields(ev *event.Event) [][2]string {
	return FieldsEscaped(ev, func(s string) string { return s })
}

// FieldsEscaped is Fields with escape applied to each upstream value (names,
// ids, the level's name) and not to the text relay adds around them, for a
// markup whose escaping would change that text too.
func FieldsEscaped(ev *event.Event, escape func(string) string) [][2]string {
	value := func(s string) string { return escape(Truncate(s, MaxValue)) }
	station, device := value(ev.Data.StationID), value(ev.Data.DeviceSN)
	if ev.Data.StationName != "" {
		station = value(ev.Data.StationName) + " (" + station + ")"
	}
	if ev.Data.DeviceName != "" {
		device = value(ev.Data.DeviceName) + " (" + device + ")"
	}
	out := [][2]string{
		{"Level", value(ev.Data.LevelName)},
		{"Since", ReadableTime(ev.Data.OccurredAt)},
		{"Station", station},
		{"Device", device},
		{"Alarm", value(ev.Data.OriginID)},
	}
	if ev.Data.Transition != event.Start {
		out = append(out, [2]string{Outcome(ev), Ended(ev)})
	}
	return out
}

// ReadableTime writes an event time as "2026-11-21 08:00:00 UTC".
func ReadableTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// HumanDuration writes d as "2d 3h 4m", "1h 5m" or "45s".
func HumanDuration(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return d.String()
	}
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	hours := d / time.Hour
	d -= hours * time.Hour
	minutes := d / time.Minute
	seconds := (d - minutes*time.Minute) / time.Second
	if days > 0 {
		seconds = 0
	}
	var parts []string
	for _, p := range []struct {
		n    time.Duration
		unit string
	}{{days, "d"}, {hours, "h"}, {minutes, "m"}, {seconds, "s"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d%s", p.n, p.unit))
		}
	}
	return strings.Join(parts, " ")
}

// FirstNonEmpty returns the first of ss that is not empty.
func FirstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// Truncate cuts s to at most n bytes at a rune boundary, ending it with "…"
// when it was cut, for vendors that refuse longer texts.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "…"
	cut := n - len(more)
	for cut > 0 && cut < len(s) && !utf8RuneStart(s[cut]) {
		cut--
	}
	if cut < 0 {
		cut = 0
	}
	return s[:cut] + more
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// FitText cuts *text, as little as it can, so that the body encode makes
// with it is at most limit bytes; a text that fits is left whole. The JSON
// of a text may be up to six times as long as the text (control
// characters), so the cut is searched for, as DigestFit searches.
func FitText(text *string, limit int, encode func() ([]byte, error)) {
	full := *text
	n := DigestFit(len(full), func(n int) bool {
		*text = Truncate(full, n)
		b, err := encode()
		return err == nil && len(b) <= limit
	})
	*text = Truncate(full, n)
}

// OneLine returns s with its line breaks turned to spaces, and trimmed: a
// title, a summary.
func OneLine(s string) string {
	return strings.TrimSpace(strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s))
}

// PlainLine returns s with every run of white space turned to one space:
// a value substituted into a plain-text title.
func PlainLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// EscapeMarkup makes s plain text in a Markdown that reads HTML (tags and
// character references): line breaks become spaces, so that a value cannot
// start a heading or a line of its own; &, < and > become &amp;, &lt; and
// &gt;, so that an upstream "&amp;" is shown as written; and each rune of
// syntax becomes quote of it.
func EscapeMarkup(s, syntax string, quote func(r rune) string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\r' || r == '\n':
			b.WriteByte(' ')
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case strings.ContainsRune(syntax, r):
			b.WriteString(quote(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
