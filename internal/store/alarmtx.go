package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/plant"
)

// ErrUnchanged, returned by the function of UpdateAlarm, rolls its
// transaction back: nothing is written, and UpdateAlarm succeeds.
var ErrUnchanged = errUnchanged

// AlarmTx is one read-write transaction on one alarm, for what people and
// the clock do to it besides its upstream transitions: an acknowledgement,
// an escalation step (alarm management, docs/design.md §8). Its values,
// outbox entries and the sinks it joins to the alarm's ledger set commit
// together or not at all, on either backend.
type AlarmTx struct {
	s      *Store
	tx     *txn
	delta  map[string]int
	origin string
	st     state
	sets   *sinkSets
	now    time.Time
	dirty  bool
	queued []string
	// dropped counts the entries Enqueue recorded as dropped, by sink and
	// kind.
	dropped map[[2]string]int
}

// UpdateAlarm runs fn in one read-write transaction on the alarm origin.
// It reports false, without calling fn, when the store does not know the
// alarm. fn returning ErrUnchanged rolls back and counts as success; any
// other error rolls back and is returned.
func (s *Store) UpdateAlarm(origin string, fn func(a *AlarmTx) error) (bool, error) {
	found := false
	var queued []string
	var dropped map[[2]string]int
	err := s.update(func(tx *txn, delta map[string]int) error {
		v, _ := findState(tx, origin)
		if v == nil {
			return errUnchanged
		}
		st, err := decodeState(v)
		if err != nil {
			return fmt.Errorf("alarm %q: %w", origin, err)
		}
		found = true
		a := &AlarmTx{s: s, tx: tx, delta: delta, origin: origin, st: st, sets: newSinkSets(tx), now: s.clock.Now()}
		if err := fn(a); err != nil {
			return err
		}
		if a.dirty {
			if err := putState(tx.Bucket(bucketOngoing), tx.Bucket(bucketAlarms), origin, &a.st); err != nil {
				return err
			}
		}
		queued, dropped = a.queued, a.dropped
		return nil
	})
	if err != nil {
		return found, fmt.Errorf("dedupe: alarm %q: %w", origin, err)
	}
	for k, n := range dropped {
		s.countDropped(k[0], k[1], n)
	}
	for _, sink := range queued {
		s.signal(sink)
	}
	return found, nil
}

// Tracked returns what the store knows of the alarm.
func (a *AlarmTx) Tracked() Tracked { return a.st.tracked(a.origin) }

// Now is the store's clock at the start of the transaction.
func (a *AlarmTx) Now() time.Time { return a.now }

// Record returns the latest upstream record of the alarm while it is
// ongoing, and false once it is over (an ended alarm's record is dead).
func (a *AlarmTx) Record() (event.Alarm, bool, error) {
	if a.st.terminal() || a.st.rec.n == 0 {
		return event.Alarm{}, false, nil
	}
	l, err := a.s.acquireTxLog(a.tx)
	if err != nil {
		return event.Alarm{}, false, err
	}
	defer a.s.releaseLog(l)
	rec, err := readRecord(l, []byte(a.origin), a.st.rec)
	if err != nil {
		return event.Alarm{}, false, err
	}
	return rec, true, nil
}

// Sinks returns the alarm's ledger set: the sinks its start was enqueued
// for, where its end goes. For an alarm started before the ledger (not
// Ledgered) it holds only the sinks joined to it, if any.
func (a *AlarmTx) Sinks() ([]string, error) {
	if a.st.sinks == 0 {
		return nil, nil
	}
	names, err := a.sets.names(a.st.setID())
	return slices.Clone(names), err
}

// Ledgered reports whether the alarm's set says where its end goes. One
// started before the ledger has no set, or one of the sinks joined to it:
// its end goes where the rules in force route it, and to those.
func (a *AlarmTx) Ledgered() bool { return a.st.ledgered() }

// Adopt gives an alarm started before the ledger the set routed, the sinks
// the rules route its start to now, where its end would go by the rules,
// beside the sinks joined to it: from then on its end goes there, whatever
// the rules say by then. It does nothing to an alarm that has a set.
func (a *AlarmTx) Adopt(routed []string) error {
	if a.st.ledgered() || a.s.endsByRules || a.s.plant.On(plant.LedgerNotUpgraded) {
		return nil
	}
	joined, err := a.Sinks()
	if err != nil {
		return err
	}
	names, err := uniqueSinks(append(slices.Clone(routed), joined...))
	if err != nil {
		return err
	}
	if a.st.sinks, err = a.sets.id(names); err != nil {
		return err
	}
	a.dirty = true
	return nil
}

// Join adds sinks to the alarm's ledger set, so that its end goes to them
// too. An alarm started before the ledger keeps its end where the rules in
// force route it and gets it at the joined sinks too: a set of the joined
// sinks alone would take its end from every sink its start reached.
func (a *AlarmTx) Join(sinks ...string) error {
	if a.s.endsByRules {
		return nil
	}
	have, err := a.Sinks()
	if err != nil {
		return err
	}
	n := len(have)
	for _, s := range sinks {
		if !slices.Contains(have, s) {
			have = append(have, s)
		}
	}
	if len(have) == n {
		return nil
	}
	id, err := a.sets.id(have)
	if err != nil {
		return err
	}
	if !a.st.ledgered() && !a.s.plant.On(plant.LedgerNotUpgraded) {
		id |= setPlusRules
	}
	a.st.sinks, a.dirty = id, true
	return nil
}

