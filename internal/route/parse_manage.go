package route

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/alertmanager/timeinterval"
	"gopkg.in/yaml.v3"

	"github.com/relay-energy/relay/internal/rulefile"
)

// entryHints say, per key of a time interval entry, what a value looks like.
var entryHints = map[string]string{
	"weekdays":      "want a day such as monday, or a range from sunday to saturday such as monday:friday; write a weekend as [saturday, sunday]",
	"days_of_month": "want a day from 1 to 31, or -1 for the last, or a range such as 1:7 or -7:-1",
	"months":        "want a month such as january or 1, or a range such as january:march",
	"years":         "want a year such as 2026, or a range such as 2026:2027",
	"times": "want start_time and end_time as HH:MM from 00:00 to 24:00, the start before the end; " +
		"write a range across midnight as two, such as 22:00-24:00 and 00:00-06:00",
}

var dailyRE = regexp.MustCompile(`^([01][0-9]|2[0-3]):([0-5][0-9])$`)

// intervalRef is a time interval named at line in field, checked once the
// file's time_intervals are read (they may come after the names).
type intervalRef struct {
	name, field string
	line        int
}

// optionalList returns the items of an optional top-level list: absent,
// null or empty is none.
func (p *parser) optionalList(n *yaml.Node, field string) ([]*yaml.Node, bool) {
	if rulefile.IsNull(n) {
		return nil, true
	}
	if n.Kind != yaml.SequenceNode {
		p.Errorf(n.Line, field, "want a list, got %s", rulefile.Describe(n))
		return nil, false
	}
	return p.Sequence(n, field)
}

// timeIntervals reads the top-level time_intervals.
func (p *parser) timeIntervals(r *Rules, n *yaml.Node) {
	items, ok := p.optionalList(n, "time_intervals")
	if !ok {
		p.intervalsUnread = true
		return
	}
	for i, item := range items {
		p.timeInterval(r, item, fmt.Sprintf("time_intervals[%d]", i))
	}
}

func (p *parser) timeInterval(r *Rules, n *yaml.Node, field string) {
	pairs, ok := p.Mapping(n, field, intervalKeys)
	if !ok {
		p.intervalsUnread = true
		return
	}
	var name string
	if kv, found := rulefile.Find(pairs, "name"); found {
		name, _ = p.name(kv.Val, rulefile.Join(field, "name"))
		if prev, dup := r.Intervals[name]; dup && name != "" {
			p.Errorf(kv.Val.Line, rulefile.Join(field, "name"), "time interval %q is already defined at line %d", name, prev.Line)
			name = ""
		}
	} else {
		p.Errorf(n.Line, rulefile.Join(field, "name"), "missing: every time interval needs a name")
	}
	if name == "" {
		p.intervalsUnread = true
	}
	var entries []timeinterval.TimeInterval
	if kv, found := rulefile.Find(pairs, "time_intervals"); found {
		sub := rulefile.Join(field, "time_intervals")
		if items, ok := p.Sequence(kv.Val, sub); ok {
			if len(items) == 0 {
				p.Errorf(kv.Val.Line, sub, "empty list: an interval without entries is never active; write {} for always")
			}
			for i, it := range items {
				if e, ok := p.intervalEntry(it, fmt.Sprintf("%s[%d]", sub, i)); ok {
					entries = append(entries, e)
				}
			}
		}
	} else {
		p.Errorf(n.Line, rulefile.Join(field, "time_intervals"), "missing: want a list of times, weekdays, days_of_month, months, years and location")
	}
	if name != "" {
		// An interval with problems still defines its name, so that what
		// names it is not also reported.
		r.Intervals[name] = newInterval(name, n.Line, entries)
	}
}

