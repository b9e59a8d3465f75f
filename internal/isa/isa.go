// Package isa computes the alarm-system figures of ISA-18.2 (ANSI/ISA-18.2,
// IEC 62682) from relay's alarm journal: alarms per day and per operator
// position, the peak 10-minute rate, the time in flood, the bad actors, the
// stale and chattering alarms and the priority mix (docs/design.md §11).
// relay report and the ops listener's /report present a Report; the
// service's metrics use the same definitions.
package isa

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

// The ISA-18.2 terms.
const (
	// FloodWindow and FloodStarts: more than FloodStarts alarms started in
	// FloodWindow is a flood for the operator who receives them.
	FloodWindow = 10 * time.Minute
	FloodStarts = 10
	// FloodPerHour is the flood threshold as a sustained hourly rate, the
	// line drawn on the chart of alarms per hour.
	FloodPerHour = FloodStarts * int(time.Hour/FloodWindow)
	// ChatterWindow and ChatterStarts: ChatterStarts or more starts of one
	// device and event code within ChatterWindow is chattering.
	ChatterWindow = time.Minute
	ChatterStarts = 3
	// StaleAfter: an alarm ongoing for longer is stale.
	StaleAfter = 24 * time.Hour
	// BadActors is how many of the most frequent alarms a report lists.
	BadActors = 10
	// MaxSince is the longest period a report covers.
	MaxSince = 366 * 24 * time.Hour
)

// Report holds the figures of one period, overall and per route.
type Report struct {
	// From and To bound the period: alarms that occurred at or after From
	// and before To count.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Rules names the rules file whose routes are the operator positions;
	// empty when the report was computed without rules.
	Rules string `json:"rules,omitempty"`
	// Overall counts every alarm.
	Overall Figures `json:"overall"`
	// Routes are the figures of each route of the rules, in file order: the
	// alarms whose start the route matches.
	Routes []Figures `json:"routes"`
	// Silent counts the alarms of the period recorded without a start at
	// the first run (RELAY_BOOTSTRAP=record): nobody received them, and
	// they count only among the stale alarms.
	Silent int `json:"silent"`
}

// Figures are the ISA-18.2 figures of one operator position, or of all.
type Figures struct {
	// Route is the route's name; empty for the overall figures.
	Route string `json:"route,omitempty"`
	// Alarms counts the alarms that started in the period.
	Alarms int `json:"alarms"`
	// AveragePerDay is Alarms over the period's length in days.
	AveragePerDay float64 `json:"average_per_day"`
	// PerDay counts them by UTC day of occurrence, every day of the period.
	PerDay []Day `json:"per_day"`
	// PerHour counts them by UTC hour of occurrence, every hour of the
	// period.
	PerHour []Hour `json:"per_hour"`
	// Peak10m is the most alarms started in any 10 minutes of the period,
	// and Peak10mAt the start of the first such 10 minutes.
	Peak10m   int       `json:"peak_10m"`
	Peak10mAt time.Time `json:"peak_10m_at,omitzero"`
	// FloodSeconds is how long the period was in flood: the measure of the
	// instants at which more than FloodStarts alarms had started in the
	// FloodWindow before them. FloodShare is its share of the period.
	FloodSeconds float64 `json:"flood_seconds"`
	FloodShare   float64 `json:"flood_share"`
	// BadActors are the BadActors most frequent device and event code
	// pairs, most frequent first; BadActorShare is their share of Alarms.
	BadActors     []BadActor `json:"bad_actors"`
	BadActorShare float64    `json:"bad_actor_share"`
	// Stale are the alarms ongoing at To for longer than StaleAfter,
	// whenever they started, oldest first.
	Stale []Stale `json:"stale"`
	// Chattering are the device and event code pairs that started
	// ChatterStarts or more times within ChatterWindow in the period, most
	// chattering first.
	Chattering []Chatter `json:"chattering"`
	// Priority is the mix of Alarms by priority: high, medium, low.
	Priority []Priority `json:"priority"`
	// Acknowledged counts the alarms of the period someone acknowledged;
	// MedianTimeToAckSeconds is the median time from their detection to
	// the first acknowledgement (0 when none was). ClearedUnacknowledged
	// counts those that ended before anyone acknowledged them.
	Acknowledged           int     `json:"acknowledged"`
	MedianTimeToAckSeconds float64 `json:"median_time_to_ack_seconds"`
	ClearedUnacknowledged  int     `json:"cleared_unacknowledged"`
}

