package route

import (
	"maps"
	"strconv"
	"strings"
	"unicode"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/registry"
)

// key is one key that a mapping of the rules file accepts. The tables of keys
// below are what the parser checks each mapping against, refusing any other
// key, and what Schema describes, so that the parser and the JSON Schema of
// the file cannot drift apart. The options of each sink type are its own
// (sinktype.Type.Options).
type key struct {
	// name is the key as written in the file.
	name string
	// value is the JSON Schema of the key's value.
	value jsonSchema
	// doc says what the key sets.
	doc string
	// required says the parser reports the key when it is missing.
	required bool
}

// keys are the keys of one kind of mapping, in the order errors list them.
type keys []key

// names returns the keys' names, in order.
func (ks keys) names() []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.name
	}
	return out
}

// The keys of the file, of every sink, of routes and of matches, and of the
// alarm management entries.
var (
	topTable = keys{
		{name: "sinks", required: true, value: listOf(ref("sink")),
			doc: "the sinks: where events can go, each with a unique name and a type"},
		{name: "routes", required: true, value: listOf(ref("route")),
			doc: "the routes, tried in order: an event goes to the sinks of the first route that matches, " +
				"and the search goes on only when that route says continue: true"},
		{name: "time_intervals", value: optionalListOf(ref("time_interval")),
			doc: "named time intervals, in Alertmanager's grammar, for the active_when and mute_when of routes and the when of maintenance windows"},
		{name: "maintenance", value: optionalListOf(ref("maintenance")),
			doc: "maintenance windows: while one of the intervals in when is active, the alarms match admits are suppressed for people"},
		{name: "inhibit", value: optionalListOf(ref("inhibit")),
			doc: "inhibit rules: while an alarm matching source is ongoing, alarms matching target in the same scope are suppressed for people"},
	}
	sinkTable = keys{
		{name: "name", required: true, value: nameValue,
			doc: "the sink's name, unique in the file; outboxes, metrics and routes' to name it"},
		{name: "type", required: true, value: jsonSchema{"enum": registry.Names()},
			doc: "the sink's type: " + strings.Join(registry.Names(), ", ")},
		{name: "max_age", value: durationValue,
			doc: "how long an event is retried before it is dead-lettered; an event is always attempted once first (default " +
				fmtDuration(notify.DefaultMaxAge) + ")"},
		{name: "max_retry_after", value: durationValue,
			doc: "the longest the sink waits when a receiver answers with a Retry-After (default " +
				fmtDuration(notify.DefaultMaxRetryAfter) + ")"},
		{name: "send_resolved", value: boolValue,
			doc: "false keeps every end and invalid from the sink, as Alertmanager's send_resolved does: it gets starts only " +
				"(a ticket system that opens on start), and each end is recorded as not wanted in its suppressed log (default true)"},
		{name: "digest", value: jsonSchema{"anyOf": []any{jsonSchema{"type": "boolean"}, ref("digest")}},
			doc: "the storm digest: when more than threshold starts are due within window, one digest message goes out instead " +
				"of one message each; false turns it off (default on, threshold " + strconv.Itoa(DefaultDigestThreshold) +
				" per window " + fmtDuration(DefaultDigestWindow) + ")"},
		{name: "daily_summary", value: jsonSchema{"type": "string", "pattern": `^\s*([01][0-9]|2[0-3]):[0-5][0-9]\s+\S+\s*$`},
			doc: `"HH:MM Zone", such as "08:00 Asia/Shanghai": a daily summary of the alarms ongoing for over 24 h at that time of day (default none)`},
	}
	digestTable = keys{
		{name: "threshold", value: jsonSchema{"type": "integer", "minimum": MinDigestThreshold, "maximum": MaxDigestThreshold},
			doc: "the starts per window above which one digest is sent, " + strconv.Itoa(MinDigestThreshold) + " to " +
				strconv.Itoa(MaxDigestThreshold) + " (default " + strconv.Itoa(DefaultDigestThreshold) + ")"},
		{name: "window", value: durationValue,
			doc: "the window the starts are counted in, " + fmtDuration(MinDigestWindow) + " to " + fmtDuration(MaxDigestWindow) +
				" (default " + fmtDuration(DefaultDigestWindow) + ")"},
	}
	routeTable = keys{
		{name: "name", required: true, value: nameValue, doc: "the route's name, unique in the file"},
		{name: "match", value: nullable(ref("match")),
			doc: "the conditions an event must meet, combined with and; without it the route matches every event"},
		{name: "to", required: true, value: oneOrList(textValue),
			doc: "the names of the sinks the route sends to: a list, or one name"},
		{name: "continue", value: boolValue,
			doc: "true lets the search go on to later routes after this one matched (default false)"},
		{name: "hold", value: durationOrZero,
			doc: "a start reaches the route's sinks only if its alarm is still ongoing after so long, up to " + fmtDuration(MaxHold) +
				"; an alarm that ends sooner reaches them not at all; shorter than each sink's max_age (default 0, none)"},
		{name: "suppress", value: boolValue,
			doc: "whether alarm management (silences, maintenance, inhibition, holds, digests, reminders) applies to the route's " +
				"sinks; unset, their type decides (it does not for nats sinks)"},
		{name: "repeat", value: durationOrZero,
			doc: "a reminder every so long while the alarm stays ongoing, at least " + fmtDuration(MinRepeat) + " (default 0, none)"},
		{name: "repeat_until", value: jsonSchema{"enum": []string{"acknowledged", "cleared"}},
			doc: "when reminders stop: acknowledged (default; they stop once someone acknowledged the alarm) or cleared (they go on until it ends)"},
		{name: "ack_by", value: oneOrList(jsonSchema{"type": "string", "pattern": `^(slack|telegram|feishu|pagerduty):\S+$`}),
			doc: "who may acknowledge or shelve the route's alarms from a chat: slack:U… (a user), slack:S… (a user group), telegram:<user id>, " +
				"feishu:<open_id>, pagerduty:<user id>; others are told they are not allowed (default: anyone who sees the buttons)"},
		{name: "escalate", value: listOf(ref("escalation_step")),
			doc: "escalation steps: while an alarm stays ongoing, unacknowledged and not shelved, each step announces it to its sinks after so long; " +
				"acknowledgement, shelving or its end stops the chain, and its end goes wherever it was announced"},
		{name: "active_when", value: oneOrList(textValue), doc: "time intervals outside which the route's sinks are muted"},
		{name: "mute_when", value: oneOrList(textValue), doc: "time intervals inside which the route's sinks are muted"},
	}
	escalationTable = keys{
		{name: "after", required: true, value: durationValue,
			doc: "how long after the alarm was first seen, at least " + fmtDuration(MinEscalateAfter) + " and at most " + fmtDuration(MaxEscalateAfter)},
		{name: "to", required: true, value: oneOrList(textValue), doc: "the sinks the step announces the alarm to"},
	}
	matchTable = keys{
		{name: "transitions", value: oneOrList(jsonSchema{"enum": event.Transitions}),
			doc: "start, end or invalid: a start is routed by the rules, and its end and invalid go wherever it went"},
		{name: "levels", value: oneOrList(levelValue()), doc: "0 urgent, 1 severe, 2 major, 3 minor (numbers or names)"},
		{name: "tenant_ids", value: oneOrList(scalarValue), doc: "the alarm's tenant id"},
		{name: "station_ids", value: oneOrList(scalarValue), doc: "the alarm's station id"},
		{name: "system_ids", value: oneOrList(scalarValue), doc: "the alarm's system id"},
		{name: "device_sns", value: oneOrList(scalarValue), doc: "the serial number of the alarm's device"},
		{name: "device_types", value: oneOrList(anyCase(event.DeviceTypes)),
			doc: "the device's deviceTemplateCode, a code of the upstream's table in any letter case: " + strings.Join(event.DeviceTypes, ", ")},
		{name: "event_codes", value: oneOrList(scalarValue), doc: "the alarm's eventCode"},
		{name: "event_types", value: oneOrList(scalarValue), doc: "the alarm's eventType"},
		{name: "station_names", value: oneOrList(textValue), doc: "the station's name: " + globDoc},
		{name: "device_names", value: oneOrList(textValue), doc: "the device's name: " + globDoc},
	}
	intervalTable = keys{
		{name: "name", required: true, value: nameValue, doc: "the time interval's name, unique in the file"},
		{name: "time_intervals", required: true, value: listOf(nullable(ref("time_interval_entry"))),
			doc: "the entries: the interval is active when any of them is; {} is always"},
	}
	entryTable = keys{
		{name: "times", value: listOf(ref("time_range")), doc: "times of the day: " + entryHints["times"]},
		{name: "weekdays", value: oneOrList(scalarValue), doc: "days of the week: " + entryHints["weekdays"]},
		{name: "days_of_month", value: oneOrList(scalarValue), doc: "days of the month: " + entryHints["days_of_month"]},
		{name: "months", value: oneOrList(scalarValue), doc: "months: " + entryHints["months"]},
		{name: "years", value: oneOrList(scalarValue), doc: "years: " + entryHints["years"]},
		{name: "location", value: textValue,
			doc: "the IANA time zone of the entry, such as Europe/Berlin (default UTC; daylight saving time is followed; Local is refused)"},
	}
	timeRangeTable = keys{
		{name: "start_time", required: true, value: clockValue, doc: "HH:MM from 00:00 to 24:00, where the range starts"},
		{name: "end_time", required: true, value: clockValue, doc: "HH:MM from 00:00 to 24:00, where the range ends (excluded)"},
	}
	maintenanceTable = keys{
		{name: "name", required: true, value: nameValue, doc: "the maintenance window's name, unique in the file"},
		{name: "when", required: true, value: oneOrList(textValue), doc: "the time intervals the window is open in"},
		{name: "match", value: nullable(ref("match")), doc: "the alarms of the window; without it, every alarm"},
	}
	inhibitTable = keys{
		{name: "name", required: true, value: nameValue, doc: "the inhibit rule's name, unique in the file"},
		{name: "source", required: true, value: condition,
			doc: "a match of the alarms that mask, such as {event_codes: [DC_OFFLINE]}"},
		{name: "target", required: true, value: condition,
			doc: "a match of the alarms they mask, such as {event_types: [communication]}"},
		{name: "equal", value: jsonSchema{"enum": scopes},
			doc: "what a source and a target must share: station, system or device (default station)"},
	}
)

