package route

import (
	"bytes"
	"encoding/json"

	"github.com/relay-energy/relay/internal/notify/registry"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// SchemaPath is where the JSON Schema of the rules file is committed,
// relative to the repository's root; rules.example.yaml names it for editors.
const SchemaPath = "docs/reference/rules.schema.json"

// Schema returns the JSON Schema (draft 2020-12) of the rules file, which
// relay schema prints: editors validate and complete a rules file with it.
// It is made from the tables of keys the parser checks every mapping against
// and from the options each sink type declares, so it refuses the keys the
// parser refuses. Of values it checks the form (a duration, a level, a name),
// not what only loading tells: that a sink a route names exists, that a
// variable is set, that a template compiles.
func Schema() []byte {
	defs := jsonSchema{
		"sink":  sinkSchema(),
		"route": routeTable.object("a route: the events it matches go to its sinks"),
		"match": matchTable.object("conditions on an event, combined with and; a list matches any of its values"),
		"time_interval": intervalTable.object("a named time interval, in Alertmanager's grammar: " +
			"active when any of its entries is"),
		"time_interval_entry": entryTable.object("an entry of a time interval: it is active when every key it sets " +
			"matches; a key left out matches any time"),
		"time_range":      timeRangeTable.object("a range of times of the day"),
		"maintenance":     maintenanceTable.object("a maintenance window"),
		"inhibit":         inhibitTable.object("an inhibit rule"),
		"digest":          digestTable.object("the storm digest's threshold and window"),
		"escalation_step": escalationTable.object("one step of a route's escalation"),
	}
	for _, t := range registry.Types() {
		defs["sink."+t.Name] = sinkTypeSchema(t)
	}
	s := topTable.object("relay's rules file (docs/design.md §7): the sinks events can go to, the routes to them, " +
		"and alarm management")
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["title"] = "relay rules file"
	s["$defs"] = defs
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		panic("route: the rules file's schema does not encode: " + err.Error())
	}
	return b.Bytes()
}

// sinkSchema is the schema of a sink: a name, one of the types, and the
// options of that type (sink.<type>).
func sinkSchema() jsonSchema {
	var cases []any
	for _, t := range registry.Types() {
		cases = append(cases, jsonSchema{
			"if":   jsonSchema{"properties": jsonSchema{"type": jsonSchema{"const": t.Name}}, "required": []string{"type"}},
			"then": ref("sink." + t.Name),
		})
	}
	s := sinkTable.object("a sink: where events can go")
	// The type's schema in allOf closes the mapping: its keys are the
	// common ones and the type's options.
	delete(s, "additionalProperties")
	s["allOf"] = cases
	return s
}

// sinkTypeSchema is the schema of a sink of type t: the keys every sink has
// and the options of t, no other.
func sinkTypeSchema(t sinktype.Type) jsonSchema {
	ks := append(keys{}, sinkTable...)
	for _, o := range t.Options {
		// A sink type declares what each option means, not the form of its
		// value: any value is left to the parser.
		ks = append(ks, key{name: o.Key, doc: o.Doc, value: jsonSchema{}})
	}
	return ks.object("a " + t.Name + " sink: " + t.Doc)
}
