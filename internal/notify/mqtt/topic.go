package mqtt

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/relay-energy/relay/internal/event"
)

// DefaultTopic is the topic of an event when the rules set none: one level
// per tenant, station, level and transition, so that a subscriber picks
// what it wants with + and # (energy/alarms/+/+/0/# for every urgent one).
const DefaultTopic = "energy/alarms/{tenant}/{station}/{level}/{transition}"

// DefaultStateTopic is where retain_state keeps an ongoing alarm: one topic
// per alarm, so that a subscriber that connects late reads every ongoing
// alarm from the broker's retained messages.
const DefaultStateTopic = "energy/alarm-state/{tenant}/{station}/{alarm}"

// placeholders are the names a topic template may use, and the event's
// text each one stands for.
var placeholders = map[string]func(d *event.Data) string{
	"tenant":     func(d *event.Data) string { return d.TenantID },
	"station":    func(d *event.Data) string { return d.StationID },
	"system":     func(d *event.Data) string { return d.SystemID },
	"device":     func(d *event.Data) string { return d.DeviceSN },
	"level":      func(d *event.Data) string { return strconv.Itoa(d.Level) },
	"levelName":  func(d *event.Data) string { return d.LevelName },
	"transition": func(d *event.Data) string { return string(d.Transition) },
	"code":       func(d *event.Data) string { return d.EventCode },
	"alarm":      func(d *event.Data) string { return d.OriginID },
}

// Topic is a compiled topic template: literal text and {name}
// placeholders, each replaced by the event's value as one topic level.
type Topic struct {
	text  string
	parts []part
}

type part struct {
	literal string
	value   func(d *event.Data) string
}

// CompileTopic reads a topic template. It refuses an unknown placeholder,
// an unclosed brace, the wildcards + and # (a topic a message is published
// to names one topic), an empty level and a leading $ (the broker's own
// topics).
func CompileTopic(text string) (*Topic, error) {
	t := &Topic{text: text}
	rest := text
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			t.parts = append(t.parts, part{literal: rest})
			break
		}
		if open > 0 {
			t.parts = append(t.parts, part{literal: rest[:open]})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("%q: a { without its }", text)
		}
		name := rest[open+1 : open+end]
		value, ok := placeholders[name]
		if !ok {
			return nil, fmt.Errorf("%q: unknown placeholder {%s}: want one of {tenant}, {station}, {system}, {device}, {level}, {levelName}, {transition}, {code}, {alarm}", text, name)
		}
		t.parts = append(t.parts, part{value: value})
		rest = rest[open+end+1:]
	}
	for _, p := range t.parts {
		if strings.ContainsAny(p.literal, "+#}\x00") {
			return nil, fmt.Errorf("%q: + and # are wildcards of subscriptions, not of a topic a message is published to", text)
		}
	}
	switch {
	case text == "":
		return nil, fmt.Errorf("empty topic")
	case strings.HasPrefix(text, "$"):
		return nil, fmt.Errorf("%q: topics that begin with $ are the broker's own", text)
	case strings.HasPrefix(text, "/") || strings.HasSuffix(text, "/") || strings.Contains(text, "//"):
		return nil, fmt.Errorf("%q: an empty topic level (a leading, trailing or double /)", text)
	}
	return t, nil
}

// Text returns the template as written.
func (t *Topic) Text() string { return t.text }

// Render returns the topic of ev. Each placeholder's value is written as
// one topic level, whatever it holds: '/', '+', '#', '%' and NUL are
// escaped as %2F, %2B, %23, %25 and %00, an empty value is written "-" and
// a value that is "-" as %2D (so that two values never make one level), and
// a value that is not UTF-8 is refused (MQTT topics are UTF-8).
func (t *Topic) Render(ev *event.Event) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.value == nil {
			b.WriteString(p.literal)
			continue
		}
		v := p.value(&ev.Data)
		if !utf8.ValidString(v) {
			return "", fmt.Errorf("topic %q: a value of event %s is not UTF-8", t.text, ev.ID)
		}
		b.WriteString(Level(v))
	}
	topic := b.String()
	if len(topic) > 65535 {
		return "", fmt.Errorf("topic %q: %d bytes for event %s, over MQTT's 65,535", t.text, len(topic), ev.ID)
	}
	return topic, nil
}

// Level writes v as one topic level: see Render.
func Level(v string) string {
	switch v {
	case "":
		return "-"
	case "-":
		return "%2D" // not the empty value's level
	}
	var b strings.Builder
	for i, r := range v {
		switch {
		case r == '/', r == '+', r == '#', r == '%', r == '$' && i == 0,
			needsEscape(r):
			// Wildcards, separators, a leading $ (the broker's own topics),
			// and what brokers drop a connection for: control characters
			// and noncharacters.
			for _, c := range []byte(string(r)) {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// PropertyText writes v as the value of a user property (MQTT 5 UTF-8
// strings): '%', control characters and noncharacters, which brokers drop
// the connection for, are percent-escaped.
func PropertyText(v string) string {
	if !strings.ContainsFunc(v, needsEscape) && !strings.Contains(v, "%") {
		return v
	}
	var b strings.Builder
	for _, r := range v {
		if r == '%' || needsEscape(r) {
			for _, c := range []byte(string(r)) {
				fmt.Fprintf(&b, "%%%02X", c)
			}
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// needsEscape says whether brokers refuse r in a UTF-8 string: a control
// character or a noncharacter.
func needsEscape(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0xfdd0 && r <= 0xfdef) || r&0xfffe == 0xfffe
}