// The key lists the parser checks mappings against.
var (
	sinkCommonKeys  = sinkTable.names()
	topKeys         = topTable.names()
	routeKeys       = routeTable.names()
	matchKeys       = matchTable.names()
	intervalKeys    = intervalTable.names()
	entryKeys       = entryTable.names()
	timeRangeKeys   = timeRangeTable.names()
	maintenanceKeys = maintenanceTable.names()
	inhibitKeys     = inhibitTable.names()
	digestKeys      = digestTable.names()
	escalationKeys  = escalationTable.names()
)

// globDoc says how station_names and device_names match.
const globDoc = `globs: * matches any run of characters, ? any one, \ escapes * ? \ (case-sensitive)`

// jsonSchema is one JSON Schema, or part of one.
type jsonSchema = map[string]any

// The schemas of values that several keys share. The parser reads most
// values with rulefile.Reader.Str, which takes any scalar but null as
// written; the schema takes a number where one is natural (ids, codes, the
// values of time intervals, levels) and asks for a string elsewhere (names,
// durations, templates).
var (
	// textValue is a non-empty string.
	textValue = jsonSchema{"type": "string", "pattern": `\S`}
	// scalarValue is a non-empty string or a number, such as an id.
	scalarValue = jsonSchema{"type": []string{"string", "number"}, "pattern": `\S`}
	// nameValue is the name of a sink, route, interval, window or rule.
	nameValue = jsonSchema{"type": "string", "pattern": nameRE.String()}
	boolValue = jsonSchema{"type": "boolean"}
	// durationValue is a Go duration such as 90s, 10m or 1h30m.
	durationValue = jsonSchema{"type": "string",
		"pattern": `^\+?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`}
	// durationOrZero is a duration, or 0 for none.
	durationOrZero = jsonSchema{"anyOf": []any{durationValue, jsonSchema{"enum": []any{0, "0"}}}}
	// clockValue is a time of day in Alertmanager's grammar.
	clockValue = jsonSchema{"type": "string", "pattern": `^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$`}
	// condition is a match that names at least one condition.
	condition = func() jsonSchema {
		s := ref("match")
		s["minProperties"] = 1
		return s
	}()
)