// Acks tells when an alarm was first acknowledged, if it was (alarm
// management keeps it; manage.FirstAcks reads it).
type Acks map[string]time.Time

// Day is the count of one UTC day. Hours is how much of the day the period
// covers: 24 but at its ends.
type Day struct {
	Date   string  `json:"date"`
	Hours  float64 `json:"hours"`
	Alarms int     `json:"alarms"`
}

// Hour is the count of one UTC hour.
type Hour struct {
	Hour   time.Time `json:"hour"`
	Alarms int       `json:"alarms"`
}

// Source names a device and an event code, with the names of the latest
// alarm of the pair.
type Source struct {
	DeviceSN    string `json:"device_sn"`
	DeviceName  string `json:"device_name,omitempty"`
	StationName string `json:"station_name,omitempty"`
	EventCode   string `json:"event_code"`
	EventDesc   string `json:"event_desc,omitempty"`
}

// BadActor is a frequent device and event code pair: its alarms and their
// share of all.
type BadActor struct {
	Source
	Alarms int     `json:"alarms"`
	Share  float64 `json:"share"`
}

// Chatter is a chattering device and event code pair: its alarms in the
// period, the most that started within ChatterWindow, and when the first
// such burst began.
type Chatter struct {
	Source
	Alarms    int       `json:"alarms"`
	MostIn60s int       `json:"most_in_60s"`
	At        time.Time `json:"at"`
}

// Stale is an alarm ongoing for longer than StaleAfter.
type Stale struct {
	Source
	OriginID    string    `json:"origin_id"`
	Level       int       `json:"level"`
	OccurredAt  time.Time `json:"occurred_at"`
	ActiveHours float64   `json:"active_hours"`
}

// Priority is the share of one priority in the mix, against the target of
// ISA-18.2's guideline.
type Priority struct {
	// Name is high, medium or low; Levels the upstream levels it holds.
	Name   string  `json:"name"`
	Levels string  `json:"levels"`
	Alarms int     `json:"alarms"`
	Share  float64 `json:"share"`
	Target float64 `json:"target"`
}

// priorities maps upstream levels to ISA-18.2 priorities: urgent (0) is
// high, severe (1) medium, major (2), minor (3) and any other level low.
var priorities = []Priority{
	{Name: "high", Levels: "urgent", Target: 0.05},
	{Name: "medium", Levels: "severe", Target: 0.15},
	{Name: "low", Levels: "major, minor", Target: 0.80},
}

func priorityOf(level int) int {
	switch level {
	case 0:
		return 0
	case 1:
		return 1
	}
	return 2
}

// Read reads from st what Compute needs for the period of length since
// that ends at now: the alarms that occurred before the period and were
// still ongoing at its end, then the journal of the period.
func Read(st *store.Store, now time.Time, since time.Duration) ([]store.JournalEntry, error) {
	from := now.Add(-since)
	var out []store.JournalEntry
	keep := func(e *store.JournalEntry) error {
		out = append(out, *e)
		return nil
	}
	if err := st.JournalActive(from, now, keep); err != nil {
		return nil, err
	}
	if err := st.Journal(from, now, keep); err != nil {
		return nil, err
	}
	return out, nil
}

// FromStore reads the journal of st and computes the report of the
// period of length since that ends at now; see Compute.
func FromStore(st *store.Store, rules *route.Rules, now time.Time, since time.Duration, acks Acks) (Report, error) {
	entries, err := Read(st, now, since)
	if err != nil {
		return Report{}, err
	}
	return Compute(entries, rules, now, since, acks), nil
}

