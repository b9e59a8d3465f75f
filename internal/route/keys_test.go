package route

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/relay-energy/relay/internal/notify/registry"
)

// everyMapping is a valid rules file with a mapping of each kind and every
// key a mapping requires.
const everyMapping = `sinks:
  - name: s
    type: console
    digest: { threshold: 10, window: 10m }
routes:
  - name: r
    to: [s]
    match: { levels: [0] }
time_intervals:
  - name: i
    time_intervals:
      - times: [{ start_time: '00:00', end_time: '24:00' }]
maintenance:
  - name: m
    when: [i]
inhibit:
  - name: n
    source: { event_codes: [A] }
    target: { event_codes: [B] }
`

// tables are the tables of keys, each with where a mapping of its kind is
// in everyMapping.
var tables = []struct {
	table keys
	path  []any // keys and indexes from the top of the file
}{
	{topTable, nil},
	{sinkTable, []any{"sinks", 0}},
	{digestTable, []any{"sinks", 0, "digest"}},
	{routeTable, []any{"routes", 0}},
	{matchTable, []any{"routes", 0, "match"}},
	{intervalTable, []any{"time_intervals", 0}},
	{entryTable, []any{"time_intervals", 0, "time_intervals", 0}},
	{timeRangeTable, []any{"time_intervals", 0, "time_intervals", 0, "times", 0}},
	{maintenanceTable, []any{"maintenance", 0}},
	{inhibitTable, []any{"inhibit", 0}},
}

// field writes path as the parser's errors name a field: sinks[0].digest.
func field(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		}
	}
	return b.String()
}

// edited returns everyMapping with the value of key in the mapping at path
// replaced by value, or the key removed when value is nil.
func edited(t *testing.T, path []any, key string, value *yaml.Node) []byte {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(everyMapping), &doc); err != nil {
		t.Fatal(err)
	}
	n := doc.Content[0]
	for _, p := range path {
		switch p := p.(type) {
		case int:
			n = n.Content[p]
		case string:
			n = valueOf(n, p)
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value != key {
			continue
		}
		if value == nil {
			n.Content = slices.Delete(n.Content, i, i+2)
		} else {
			n.Content[i+1] = value
		}
		break
	}
	if value != nil && valueOf(n, key) == nil {
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, value)
	}
	b, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// valueOf returns the value of key in the mapping n, nil when it has none.
func valueOf(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// fieldsOf returns the fields of the problems of a Parse of text.
func fieldsOf(text []byte) []string {
	_, err := Parse("rules.yaml", text, func(string) (string, bool) { return "", false })
	var fields []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			var re *Error
			if errors.As(e, &re) {
				fields = append(fields, re.Field)
			}
		}
	}
	return fields
}

// TestTheRequiredKeysAreThoseTheParserReportsMissing: a key a table marks
// required (and so the schema requires) is reported when it is missing;
// any other key may be left out.
func TestTheRequiredKeysAreThoseTheParserReportsMissing(t *testing.T) {
	if errs := fieldsOf([]byte(everyMapping)); len(errs) > 0 {
		t.Fatalf("everyMapping has problems at %v", errs)
	}
	for _, tb := range tables {
		for _, k := range tb.table {
			f := field(append(slices.Clone(tb.path), k.name))
			t.Run(f, func(t *testing.T) {
				reported := slices.Contains(fieldsOf(edited(t, tb.path, k.name, nil)), f)
				if reported != k.required {
					t.Fatalf("required %v in the table, reported missing by the parser %v", k.required, reported)
				}
			})
		}
	}
}

// TestTheParserReadsEveryKeyOfTheTables: a key of a table is not only
// accepted but read: a value no key takes (a list of lists) is refused at
// that key, so that the parser has no key in a table that it ignores.
func TestTheParserReadsEveryKeyOfTheTables(t *testing.T) {
	var bad yaml.Node
	if err := yaml.Unmarshal([]byte("[[[]]]"), &bad); err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		for _, k := range tb.table {
			f := field(append(slices.Clone(tb.path), k.name))
			t.Run(f, func(t *testing.T) {
				fields := fieldsOf(edited(t, tb.path, k.name, bad.Content[0]))
				if !slices.ContainsFunc(fields, func(got string) bool { return strings.HasPrefix(got, f) }) {
					t.Fatalf("a list of lists is not refused at %s; problems at %v", f, fields)
				}
			})
		}
	}
}

// TestTheSchemaHasTheKeysOfTheParser: every mapping of the schema has the
// keys the parser accepts there, no other: those of the tables, and for a
// sink of each type the keys of every sink and the type's options.
func TestTheSchemaHasTheKeysOfTheParser(t *testing.T) {
	type object struct {
		Properties           map[string]json.RawMessage `json:"properties"`
		AdditionalProperties *bool                      `json:"additionalProperties"`
	}
	var s struct {
		object
		Defs map[string]object `json:"$defs"`
	}
	if err := json.Unmarshal(Schema(), &s); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"route": routeKeys, "match": matchKeys, "time_interval": intervalKeys, "time_interval_entry": entryKeys,
		"time_range": timeRangeKeys, "maintenance": maintenanceKeys, "inhibit": inhibitKeys, "digest": digestKeys,
	}
	for _, typ := range registry.Types() {
		want["sink."+typ.Name] = append(slices.Clone(sinkCommonKeys), typ.Keys()...)
	}
	check := func(name string, o object, keys []string) {
		got := slices.Sorted(maps.Keys(o.Properties))
		if !slices.Equal(got, slices.Sorted(slices.Values(keys))) {
			t.Errorf("the schema's %s has the keys %v; the parser accepts %v", name, got, keys)
		}
		if o.AdditionalProperties == nil || *o.AdditionalProperties {
			t.Errorf("the schema's %s allows other keys; the parser refuses them", name)
		}
	}
	check("top level", s.object, topKeys)
	for name, keys := range want {
		check(name, s.Defs[name], keys)
	}
}