// ref refers to the schema of the file's $defs called def.
func ref(def string) jsonSchema { return jsonSchema{"$ref": "#/$defs/" + def} }

// listOf is a list of at least one item.
func listOf(item jsonSchema) jsonSchema {
	return jsonSchema{"type": "array", "items": item, "minItems": 1}
}

// optionalListOf is a list, maybe empty, or nothing.
func optionalListOf(item jsonSchema) jsonSchema {
	return jsonSchema{"type": []string{"array", "null"}, "items": item}
}

// oneOrList is a list of at least one item, or one item alone
// (rulefile.Reader.Sequence).
func oneOrList(item jsonSchema) jsonSchema {
	return jsonSchema{"anyOf": []any{item, listOf(item)}}
}

// nullable is s or nothing, which the parser reads as an empty mapping.
func nullable(s jsonSchema) jsonSchema {
	return jsonSchema{"anyOf": []any{jsonSchema{"type": "null"}, s}}
}

// levelValue is a level: 0 to 3 as a number or a string, or its name.
func levelValue() jsonSchema {
	var levels []any
	for l := 0; l <= maxLevel; l++ {
		levels = append(levels, l, strconv.Itoa(l), event.LevelName(l))
	}
	return jsonSchema{"enum": levels}
}

// anyCase is one of words in any letter case, as a pattern that every
// regular expression dialect reads alike.
func anyCase(words []string) jsonSchema {
	alts := make([]string, len(words))
	for i, w := range words {
		var b strings.Builder
		for _, r := range w {
			if lo, up := unicode.ToLower(r), unicode.ToUpper(r); lo != up {
				b.WriteString("[" + string(up) + string(lo) + "]")
			} else {
				b.WriteRune(r)
			}
		}
		alts[i] = b.String()
	}
	return jsonSchema{"type": "string", "pattern": "^(" + strings.Join(alts, "|") + ")$"}
}

// object is the schema of a mapping of ks: no other key, and the required
// ones present. doc describes the mapping.
func (ks keys) object(doc string) jsonSchema {
	props := jsonSchema{}
	var required []string
	for _, k := range ks {
		props[k.name] = described(k.value, k.doc)
		if k.required {
			required = append(required, k.name)
		}
	}
	s := jsonSchema{"type": "object", "description": doc, "properties": props, "additionalProperties": false}
	if required != nil {
		s["required"] = required
	}
	return s
}

// described returns a copy of s with the description doc.
func described(s jsonSchema, doc string) jsonSchema {
	out := maps.Clone(s)
	out["description"] = doc
	return out
}
