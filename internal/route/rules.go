// Package route reads relay's rules file (docs/design.md §7): which sinks
// exist and which events each of them receives. Load parses, validates and
// compiles the file once; matching an event against the compiled rules is
// then cheap and safe for concurrent use.
//
// Routes are tried in order. An event goes to the sinks of the first route
// that matches; a route with continue: true lets the search go on. A sink gets
// an event once even if several matching routes name it.
//
// The file also holds what alarm management reads: time intervals, maintenance
// windows, inhibit rules, and options of routes (hold, repeat, mute times) and
// of sinks (digest, daily summary). This package parses and answers questions
// about them (is this route muted now, which window holds this alarm); acting
// on the answers is the delivery loop's part.
package route

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
	"github.com/relay-energy/relay/internal/rulefile"
)

// MaxFileSize is the largest rules file Load reads.
const MaxFileSize = 1 << 20

// Error is one problem in a rules file: where it is and what is wrong. Parse
// and Load return every problem they find, joined with errors.Join; use
// errors.As, or Unwrap() []error on the joined error, to get at each one.
type Error = rulefile.Error

// Rules is a loaded, validated and compiled rules file. It is immutable after
// Load or Parse and safe for concurrent use.
type Rules struct {
	// File is the name the rules were loaded from.
	File string
	// Sinks are the sinks in file order.
	Sinks []Sink
	// Routes are the routes in file order.
	Routes []Route
	// Intervals are the time intervals (time_intervals) by name.
	Intervals map[string]*Interval
	// Maintenance are the maintenance windows in file order.
	Maintenance []Maintenance
	// Inhibits are the inhibit rules in file order.
	Inhibits []Inhibit

	// Variables are the environment variables the sinks read, in file order.
	Variables []string

	sinkIndex map[string]int
	idx       index
}

// Sink is one destination of events and its options, as written in the rules
// file with defaults applied and secrets resolved.
type Sink struct {
	// Name is unique in the file; outboxes and metrics are keyed by it.
	Name string
	// Type is the sink type's name (internal/notify/registry).
	Type string
	// Machines says the sink's type feeds other programs, not people
	// (sinktype.Type.Machines): alarm management leaves it alone unless a
	// route says suppress: true.
	Machines bool
	// Line is where the sink is defined.
	Line int
	// MaxAge is how long an event is retried before it is dead-lettered
	// (max_age, default notify.DefaultMaxAge).
	MaxAge time.Duration
	// MaxRetryAfter caps the wait a receiver's Retry-After asks for
	// (max_retry_after, default notify.DefaultMaxRetryAfter).
	MaxRetryAfter time.Duration
	// SendResolved is false when the sink wants no end nor invalid
	// (send_resolved: false, Alertmanager's word and meaning; default
	// true): it gets starts only.
	SendResolved bool
	// Digest configures the storm digest (digest, default on with
	// DefaultDigestThreshold per DefaultDigestWindow).
	Digest Digest
	// DailySummary is when the daily summary of stale alarms goes out
	// (daily_summary); nil for none.
	DailySummary *DailyTime
	// Config is the sink's options, decoded by its type. It holds the
	// secrets they name: never log it.
	Config sinktype.Config

	// fingerprint is what the options configure, variables read included.
	fingerprint []string
}

