package route

import (
	"slices"
	"time"

	"github.com/prometheus/alertmanager/timeinterval"
)

// nextYears is how far ahead Interval.Next looks, in years.
const nextYears = 1

// Interval is a named, recurring set of times from the rules file's
// time_intervals, in Alertmanager's grammar: weekdays, times of day, days of
// the month, months and years, each in an IANA time zone (UTC when the
// entry names none). It is active when any of its entries contains the time.
// Maintenance windows and the active_when and mute_when of routes name
// intervals.
type Interval struct {
	// Name is unique in the file.
	Name string
	// Line is where the interval is defined.
	Line int

	// entries are the entries without their zones, which locs holds: each
	// is asked about the wall clock of its zone written as UTC, because the
	// library counts a month whose clocks go forward as a day short and so
	// takes -1 in days_of_month for the day before the last.
	entries []timeinterval.TimeInterval
	locs    []*time.Location
	// zones holds, per zone of the entries, the minutes of the day at which
	// an entry can become active or inactive.
	zones []zoneBounds
}

// zoneBounds are the minutes of the day, in loc, at which entries in loc can
// become active or inactive: 0 and the ends of their times, ascending.
type zoneBounds struct {
	loc     *time.Location
	minutes []int
}

// Span is a stretch of time [Start, End).
type Span struct{ Start, End time.Time }

// newInterval returns the interval of entries; an entry without a location
// is in UTC.
func newInterval(name string, line int, entries []timeinterval.TimeInterval) *Interval {
	i := &Interval{Name: name, Line: line}
	for _, e := range entries {
		loc := time.UTC
		if e.Location != nil {
			loc = e.Location.Location
		}
		e.Location = nil
		i.entries = append(i.entries, e)
		i.locs = append(i.locs, loc)
		z := slices.IndexFunc(i.zones, func(z zoneBounds) bool { return z.loc.String() == loc.String() })
		if z < 0 {
			z = len(i.zones)
			i.zones = append(i.zones, zoneBounds{loc: loc, minutes: []int{0}})
		}
		for _, tr := range e.Times {
			i.zones[z].minutes = append(i.zones[z].minutes, tr.StartMinute, tr.EndMinute)
		}
	}
	for k := range i.zones {
		slices.Sort(i.zones[k].minutes)
		i.zones[k].minutes = slices.Compact(i.zones[k].minutes)
	}
	return i
}

// Contains reports whether the interval is active at t.
func (i *Interval) Contains(t time.Time) bool {
	for k, e := range i.entries {
		lt := t.In(i.locs[k])
		wall := time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), lt.Minute(), lt.Second(), lt.Nanosecond(), time.UTC)
		if e.ContainsTime(wall) {
			return true
		}
	}
	return false
}

// Location returns the time zone of the interval's first entry, in which
// relay check shows its occurrences.
func (i *Interval) Location() *time.Location {
	if len(i.locs) == 0 {
		return time.UTC
	}
	return i.locs[0]
}

// Next returns up to n spans [Start, End) in which i is active, starting at
// or after t (a span already active at t starts at t), looking at most a
// year ahead: a span still active a year after t ends there. Adjacent
// entries make one span, so a night written as 22:00-24:00 and 00:00-06:00
// is one span from 22:00 to 06:00. Times are in i's Location, to the minute
// of the wall clock: across a change of daylight saving time a span lasts as
// long as the clocks say, so 01:00-04:00 lasts two hours on the morning the
// clocks go forward.
func (i *Interval) Next(t time.Time, n int) []Span {
	if n <= 0 || len(i.entries) == 0 {
		return nil
	}
	return nextSpans(t, n, i.Location(), i.Contains, i.boundaryAfter)
}

// nextSpans returns up to n spans [Start, End) in which active holds,
// starting at or after t and looking at most a year ahead, in loc; boundary
// returns the first instant after x at which active can change.
func nextSpans(t time.Time, n int, loc *time.Location, active func(time.Time) bool, boundary func(x time.Time) time.Time) []Span {
	end := t.AddDate(nextYears, 0, 0)
	var out []Span
	on := active(t)
	start := t
	for x := t; len(out) < n; {
		x = boundary(x)
		if !x.Before(end) {
			if on {
				out = append(out, Span{Start: start.In(loc), End: end.In(loc)})
			}
			break
		}
		if now := active(x); now != on {
			if now {
				start = x
			} else {
				out = append(out, Span{Start: start.In(loc), End: x.In(loc)})
			}
			on = now
		}
	}
	return out
}