// start is one alarm start counted in a Figures.
type start struct {
	at       time.Time
	level    int
	source   Source
	originID string
	// ackAfter is the time from detection to the first acknowledgement,
	// when there was one by now; cleared says it ended by now.
	ackAfter time.Duration
	acked    bool
	cleared  bool
}

// Compute returns the figures of the period of length since that ends at
// now, from entries: the journal entries of the period and of the alarms
// that occurred before it and were ongoing at now, each alarm once (as Read
// gives them). An alarm is ongoing at now when its entry says so, or it
// ended after now. An alarm counts for every route of rules whose match
// admits its start, as routing would; with nil rules there are only overall
// figures. Silent alarms count only as stale. Times are taken in UTC.
func Compute(entries []store.JournalEntry, rules *route.Rules, now time.Time, since time.Duration, acks Acks) Report {
	now = now.UTC()
	from := now.Add(-since)
	rep := Report{From: from, To: now}
	var routeStarts map[string][]start
	var routeStale map[string][]Stale
	if rules != nil {
		rep.Rules = rules.File
		routeStarts, routeStale = map[string][]start{}, map[string][]Stale{}
	}
	var starts []start
	var stale []Stale
	for i := range entries {
		e := &entries[i]
		inPeriod := !e.OccurredAt.Before(from) && e.OccurredAt.Before(now)
		ongoing := e.Status == event.StatusOngoing || e.RecoveredAt.After(now)
		isStale := ongoing && now.Sub(e.OccurredAt) > StaleAfter
		if inPeriod && e.Silent {
			rep.Silent++
		}
		counted := inPeriod && !e.Silent
		if !counted && !isStale {
			continue
		}
		src := sourceOf(e)
		st := start{at: e.OccurredAt.UTC(), level: e.Level, source: src, originID: e.OriginID, cleared: !ongoing}
		if at, ok := acks[e.OriginID]; ok && !at.After(now) {
			st.acked, st.ackAfter = true, at.Sub(e.DetectedAt)
		}
		var sa Stale
		if isStale {
			sa = Stale{Source: src, OriginID: e.OriginID, Level: e.Level, OccurredAt: e.OccurredAt.UTC(),
				ActiveHours: now.Sub(e.OccurredAt).Hours()}
			stale = append(stale, sa)
		}
		if counted {
			starts = append(starts, st)
		}
		if rules == nil {
			continue
		}
		for _, name := range rules.Match(e.Event()).Routes {
			if counted {
				routeStarts[name] = append(routeStarts[name], st)
			}
			if isStale {
				routeStale[name] = append(routeStale[name], sa)
			}
		}
	}
	rep.Overall = figures("", starts, stale, from, now)
	if rules != nil {
		rep.Routes = make([]Figures, 0, len(rules.Routes))
		for _, rt := range rules.Routes {
			rep.Routes = append(rep.Routes, figures(rt.Name, routeStarts[rt.Name], routeStale[rt.Name], from, now))
		}
	}
	return rep
}

func sourceOf(e *store.JournalEntry) Source {
	return Source{DeviceSN: e.DeviceSN, DeviceName: e.DeviceName, StationName: e.StationName, EventCode: e.EventCode, EventDesc: e.EventDesc}
}