// StartAt tells what became of the alarm's start at sink, read in this
// transaction from the delivery ledger and the sink's memory of the alarm:
// StartDead or StartDropped (with the reason of a drop), StartWithheld
// (with why), StartDigested, or, where the memory does not tell, StartPending
// when waiting (the caller saw a start of the alarm wait in sink's outbox,
// as Store.Deliveries tells, read for many alarms at once) and
// StartDelivered otherwise. A start withheld there and enqueued again since
// (announced again, or by an earlier step) is StartPending: the outbox is
// read for it then. in is false when sink is not in the alarm's set.
func (a *AlarmTx) StartAt(sink string, waiting bool) (state StartState, reason string, in bool, err error) {
	names, err := a.Sinks()
	if err != nil || !slices.Contains(names, sink) {
		return "", "", false, err
	}
	switch kind, why := ledgerRecord(a.tx, sink, a.origin); kind {
	case ledgerDead:
		return StartDead, "", true, nil
	case ledgerDropped:
		return StartDropped, why, true, nil
	}
	mem, err := a.Memory(sink)
	if err != nil {
		return "", "", true, err
	}
	switch {
	case mem[MemorySuppressed] != "":
		if again, err := startWaits(a.tx, sink, a.origin); err != nil || again {
			return StartPending, "", true, err
		}
		return StartWithheld, strings.TrimSuffix(mem[MemorySuppressed]+": "+mem[MemoryWhy], ": "), true, nil
	case mem[MemoryDigest] != "":
		return StartDigested, "", true, nil
	case mem == nil && waiting:
		return StartPending, "", true, nil
	}
	return StartDelivered, "", true, nil
}

// Nudge wakes sink's delivery loop once the transaction commits, so that it
// decides again on the alarm's entries it holds back (a start held down).
func (a *AlarmTx) Nudge(sink string) {
	if !slices.Contains(a.queued, sink) {
		a.queued = append(a.queued, sink)
	}
}

// StartHeld reports whether the alarm's start at sink is on its way or
// delivered, as far as the delivery ledger knows: false when it is a dead
// letter or was dropped, so that nothing of the alarm should follow it
// there (Enqueue parks or drops what does).
func (a *AlarmTx) StartHeld(sink string) bool {
	kind, _ := ledgerRecord(a.tx, sink, a.origin)
	return kind == 0
}

// Get returns the value of key in namespace ns, as this transaction sees
// it, or nil. The caller must not keep it past the transaction.
func (a *AlarmTx) Get(ns, key string) []byte {
	if b := a.tx.Bucket(bucketKV).Bucket([]byte(ns)); b != nil {
		return bytes.Clone(b.Get([]byte(key)))
	}
	return nil
}

// Put writes kvs in this transaction.
func (a *AlarmTx) Put(kvs ...KV) error { return putKV(a.tx, kvs) }

// Memory returns sink's memory of the alarm, as Store.Memory does.
func (a *AlarmTx) Memory(sink string) (map[string]string, error) {
	b := a.tx.Bucket(bucketMemory).Bucket([]byte(sink))
	if b == nil {
		return nil, nil
	}
	v := b.Get([]byte(a.origin))
	if v == nil {
		return nil, nil
	}
	var m map[string]string
	return m, json.Unmarshal(v, &m)
}

// Enqueue appends ev to sink's outbox, enqueued now. An ack, unack or a
// start must be the alarm's own. An event that follows the alarm's start
// (an ack or unack) follows the delivery ledger: beside a start that is a
// dead letter of sink it is parked as one too, so that a replay sends them
// in order; after a start that was dropped, or at a sink the rules no
// longer name, it is recorded as dropped. Nothing of the alarm reaches a
// sink that does not hold its start.
func (a *AlarmTx) Enqueue(sink string, ev *event.Event) error {
	if ev.Data.OriginID != a.origin {
		return errors.New("an alarm transaction enqueued an event of another alarm")
	}
	body, err := ev.Marshal()
	if err != nil {
		return err
	}
	e := Entry{Sink: sink, EventID: ev.ID, OriginID: a.origin, Transition: ev.Data.Transition, Level: ev.Data.Level, Body: body, EnqueuedAt: a.now}
	if e.Transition != event.Start && !a.s.endsByRules {
		took, kind, err := follow(a.tx, &e, a.s.currentSinks(), a.s.noResolvedSinks(), a.now, a.s.plant)
		if err != nil || took {
			if kind != "" {
				if a.dropped == nil {
					a.dropped = map[[2]string]int{}
				}
				a.dropped[[2]string{sink, kind}]++
			}
			return err
		}
	}
	ob, err := outboxOf(a.tx, sink)
	if err != nil {
		return err
	}
	seq, err := ob.NextSequence()
	if err != nil {
		return err
	}
	if err := ob.Put(seqKey(seq), encodeEntry(&e)); err != nil {
		return err
	}
	a.delta[sink]++
	if !slices.Contains(a.queued, sink) {
		a.queued = append(a.queued, sink)
	}
	return nil
}
