package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Marshal returns the event's JSON bytes: exactly what encoding/json writes
// for the Event (TestMarshalIsEncodingJSON and FuzzMarshalIsEncodingJSON
// compare them), written field by field because this runs once per event
// in the store's transaction, where encoding/json's reflection and its
// byte-at-a-time scanner of data.alarm were a third of the cost. The
// upstream record in data.alarm is written as received, compacted, with
// the characters HTML treats specially escaped; a record that is not valid
// JSON makes this fail.
func (e *Event) Marshal() ([]byte, error) {
	d := &e.Data
	// The keys, quotes, numbers and braces take about 530 bytes; every
	// string is counted as it is, and the record with room for escapes, so
	// that the bytes are allocated once.
	n := 576 + len(e.SpecVersion) + len(e.ID) + len(e.Source) + len(e.Type) + len(e.Subject) + len(e.Time) + len(e.DataContentType) +
		len(e.TraceParent) + len(e.TraceState) + len(d.Transition) + len(d.LevelName) + len(d.OriginID) +
		len(d.EventCode) + len(d.EventDesc) + len(d.EventType) + len(d.TenantID) + len(d.StationID) + len(d.StationName) +
		len(d.SystemID) + len(d.DeviceSN) + len(d.DeviceName) + len(d.DeviceTemplateCode) +
		len(d.OccurredAt) + len(d.RecoveredAt) + len(d.DetectedAt) + len(d.Alarm) + len(d.Alarm)/16
	b := make([]byte, 0, n)
	b = appendField(b, `{"specversion":`, e.SpecVersion)
	b = appendField(b, `,"id":`, e.ID)
	b = appendField(b, `,"source":`, e.Source)
	b = appendField(b, `,"type":`, e.Type)
	b = appendField(b, `,"subject":`, e.Subject)
	b = appendField(b, `,"time":`, e.Time)
	b = appendField(b, `,"datacontenttype":`, e.DataContentType)
	if e.TraceParent != "" {
		b = appendField(b, `,"traceparent":`, e.TraceParent)
	}
	if e.TraceState != "" {
		b = appendField(b, `,"tracestate":`, e.TraceState)
	}
	b = appendField(b, `,"data":{"transition":`, string(d.Transition))
	b = strconv.AppendInt(append(b, `,"status":`...), int64(d.Status), 10)
	b = strconv.AppendInt(append(b, `,"level":`...), int64(d.Level), 10)
	b = appendField(b, `,"levelName":`, d.LevelName)
	b = appendField(b, `,"originId":`, d.OriginID)
	b = appendField(b, `,"eventCode":`, d.EventCode)
	b = appendField(b, `,"eventDesc":`, d.EventDesc)
	if d.EventType != "" {
		b = appendField(b, `,"eventType":`, d.EventType)
	}
	b = appendField(b, `,"tenantId":`, d.TenantID)
	b = appendField(b, `,"stationId":`, d.StationID)
	b = appendField(b, `,"stationName":`, d.StationName)
	b = appendField(b, `,"systemId":`, d.SystemID)
	b = appendField(b, `,"deviceSn":`, d.DeviceSN)
	b = appendField(b, `,"deviceName":`, d.DeviceName)
	b = appendField(b, `,"deviceTemplateCode":`, d.DeviceTemplateCode)
	b = appendField(b, `,"occurredAt":`, d.OccurredAt)
	if d.RecoveredAt != "" {
		b = appendField(b, `,"recoveredAt":`, d.RecoveredAt)
	}
	b = strconv.AppendInt(append(b, `,"durationMs":`...), d.DurationMs, 10)
	b = appendField(b, `,"detectedAt":`, d.DetectedAt)
	b = strconv.AppendBool(append(b, `,"inferred":`...), d.Inferred)
	b = append(b, `,"alarm":`...)
	if d.Alarm == nil {
		b = append(b, "null"...)
	} else {
		var err error
		if b, err = appendCompactJSON(b, d.Alarm); err != nil {
			return nil, fmt.Errorf("event %s: data.alarm: %w", e.ID, err)
		}
	}
	if d.Ack != nil {
		// Rare (one per acknowledgement): encoding/json writes it.
		a, err := json.Marshal(d.Ack)
		if err != nil {
			return nil, fmt.Errorf("event %s: data.ack: %w", e.ID, err)
		}
		b = append(append(b, `,"ack":`...), a...)
	}
	if d.Escalation != nil {
		a, err := json.Marshal(d.Escalation)
		if err != nil {
			return nil, fmt.Errorf("event %s: data.escalation: %w", e.ID, err)
		}
		b = append(append(b, `,"escalation":`...), a...)
	}
	return append(b, "}}"...), nil
}

