package route

import (
	"slices"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// Maintenance is a maintenance window of the rules file: while one of the
// intervals it names is active, the alarms its match admits are suppressed
// for people, as a silence would suppress them.
type Maintenance struct {
	// Name is unique among the maintenance windows of the file.
	Name string
	// Line is where the window is defined.
	Line int
	// When names the time intervals of the window, one or more; it is open
	// while any of them is active.
	When []string
	// Match selects the alarms of the window; the zero Matcher, written by
	// leaving match out, admits every alarm.
	Match Matcher
}

// Inhibit is a masking rule of the rules file: while an alarm that Source
// matches is ongoing, alarms that Target matches in the same Equal scope (the
// same station, system or device) are suppressed for people.
type Inhibit struct {
	// Name is unique among the inhibit rules of the file.
	Name string
	// Line is where the rule is defined.
	Line int
	// Source selects the alarms that mask, Target those they mask.
	Source, Target Matcher
	// Equal is what a source and a target must share (default ScopeStation).
	Equal Scope
}

// Scope is what two alarms must share for one to mask the other.
type Scope string

// The scopes of an inhibit rule's equal.
const (
	ScopeStation Scope = "station"
	ScopeSystem  Scope = "system"
	ScopeDevice  Scope = "device"
)

// scopes are the scopes in the order the rules file lists them.
var scopes = []Scope{ScopeStation, ScopeSystem, ScopeDevice}

// Key returns what identifies the scope of an event: its tenant id and its
// station id, system id or device serial number, joined as "tenant/id"
// (the way an event's source names a station). It is "" when the event has
// no such id, and then masks nothing and is masked by nothing.
func (s Scope) Key(d *event.Data) string {
	var id string
	switch s {
	case ScopeStation:
		id = d.StationID
	case ScopeSystem:
		id = d.SystemID
	case ScopeDevice:
		id = d.DeviceSN
	}
	if id == "" {
		return ""
	}
	return d.TenantID + "/" + id
}

// MaintenanceAt returns the name of the first maintenance window, in file
// order, that is open at t and whose match admits ev.
func (r *Rules) MaintenanceAt(ev *event.Event, t time.Time) (name string, ok bool) {
	for i := range r.Maintenance {
		m := &r.Maintenance[i]
		if m.Match.Matches(ev) && r.anyActive(m.When, t) {
			return m.Name, true
		}
	}
	return "", false
}

// RouteMuted reports whether the sinks of rt are muted at t by its
// mute_when (inside one of those intervals) or its active_when (outside all
// of those), and names why: the interval of mute_when, or "outside " and the
// intervals of active_when, such as "outside business-hours".
func (r *Rules) RouteMuted(rt *Route, t time.Time) (interval string, muted bool) {
	for _, name := range rt.MuteWhen {
		if iv := r.Intervals[name]; iv != nil && iv.Contains(t) {
			return name, true
		}
	}
	if len(rt.ActiveWhen) > 0 && !r.anyActive(rt.ActiveWhen, t) {
		return "outside " + strings.Join(rt.ActiveWhen, ", "), true
	}
	return "", false
}

// RoutesTo returns the routes ev matches that name sink, in file order; the
// search stops, as routing does, after the first matching route that does
// not continue.
func (r *Rules) RoutesTo(ev *event.Event, sink string) []*Route {
	var out []*Route
	r.each(ev, func(rt *Route) {
		if slices.Contains(rt.To, sink) {
			out = append(out, rt)
		}
	})
	return out
}

// MaintenanceZone returns the time zone of maintenance window m: that of
// the first interval it names, in which its occurrences are shown.
func (r *Rules) MaintenanceZone(m *Maintenance) *time.Location {
	for _, name := range m.When {
		if iv := r.Intervals[name]; iv != nil {
			return iv.Location()
		}
	}
	return time.UTC
}

// MaintenanceNext returns up to n spans [Start, End) in which maintenance
// window m is open (any of its intervals active), starting at or after t
// (a span already open at t starts at t), looking at most a year ahead, in
// the window's zone (MaintenanceZone). Intervals that touch or overlap make
// one span, as for Interval.Next, whose wall-clock rules across daylight
// saving time apply.
func (r *Rules) MaintenanceNext(m *Maintenance, t time.Time, n int) []Span {
	var ivs []*Interval
	for _, name := range m.When {
		if iv := r.Intervals[name]; iv != nil && len(iv.entries) > 0 {
			ivs = append(ivs, iv)
		}
	}
	if n <= 0 || len(ivs) == 0 {
		return nil
	}
	open := func(x time.Time) bool { return r.anyActive(m.When, x) }
	boundary := func(x time.Time) time.Time {
		var best time.Time
		for _, iv := range ivs {
			if b := iv.boundaryAfter(x); best.IsZero() || b.Before(best) {
				best = b
			}
		}
		return best
	}
	return nextSpans(t, n, r.MaintenanceZone(m), open, boundary)
}

// anyActive reports whether any of the named intervals is active at t.
func (r *Rules) anyActive(names []string, t time.Time) bool {
	for _, name := range names {
		if iv := r.Intervals[name]; iv != nil && iv.Contains(t) {
			return true
		}
	}
	return false
}
