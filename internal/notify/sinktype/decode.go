package sinktype

import (
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/relay-energy/relay/internal/rulefile"
)

// Decoder reads the options of one sink from the rules file. Each getter
// reads one key; a key that is absent gives the zero value and no problem,
// one that is malformed records a problem at its line and gives the zero
// value. Problems never hold the value of a variable.
type Decoder struct {
	r     *rulefile.Reader
	field string
	line  int
	pairs []rulefile.Pair
	// fingerprint is what the options configure: each key's YAML and each
	// variable read, so that Same tells whether a reload changed the sink.
	fingerprint []string
}

// NewDecoder returns a Decoder of the sink at field (such as sinks[2]) on
// line, whose type-specific options are pairs. The route parser makes it.
func NewDecoder(r *rulefile.Reader, field string, line int, pairs []rulefile.Pair) *Decoder {
	d := &Decoder{r: r, field: field, line: line, pairs: pairs}
	for _, kv := range pairs {
		b, _ := yaml.Marshal(kv.Val)
		d.fingerprint = append(d.fingerprint, kv.Key+": "+string(b))
	}
	return d
}

// Fingerprint returns what the options configure, variables read included.
func (d *Decoder) Fingerprint() []string { return d.fingerprint }

// Has reports whether key is set.
func (d *Decoder) Has(key string) bool {
	_, ok := rulefile.Find(d.pairs, key)
	return ok
}

// Line returns the line of key, or the sink's line when key is absent.
func (d *Decoder) Line(key string) int {
	if kv, ok := rulefile.Find(d.pairs, key); ok {
		return kv.Line
	}
	return d.line
}

// Field returns the path of key, such as sinks[2].secret_env.
func (d *Decoder) Field(key string) string { return rulefile.Join(d.field, key) }

// Errorf records a problem with key, at its line (the sink's line when the
// key is absent, as for a missing key).
func (d *Decoder) Errorf(key, format string, args ...any) {
	d.r.Errorf(d.Line(key), d.Field(key), format, args...)
}

// Missing records that key, which the sink needs, is absent, unless it is
// set: "missing: <why>". It reports whether key is set.
func (d *Decoder) Missing(key, why string) bool {
	if d.Has(key) {
		return true
	}
	d.Errorf(key, "missing: %s", why)
	return false
}

// Node returns the YAML value of key, for options no getter reads.
func (d *Decoder) Node(key string) (*yaml.Node, bool) {
	kv, ok := rulefile.Find(d.pairs, key)
	return kv.Val, ok
}

// Reader returns the reader of the rules file, for options no getter reads.
func (d *Decoder) Reader() *rulefile.Reader { return d.r }

// String returns the non-empty string of key.
func (d *Decoder) String(key string) string {
	kv, ok := rulefile.Find(d.pairs, key)
	if !ok {
		return ""
	}
	s, _ := d.r.Str(kv.Val, d.Field(key))
	return s
}

// Strings returns the non-empty strings of key, a list or one string.
func (d *Decoder) Strings(key string) []string {
	kv, ok := rulefile.Find(d.pairs, key)
	if !ok {
		return nil
	}
	items, ok := d.r.Sequence(kv.Val, d.Field(key))
	if !ok {
		return nil
	}
	if len(items) == 0 {
		d.Errorf(key, "empty list: leave the key out or name at least one")
	}
	var out []string
	for _, it := range items {
		if s, ok := d.r.Str(it, d.Field(key)); ok {
			out = append(out, s)
		}
	}
	return out
}

// Bool returns the boolean of key, false when absent.
func (d *Decoder) Bool(key string) bool {
	kv, ok := rulefile.Find(d.pairs, key)
	if !ok {
		return false
	}
	b, _ := d.r.Bool(kv.Val, d.Field(key))
	return b
}

// Duration returns the positive duration of key, def when absent or bad.
func (d *Decoder) Duration(key string, def time.Duration) time.Duration {
	kv, ok := rulefile.Find(d.pairs, key)
	if !ok {
		return def
	}
	if v, ok := d.r.Duration(kv.Val, d.Field(key)); ok {
		return v
	}
	return def
}

// Env reads the variable named by key: its name and value, both empty when
// key is absent or the variable is not set (which is recorded).
func (d *Decoder) Env(key string) (name, value string) {
	kv, ok := rulefile.Find(d.pairs, key)
	if !ok {
		return "", ""
	}
	name, value, ok = d.r.Env(kv.Val, d.Field(key))
	if !ok {
		return "", ""
	}
	d.fingerprint = append(d.fingerprint, "$"+name+"="+value)
	return name, value
}

// Placeholder reports whether value stands in for a variable the
// environment does not set (relay route): checks of its form must skip it.
func (d *Decoder) Placeholder(value string) bool { return value == rulefile.Placeholder }

// URL returns the http:// or https:// URL of key, checked without echoing
// it (it may carry a token).
func (d *Decoder) URL(key string) string {
	u := d.String(key)
	if u != "" && !rulefile.ValidHTTPURL(u) {
		d.Errorf(key, "want an http:// or https:// URL with a host")
		return ""
	}
	return u
}

// URLEnv reads an http(s) URL from the variable named by key: the URL is a
// secret (it carries the destination's token).
func (d *Decoder) URLEnv(key string) (name, url string) {
	name, url = d.Env(key)
	if url != "" && !rulefile.ValidHTTPURL(url) {
		d.Errorf(key, "environment variable %s does not hold an http:// or https:// URL with a host", name)
		return name, ""
	}
	return name, url
}

// OneOf records a problem unless exactly one of keys is set, and returns the
// one set ("" when none or several are).
func (d *Decoder) OneOf(what string, keys ...string) string {
	var set []string
	for _, k := range keys {
		if d.Has(k) {
			set = append(set, k)
		}
	}
	switch len(set) {
	case 0:
		d.Errorf(keys[0], "missing: %s needs %s", what, strings.Join(keys, " or "))
		return ""
	case 1:
		return set[0]
	}
	d.Errorf(set[1], "set %s, not both", strings.Join(set, " or "))
	return ""
}

// Enum returns the value of key, which must be one of allowed; def when
// absent.
func (d *Decoder) Enum(key, def string, allowed ...string) string {
	s := d.String(key)
	if s == "" {
		return def
	}
	for _, a := range allowed {
		if s == a {
			return s
		}
	}
	d.Errorf(key, "%q is not allowed here (want %s)", s, strings.Join(allowed, ", "))
	return def
}

// Describe names the kind of key's value for an error, without the value.
func (d *Decoder) Describe(key string) string {
	if n, ok := d.Node(key); ok {
		return rulefile.Describe(n)
	}
	return "nothing"
}

// Decode reads the options of one sink of type t at field and line: pairs
// are its keys besides common (name, type, max_age, max_retry_after), whose
// names only serve the message about an unknown key. It returns the
// decoded options, nil when they are too broken to use, and their
// fingerprint. Problems are recorded in r.
func Decode(t Type, r *rulefile.Reader, field string, line int, pairs []rulefile.Pair, common []string) (Config, []string) {
	known := t.Keys()
	var ok []rulefile.Pair
	for _, kv := range pairs {
		if !slices.Contains(known, kv.Key) {
			r.Errorf(kv.Line, rulefile.Join(field, kv.Key), "unknown key %q for a %s sink (want %s)", kv.Key, t.Name,
				strings.Join(append(slices.Clone(common), known...), ", "))
			continue
		}
		ok = append(ok, kv)
	}
	d := NewDecoder(r, field, line, ok)
	cfg := t.Decode(d)
	return cfg, d.Fingerprint()
}
