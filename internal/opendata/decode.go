package opendata

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The upstream is decoded tolerantly (docs/design.md §3): ids arrive as
// strings or numbers and are kept as strings, timestamps as epoch-ms strings
// or numbers, metric values as numbers or strings. A field of an unexpected
// type reads as empty rather than failing its record, unknown fields are
// ignored here and kept in each record's Raw.

// fields is one JSON object, by key, each value as received.
type fields map[string]json.RawMessage

// objectFields decodes b as a JSON object.
func objectFields(b []byte) (fields, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	var f fields
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	return f, nil
}

// str returns the value of key as text: a string as is, a number or boolean
// as written, and "" for null, an object, an array or an absent key.
func (f fields) str(key string) string { return scalarText(f[key]) }

func scalarText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	case '{', '[', 'n':
		return ""
	}
	return string(raw)
}

// int returns the value of key as an integer, from a number or a numeric
// string; ok is false when it is absent or not a whole number.
func (f fields) int(key string) (int, bool) {
	s := strings.TrimSpace(f.str(key))
	if n, err := strconv.Atoi(s); err == nil {
		return n, true
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v != math.Trunc(v) || math.Abs(v) > math.MaxInt32 {
		return 0, false
	}
	return int(v), true
}

// intOr returns the integer value of key, or def when it has none.
func (f fields) intOr(key string, def int) int {
	if n, ok := f.int(key); ok {
		return n
	}
	return def
}

// bool returns the value of key as a boolean: true, "true" and 1 read as true.
func (f fields) bool(key string) bool {
	switch strings.ToLower(strings.TrimSpace(f.str(key))) {
	case "true", "1":
		return true
	}
	return false
}

// maxMillis is the last millisecond of the year 9999: later times cannot be
// written as RFC 3339, so they read as absent.
const maxMillis = 253402300799999

// millis returns the value of key as an epoch-millisecond time in UTC, from a
// number or a numeric string; the zero time when it is absent, not positive,
// or out of range.
func (f fields) millis(key string) time.Time {
	s := strings.TrimSpace(f.str(key))
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		v, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || !(v > 0 && v <= maxMillis) {
			return time.Time{}
		}
		ms = int64(v)
	}
	if ms <= 0 || ms > maxMillis {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// upstreamLayout is how the upstream writes times as text, without a zone.
const upstreamLayout = "2006-01-02 15:04:05"

// localTime returns the value of key read as upstreamLayout in loc, or the
// zero time.
func (f fields) localTime(key string, loc *time.Location) time.Time {
	t, err := time.ParseInLocation(upstreamLayout, strings.TrimSpace(f.str(key)), loc)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// timeOf returns the epoch-ms time of msKey, falling back to strKey read in loc.
func (f fields) timeOf(msKey, strKey string, loc *time.Location) time.Time {
	if t := f.millis(msKey); !t.IsZero() {
		return t
	}
	return f.localTime(strKey, loc)
}

// list returns the elements of the array at key, nil when it is absent or
// not an array.
func (f fields) list(key string) []json.RawMessage { return arrayOf(f[key]) }

func arrayOf(raw json.RawMessage) []json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil
	}
	return items
}

// strs returns the array at key as texts, leaving out empty ones.
func (f fields) strs(key string) []string {
	var out []string
	for _, item := range f.list(key) {
		if s := scalarText(item); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// number reads a metric value: a finite JSON number or a string holding one.
func number(raw json.RawMessage) (float64, bool) {
	s := strings.TrimSpace(scalarText(raw))
	if s == "" || s == "true" || s == "false" {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// metricsOf splits a metric object into numeric values (numbers and numeric
// strings) and other values (text, booleans; objects and arrays as JSON).
// Null values are left out: the spec counts a missing metric as 0.
func metricsOf(raw json.RawMessage) (map[string]float64, map[string]string) {
	f, err := objectFields(raw)
	if err != nil {
		return nil, nil
	}
	var nums map[string]float64
	var text map[string]string
	for k, v := range f {
		v = bytes.TrimSpace(v)
		if len(v) == 0 || string(v) == "null" {
			continue
		}
		if n, ok := number(v); ok {
			if nums == nil {
				nums = map[string]float64{}
			}
			nums[k] = n
			continue
		}
		if text == nil {
			text = map[string]string{}
		}
		if s := scalarText(v); s != "" || v[0] == '"' {
			text[k] = s
		} else {
			text[k] = string(v)
		}
	}
	return nums, text
}

// cloneRaw returns a copy of b, so that a record's Raw does not share memory
// with a larger buffer.
func cloneRaw(b []byte) json.RawMessage {
	return json.RawMessage(bytes.Clone(bytes.TrimSpace(b)))
}

// envelope is the common response envelope.
type envelope struct {
	code, description, errorMsg, errorKey string
	data                                  json.RawMessage
}

// decodeEnvelope reads the common envelope of an answer.
func decodeEnvelope(body []byte) (envelope, error) {
	f, err := objectFields(body)
	if err != nil {
		return envelope{}, fmt.Errorf("malformed response body: %w", err)
	}
	code := strings.TrimSpace(f.str("code"))
	if code == "" {
		return envelope{}, errors.New("malformed response body: no code")
	}
	return envelope{
		code:        code,
		description: f.str("description"),
		errorMsg:    f.str("errorMsg"),
		errorKey:    f.str("errorKey"),
		data:        f["data"],
	}, nil
}
