package store

import (
	"bytes"
	"fmt"
)

// Where the alarms' states are. Since schema version 4 the state of an
// ongoing alarm is the value of its originId in bucket ongoing, and the
// state of every other alarm (ended, invalidated, history) in bucket
// alarms: an alarm's state is in exactly one of them, in ongoing exactly
// while it is not terminal. Up to schema version 3, bucket ongoing was the
// set of the ongoing alarms' originIds, with empty values, and every state
// was in alarms: a second key per ongoing alarm, about a sixth of the mapped
// file at 100,000 alarms. The readers below read both layouts, so that a
// copy of an older file opened read-only reads as it did; a read-write Open
// moves an older file's ongoing states (moveOngoingStates).

// findState returns the encoded state of alarm id, and whether the alarm is
// ongoing; nil when the store does not know the alarm.
func findState(tx *txn, id []byte) (v []byte, ongoing bool) {
	v = tx.Bucket(bucketOngoing).Get(id)
	if v == nil {
		return tx.Bucket(bucketAlarms).Get(id), false
	}
	if len(v) == 0 {
		// Schema version 3 or older: the state is in alarms.
		v = tx.Bucket(bucketAlarms).Get(id)
	}
	return v, true
}

// putState writes st as the state of alarm id: into ongoing while the alarm
// is ongoing, into alarms once it is terminal. Whoever makes an alarm
// terminal deletes it from ongoing (applier.terminate).
func putState(ongoing, alarms *bucket, id []byte, st *state) error {
	if st.terminal() {
		return alarms.Put(id, st.encode())
	}
	return ongoing.Put(id, st.encode())
}

// ongoingCursor walks the ongoing alarms in originId order with their
// encoded states, in either layout.
type ongoingCursor struct {
	c *cursor
	// alarms is a cursor over bucket alarms, for a file of schema
	// version 3 or older, made at its first use.
	alarms *bucket
	ac     *cursor
	ak, av []byte
}

func newOngoingCursor(tx *txn) *ongoingCursor {
	return &ongoingCursor{c: tx.Bucket(bucketOngoing).Cursor(), alarms: tx.Bucket(bucketAlarms)}
}

// First returns the first ongoing alarm's originId and state.
func (o *ongoingCursor) First() (k, v []byte, err error) { return o.state(o.c.First()) }

// Next returns the next ongoing alarm's originId and state; k is nil after
// the last.
func (o *ongoingCursor) Next() (k, v []byte, err error) { return o.state(o.c.Next()) }

// state returns the state of the ongoing alarm k whose value in bucket
// ongoing is v. In the layout of schema version 3 or older, both buckets
// are in originId order: a cursor walks the alarms beside the ongoing
// ones, stepping over a few ended alarms and seeking past more, instead of
// a search from the root for each.
func (o *ongoingCursor) state(k, v []byte) ([]byte, []byte, error) {
	if k == nil || len(v) > 0 {
		return k, v, nil
	}
	if o.ac == nil {
		o.ac = o.alarms.Cursor()
		o.ak, o.av = o.ac.Seek(k)
	}
	for step := 0; o.ak != nil && bytes.Compare(o.ak, k) < 0; step++ {
		if step == 8 {
			o.ak, o.av = o.ac.Seek(k)
			break
		}
		o.ak, o.av = o.ac.Next()
	}
	if !bytes.Equal(o.ak, k) {
		return nil, nil, fmt.Errorf("ongoing alarm %q has no state: %w", k, errCorrupt)
	}
	return k, o.av, nil
}

// updateOngoing calls fn with the originId and the state of every ongoing
// alarm of a store in the layout of schema version 4, in originId order, and
// writes back the states fn reports changed. fn must not make an alarm
// terminal, nor write to bucket ongoing.
func updateOngoing(tx *txn, fn func(k []byte, st *state) (bool, error)) error {
	ongoing := tx.Bucket(bucketOngoing)
	c := ongoing.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(v) == 0 {
			return fmt.Errorf("ongoing alarm %q has no state in bucket %q: %w", k, bucketOngoing, errCorrupt)
		}
		st, err := decodeState(v)
		if err != nil {
			return fmt.Errorf("alarm %q: %w", k, err)
		}
		changed, err := fn(k, &st)
		if err != nil {
			return err
		}
		if !changed {
			continue
		}
		k = bytes.Clone(k)
		if err := ongoing.Put(k, st.encode()); err != nil {
			return err
		}
		// A cursor does not survive a write to its bucket: found again.
		if got, _ := c.Seek(k); !bytes.Equal(got, k) {
			return fmt.Errorf("ongoing alarm %q: not found after its write: %w", k, errCorrupt)
		}
	}
	return nil
}

// moveOngoingStates moves a store of schema version 3 or older to the
// layout of version 4: the state of each ongoing alarm, byte for byte, from
// alarms into ongoing. It runs in the transaction of the first read-write
// Open, after the migrations of the older versions.
func moveOngoingStates(tx *txn) error {
	ongoing, alarms := tx.Bucket(bucketOngoing), tx.Bucket(bucketAlarms)
	var ids [][]byte
	c := ongoing.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(v) == 0 {
			ids = append(ids, bytes.Clone(k))
		}
	}
	for _, id := range ids {
		v := alarms.Get(id)
		if v == nil {
			return fmt.Errorf("ongoing alarm %q has no state: %w", id, errCorrupt)
		}
		if err := ongoing.Put(id, bytes.Clone(v)); err != nil {
			return err
		}
		if err := alarms.Delete(id); err != nil {
			return err
		}
	}
	return nil
}