// Route sends the events it matches to its sinks.
type Route struct {
	// Name is unique in the file.
	Name string
	// Line is where the route is defined.
	Line int
	// Match holds the conditions as written; empty matches every event.
	Match Match
	// To names the sinks, each once, in the order written.
	To []string
	// Continue lets the search go on to later routes after this one matched.
	Continue bool
	// Hold is how long a start must stay ongoing before it reaches the
	// route's sinks (hold, 0 to MaxHold); an alarm that ends within it
	// reaches them not at all.
	Hold time.Duration
	// Suppress says whether alarm management applies to the route's sinks
	// (suppress); nil when unset, which leaves it to the sink's type.
	Suppress *bool
	// Repeat is the reminder interval while an alarm stays ongoing (repeat,
	// at least MinRepeat); 0 for no reminders.
	Repeat time.Duration
	// RepeatUntilCleared keeps reminders going after the alarm was
	// acknowledged (repeat_until: cleared); by default they stop then.
	RepeatUntilCleared bool
	// ActiveWhen names time intervals outside which the route's sinks are
	// muted (active_when); MuteWhen names those inside which they are
	// (mute_when). See Rules.RouteMuted.
	ActiveWhen, MuteWhen []string
	// AckBy names who may acknowledge or shelve the route's alarms from a
	// chat (ack_by): "slack:U…" (a user) or "slack:S…" (a user group),
	// "telegram:<user id>", "feishu:<open_id>", "pagerduty:<user id>".
	// Empty lets anyone who sees the buttons.
	AckBy []string
	// Escalate are the escalation steps (escalate), in the order of their
	// After: while an alarm the route matches stays ongoing and nobody has
	// acknowledged or shelved it, each step announces it to its sinks.
	Escalate []EscalationStep

	cond cond
}

// EscalationStep is one step of a route's escalation: After the alarm's
// start was first seen, unacknowledged, it is announced to To.
type EscalationStep struct {
	After time.Duration
	To    []string
	// Line is where the step is written.
	Line int
}

// Match is the conditions of a route. Every field is optional; a list
// matches when the event's value is any of its entries, and the fields
// combine with and.
type Match struct {
	Transitions []event.Transition `json:"transitions,omitempty"`
	Levels      []int              `json:"levels,omitempty"`
	TenantIDs   []string           `json:"tenant_ids,omitempty"`
	StationIDs  []string           `json:"station_ids,omitempty"`
	SystemIDs   []string           `json:"system_ids,omitempty"`
	DeviceSNs   []string           `json:"device_sns,omitempty"`
	// DeviceTypes match the device's deviceTemplateCode.
	DeviceTypes []string `json:"device_types,omitempty"`
	EventCodes  []string `json:"event_codes,omitempty"`
	EventTypes  []string `json:"event_types,omitempty"`
	// StationNames and DeviceNames are globs: * matches any run of
	// characters, ? any one character, and \ escapes *, ? or \.
	StationNames []string `json:"station_names,omitempty"`
	DeviceNames  []string `json:"device_names,omitempty"`
}

// Result is what matching one event found.
type Result struct {
	// Routes are the names of the routes that matched, in order; the search
	// stopped after the last one unless it continues.
	Routes []string
	// Sinks are the sinks the event goes to, each once, in route order.
	Sinks []string
}

// Load reads, validates and compiles the rules file at path. lookup reads
// environment variables (webhook secrets, Slack webhook URLs); nil reads none.
// Every problem is reported, each as an *Error.
func Load(path string, lookup func(string) (string, bool)) (*Rules, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, lookup)
}

// ReadFile reads the rules file at path, and refuses one larger than
// MaxFileSize without reading past it. relay check, start-up and every
// reload read rules through it, so that they accept the same files.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("route: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("route: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, &Error{File: path, Msg: fmt.Sprintf("file is larger than the %d bytes allowed", MaxFileSize)}
	}
	return data, nil
}

// AddSecrets adds to set the secret values of the sink's options: tokens,
// signing secrets, header values, URL credentials.
func (s Sink) AddSecrets(set *redact.Set) {
	if s.Config != nil {
		s.Config.AddSecrets(set)
	}
}

// Destination identifies where a sink's messages land, for the sinks whose
// memory of an alarm refers to it: "slack:<channel>" for a Slack sink
// posting with the bot token (its memory holds the thread of each alarm).
// Other sinks return "": their name alone identifies them.
func (s Sink) Destination() string {
	if s.Config == nil {
		return ""
	}
	return s.Config.Destination()
}

// Target describes where a sink sends events without revealing secrets.
func (s Sink) Target() string {
	if s.Config == nil {
		return ""
	}
	return s.Config.Target()
}

