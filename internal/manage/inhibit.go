package manage

import (
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/route"
)

// recentFor is how long an observed transition is kept for replay over a
// rebuilt inhibition view: longer than any Apply takes to commit.
const recentFor = 5 * time.Minute

// maxRecent bounds the transitions kept for replay.
const maxRecent = 50_000

// observed is one transition the router told the manager of.
type observed struct {
	at time.Time
	ev event.Event // without the upstream record
}

// inhibitView is, for one set of rules, which ongoing alarms each inhibit
// rule's source matches, by scope key.
type inhibitView struct {
	rules *route.Rules
	// sources[i][scope key][originId] holds the ongoing alarms the source of
	// rule i matches there; the value says the alarm matches the rule's
	// target too.
	sources []map[string]map[string]bool
}

func newInhibitView(r *route.Rules) *inhibitView {
	v := &inhibitView{rules: r, sources: make([]map[string]map[string]bool, len(r.Inhibits))}
	for i := range v.sources {
		v.sources[i] = map[string]map[string]bool{}
	}
	return v
}

// observe records a transition: a start matching a source masks its scope
// until the alarm's end or invalid. Applying one twice changes nothing.
func (v *inhibitView) observe(ev *event.Event) {
	if len(v.sources) == 0 {
		return
	}
	start := *ev
	start.Data.Transition = event.Start
	for i := range v.rules.Inhibits {
		in := &v.rules.Inhibits[i]
		if !in.Source.Matches(&start) {
			continue
		}
		key := in.Equal.Key(&ev.Data)
		if key == "" {
			continue
		}
		set := v.sources[i][key]
		if ev.Data.Transition == event.Start {
			if set == nil {
				set = map[string]bool{}
				v.sources[i][key] = set
			}
			set[ev.Data.OriginID] = in.Target.Matches(&start)
			continue
		}
		delete(set, ev.Data.OriginID)
		if len(set) == 0 {
			delete(v.sources[i], key)
		}
	}
}

// Observe is told every transition the store produces, before it commits
// them (the service's router calls it), so that a masking alarm is known
// before any delivery of the alarms it masks. It keeps the transitions of
// the last few minutes, so that a view rebuilt from the store while a batch
// is being applied still learns that batch (see view).
func (m *Manager) Observe(ev *event.Event) {
	if len(m.rules().Inhibits) == 0 {
		return // nothing to mask: the bus's pipeline pays nothing
	}
	now := m.clk.Now()
	kept := *ev
	kept.Data.Alarm = nil
	m.mu.Lock()
	defer m.mu.Unlock()
	cut := 0
	for cut < len(m.recent) && (now.Sub(m.recent[cut].at) > recentFor || len(m.recent)-cut >= maxRecent) {
		cut++
	}
	m.recent = append(m.recent[cut:], observed{at: now, ev: kept})
	if m.inhibit != nil && m.inhibit.rules == m.rules() {
		m.inhibit.observe(&kept)
	}
}

// view returns the inhibition view of r, rebuilding it when the rules
// changed: from the store's ongoing alarms, then the transitions observed
// lately replayed over them (a batch in flight when the store was read is
// in those; replaying one already committed changes nothing). Called with
// m.mu held.
func (m *Manager) view(r *route.Rules) (*inhibitView, error) {
	if m.inhibit != nil && m.inhibit.rules == r {
		return m.inhibit, nil
	}
	v := newInhibitView(r)
	if len(r.Inhibits) > 0 {
		detected := m.clk.Now()
		err := m.o.Store.OngoingRecords(func(a *event.Alarm) error {
			ev := event.New(*a, event.Start, detected, false)
			v.observe(&ev)
			return nil
		})
		if err != nil {
			return nil, err
		}
		for i := range m.recent {
			v.observe(&m.recent[i].ev)
		}
	}
	m.inhibit = v
	return v, nil
}

// inhibited returns the name of an inhibit rule whose target matches ev while
// another ongoing alarm its source matches shares ev's scope. As in
// Alertmanager, an alarm that the rule's source matches too is masked only
// by sources that its target does not match: two collectors offline at one
// station do not mask each other.
func (m *Manager) inhibited(r *route.Rules, ev *event.Event) (string, bool) {
	if len(r.Inhibits) == 0 {
		return "", false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, err := m.view(r)
	if err != nil {
		m.log.Error("inhibition could not read the ongoing alarms; not masking", "err", err)
		return "", false
	}
	for i := range r.Inhibits {
		in := &r.Inhibits[i]
		if !in.Target.Matches(ev) {
			continue
		}
		self := in.Source.Matches(ev)
		key := in.Equal.Key(&ev.Data)
		for origin, alsoTarget := range v.sources[i][key] {
			if origin != ev.Data.OriginID && !(self && alsoTarget) {
				return in.Name, true
			}
		}
	}
	return "", false
}