func appendField(b []byte, key, value string) []byte {
	return appendString(append(b, key...), value)
}

const hex = "0123456789abcdef"

// htmlSafe reports the ASCII bytes a JSON string holds as they are:
// printable, and neither a quote, a backslash nor <, > or &.
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString appends s as a JSON string, escaped as encoding/json escapes
// it: HTML's special characters, U+2028 and U+2029 as \u escapes, invalid
// UTF-8 as U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if htmlSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}

// maxDepth is encoding/json's limit on nested objects and arrays.
const maxDepth = 10000

var errSyntax = errors.New("invalid JSON")

// appendCompactJSON appends src, one JSON value, without the whitespace
// between its tokens and with <, >, &, U+2028 and U+2029 escaped inside its
// strings, as encoding/json writes a json.RawMessage; src that is not
// exactly one valid JSON value is an error.
func appendCompactJSON(b, src []byte) ([]byte, error) {
	c := compactor{src: src, out: b}
	c.space()
	if err := c.value(0); err != nil {
		return b, err
	}
	c.space()
	if c.i != len(src) {
		return b, fmt.Errorf("%w: data after the value at offset %d", errSyntax, c.i)
	}
	return c.out, nil
}

type compactor struct {
	src []byte
	i   int
	out []byte
}

func (c *compactor) fail(what string) error {
	if c.i >= len(c.src) {
		return fmt.Errorf("%w: unexpected end, %s", errSyntax, what)
	}
	return fmt.Errorf("%w: %s at offset %d", errSyntax, what, c.i)
}

