package route

import (
	"strings"
	"testing"
)

// oneSink is the start of a file whose mistakes are elsewhere: line 1 to 4.
const oneSink = `
sinks:
  - {name: a, type: console}
routes:
  - {name: all, to: [a]}
`

// withInterval follows oneSink with an interval whose entry is entry, its
// first line on line 8.
func withInterval(entry string) string {
	return oneSink + `time_intervals:
  - name: it
    time_intervals:
` + strings.TrimPrefix(entry, "\n")
}

func TestAlarmManagementMistakesNameLineAndField(t *testing.T) {
	const entry = "time_intervals[0].time_intervals[0]"
	cases := []struct {
		name  string
		yaml  string
		line  int
		field string
		msg   string // a substring of the message
	}{
		{"unknown key of an entry", withInterval(`
      - weekday: [monday]
`), 8, entry + ".weekday", `unknown key "weekday" (want one of times, weekdays, days_of_month, months, years, location)`},
		{"a weekday misspelt", withInterval(`
      - weekdays: ['monday:fri']
`), 8, entry + ".weekdays", `"monday:fri": fri is not a valid weekday`},
		{"a weekend as a range", withInterval(`
      - weekdays: [monday, 'saturday:sunday']
`), 8, entry + ".weekdays", `write a weekend as [saturday, sunday]`},
		{"a time without its leading zero", withInterval(`
      - times: [{start_time: '9:00', end_time: '18:00'}]
`), 8, entry + ".times[0]", `9:00-18:00: couldn't parse timestamp 9:00`},
		{"a time range across midnight", withInterval(`
      - times:
          - start_time: '08:00'
            end_time: '12:00'
          - start_time: '22:00'
            end_time: '06:00'
`), 11, entry + ".times[1]", `start time cannot be equal or greater than end time (want start_time and end_time as HH:MM from 00:00 to 24:00, the start before the end; write a range across midnight as two, such as 22:00-24:00 and 00:00-06:00)`},
		{"a time range without its end", withInterval(`
      - times: [{start_time: '09:00'}]
`), 8, entry + ".times[0].end_time", "missing: want start_time and end_time"},
		{"a time range with an unknown key", withInterval(`
      - times: [{start_time: '09:00', end_time: '10:00', end: '11:00'}]
`), 8, entry + ".times[0].end", `unknown key "end" (want one of start_time, end_time)`},
		{"a time zone that does not exist", withInterval(`
      - location: Mars/Olympus_Mons
`), 8, entry + ".location", `"Mars/Olympus_Mons" is not an IANA time zone (such as Europe/Berlin, Asia/Shanghai or UTC)`},
		{"the machine's time zone", withInterval(`
      - location: Local
`), 8, entry + ".location", `"Local" depends on the machine relay runs on`},
		{"a day of the month out of range", withInterval(`
      - days_of_month: ['1:32']
`), 8, entry + ".days_of_month", `"1:32": 32 is not a valid day of the month: out of range`},
		{"a month out of range", withInterval(`
      - months: ['11:13']
`), 8, entry + ".months", `"11:13": a month is 1 to 12`},
		{"a month misspelt", withInterval(`
      - months: [janaury]
`), 8, entry + ".months", `"janaury": janaury is not a valid month`},
		{"years backwards", withInterval(`
      - years: ['2027:2026']
`), 8, entry + ".years", `end year 2026 is before start year 2027`},
		{"an empty list of weekdays", withInterval(`
      - weekdays: []
`), 8, entry + ".weekdays", "empty list matches no time: leave the key out to match any"},
		{"an entry that is a list", withInterval(`
      - [monday]
`), 8, entry, "want a mapping, got a list"},
		{"an interval without entries", oneSink + `time_intervals:
  - name: it
    time_intervals: []
`, 7, "time_intervals[0].time_intervals", "empty list: an interval without entries is never active; write {} for always"},
		{"an interval without time_intervals", oneSink + `time_intervals:
  - name: it
`, 6, "time_intervals[0].time_intervals", "missing: want a list of times"},
		{"an interval without a name", oneSink + `time_intervals:
  - time_intervals: [{}]
`, 6, "time_intervals[0].name", "missing: every time interval needs a name"},
		{"an interval defined twice", oneSink + `time_intervals:
  - {name: it, time_intervals: [{}]}
  - {name: it, time_intervals: [{}]}
`, 7, "time_intervals[1].name", `time interval "it" is already defined at line 6`},
		{"time_intervals not a list", oneSink + `time_intervals: {name: it}
`, 5, "time_intervals", "want a list, got a mapping"},
		{"a route active in an undefined interval", `
sinks:
  - {name: a, type: console}
routes:
  - name: all
    to: [a]
    active_when: [busines-hours]
time_intervals:
  - {name: business-hours, time_intervals: [{}]}
  - {name: night, time_intervals: [{}]}
`, 6, "routes[0].active_when", `time interval "busines-hours" is not defined (time_intervals defines business-hours, night)`},
		{"a route muted in an undefined interval, without any", `
sinks:
  - {name: a, type: console}
routes:
  - name: all
    to: [a]
    mute_when:
      - night
`, 7, "routes[0].mute_when", `time interval "night" is not defined (time_intervals defines none)`},
		{"a route muted in no interval", `
sinks:
  - {name: a, type: console}
routes:
  - {name: all, to: [a], mute_when: []}
`, 4, "routes[0].mute_when", "empty list: want the name of at least one time interval"},
		{"a hold over a day", oneSink + `  - {name: slow, to: [a], hold: 25h}
`, 5, "routes[1].hold", `"25h" is not a duration from 1s to 24h, or 0 for none`},
		{"a hold as long as max_age", `
sinks:
  - {name: a, type: console, max_age: 1h}
routes:
  - {name: slow, to: [a], hold: 1h}
`, 4, "routes[0].hold", `hold 1h0m0s is not shorter than max_age 1h0m0s of sink "a": a held start would be dead-lettered at its first failed attempt`},
		{"a negative hold", oneSink + `  - {name: slow, to: [a], hold: -1m}
`, 5, "routes[1].hold", `"-1m" is not a duration from 1s to 24h, or 0 for none`},
		{"a hold without a unit", oneSink + `  - {name: slow, to: [a], hold: 120}
`, 5, "routes[1].hold", `"120" is not a duration from 1s to 24h, or 0 for none (a number with a unit, such as 90s, 10m or 4h)`},
		{"a repeat too often", oneSink + `  - {name: nag, to: [a], repeat: 5m}
`, 5, "routes[1].repeat", `"5m" is not a duration of at least 10m, or 0 for none`},
		{"suppress as a word", oneSink + `  - {name: s, to: [a], suppress: "yes"}
`, 5, "routes[1].suppress", "want true or false, got a string"},
		{"a digest threshold of one", `
sinks:
  - name: a
    type: console
    digest: {threshold: 1}
routes:
  - {name: all, to: [a]}
`, 4, "sinks[0].digest.threshold", "want a whole number from 2 to 1000"},
		{"a digest threshold as a word", `
sinks:
  - {name: a, type: console, digest: {threshold: ten}}
routes:
  - {name: all, to: [a]}
`, 2, "sinks[0].digest.threshold", "want a whole number from 2 to 1000"},
		{"a digest window too short", `
sinks:
  - {name: a, type: console, digest: {window: 30s}}
routes:
  - {name: all, to: [a]}
`, 2, "sinks[0].digest.window", `"30s" is not a duration from 1m to 24h`},
		{"a digest key misspelt", `
sinks:
  - name: a
    type: console
    digest:
      treshold: 20
routes:
  - {name: all, to: [a]}
`, 5, "sinks[0].digest.treshold", `unknown key "treshold" (want one of threshold, window)`},
		{"digest as a word", `
sinks:
  - {name: a, type: console, digest: "off"}
routes:
  - {name: all, to: [a]}
`, 2, "sinks[0].digest", "want false, true or a mapping such as {threshold: 10, window: 10m}, got a string"},
		{"a daily summary without a leading zero", `
sinks:
  - {name: a, type: console, daily_summary: "8:00 Asia/Shanghai"}
routes:
  - {name: all, to: [a]}
`, 2, "sinks[0].daily_summary", `"8:00 Asia/Shanghai" is not a time of day and a time zone: want "HH:MM Zone"`},
		{"a daily summary without a zone", `
sinks:
  - {name: a, type: console, daily_summary: "08:00"}
routes:
  - {name: all, to: [a]}
`, 2, "sinks[0].daily_summary", `"08:00" is not a time of day and a time zone`},
		{"a daily summary in a zone that does not exist", `
sinks:
  - {name: a, type: console, daily_summary: "08:00 Asia/Shangai"}
routes:
  - {name: all, to: [a]}
`, 2, "sinks[0].daily_summary", `"Asia/Shangai" is not an IANA time zone`},
		{"an option of alarm management misspelt on a sink", `
sinks:
  - {name: a, type: console, daily_sumary: "08:00 UTC"}
routes:
  - {name: all, to: [a]}
`, 2, "sinks[0].daily_sumary", `unknown key "daily_sumary" for a console sink (want name, type, max_age, max_retry_after, send_resolved, digest, daily_summary`},
		{"a maintenance window in an undefined interval", oneSink + `maintenance:
  - name: service
    when: [first-monday]
time_intervals:
  - {name: first-mondays, time_intervals: [{}]}
`, 7, "maintenance[0].when", `time interval "first-monday" is not defined (time_intervals defines first-mondays)`},
		{"a maintenance window without when", oneSink + `maintenance:
  - name: service
    match: {station_ids: [S1]}
`, 6, "maintenance[0].when", "missing: want the names of the time intervals the window is open in"},
		{"a maintenance window without a name", oneSink + `maintenance:
  - when: [it]
time_intervals:
  - {name: it, time_intervals: [{}]}
`, 6, "maintenance[0].name", "missing: every maintenance window needs a name"},
		{"a maintenance window with a bad match", oneSink + `maintenance:
  - name: service
    when: [it]
    match: {levels: [7]}
time_intervals:
  - {name: it, time_intervals: [{}]}
`, 8, "maintenance[0].match.levels", `"7" is not a level`},
		{"two maintenance windows of one name", oneSink + `maintenance:
  - {name: service, when: [it]}
  - {name: service, when: [it]}
time_intervals:
  - {name: it, time_intervals: [{}]}
`, 7, "maintenance[1].name", `maintenance window "service" is already defined at line 6`},
		{"maintenance not a list", oneSink + `maintenance: {name: service}
`, 5, "maintenance", "want a list, got a mapping"},
		{"an inhibit rule masking by everything", oneSink + `inhibit:
  - name: mask
    source: {}
    target: {event_types: [communication]}
`, 7, "inhibit[0].source", "no condition: an empty source matches every alarm; name at least one, such as event_codes"},
		{"an inhibit rule masking everything", oneSink + `inhibit:
  - name: mask
    source: {event_codes: [DC_OFFLINE]}
    target:
`, 8, "inhibit[0].target", "no condition: an empty target matches every alarm"},
		{"an inhibit rule without a target", oneSink + `inhibit:
  - name: mask
    source: {event_codes: [DC_OFFLINE]}
`, 6, "inhibit[0].target", "missing: want a match of the alarms they mask"},
		{"an inhibit rule with an unknown match key", oneSink + `inhibit:
  - name: mask
    source: {event_code: [DC_OFFLINE]}
    target: {event_types: [communication]}
`, 7, "inhibit[0].source.event_code", `unknown key "event_code"`},
		{"an inhibit rule on an unknown scope", oneSink + `inhibit:
  - name: mask
    source: {event_codes: [DC_OFFLINE]}
    target: {event_types: [communication]}
    equal: rack
`, 9, "inhibit[0].equal", `"rack" is not a scope (want station, system or device)`},
		{"two inhibit rules of one name", oneSink + `inhibit:
  - {name: mask, source: {event_codes: [A]}, target: {event_codes: [B]}}
  - {name: mask, source: {event_codes: [C]}, target: {event_codes: [D]}}
`, 7, "inhibit[1].name", `inhibit rule "mask" is already defined at line 6`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("rules.yaml", yamlText(c.yaml), nil)
			errs := problems(t, err)
			if len(errs) != 1 {
				t.Fatalf("got %d problems, want 1:\n%v", len(errs), err)
			}
			e := errs[0]
			if e.File != "rules.yaml" || e.Line != c.line || e.Field != c.field || !strings.Contains(e.Msg, c.msg) {
				t.Fatalf("got %s\nwant rules.yaml:%d: field %q, message containing %q", e, c.line, c.field, c.msg)
			}
		})
	}
}

