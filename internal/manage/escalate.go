package manage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/plant"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

// nsEscalate holds, by originId, the escalation steps taken for an alarm
// (escalation as JSON): the timers of escalation live in the store, like
// holds, so that a restart or a takeover keeps the chain's timing.
const nsEscalate = "escalate"

// EscalateEvery is how often the service calls Escalate.
const EscalateEvery = 5 * time.Second

// nsEscalated holds, by sink + "\x00" + originId, what the escalation steps
// of an alarm did at a sink they named (escalatedTo as JSON): keyed by the
// sink, it moves with a renamed sink (SinkNamespaces).
const nsEscalated = "escalated"

// escalation is what escalation did to one alarm.
type escalation struct {
	// Done are the steps taken, by stepKey, with when.
	Done map[string]time.Time `json:"done"`
	// Notes are, by sink, the notes of the starts escalation announced, as
	// states written before nsEscalated kept them; New moves them there.
	Notes map[string]string `json:"notes,omitempty"`
}

// escalatedTo is what the escalation steps of an alarm did at one sink.
type escalatedTo struct {
	// Step is the first step that named the sink (stepKey).
	Step string `json:"step"`
	// Note, when set, is what the alarm's start there says: how long the
	// alarm had waited unacknowledged when a step announced it there, or
	// released its start from a hold. A start of the alarm at a sink with a
	// note is an escalated start: the routes' hold, muting and chattering
	// are not for it (Decide). Empty where the step found the alarm there.
	Note string `json:"note,omitempty"`
	// Blocked says the step could not reach the sink (its start there a
	// dead letter, or dropped): the note is kept for the start's replay.
	Blocked bool `json:"blocked,omitempty"`
}

func escalatedKey(sink, origin string) string { return sink + "\x00" + origin }

// stepKey names a step of a route: a reload that keeps the route and the
// step's after keeps what was done.
func stepKey(rt *route.Route, st *route.EscalationStep) string {
	return rt.Name + "/" + strconv.FormatInt(int64(st.After/time.Second), 10)
}