func (c *compactor) space() {
	for c.i < len(c.src) {
		switch c.src[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *compactor) value(depth int) error {
	if c.i >= len(c.src) {
		return c.fail("want a value")
	}
	switch ch := c.src[c.i]; {
	case ch == '{':
		return c.object(depth + 1)
	case ch == '[':
		return c.array(depth + 1)
	case ch == '"':
		return c.string()
	case ch == '-' || ch >= '0' && ch <= '9':
		return c.number()
	case ch == 't':
		return c.literal("true")
	case ch == 'f':
		return c.literal("false")
	case ch == 'n':
		return c.literal("null")
	}
	return c.fail("want a value")
}

func (c *compactor) object(depth int) error {
	return c.container(depth, '}', func() error {
		if c.i >= len(c.src) || c.src[c.i] != '"' {
			return c.fail("want a key")
		}
		if err := c.string(); err != nil {
			return err
		}
		c.space()
		if c.i >= len(c.src) || c.src[c.i] != ':' {
			return c.fail("want ':'")
		}
		c.out = append(c.out, ':')
		c.i++
		c.space()
		return c.value(depth)
	})
}

func (c *compactor) array(depth int) error {
	return c.container(depth, ']', func() error { return c.value(depth) })
}

// container copies an object or an array, whose opening bracket is at c.i:
// its members, each copied by member, separated by commas, up to close.
func (c *compactor) container(depth int, close byte, member func() error) error {
	if depth > maxDepth {
		return c.fail("nested too deep")
	}
	c.out = append(c.out, c.src[c.i])
	c.i++
	c.space()
	if c.i < len(c.src) && c.src[c.i] == close {
		c.out = append(c.out, close)
		c.i++
		return nil
	}
	for {
		if err := member(); err != nil {
			return err
		}
		c.space()
		if c.i >= len(c.src) || c.src[c.i] != ',' && c.src[c.i] != close {
			return c.fail("want ',' or '" + string(close) + "'")
		}
		ch := c.src[c.i]
		c.out = append(c.out, ch)
		c.i++
		if ch == close {
			return nil
		}
		c.space()
	}
}

// string copies a string as it is (its bytes are not checked as UTF-8, as
// encoding/json's scanner does not), escaping <, >, &, U+2028 and U+2029.
func (c *compactor) string() error {
	src := c.src
	start := c.i
	c.i++
	for c.i < len(src) {
		ch := src[c.i]
		switch {
		case ch == '"':
			c.i++
			c.out = append(c.out, src[start:c.i]...)
			return nil
		case ch == '\\':
			if c.i+1 >= len(src) {
				c.i++
				return c.fail("unfinished escape")
			}
			switch src[c.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				c.i += 2
			case 'u':
				for k := 2; k < 6; k++ {
					if c.i+k >= len(src) || !isHex(src[c.i+k]) {
						c.i += k
						return c.fail("want a hex digit in a \\u escape")
					}
				}
				c.i += 6
			default:
				c.i++
				return c.fail("invalid escape")
			}
		case ch < 0x20:
			return c.fail("control character in a string")
		case ch == '<' || ch == '>' || ch == '&':
			c.out = append(c.out, src[start:c.i]...)
			c.out = append(c.out, '\\', 'u', '0', '0', hex[ch>>4], hex[ch&0xf])
			c.i++
			start = c.i
		case ch == 0xe2 && c.i+2 < len(src) && src[c.i+1] == 0x80 && src[c.i+2]&^1 == 0xa8:
			c.out = append(c.out, src[start:c.i]...)
			c.out = append(c.out, '\\', 'u', '2', '0', '2', hex[src[c.i+2]&0xf])
			c.i += 3
			start = c.i
		default:
			c.i++
		}
	}
	return c.fail("unfinished string")
}

func isHex(ch byte) bool {
	return ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f' || ch >= 'A' && ch <= 'F'
}

func isDigit(ch byte) bool { return ch >= '0' && ch <= '9' }

func (c *compactor) number() error {
	src := c.src
	start := c.i
	if src[c.i] == '-' {
		c.i++
	}
	switch {
	case c.i < len(src) && src[c.i] == '0':
		c.i++
	case c.i < len(src) && src[c.i] >= '1' && src[c.i] <= '9':
		for c.i < len(src) && isDigit(src[c.i]) {
			c.i++
		}
	default:
		return c.fail("want a digit")
	}
	if c.i < len(src) && src[c.i] == '.' {
		c.i++
		if c.i >= len(src) || !isDigit(src[c.i]) {
			return c.fail("want a digit after '.'")
		}
		for c.i < len(src) && isDigit(src[c.i]) {
			c.i++
		}
	}
	if c.i < len(src) && (src[c.i] == 'e' || src[c.i] == 'E') {
		c.i++
		if c.i < len(src) && (src[c.i] == '+' || src[c.i] == '-') {
			c.i++
		}
		if c.i >= len(src) || !isDigit(src[c.i]) {
			return c.fail("want a digit in an exponent")
		}
		for c.i < len(src) && isDigit(src[c.i]) {
			c.i++
		}
	}
	c.out = append(c.out, src[start:c.i]...)
	return nil
}

func (c *compactor) literal(word string) error {
	if len(c.src)-c.i < len(word) || string(c.src[c.i:c.i+len(word)]) != word {
		return c.fail("want " + word)
	}
	c.out = append(c.out, word...)
	c.i += len(word)
	return nil
}