// boundaryAfter returns the first instant after x at which an entry of i can
// change between active and inactive. An entry looks only at the wall clock
// of its zone, to the minute: it changes at a minute of the day where one of
// its times starts or ends, at midnight (a new weekday, day, month or year),
// or when the zone's offset changes. Between offset changes the wall clock
// is the instant plus a fixed offset, so each such minute maps to exactly one
// instant. i has at least one entry.
func (i *Interval) boundaryAfter(x time.Time) time.Time {
	var best time.Time
	for _, z := range i.zones {
		lx := x.In(z.loc)
		_, offset := lx.Zone()
		_, zoneEnd := lx.ZoneBounds()
		y, m, d := lx.Date()
		midnight := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Add(-time.Duration(offset) * time.Second)
		var next time.Time
	days:
		for day := 0; day < 2; day++ {
			for _, minute := range z.minutes {
				c := midnight.AddDate(0, 0, day).Add(time.Duration(minute) * time.Minute)
				if c.After(x) {
					next = c
					break days
				}
			}
		}
		// minutes holds 0, so the next midnight is always a candidate.
		if !zoneEnd.IsZero() && zoneEnd.Before(next) {
			next = zoneEnd
		}
		if best.IsZero() || next.Before(best) {
			best = next
		}
	}
	return best
}

// DailyTime is a time of day in a time zone, such as 08:00 in Asia/Shanghai:
// when a sink's daily summary goes out.
type DailyTime struct {
	Hour, Minute int
	Location     *time.Location
}

// Next returns the first instant after after at which the wall clock of d's
// zone shows d's time: once per day. On a day whose clocks skip that time
// (daylight saving starts), it is the instant the skipped time would have
// been in the offset before the change, which the clocks show as an hour
// later; on a day whose clocks show it twice, it is one of the two.
func (d DailyTime) Next(after time.Time) time.Time {
	loc := d.Location
	if loc == nil {
		loc = time.UTC
	}
	y, m, day := after.In(loc).Date()
	for k := 0; ; k++ {
		c := time.Date(y, m, day+k, d.Hour, d.Minute, 0, 0, loc)
		if c.After(after) {
			return c
		}
	}
}

// String writes d as it is written in the rules file: "08:00 Asia/Shanghai".
func (d DailyTime) String() string {
	loc := d.Location
	if loc == nil {
		loc = time.UTC
	}
	return time.Date(2000, 1, 1, d.Hour, d.Minute, 0, 0, time.UTC).Format("15:04") + " " + loc.String()
}

// Digest is how a sink's storm digest is configured: when more than
// Threshold starts are due for one destination within Window, they go out as
// one digest message. The default is on, 10 per 10 minutes (the ISA-18.2
// flood threshold).
type Digest struct {
	// Off is set by digest: false.
	Off bool
	// Threshold is the number of starts in Window above which a digest is
	// sent (2 to 1000, default DefaultDigestThreshold).
	Threshold int
	// Window is the stretch of time the starts are counted over (1m to 24h,
	// default DefaultDigestWindow).
	Window time.Duration
}

// Defaults and bounds of the digest option and of the route options.
const (
	DefaultDigestThreshold = 10
	DefaultDigestWindow    = 10 * time.Minute
	MinDigestThreshold     = 2
	MaxDigestThreshold     = 1000
	MinDigestWindow        = time.Minute
	MaxDigestWindow        = 24 * time.Hour
	// MaxHold is the longest hold of a route.
	MaxHold = 24 * time.Hour
	// MinRepeat is the shortest reminder interval of a route.
	MinRepeat = 10 * time.Minute
	// MinEscalateAfter and MaxEscalateAfter bound an escalation step's
	// after: alarm management looks every few seconds, and an alarm
	// unacknowledged for a week needs a person, not a step.
	MinEscalateAfter = 10 * time.Second
	MaxEscalateAfter = 7 * 24 * time.Hour
	// MaxEscalationSteps is how many steps a route's escalate may have.
	MaxEscalationSteps = 10
)