// intervalEntry reads one entry of an interval in Alertmanager's grammar,
// decoding each value with the library's own parser.
func (p *parser) intervalEntry(n *yaml.Node, field string) (timeinterval.TimeInterval, bool) {
	e := timeinterval.TimeInterval{Location: &timeinterval.Location{Location: time.UTC}}
	pairs, ok := p.Mapping(n, field, entryKeys)
	if !ok {
		return e, false
	}
	good := true
	for _, kv := range pairs {
		sub := rulefile.Join(field, kv.Key)
		if kv.Key == "location" {
			loc, ok := p.location(kv.Val, sub)
			if ok {
				e.Location = &timeinterval.Location{Location: loc}
			}
			good = good && ok
			continue
		}
		items, ok := p.Sequence(kv.Val, sub)
		if !ok {
			good = false
			continue
		}
		if len(items) == 0 {
			p.Errorf(kv.Val.Line, sub, "empty list matches no time: leave the key out to match any")
			good = false
			continue
		}
		for i, it := range items {
			if kv.Key == "times" {
				tr, ok := p.timeRange(it, fmt.Sprintf("%s[%d]", sub, i))
				e.Times = append(e.Times, tr)
				good = good && ok
				continue
			}
			s, ok := p.Str(it, sub)
			if !ok {
				good = false
				continue
			}
			var err error
			switch kv.Key {
			case "weekdays":
				var v timeinterval.WeekdayRange
				err = it.Decode(&v)
				e.Weekdays = append(e.Weekdays, v)
			case "days_of_month":
				var v timeinterval.DayOfMonthRange
				err = it.Decode(&v)
				e.DaysOfMonth = append(e.DaysOfMonth, v)
			case "months":
				var v timeinterval.MonthRange
				if err = it.Decode(&v); err == nil && (v.Begin < 1 || v.End > 12) {
					err = errors.New("a month is 1 to 12")
				}
				e.Months = append(e.Months, v)
			case "years":
				var v timeinterval.YearRange
				err = it.Decode(&v)
				e.Years = append(e.Years, v)
			}
			if err != nil {
				p.Errorf(it.Line, sub, "%q: %v (%s)", s, err, entryHints[kv.Key])
				good = false
			}
		}
	}
	return e, good
}

// timeRange reads {start_time: HH:MM, end_time: HH:MM}.
func (p *parser) timeRange(n *yaml.Node, field string) (timeinterval.TimeRange, bool) {
	var tr timeinterval.TimeRange
	pairs, ok := p.Mapping(n, field, timeRangeKeys)
	if !ok {
		return tr, false
	}
	good := true
	written := make([]string, 0, 2)
	for _, key := range timeRangeKeys {
		kv, found := rulefile.Find(pairs, key)
		if !found {
			p.Errorf(n.Line, rulefile.Join(field, key), "missing: %s", entryHints["times"])
			good = false
			continue
		}
		s, ok := p.Str(kv.Val, rulefile.Join(field, key))
		good = good && ok
		written = append(written, s)
	}
	if !good {
		return tr, false
	}
	// Every key is known and every value a scalar: decoding visits no more
	// nodes than were charged.
	if err := n.Decode(&tr); err != nil {
		p.Errorf(n.Line, field, "%s-%s: %v (%s)", written[0], written[1], err, entryHints["times"])
		return tr, false
	}
	return tr, true
}

// location reads an IANA time zone name.
func (p *parser) location(n *yaml.Node, field string) (*time.Location, bool) {
	s, ok := p.Str(n, field)
	if !ok {
		return nil, false
	}
	return p.zone(s, n.Line, field)
}

// zone loads the IANA time zone name. Local is refused: it would depend on
// the machine relay runs on.
func (p *parser) zone(name string, line int, field string) (*time.Location, bool) {
	if name == "Local" {
		p.Errorf(line, field, `"Local" depends on the machine relay runs on: name the zone, such as Europe/Berlin or UTC`)
		return nil, false
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		p.Errorf(line, field, "%q is not an IANA time zone (such as Europe/Berlin, Asia/Shanghai or UTC)", name)
		return nil, false
	}
	return loc, true
}

