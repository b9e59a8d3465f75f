// Package manage is alarm management (docs/design.md §8, "Alarm
// management"): what of the stream of transitions reaches people. It is the
// delivery loops' deliver.Gate: before an alarm's next entry goes to a sink,
// it applies, in this order, the route's hold-down, the route's muting
// intervals (active_when, mute_when), maintenance windows, silences,
// inhibition and chattering, then gathers floods into storm digests.
//
// Everything it decides is kept in the store, never in timers: a hold is the
// entry's enqueue time plus the hold, a suppressed start is remembered in the
// sink's memory of the alarm (so that its end is suppressed too, and only
// then), digests and chatter histories are values written with the entries
// they settle. A restart in the middle changes nothing.
package manage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/plant"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

// Reasons an entry is withheld: the reason label of relay_suppressed_total
// and of the suppressed log.
const (
	ReasonHold        = "hold"
	ReasonMuted       = "muted"
	ReasonMaintenance = "maintenance"
	ReasonSilence     = "silence"
	ReasonInhibited   = "inhibited"
	ReasonChattering  = "chattering"
)

// Keys alarm management keeps in a sink's memory of an alarm, beside the
// sink's own; the store defines them, as its delivery ledger reads them.
const (
	// memSuppressed is why the alarm's start was withheld; its end is then
	// withheld too.
	memSuppressed = store.MemorySuppressed
	// memWhy names what withheld it: the silence's id, the window's name.
	memWhy = store.MemoryWhy
	// memDigest is the digest the alarm's start joined.
	memDigest = store.MemoryDigest
)

// SinkNamespaces are the namespaces of the store whose values alarm
// management keys by sink name: they move with a renamed sink
// (store.Store.AdoptSinks).
var SinkNamespaces = []string{nsChatter, nsRemind, nsDaily, nsEscalated}

// Defaults of Options.
const (
	DefaultChatterCount  = 3
	DefaultChatterWindow = 10 * time.Minute
	DefaultChatterQuiet  = 10 * time.Minute
)

// Silencer tells whether an active silence matches an event (the silences of
// internal/silence).
type Silencer interface {
	// Silencing returns the id of a silence active at t that matches ev.
	Silencing(ev *event.Event, t time.Time) (id string, ok bool)
}

// Options configure a Manager.
type Options struct {
	// Store is the relay's state.
	Store *store.Store
	// Rules returns the rules in force.
	Rules func() *route.Rules
	// Silences, when set, are the silences to apply.
	Silences Silencer
	// Clock tells the time (default the real clock).
	Clock clock.Clock
	// Logger receives a line when a digest opens and when chattering is
	// announced (default slog.Default()).
	Logger *slog.Logger
	// ChatterCount starts of one device and event code within ChatterWindow
	// make it chattering (defaults 3 and 10m); it is quiet again after
	// ChatterQuiet without a start (default 10m).
	ChatterCount  int
	ChatterWindow time.Duration
	ChatterQuiet  time.Duration
	// Fence, when set, is asked immediately before each message Tick
	// sends straight to a sink (a reminder, a daily summary); a refusal
	// sends nothing, and the message is due again at the next tick.
	Fence notify.Fence
	// Shelf, when set, makes the silences that shelve an alarm from a chat.
	Shelf Shelf
	// Metrics, when set, count acknowledgements and escalations.
	Metrics *Metrics
	// Plant switches on faults for the whole-relay simulation's proof that
	// its invariants catch them (internal/plant); nil everywhere else.
	Plant plant.Set
}

// Manager is alarm management for one relay. It is safe for concurrent use
// by every sink's delivery loop.
type Manager struct {
	o   Options
	clk clock.Clock
	log *slog.Logger

	// use is the rules last given to Use.
	use atomic.Pointer[route.Rules]

	mu sync.Mutex
	// sinks are the sinks being delivered to, by name, for their digests.
	sinks map[string]notify.Sink
	// dests holds a lock per destination: the flood window and the digests
	// of a channel are read and written under it.
	dests map[string]*sync.Mutex
	// recent are the transitions observed lately, replayed over the store's
	// ongoing alarms when the inhibition view is rebuilt (see view).
	recent []observed
	// ongoing is the inhibition view: for the rules it was built from, per
	// inhibit rule, per scope key, the ongoing alarms its source matches.
	inhibit *inhibitView
	// notes says the store may hold escalation notes (nsEscalated): the
	// gate looks for them only then, whatever the rules say.
	notes atomic.Bool

	// managed is, for the rules it was computed from, the sinks some route
	// may manage.
	managed      map[string]bool
	managedRules *route.Rules
}