// Escalate takes the escalation steps that are due: for each ongoing alarm
// whose routes say escalate, unacknowledged and not shelved, each step whose
// after has passed since the alarm was first seen announces it, as a start,
// to the step's sinks that did not get it; they join its ledger set, so that
// its end follows. A step and its starts are written in one transaction
// that checks the alarm is still ongoing and unacknowledged, so a step is
// taken once, and never after an acknowledgement or the end. It also ends
// the silences of "shelve until cleared" whose alarm is over.
func (m *Manager) Escalate(ctx context.Context) error {
	rules := m.rules()
	var errs []error
	if err := m.unshelveCleared(); err != nil {
		errs = append(errs, err)
	}
	if !rules.Escalates() || m.o.Plant.On(plant.EscalationStalls) {
		return errors.Join(errs...)
	}
	now := m.clk.Now()
	var due []event.Alarm
	var firstSeen []time.Time
	ongoing, err := m.o.Store.Ongoing()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	// Only alarms that may have a step due need their record read: seen
	// longer ago than the shortest after, with a step of these rules not
	// yet taken, and not acknowledged.
	escs, err := m.escalations()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	steps, soonest := map[string]bool{}, time.Duration(0)
	for i := range rules.Routes {
		rt := &rules.Routes[i]
		for j := range rt.Escalate {
			steps[stepKey(rt, &rt.Escalate[j])] = true
			if soonest == 0 || rt.Escalate[j].After < soonest {
				soonest = rt.Escalate[j].After
			}
		}
	}
	seen := make(map[string]time.Time, len(ongoing))
	for _, t := range ongoing {
		if now.Sub(t.FirstSeen) < soonest && !m.o.Plant.On(plant.EscalationEarly) {
			continue
		}
		taken := 0
		for key := range escs[t.OriginID].Done {
			if steps[key] {
				taken++
			}
		}
		if taken == len(steps) {
			continue
		}
		// One small read here rather than a scan of every acknowledgement
		// kept for the report.
		acked, err := m.acknowledged(t.OriginID)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		if !acked || m.o.Plant.On(plant.EscalationIgnoresAck) {
			seen[t.OriginID] = t.FirstSeen
		}
	}
	if len(seen) == 0 {
		return errors.Join(errs...)
	}
	err = m.o.Store.OngoingRecords(func(a *event.Alarm) error {
		if fs, ok := seen[a.OriginID]; ok {
			due = append(due, *a)
			firstSeen = append(firstSeen, fs)
		}
		return nil
	})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	// Where their starts wait, read for every alarm due at once: one walk
	// of each outbox, not one per alarm inside its transaction.
	origins := make([]string, len(due))
	for i := range due {
		origins[i] = due[i].OriginID
	}
	starts, err := m.o.Store.Deliveries(origins)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for i := range due {
		if ctx.Err() != nil {
			break
		}
		waiting := map[string]bool{}
		for _, d := range starts[due[i].OriginID] {
			waiting[d.Sink] = d.State == store.StartPending
		}
		if err := m.escalateOne(rules, &due[i], firstSeen[i], now, waiting); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// escalateOne takes the due steps of one alarm; waiting are the sinks where
// a start of the alarm waited in the outbox when the pass began.
func (m *Manager) escalateOne(rules *route.Rules, rec *event.Alarm, firstSeen, now time.Time, waiting map[string]bool) error {
	start := event.New(*rec, event.Start, firstSeen, false)
	type step struct {
		key, route string
		after      time.Duration
		to         []string
	}
	var steps []step
	for _, rt := range rules.RoutesOf(&start) {
		for i := range rt.Escalate {
			st := &rt.Escalate[i]
			if now.Sub(firstSeen) >= st.After || m.o.Plant.On(plant.EscalationEarly) {
				steps = append(steps, step{stepKey(rt, st), rt.Name, st.After, st.To})
			}
		}
	}
	if len(steps) == 0 {
		return nil
	}
	// Shelved: a silence, maintenance or inhibition would withhold its start
	// now. The chain waits; the steps due meanwhile go out once it ends.
	if m.pointShelved(rules, &start, now) && !m.o.Plant.On(plant.EscalationIgnoresShelving) {
		return nil
	}
	// Before the step's notes can be read: the gate looks for notes from
	// now on, whatever the rules say by then.
	m.notes.Store(true)
	origin := rec.OriginID
	var escalated, blocked []string
	_, err := m.o.Store.UpdateAlarm(origin, func(tx *store.AlarmTx) error {
		escalated, blocked = nil, nil
		if loadAck(tx.Get(nsAck, origin)).Acked && !m.o.Plant.On(plant.EscalationIgnoresAck) {
			return store.ErrUnchanged
		}
		cur, ongoing, err := tx.Record()
		if err != nil || !ongoing {
			if err == nil {
				err = store.ErrUnchanged
			}
			return err
		}
		var es escalation
		if raw := tx.Get(nsEscalate, origin); raw != nil {
			_ = json.Unmarshal(raw, &es) // unreadable: taken afresh
		}
		if es.Done == nil {
			es.Done = map[string]time.Time{}
		}
		ev := event.New(cur, event.Start, firstSeen, false)
		// An alarm recorded before the delivery ledger gets the sinks its
		// end would go to by the rules first, so that a join keeps them.
		if err := tx.Adopt(rules.SinksFor(&ev)); err != nil {
			return err
		}
		changed := false
		var kvs []store.KV
		for _, st := range steps {
			if _, done := es.Done[st.key]; done {
				continue
			}
			es.Done[st.key], changed = now, true
			for _, sink := range st.to {
				if _, ok := rules.Sink(sink); !ok {
					continue
				}
				key := escalatedKey(sink, origin)
				var at escalatedTo
				if raw := tx.Get(nsEscalated, key); raw != nil {
					_ = json.Unmarshal(raw, &at) // unreadable: named afresh
				}
				if at.Step == "" {
					at.Step = st.key
				}
				state, _, in, err := tx.StartAt(sink, waiting[sink])
				if err != nil {
					return err
				}
				switch {
				case m.o.Plant.On(plant.EscalationTrustsTheSet) && in:
					state = store.StartDelivered
				case m.o.Plant.On(plant.EscalationIgnoresTheSet):
					state = store.StartWithheld
				}
				switch {
				case !in, state == store.StartWithheld:
					// Not there, or withheld there (a route's muting or
					// hold, chattering): the step announces it, the bytes
					// saying so too, for the bus and webhooks.
					sev := ev
					sev.Data.Escalation = &event.Escalation{Route: st.route, AfterMs: st.after.Milliseconds(),
						WaitedMs: now.Sub(firstSeen).Milliseconds()}
					if err := tx.Enqueue(sink, &sev); err != nil {
						return err
					}
					if !in {
						if err := tx.Join(sink); err != nil {
							return err
						}
					}
				case state == store.StartPending:
					// On its way, or held down: the note makes it an
					// escalated start, which goes out now.
					tx.Nudge(sink)
				case state == store.StartDead, state == store.StartDropped:
					// Not there, and nothing of the alarm may go before its
					// start does: the step is taken, and Alarms shows why
					// it did not reach the sink. A replay of the start is
					// an escalated start.
					blocked = append(blocked, sink)
					if at.Note == "" {
						at.Note, at.Blocked = escalatedNote(st.after), true
					}
				default:
					// Delivered, or digested: it has the alarm.
				}
				if at.Note == "" && (!in || state == store.StartWithheld || state == store.StartPending) {
					at.Note = escalatedNote(st.after)
					escalated = append(escalated, sink)
				}
				b, err := json.Marshal(&at)
				if err != nil {
					return err
				}
				kvs = append(kvs, store.KV{NS: nsEscalated, Key: key, Value: b})
			}
		}
		if !changed {
			return store.ErrUnchanged
		}
		b, err := json.Marshal(&es)
		if err != nil {
			return err
		}
		return tx.Put(append(kvs, store.KV{NS: nsEscalate, Key: origin, Value: b})...)
	})
	if err != nil {
		return fmt.Errorf("manage: escalating alarm %s: %w", origin, err)
	}
	if len(escalated) > 0 {
		m.log.Info("alarm escalated: unacknowledged", "origin_id", origin, "sinks", escalated,
			"waited", now.Sub(firstSeen).Round(time.Second).String())
		if m.o.Metrics != nil {
			m.o.Metrics.escalated(len(escalated))
		}
	}
	if len(blocked) > 0 {
		m.log.Warn("an escalation step could not reach a sink: the alarm's start there is a dead letter or was dropped; "+
			"relay deadletters replays it", "origin_id", origin, "sinks", blocked)
	}
	return nil
}

// escalatedNote is what a start escalation sent after waiting after says.
func escalatedNote(after time.Duration) string {
	return "Escalated: unacknowledged for " + sinktype.HumanDuration(after)
}

// EscalationAfter returns how long after its alarm was first seen
// escalation under the rules r sends ev's start to sink: the after of the
// earliest step of ev's routes that names sink, and false when none does.
// It lets the demo's feed say why a start reached a sink late.
func EscalationAfter(r *route.Rules, ev *event.Event, sink string) (time.Duration, bool) {
	var after time.Duration
	for _, rt := range r.RoutesOf(ev) {
		for _, st := range rt.Escalate {
			if slices.Contains(st.To, sink) && (after == 0 || st.After < after) {
				after = st.After
			}
		}
	}
	return after, after > 0
}

// pointShelved reports whether a silence, a maintenance window or
// inhibition would withhold ev's start now, whatever the sink.
func (m *Manager) pointShelved(rules *route.Rules, ev *event.Event, now time.Time) bool {
	reason, _ := m.withheld(rules, policy{managed: true}, ev, now)
	return reason != ""
}

// escalationNote returns what sink's start of origin says when escalation
// sent it there, or released it there from a hold, or "".
func (m *Manager) escalationNote(sink, origin string) (string, error) {
	raw, err := m.o.Store.Get(nsEscalated, escalatedKey(sink, origin))
	if err != nil || raw == nil {
		return "", err
	}
	var at escalatedTo
	_ = json.Unmarshal(raw, &at) // unreadable: no note
	if !at.Blocked || at.Note == "" {
		return at.Note, nil
	}
	// A step that could not reach the sink owes it the page only while
	// the alarm still wants one: a replay of the dead start after an
	// acknowledgement or the end is the route's own start again.
	a, found, err := m.o.Store.Alarm(origin)
	if err != nil || !found || a.Status != event.StatusOngoing {
		return "", err
	}
	if acked, err := m.acknowledged(origin); err != nil || acked {
		return "", err
	}
	return at.Note, nil
}

// errFound stops a scan that found what it looked for.
var errFound = errors.New("found")

// hasNotes reports whether st holds an escalation note.
func hasNotes(st *store.Store) (bool, error) {
	err := st.Scan(nsEscalated, "", func(string, []byte) error { return errFound })
	if errors.Is(err, errFound) {
		return true, nil
	}
	return false, err
}

// moveNotes moves the notes that states written before nsEscalated kept
// inside the alarm's escalation state to nsEscalated, once, when the
// manager is made.
func moveNotes(st *store.Store) error {
	var kvs []store.KV
	err := st.Scan(nsEscalate, "", func(origin string, v []byte) error {
		var es escalation
		if json.Unmarshal(v, &es) != nil || len(es.Notes) == 0 {
			return nil
		}
		for sink, note := range es.Notes {
			b, err := json.Marshal(escalatedTo{Note: note})
			if err != nil {
				return err
			}
			kvs = append(kvs, store.KV{NS: nsEscalated, Key: escalatedKey(sink, origin), Value: b})
		}
		es.Notes = nil
		b, err := json.Marshal(&es)
		kvs = append(kvs, store.KV{NS: nsEscalate, Key: origin, Value: b})
		return err
	})
	if err != nil || len(kvs) == 0 {
		return err
	}
	return st.Put(kvs...)
}

// unshelveCleared ends the silences of "shelve until cleared" whose alarm
// is over, and forgets them.
func (m *Manager) unshelveCleared() error {
	if m.o.Shelf == nil {
		return nil
	}
	over := map[string]string{} // origin -> silence
	err := m.o.Store.Scan(nsShelf, "", func(origin string, id []byte) error {
		a, found, err := m.o.Store.Alarm(origin)
		if err != nil {
			return err
		}
		if !found || a.Status != event.StatusOngoing {
			over[origin] = string(id)
		}
		return nil
	})
	if err != nil || len(over) == 0 {
		return err
	}
	var errs []error
	for origin, id := range over {
		if err := m.o.Shelf.Unshelve(id); err != nil {
			errs = append(errs, fmt.Errorf("manage: ending the shelving of alarm %s: %w", origin, err))
			delete(over, origin)
			continue
		}
		m.log.Info("alarm cleared: its shelving ended", "origin_id", origin, "silence", id)
	}
	// Forgotten in one transaction, unless shelved again meanwhile.
	if _, err := m.o.Store.DeleteIf(nsShelf, func(origin string, id []byte) bool {
		return over[origin] != "" && over[origin] == string(id)
	}); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
