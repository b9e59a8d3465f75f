package manage

import (
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/route"
)

// inhibitView is, for one set of rules, which ongoing alarms each inhibit
// rule's source matches, by scope key.
type inhibitView struct {
	rules *route.Rules
	// sources[i][scope key] holds the originIds of the ongoing alarms the
	// source of rule i matches there.
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
// until the alarm's end or invalid.
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
			set[ev.Data.OriginID] = true
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
// before any delivery of the alarms it masks.
func (m *Manager) Observe(ev *event.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inhibit == nil || m.inhibit.rules != m.o.Rules() {
		// Rebuilt from the store on first use and after a reload.
		return
	}
	m.inhibit.observe(ev)
}

// view returns the inhibition view of r, rebuilding it from the store's
// ongoing alarms when the rules changed. Called with m.mu held.
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
	}
	m.inhibit = v
	return v, nil
}

// inhibited returns the name of an inhibit rule whose target matches ev while
// another ongoing alarm its source matches shares ev's scope.
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
		key := in.Equal.Key(&ev.Data)
		for origin := range v.sources[i][key] {
			if origin != ev.Data.OriginID {
				return in.Name, true
			}
		}
	}
	return "", false
}

// chatterState is a sink's history of the starts of one device and event
// code.
type chatterState struct {
	// Starts are the occurrence times of its latest starts within the
	// window.
	Starts []time.Time `json:"starts"`
	// Since is when it began chattering (zero: it is not); Count counts its
	// starts since.
	Since time.Time `json:"since,omitzero"`
	Count int       `json:"count,omitempty"`
}