// intervalNames reads a list of time interval names, each once, and
// remembers them to check once every interval is read.
func (p *parser) intervalNames(n *yaml.Node, field string) []string {
	items, ok := p.Sequence(n, field)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		p.Errorf(n.Line, field, "empty list: want the name of at least one time interval")
		return nil
	}
	var out []string
	for _, it := range items {
		name, ok := p.Str(it, field)
		if !ok {
			continue
		}
		p.intervalRefs = append(p.intervalRefs, intervalRef{name: name, field: field, line: it.Line})
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// checkIntervalRefs reports every name of an undefined time interval,
// unless some interval could not be read and might be the one meant.
func (p *parser) checkIntervalRefs(r *Rules) {
	if p.intervalsUnread {
		return
	}
	for _, ref := range p.intervalRefs {
		if _, ok := r.Intervals[ref.name]; !ok {
			p.Errorf(ref.line, ref.field, "time interval %q is not defined (time_intervals defines %s)", ref.name, p.definedIntervals(r))
		}
	}
}

func (p *parser) definedIntervals(r *Rules) string {
	if len(r.Intervals) == 0 {
		return "none"
	}
	var names []string
	for _, iv := range r.OrderedIntervals() {
		names = append(names, iv.Name)
	}
	return strings.Join(names, ", ")
}

// maintenanceWindows reads the top-level maintenance.
func (p *parser) maintenanceWindows(r *Rules, n *yaml.Node) {
	items, _ := p.optionalList(n, "maintenance")
	names := map[string]int{}
	for i, item := range items {
		field := fmt.Sprintf("maintenance[%d]", i)
		m := Maintenance{Line: item.Line}
		pairs, ok := p.Mapping(item, field, maintenanceKeys)
		if !ok {
			continue
		}
		for _, kv := range pairs {
			sub := rulefile.Join(field, kv.Key)
			switch kv.Key {
			case "name":
				m.Name = p.uniqueName(kv.Val, sub, "maintenance window", names)
			case "when":
				m.When = p.intervalNames(kv.Val, sub)
			case "match":
				m.Match = p.matcher(kv.Val, sub)
			}
		}
		if _, ok := rulefile.Find(pairs, "name"); !ok {
			p.Errorf(item.Line, rulefile.Join(field, "name"), "missing: every maintenance window needs a name")
		}
		if _, ok := rulefile.Find(pairs, "when"); !ok {
			p.Errorf(item.Line, rulefile.Join(field, "when"), "missing: want the names of the time intervals the window is open in")
		}
		r.Maintenance = append(r.Maintenance, m)
	}
}

// inhibits reads the top-level inhibit.
func (p *parser) inhibits(r *Rules, n *yaml.Node) {
	items, _ := p.optionalList(n, "inhibit")
	names := map[string]int{}
	for i, item := range items {
		field := fmt.Sprintf("inhibit[%d]", i)
		in := Inhibit{Line: item.Line, Equal: ScopeStation}
		pairs, ok := p.Mapping(item, field, inhibitKeys)
		if !ok {
			continue
		}
		for _, kv := range pairs {
			sub := rulefile.Join(field, kv.Key)
			switch kv.Key {
			case "name":
				in.Name = p.uniqueName(kv.Val, sub, "inhibit rule", names)
			case "source", "target":
				m := p.matcher(kv.Val, sub)
				if rulefile.IsNull(kv.Val) || kv.Val.Kind == yaml.MappingNode && len(kv.Val.Content) == 0 {
					p.Errorf(kv.Val.Line, sub, "no condition: an empty %s matches every alarm; name at least one, such as event_codes", kv.Key)
				}
				if kv.Key == "source" {
					in.Source = m
				} else {
					in.Target = m
				}
			case "equal":
				s, ok := p.Str(kv.Val, sub)
				if !ok {
					continue
				}
				if !slices.Contains(scopes, Scope(s)) {
					p.Errorf(kv.Val.Line, sub, "%q is not a scope (want station, system or device)", s)
					continue
				}
				in.Equal = Scope(s)
			}
		}
		for _, need := range [...]struct{ key, why string }{
			{"name", "every inhibit rule needs a name"},
			{"source", "want a match of the alarms that mask, such as {event_codes: [DC_OFFLINE]}"},
			{"target", "want a match of the alarms they mask, such as {event_types: [communication]}"},
		} {
			if _, ok := rulefile.Find(pairs, need.key); !ok {
				p.Errorf(item.Line, rulefile.Join(field, need.key), "missing: %s", need.why)
			}
		}
		r.Inhibits = append(r.Inhibits, in)
	}
}

// uniqueName reads the name of an entry of a kind, unique among names.
func (p *parser) uniqueName(n *yaml.Node, field, kind string, names map[string]int) string {
	name, ok := p.name(n, field)
	if !ok {
		return name
	}
	if first, dup := names[name]; dup {
		p.Errorf(n.Line, field, "%s %q is already defined at line %d", kind, name, first)
		return name
	}
	names[name] = n.Line
	return name
}

// durationIn reads a duration from lo to hi (no upper bound when hi is 0);
// with zero set, 0 is also accepted (written 0 or 0s), meaning none.
func (p *parser) durationIn(n *yaml.Node, field string, lo, hi time.Duration, zero bool) time.Duration {
	s, ok := p.Str(n, field)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(s)
	switch {
	case err == nil && d == 0 && zero:
		return 0
	case err == nil && d >= lo && (hi == 0 || d <= hi):
		return d
	}
	want := "of at least " + fmtDuration(lo)
	if hi != 0 {
		want = "from " + fmtDuration(lo) + " to " + fmtDuration(hi)
	}
	if zero {
		want += ", or 0 for none"
	}
	p.Errorf(n.Line, field, "%q is not a duration %s (a number with a unit, such as 90s, 10m or 4h)", s, want)
	return 0
}

// fmtDuration writes whole minutes and hours as 10m and 24h.
func fmtDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	case d%time.Minute == 0:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	}
	return d.String()
}