func TestUndefinedIntervalsAreNotReportedWhenAnIntervalIsUnreadable(t *testing.T) {
	for name, intervals := range map[string]string{
		"time_intervals unreadable": "time_intervals: 7\n",
		"a name unreadable":         "time_intervals:\n  - {name: [x], time_intervals: [{}]}\n",
		"an interval unreadable":    "time_intervals:\n  - business-hours\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("rules.yaml", yamlText(`
sinks:
  - {name: a, type: console}
routes:
  - {name: all, to: [a], active_when: [business-hours]}
`+intervals), nil)
			if errs := problems(t, err); len(errs) != 1 || errs[0].Line != 5 && errs[0].Line != 6 || strings.Contains(errs[0].Msg, "not defined") {
				t.Fatalf("want only the problem of time_intervals, got:\n%v", err)
			}
		})
	}
}

func TestAlarmManagementProblemsAreAllReported(t *testing.T) {
	_, err := Parse("rules.yaml", yamlText(`
sinks:
  - {name: a, type: console, digest: {threshold: 0, window: 0s}}
routes:
  - {name: all, to: [a], hold: 1d, repeat: 1m, active_when: [nope]}
maintenance:
  - {name: m, when: [nope, it]}
inhibit:
  - {name: i, source: {}, target: {}, equal: tenant}
time_intervals:
  - name: it
    time_intervals:
      - {weekdays: [funday], times: [{start_time: '25:00', end_time: '26:00'}], location: Nowhere/City}
`), nil)
	type where struct {
		line  int
		field string
	}
	want := []where{
		{2, "sinks[0].digest.threshold"},
		{2, "sinks[0].digest.window"},
		{4, "routes[0].hold"},
		{4, "routes[0].repeat"},
		{4, "routes[0].active_when"},
		{6, "maintenance[0].when"},
		{8, "inhibit[0].source"},
		{8, "inhibit[0].target"},
		{8, "inhibit[0].equal"},
		{12, "time_intervals[0].time_intervals[0].weekdays"},
		{12, "time_intervals[0].time_intervals[0].times[0]"},
		{12, "time_intervals[0].time_intervals[0].location"},
	}
	errs := problems(t, err)
	got := map[where]bool{}
	for _, e := range errs {
		got[where{e.Line, e.Field}] = true
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("no problem at line %d in %s", w.line, w.field)
		}
	}
	if len(errs) != len(want) {
		t.Errorf("got %d problems, want %d:\n%v", len(errs), len(want), err)
	}
}