// Manages reports whether some route of the rules in force sends events to
// sink under alarm management: one saying suppress: true, or one saying
// nothing about a sink that feeds people.
func (m *Manager) Manages(sink string) bool {
	r := m.rules()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.managedRules != r {
		m.managed, m.managedRules = map[string]bool{}, r
		for _, rt := range r.Routes {
			for _, name := range rt.To {
				managed := true
				if s, ok := r.Sink(name); ok {
					managed = !s.Machines
				}
				if rt.Suppress != nil {
					managed = *rt.Suppress
				}
				m.managed[name] = m.managed[name] || managed
			}
		}
		for _, s := range r.Sinks {
			if _, named := m.managed[s.Name]; !named {
				// Named by no route now: what waits for it was routed by
				// earlier rules, and is managed as its type is.
				m.managed[s.Name] = !s.Machines
			}
		}
	}
	return m.managed[sink]
}

// New returns a Manager.
func New(o Options) (*Manager, error) {
	if o.Store == nil || o.Rules == nil {
		return nil, errors.New("manage: a manager needs the store and the rules")
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ChatterCount == 0 {
		o.ChatterCount = DefaultChatterCount
	}
	if o.ChatterWindow == 0 {
		o.ChatterWindow = DefaultChatterWindow
	}
	if o.ChatterQuiet == 0 {
		o.ChatterQuiet = DefaultChatterQuiet
	}
	if o.ChatterCount < 2 || o.ChatterWindow < 0 || o.ChatterQuiet < 0 {
		return nil, fmt.Errorf("manage: chattering after %d starts in %s, quiet after %s: want 2 or more starts and durations >= 0",
			o.ChatterCount, o.ChatterWindow, o.ChatterQuiet)
	}
	if err := moveNotes(o.Store); err != nil {
		return nil, fmt.Errorf("manage: moving escalation notes: %w", err)
	}
	m := &Manager{o: o, clk: o.Clock, log: o.Logger, sinks: map[string]notify.Sink{}, dests: map[string]*sync.Mutex{}}
	noted, err := hasNotes(o.Store)
	if err != nil {
		return nil, err
	}
	m.notes.Store(noted)
	return m, nil
}

// Use makes r the rules alarm management decides by, from now on, before
// Options.Rules returns them: a reload hands the new rules here once the
// delivery loops of the old sinks have drained and before those of the new
// sinks start, so that no loop decides by rules that do not know its sink
// (a sink the rules do not name is not managed: everything would go out).
func (m *Manager) Use(r *route.Rules) { m.use.Store(r) }

// rules returns the rules to decide by.
func (m *Manager) rules() *route.Rules {
	if r := m.use.Load(); r != nil {
		return r
	}
	return m.o.Rules()
}

// lockDest locks the destination dest and returns its unlock.
func (m *Manager) lockDest(dest string) func() {
	m.mu.Lock()
	l := m.dests[dest]
	if l == nil {
		l = &sync.Mutex{}
		m.dests[dest] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// SetSinks tells the manager the sinks being delivered to, at start and
// after each reload.
func (m *Manager) SetSinks(sinks []notify.Sink) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sinks = make(map[string]notify.Sink, len(sinks))
	for _, s := range sinks {
		m.sinks[s.Name()] = s
	}
}

func (m *Manager) sink(name string) notify.Sink {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sinks[name]
}

// policy is what the rules say of one event for one sink.
type policy struct {
	managed bool
	hold    time.Duration
	muted   string // the interval that mutes it, or ""
	digest  route.Digest
}

// policyFor reads the rules in force for ev and sink at t: the routes that
// send ev to sink and the sink's options. A sink is managed when one of those
// routes says suppress: true, or none says suppress: false and the sink's
// type feeds people. The hold is the shortest of the routes'; the sink is
// muted when every route muting it is muted (a route that is not muted
// still delivers).
func policyFor(r *route.Rules, ev *event.Event, sink string, t time.Time) policy {
	var p policy
	s, ok := r.Sink(sink)
	if !ok {
		return p
	}
	machines := s.Machines
	p.digest = s.Digest
	routes := r.RoutesTo(ev, sink)
	if len(routes) == 0 {
		// Enqueued under earlier rules (a reload edited the routes since),
		// or announced when its level rose: no route of these rules says
		// otherwise, so the sink is managed as its type is.
		p.managed = !machines
		return p
	}
	first := true
	for _, rt := range routes {
		managed := !machines
		if rt.Suppress != nil {
			managed = *rt.Suppress
		}
		if !managed {
			// An unmanaged route delivers everything to the sink.
			return policy{}
		}
		p.managed = true
		if first || rt.Hold < p.hold {
			p.hold = rt.Hold
		}
		if why, muted := r.RouteMuted(rt, t); muted {
			if first {
				p.muted = why
			}
		} else {
			p.muted = ""
		}
		first = false
	}
	if p.muted != "" {
		// Muted only when every route is.
		for _, rt := range routes {
			if _, muted := r.RouteMuted(rt, t); !muted {
				p.muted = ""
			}
		}
	}
	return p
}

// Hold returns the hold-down the rules r put on ev's start at sink at t:
// the shortest hold of the routes sending ev there, zero when none holds it
// or alarm management leaves the sink alone for ev. The start waits that long
// from its enqueueing before it is sent or withheld.
func Hold(r *route.Rules, ev *event.Event, sink string, t time.Time) time.Duration {
	return policyFor(r, ev, sink, t).hold
}

// Decide is the deliver.Gate verdict on d for sink.
func (m *Manager) Decide(ctx context.Context, sink string, d *notify.Delivery) (deliver.Verdict, error) {
	return m.decide(ctx, sink, d, nil)
}

var _ deliver.RunGate = (*Manager)(nil)

// DecideRun decides on ds as Decide would, one after the other, and writes
// the chattering histories they change in one transaction: a run of
// hundreds of starts to a webhook costs one commit, not hundreds. It stops
// after the first verdict that does not send its entry as it is, now (one
// that withholds it, holds it or hands it to the digest): the delivery loop
// sends the run up to there and decides on that entry and the later ones
// again, so deciding on them now would count, in a chattering history or a
// flood window, starts that are not sent.
func (m *Manager) DecideRun(ctx context.Context, sink string, ds []*notify.Delivery) ([]deliver.Verdict, error) {
	w := &writes{}
	out := make([]deliver.Verdict, 0, len(ds))
	var failed error
	for _, d := range ds {
		v, err := m.decide(ctx, sink, d, w)
		if err != nil {
			failed = err
			break
		}
		out = append(out, v)
		if v.Suppress != "" || v.Digest || !v.Until.IsZero() {
			break
		}
	}
	if len(w.kvs) > 0 {
		if err := m.o.Store.Put(w.kvs...); err != nil {
			return nil, err
		}
	}
	return out, failed
}

func (m *Manager) decide(ctx context.Context, sink string, d *notify.Delivery, w *writes) (deliver.Verdict, error) {
	ev := d.Event
	if ev == nil {
		return deliver.Verdict{}, nil
	}
	switch ev.Data.Transition {
	case event.Start:
	case event.Ack, event.Unack:
		// An acknowledgement follows its start: withheld where the start
		// was; a sink with no message of it (a digest) has nothing to edit.
		if why := d.Memory[memSuppressed]; why != "" {
			return deliver.Verdict{Suppress: why}, nil
		}
		return deliver.Verdict{}, nil
	default:
		return m.decideEnd(sink, d), nil
	}
	now := m.clk.Now()
	rules := m.rules()
	p := policyFor(rules, ev, sink, now)
	if !p.managed {
		return deliver.Verdict{Memory: cleared(d.Memory)}, nil
	}
	// A start escalation sent here (its bytes say so), or released here
	// from its hold (the note escalation kept), says so; the route's hold,
	// muting and chattering are for the routes' own starts, not for the
	// page escalation owes the sink, whatever the rules say by then. A
	// relay that never escalated reads nothing more per start.
	note := ""
	if e := ev.Data.Escalation; e != nil {
		note = escalatedNote(time.Duration(e.AfterMs) * time.Millisecond)
	} else if m.notes.Load() {
		var err error
		if note, err = m.escalationNote(sink, ev.Data.OriginID); err != nil {
			return deliver.Verdict{}, err
		}
	}
	if note != "" {
		p.hold, p.muted = 0, ""
	}
	// 1. Hold-down: the start waits; an alarm over within the hold is
	// withheld with its end.
	if p.hold > 0 {
		if m.o.Plant.On(plant.HoldNeverEnds) {
			p.hold = 1000 * time.Hour
		}
		if due := d.EnqueuedAt.Add(p.hold); now.Before(due) {
			return deliver.Verdict{Until: due}, nil
		}
		a, found, err := m.o.Store.Alarm(ev.Data.OriginID)
		if err != nil {
			return deliver.Verdict{}, err
		}
		if found && a.Status != event.StatusOngoing && a.RecoveredAt.Sub(a.OccurredAt) < p.hold {
			return suppress(ReasonHold, p.hold.String()), nil
		}
	}
	// 2. The route's intervals, 3. maintenance windows, 4. silences,
	// 5. inhibition.
	if reason, why := m.withheld(rules, p, ev, now); reason != "" {
		return suppress(reason, why), nil
	}
	// 6. Chattering.
	var v deliver.Verdict
	if note == "" {
		var err error
		if v, err = m.chatter(sink, ev, w); err != nil || v.Suppress != "" {
			return v, err
		}
	}
	// 7. The storm digest.
	dv, err := m.digestVerdict(rules, sink, ev, p.digest, now)
	if err != nil {
		return deliver.Verdict{}, err
	}
	dv.Note = strings.TrimSuffix(strings.TrimPrefix(note+"; "+v.Note, "; "), "; ")
	dv.AckCommand = AckCommand(ev.Data.OriginID)
	dv.KV = append(dv.KV, v.KV...)
	if dv.Memory == nil {
		dv.Memory = cleared(d.Memory)
	}
	return dv, nil
}

// withheld returns the reason and the name (of the interval, window,
// silence or inhibit rule) of the first of these that withholds ev from a
// sink whose policy at t is p: the route's muting intervals, maintenance
// windows, silences, inhibition. The reason is "" when none does.
func (m *Manager) withheld(rules *route.Rules, p policy, ev *event.Event, t time.Time) (reason, why string) {
	if p.muted != "" {
		return ReasonMuted, p.muted
	}
	if name, ok := rules.MaintenanceAt(ev, t); ok && !m.o.Plant.On(plant.MaintenanceIgnored) {
		return ReasonMaintenance, name
	}
	if m.o.Silences != nil && !m.o.Plant.On(plant.SilencesIgnored) {
		if id, ok := m.o.Silences.Silencing(ev, t); ok {
			return ReasonSilence, id
		}
	}
	if name, ok := m.inhibited(rules, ev); ok {
		return ReasonInhibited, name
	}
	return "", ""
}

// shelved reports whether ev's alarm is shelved for sink at t: whether a
// muting interval, a maintenance window, a silence or inhibition would
// withhold its start from sink now. A shelved alarm gets no reminder and is
// no line of a daily summary, even when its start went out before.
func (m *Manager) shelved(rules *route.Rules, ev *event.Event, sink string, t time.Time) bool {
	reason, _ := m.withheld(rules, policyFor(rules, ev, sink, t), ev, t)
	return reason != ""
}

// decideEnd: the end (or invalid) of an alarm follows its start. Withheld
// when the start was; through the digest when the start went there; else
// sent, as it is, wherever the start went (resolves stay trustworthy).
func (m *Manager) decideEnd(sink string, d *notify.Delivery) deliver.Verdict {
	if why := d.Memory[memSuppressed]; why != "" && !m.o.Plant.On(plant.EndIgnoresAWithheldStart) {
		return deliver.Verdict{Suppress: why}
	}
	if d.Memory[memDigest] != "" {
		if dg, ok := m.sink(sink).(notify.Digester); ok && dg.CanDigest() {
			return deliver.Verdict{Digest: true}
		}
	}
	return deliver.Verdict{}
}

// AckCommand is the command that acknowledges the alarm origin, which
// sinks without buttons show under its start.
func AckCommand(origin string) string { return "relay ack " + origin + " --by <you>" }

// suppress is the verdict that withholds a start for reason, remembering
// why so that its end is withheld too.
func suppress(reason, why string) deliver.Verdict {
	return deliver.Verdict{Suppress: reason, Memory: map[string]string{memSuppressed: reason, memWhy: why}}
}

// cleared returns memory without what alarm management keeps in it, when it
// holds some: a start that goes out starts afresh. Nil leaves it as it is.
func cleared(memory map[string]string) map[string]string {
	if memory[memSuppressed] == "" && memory[memDigest] == "" && memory[memWhy] == "" {
		return nil
	}
	out := map[string]string{}
	for k, v := range memory {
		if k != memSuppressed && k != memDigest && k != memWhy {
			out[k] = v
		}
	}
	return out
}