// digest reads a sink's digest: false, true, or {threshold, window}.
func (p *parser) digest(n *yaml.Node, field string) Digest {
	d := Digest{Threshold: DefaultDigestThreshold, Window: DefaultDigestWindow}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		on, _ := p.Bool(n, field)
		d.Off = !on
		return d
	}
	if n.Kind != yaml.MappingNode {
		p.Errorf(n.Line, field, "want false, true or a mapping such as {threshold: 10, window: 10m}, got %s", rulefile.Describe(n))
		return d
	}
	pairs, _ := p.Mapping(n, field, digestKeys)
	for _, kv := range pairs {
		sub := rulefile.Join(field, kv.Key)
		switch kv.Key {
		case "threshold":
			var v int
			if kv.Val.Kind != yaml.ScalarNode || kv.Val.Tag != "!!int" || kv.Val.Decode(&v) != nil ||
				v < MinDigestThreshold || v > MaxDigestThreshold {
				p.Errorf(kv.Val.Line, sub, "want a whole number from %d to %d: the starts per window above which one digest is sent",
					MinDigestThreshold, MaxDigestThreshold)
				continue
			}
			d.Threshold = v
		case "window":
			if w := p.durationIn(kv.Val, sub, MinDigestWindow, MaxDigestWindow, false); w != 0 {
				d.Window = w
			}
		}
	}
	return d
}

// dailyTime reads "HH:MM Zone", such as "08:00 Asia/Shanghai".
func (p *parser) dailyTime(n *yaml.Node, field string) *DailyTime {
	s, ok := p.Str(n, field)
	if !ok {
		return nil
	}
	parts := strings.Fields(s)
	var m []string
	if len(parts) == 2 {
		m = dailyRE.FindStringSubmatch(parts[0])
	}
	if m == nil {
		p.Errorf(n.Line, field, `%q is not a time of day and a time zone: want "HH:MM Zone", such as "08:00 Asia/Shanghai" or "07:30 UTC"`, s)
		return nil
	}
	loc, ok := p.zone(parts[1], n.Line, field)
	if !ok {
		return nil
	}
	hour, _ := strconv.Atoi(m[1])
	minute, _ := strconv.Atoi(m[2])
	return &DailyTime{Hour: hour, Minute: minute, Location: loc}
}

// ackBy reads a route's ack_by: "<chat>:<id>" entries.
func (p *parser) ackBy(n *yaml.Node, field string) []string {
	items, ok := p.Sequence(n, field)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		p.Errorf(n.Line, field, "empty list: name who may acknowledge (slack:U…, telegram:<user id>, …), or leave ack_by out to let anyone")
		return nil
	}
	var out []string
	for _, it := range items {
		s, ok := p.Str(it, field)
		if !ok {
			continue
		}
		chat, id, found := strings.Cut(s, ":")
		if !found || id == "" || strings.ContainsAny(id, " \t") || !slices.Contains(AckChats, chat) {
			p.Errorf(it.Line, field, "%q: want <chat>:<id> with chat one of %s, such as slack:U024BE7LH or telegram:123456789", s, strings.Join(AckChats, ", "))
			continue
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// AckChats are the chats ack_by may name people of.
var AckChats = []string{"slack", "telegram", "feishu", "pagerduty"}

// escalate reads a route's escalation steps, sorted by their after; two
// steps may not share one.
func (p *parser) escalate(r *Rules, n *yaml.Node, field string) []EscalationStep {
	items, ok := p.Sequence(n, field)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		p.Errorf(n.Line, field, "empty list: want steps such as [{after: 10m, to: [oncall]}], or leave escalate out")
		return nil
	}
	var out []EscalationStep
	for i, it := range items {
		sub := fmt.Sprintf("%s[%d]", field, i)
		pairs, ok := p.Mapping(it, sub, escalationKeys)
		if !ok {
			continue
		}
		st := EscalationStep{Line: it.Line}
		for _, kv := range pairs {
			switch kv.Key {
			case "after":
				st.After = p.durationIn(kv.Val, rulefile.Join(sub, "after"), MinEscalateAfter, MaxEscalateAfter, false)
			case "to":
				st.To = p.to(r, kv.Val, rulefile.Join(sub, "to"))
			}
		}
		for _, k := range []string{"after", "to"} {
			if _, ok := rulefile.Find(pairs, k); !ok {
				p.Errorf(it.Line, rulefile.Join(sub, k), "missing: every escalation step needs after and to")
			}
		}
		for _, prev := range out {
			if st.After != 0 && prev.After == st.After {
				p.Errorf(it.Line, rulefile.Join(sub, "after"), "%s: the step at line %d has the same after; join their to lists", fmtDuration(st.After), prev.Line)
			}
		}
		if len(out) >= MaxEscalationSteps {
			p.Errorf(it.Line, sub, "more than %d steps", MaxEscalationSteps)
			break
		}
		out = append(out, st)
	}
	slices.SortStableFunc(out, func(a, b EscalationStep) int { return int(a.After - b.After) })
	return out
}