// figures computes the Figures of starts, which occurred from from to to,
// and of the stale alarms stale.
func figures(name string, starts []start, stale []Stale, from, to time.Time) Figures {
	slices.SortFunc(starts, func(a, b start) int {
		return cmp.Or(a.at.Compare(b.at), strings.Compare(a.originID, b.originID))
	})
	times := make([]time.Time, len(starts))
	for i, s := range starts {
		times[i] = s.at
	}
	f := Figures{Route: name, Alarms: len(starts)}
	if days := to.Sub(from).Hours() / 24; days > 0 {
		f.AveragePerDay = float64(len(starts)) / days
	}
	f.PerDay, f.PerHour = perDay(times, from, to), perHour(times, from, to)
	f.Peak10m, f.Peak10mAt = Peak(times, FloodWindow)
	f.FloodSeconds = FloodSeconds(times, from, to)
	if period := to.Sub(from).Seconds(); period > 0 {
		f.FloodShare = f.FloodSeconds / period
	}
	f.BadActors, f.BadActorShare = badActors(starts)
	f.Chattering = chattering(starts)
	slices.SortFunc(stale, func(a, b Stale) int {
		return cmp.Or(a.OccurredAt.Compare(b.OccurredAt), strings.Compare(a.OriginID, b.OriginID))
	})
	f.Stale = append([]Stale{}, stale...)
	f.Priority = slices.Clone(priorities)
	for _, s := range starts {
		f.Priority[priorityOf(s.level)].Alarms++
	}
	for i := range f.Priority {
		f.Priority[i].Share = share(f.Priority[i].Alarms, len(starts))
	}
	var toAck []time.Duration
	for _, s := range starts {
		switch {
		case s.acked:
			toAck = append(toAck, s.ackAfter)
		case s.cleared:
			f.ClearedUnacknowledged++
		}
	}
	f.Acknowledged = len(toAck)
	if n := len(toAck); n > 0 {
		slices.Sort(toAck)
		m := toAck[n/2]
		if n%2 == 0 {
			m = (toAck[n/2-1] + toAck[n/2]) / 2
		}
		f.MedianTimeToAckSeconds = max(m, 0).Seconds()
	}
	return f
}

func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// perDay counts times, sorted, by UTC day, for every day from from to to.
func perDay(times []time.Time, from, to time.Time) []Day {
	out := []Day{}
	i := 0
	for day := from.Truncate(24 * time.Hour); day.Before(to); day = day.Add(24 * time.Hour) {
		next := day.Add(24 * time.Hour)
		d := Day{Date: day.Format(time.DateOnly), Hours: earliest(next, to).Sub(latest(day, from)).Hours()}
		for ; i < len(times) && times[i].Before(next); i++ {
			d.Alarms++
		}
		out = append(out, d)
	}
	return out
}

// perHour counts times, sorted, by UTC hour, for every hour from from to to.
func perHour(times []time.Time, from, to time.Time) []Hour {
	out := []Hour{}
	i := 0
	for h := from.Truncate(time.Hour); h.Before(to); h = h.Add(time.Hour) {
		next := h.Add(time.Hour)
		c := Hour{Hour: h}
		for ; i < len(times) && times[i].Before(next); i++ {
			c.Alarms++
		}
		out = append(out, c)
	}
	return out
}

// Peak returns the most of times, sorted, that fall within any window of
// length w, and the first time that begins such a window.
func Peak(times []time.Time, w time.Duration) (int, time.Time) {
	best, at := 0, time.Time{}
	j := 0
	for i := range times {
		for j < len(times) && times[j].Before(times[i].Add(w)) {
			j++
		}
		if j-i > best {
			best, at = j-i, times[i]
		}
	}
	return best, at
}

// FloodSeconds returns how many seconds of the interval from from to to were
// in flood: the measure of the instants t at which more than FloodStarts of
// times, sorted, lie in the FloodWindow before t. Starts before from count
// at the instants they reach.
func FloodSeconds(times []time.Time, from, to time.Time) float64 {
	var total time.Duration
	n := 0
	i, j := 0, 0 // next start to enter the window, next to leave it
	var prev time.Time
	for i < len(times) || j < i {
		at := times[j].Add(FloodWindow)
		if i < len(times) && times[i].Before(at) {
			at = times[i]
		}
		if n > FloodStarts {
			if lo, hi := latest(prev, from), earliest(at, to); hi.After(lo) {
				total += hi.Sub(lo)
			}
		}
		for i < len(times) && times[i].Equal(at) {
			n++
			i++
		}
		for j < i && times[j].Add(FloodWindow).Equal(at) {
			n--
			j++
		}
		prev = at
	}
	return total.Seconds()
}