// Same reports whether s and o configure the same sink: the same type, name,
// options as written and values of the variables they read. The line they
// are defined on is left out.
func (s Sink) Same(o Sink) bool {
	return s.Name == o.Name && s.Type == o.Type && s.MaxAge == o.MaxAge && s.MaxRetryAfter == o.MaxRetryAfter && s.SendResolved == o.SendResolved &&
		s.Digest == o.Digest && sameDaily(s.DailySummary, o.DailySummary) && slices.Equal(s.fingerprint, o.fingerprint)
}

// sameDaily reports whether two daily summary times are the same time of
// day in the same zone, or both unset.
func sameDaily(a, b *DailyTime) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.String() == b.String()
}

// Sink returns the sink called name.
func (r *Rules) Sink(name string) (Sink, bool) {
	i, ok := r.sinkIndex[name]
	if !ok {
		return Sink{}, false
	}
	return r.Sinks[i], true
}

// SinksFor returns the names of the sinks ev goes to, each once, in route
// order; nil when no route matches. Its method value fits store.Router.
func (r *Rules) SinksFor(ev *event.Event) []string {
	return r.AppendSinks(nil, ev)
}

// AppendSinks appends to dst the names of the sinks ev goes to that dst does
// not already hold past its original length, and returns the extended slice.
// With a dst of enough capacity it does not allocate.
func (r *Rules) AppendSinks(dst []string, ev *event.Event) []string {
	start := len(dst)
	r.each(ev, func(rt *Route) {
		for _, s := range rt.To {
			if !slices.Contains(dst[start:], s) {
				dst = append(dst, s)
			}
		}
	})
	return dst
}

// ResolvedOff returns the names of the sinks that say send_resolved: false.
func (r *Rules) ResolvedOff() []string {
	var out []string
	for _, s := range r.Sinks {
		if !s.SendResolved {
			out = append(out, s.Name)
		}
	}
	return out
}

// Escalates reports whether some route says escalate.
func (r *Rules) Escalates() bool {
	return slices.ContainsFunc(r.Routes, func(rt Route) bool { return len(rt.Escalate) > 0 })
}

// RoutesOf returns the routes ev matches, in order, up to and including the
// first that does not continue: those whose options (escalate, ack_by,
// repeat_until) apply to its alarm.
func (r *Rules) RoutesOf(ev *event.Event) []*Route {
	var out []*Route
	r.each(ev, func(rt *Route) { out = append(out, rt) })
	return out
}

// Match returns the routes ev matches and the sinks it goes to.
func (r *Rules) Match(ev *event.Event) Result {
	var res Result
	r.each(ev, func(rt *Route) {
		res.Routes = append(res.Routes, rt.Name)
		for _, s := range rt.To {
			if !slices.Contains(res.Sinks, s) {
				res.Sinks = append(res.Sinks, s)
			}
		}
	})
	return res
}

