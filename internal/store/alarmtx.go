package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/relay-energy/relay/internal/event"
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
}

// UpdateAlarm runs fn in one read-write transaction on the alarm origin.
// It reports false, without calling fn, when the store does not know the
// alarm. fn returning ErrUnchanged rolls back and counts as success; any
// other error rolls back and is returned.
func (s *Store) UpdateAlarm(origin string, fn func(a *AlarmTx) error) (bool, error) {
	found := false
	var queued []string
	err := s.update(func(tx *txn, delta map[string]int) error {
		v := tx.Bucket(bucketAlarms).Get([]byte(origin))
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
			if err := tx.Bucket(bucketAlarms).Put([]byte(origin), a.st.encode()); err != nil {
				return err
			}
		}
		queued = a.queued
		return nil
	})
	if err != nil {
		return found, fmt.Errorf("dedupe: alarm %q: %w", origin, err)
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
// for, where its end goes. Nil for an alarm started before the ledger.
func (a *AlarmTx) Sinks() ([]string, error) {
	if a.st.sinks == 0 {
		return nil, nil
	}
	names, err := a.sets.names(a.st.sinks)
	return slices.Clone(names), err
}

// Join adds sinks to the alarm's ledger set, so that its end goes to them
// too. An alarm without a set (started before the ledger) gets one.
func (a *AlarmTx) Join(sinks ...string) error {
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
	if a.st.sinks, err = a.sets.id(have); err != nil {
		return err
	}
	a.dirty = true
	return nil
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

// StartHeld reports whether the alarm's start at sink is on its way or
// delivered, as far as the delivery ledger knows: false when it is a dead
// letter or was dropped, so that nothing of the alarm should follow it
// there.
func (a *AlarmTx) StartHeld(sink string) bool {
	kind, _ := ledgerRecord(a.tx, sink, a.origin)
	return kind == 0
}

// Enqueue appends ev to sink's outbox, enqueued now. An ack, unack or a
// start must be the alarm's own.
func (a *AlarmTx) Enqueue(sink string, ev *event.Event) error {
	if ev.Data.OriginID != a.origin {
		return errors.New("an alarm transaction enqueued an event of another alarm")
	}
	body, err := ev.Marshal()
	if err != nil {
		return err
	}
	ob, err := outboxOf(a.tx, sink)
	if err != nil {
		return err
	}
	seq, err := ob.NextSequence()
	if err != nil {
		return err
	}
	e := Entry{EventID: ev.ID, OriginID: a.origin, Transition: ev.Data.Transition, Level: ev.Data.Level, Body: body, EnqueuedAt: a.now}
	if err := ob.Put(seqKey(seq), encodeEntry(&e)); err != nil {
		return err
	}
	a.delta[sink]++
	if !slices.Contains(a.queued, sink) {
		a.queued = append(a.queued, sink)
	}
	return nil
}