// badActors returns the BadActors most frequent device and event code pairs
// of starts, sorted, and their share of all.
func badActors(starts []start) ([]BadActor, float64) {
	type key struct{ sn, code string }
	counts := map[key]*BadActor{}
	for _, s := range starts {
		k := key{s.source.DeviceSN, s.source.EventCode}
		b := counts[k]
		if b == nil {
			b = &BadActor{}
			counts[k] = b
		}
		b.Source = s.source // the latest names
		b.Alarms++
	}
	out := make([]BadActor, 0, len(counts))
	for _, b := range counts {
		out = append(out, *b)
	}
	slices.SortFunc(out, func(a, b BadActor) int {
		return cmp.Or(b.Alarms-a.Alarms, strings.Compare(a.DeviceSN, b.DeviceSN), strings.Compare(a.EventCode, b.EventCode))
	})
	out = out[:min(len(out), BadActors)]
	top := 0
	for i := range out {
		out[i].Share = share(out[i].Alarms, len(starts))
		top += out[i].Alarms
	}
	return out, share(top, len(starts))
}

// chattering returns the chattering device and event code pairs of starts,
// sorted.
func chattering(starts []start) []Chatter {
	type key struct{ sn, code string }
	var order []key
	byKey := map[key][]start{}
	for _, s := range starts {
		k := key{s.source.DeviceSN, s.source.EventCode}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], s)
	}
	out := []Chatter{}
	for _, k := range order {
		ss := byKey[k]
		if len(ss) < ChatterStarts {
			continue
		}
		times := make([]time.Time, len(ss))
		for i, s := range ss {
			times[i] = s.at
		}
		most, at := Peak(times, ChatterWindow)
		if most >= ChatterStarts {
			out = append(out, Chatter{Source: ss[len(ss)-1].source, Alarms: len(ss), MostIn60s: most, At: at})
		}
	}
	slices.SortFunc(out, func(a, b Chatter) int {
		return cmp.Or(b.MostIn60s-a.MostIn60s, b.Alarms-a.Alarms, strings.Compare(a.DeviceSN, b.DeviceSN),
			strings.Compare(a.EventCode, b.EventCode))
	})
	return out
}

// Chattering counts the device and event code pairs of entries that started
// ChatterStarts or more times within ChatterWindow; silent entries do not
// count.
func Chattering(entries []store.JournalEntry) int {
	starts := make([]start, 0, len(entries))
	for i := range entries {
		if e := &entries[i]; !e.Silent {
			starts = append(starts, start{at: e.OccurredAt, source: sourceOf(e), originID: e.OriginID})
		}
	}
	slices.SortFunc(starts, func(a, b start) int { return a.at.Compare(b.at) })
	return len(chattering(starts))
}

// ParseSince reads the length of a report's period: a Go duration (36h,
// 90m) or a number of days (7d), or days and a duration (1d12h), from a
// minute up to MaxSince.
func ParseSince(s string) (time.Duration, error) {
	bad := fmt.Errorf("since %q: want a duration such as 7d, 36h or 90m", s)
	if s == "" {
		return 0, bad
	}
	var d time.Duration
	rest := s
	if days, after, ok := strings.Cut(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > int(MaxSince/(24*time.Hour)) {
			return 0, bad
		}
		d, rest = time.Duration(n)*24*time.Hour, after
	}
	if rest != "" {
		r, err := time.ParseDuration(rest)
		if err != nil || r < 0 {
			return 0, bad
		}
		d += r
	}
	switch {
	case d < time.Minute:
		return 0, fmt.Errorf("since %q: want at least a minute", s)
	case d > MaxSince:
		return 0, fmt.Errorf("since %q: want at most %dd", s, int(MaxSince/(24*time.Hour)))
	}
	return d, nil
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