// Warnings returns what is legal but probably not meant: sinks no route
// names, routes no event can reach because an earlier route matches
// everything and does not continue, routes that match no start (an end or
// invalid goes where its start went, so such a route sends nothing) or
// that leave out ends (which follow their starts all the same), and time
// intervals nothing names.
func (r *Rules) Warnings() []string {
	var out []string
	for _, rt := range r.Routes {
		ts := rt.Match.Transitions
		switch {
		case len(ts) == 0:
		case !slices.Contains(ts, event.Start):
			out = append(out, fmt.Sprintf("%s:%d: route %q matches no start, so it sends nothing: an end or invalid goes where its start went; "+
				"add start to its transitions, or remove the route", r.File, rt.Line, rt.Name))
		case !slices.Contains(ts, event.End) || !slices.Contains(ts, event.Invalid):
			var left []string
			for _, tr := range []event.Transition{event.End, event.Invalid} {
				if !slices.Contains(ts, tr) {
					left = append(left, string(tr))
				}
			}
			out = append(out, fmt.Sprintf("%s:%d: route %q leaves %s out of its transitions, but ends follow their starts: %s still get "+
				"the end and invalid of every alarm whose start the route sends them; to keep ends from a sink, say send_resolved: false on the sink",
				r.File, rt.Line, rt.Name, strings.Join(left, " and "), strings.Join(rt.To, ", ")))
		}
	}
	used := map[string]bool{}
	for _, rt := range r.Routes {
		for _, s := range rt.To {
			used[s] = true
		}
		for _, st := range rt.Escalate {
			for _, s := range st.To {
				used[s] = true
			}
		}
	}
	for _, s := range r.Sinks {
		if !used[s.Name] {
			out = append(out, fmt.Sprintf("%s:%d: sink %q is not named by any route", r.File, s.Line, s.Name))
		}
	}
	for i, rt := range r.Routes {
		if rt.Match.empty() && !rt.Continue {
			for _, later := range r.Routes[i+1:] {
				out = append(out, fmt.Sprintf("%s:%d: route %q is never reached: route %q before it matches every event and does not continue",
					r.File, later.Line, later.Name, rt.Name))
			}
			break
		}
	}
	for _, iv := range r.OrderedIntervals() {
		if !r.intervalUsed(iv.Name) {
			out = append(out, fmt.Sprintf("%s:%d: time interval %q is not named by any route or maintenance window", r.File, iv.Line, iv.Name))
		}
	}
	return out
}

// OrderedIntervals returns the time intervals in file order.
func (r *Rules) OrderedIntervals() []*Interval {
	out := make([]*Interval, 0, len(r.Intervals))
	for _, iv := range r.Intervals {
		out = append(out, iv)
	}
	slices.SortFunc(out, func(a, b *Interval) int { return a.Line - b.Line })
	return out
}

func (r *Rules) intervalUsed(name string) bool {
	for _, rt := range r.Routes {
		if slices.Contains(rt.ActiveWhen, name) || slices.Contains(rt.MuteWhen, name) {
			return true
		}
	}
	for _, m := range r.Maintenance {
		if slices.Contains(m.When, name) {
			return true
		}
	}
	return false
}

// String summarises the conditions, such as `levels=0,1 transitions=start`,
// or "any event" when there are none.
func (m Match) String() string {
	if m.empty() {
		return "any event"
	}
	var parts []string
	add := func(key string, vals []string) {
		if len(vals) == 0 {
			return
		}
		q := make([]string, len(vals))
		for i, v := range vals {
			q[i] = v
			if v == "" || strings.ContainsAny(v, " ,\"'\t=") {
				q[i] = fmt.Sprintf("%q", v)
			}
		}
		parts = append(parts, key+"="+strings.Join(q, ","))
	}
	tr := make([]string, len(m.Transitions))
	for i, t := range m.Transitions {
		tr[i] = string(t)
	}
	lv := make([]string, len(m.Levels))
	for i, l := range m.Levels {
		lv[i] = fmt.Sprint(l)
	}
	add("transitions", tr)
	add("levels", lv)
	add("tenant_ids", m.TenantIDs)
	add("station_ids", m.StationIDs)
	add("system_ids", m.SystemIDs)
	add("device_sns", m.DeviceSNs)
	add("device_types", m.DeviceTypes)
	add("event_codes", m.EventCodes)
	add("event_types", m.EventTypes)
	add("station_names", m.StationNames)
	add("device_names", m.DeviceNames)
	return strings.Join(parts, " ")
}

func (m Match) empty() bool {
	return len(m.Transitions) == 0 && len(m.Levels) == 0 && len(m.TenantIDs) == 0 && len(m.StationIDs) == 0 &&
		len(m.SystemIDs) == 0 && len(m.DeviceSNs) == 0 && len(m.DeviceTypes) == 0 && len(m.EventCodes) == 0 &&
		len(m.EventTypes) == 0 && len(m.StationNames) == 0 && len(m.DeviceNames) == 0
}
