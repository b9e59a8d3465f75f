package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/relay-energy/relay/internal/event"
)

// Where the alarms' states are. Since schema version 5 the state of an
// ongoing alarm is the value of its key (ongoingKey) in bucket ongoing, and
// the state of every other alarm (ended, invalidated, history) the value of
// its originId in bucket alarms: an alarm's state is in exactly one of
// them, in ongoing exactly while it is not terminal. Schema version 4 had
// the same buckets, but every key in ongoing was the alarm's originId. Up
// to schema version 3, bucket ongoing was the set of the ongoing alarms'
// originIds, with empty values, and every state was in alarms: a second key
// per ongoing alarm, about a sixth of the mapped file at 100,000 alarms.
// The readers below read the three layouts (keyedByID says whether the keys
// are originIds; then an empty value says the state is in alarms), so that
// a copy of an older file opened read-only reads as it did; a read-write
// Open moves an older file's ongoing states (moveOngoingStates).

// keyedByID reports whether the keys of bucket ongoing are the ongoing
// alarms' originIds, as they were up to schema version 4, rather than
// their keys of version 5 (ongoingKey).
func keyedByID(tx *txn) bool {
	v := tx.Bucket(bucketMeta).Get(metaVersion)
	return len(v) == 8 && binary.BigEndian.Uint64(v) < 5
}

// appendOngoingKey appends the key of alarm id in bucket ongoing to b: an
// id the upstream sends as a number (event.NumericID) as a 0, the number of
// its digits and the number in 8 bytes big-endian, 10 bytes where the 19
// digits of such an id took 19, in the numbers' order; any other id as it
// is, after a 1 when it begins with a 0 or 1 byte, so that no two ids share
// a key. appendOngoingID reads it back.
func appendOngoingKey(b []byte, id string) []byte {
	if n, ok := event.NumericID(id); ok {
		b = append(b, 0, byte(len(id)))
		return binary.BigEndian.AppendUint64(b, n)
	}
	if id != "" && id[0] <= 1 {
		b = append(b, 1)
	}
	return append(b, id...)
}

// ongoingKey returns the key of alarm id in bucket ongoing, in a new slice
// that bbolt may keep until the commit.
func ongoingKey(id string) []byte { return appendOngoingKey(make([]byte, 0, 10+len(id)), id) }

// appendOngoingID appends to b the originId whose key in bucket ongoing is
// k (schema version 5).
func appendOngoingID(b, k []byte) []byte {
	switch {
	case len(k) == 10 && k[0] == 0:
		return strconv.AppendUint(b, binary.BigEndian.Uint64(k[2:]), 10)
	case len(k) > 0 && k[0] == 1:
		return append(b, k[1:]...)
	}
	return append(b, k...)
}

// findState returns the encoded state of alarm id, and whether the alarm is
// ongoing; nil when the store does not know the alarm.
func findState(tx *txn, id string) (v []byte, ongoing bool) {
	o, alarms := tx.Bucket(bucketOngoing), tx.Bucket(bucketAlarms)
	if keyedByID(tx) {
		// Schema version 4 or older keyed bucket ongoing by originId.
		v = o.Get([]byte(id))
	} else {
		v = o.Get(ongoingKey(id))
	}
	if v == nil {
		return alarms.Get([]byte(id)), false
	}
	if len(v) == 0 {
		// Schema version 3 or older: the state is in alarms.
		v = alarms.Get([]byte(id))
	}
	return v, true
}

// putState writes st as the state of alarm id: into ongoing while the alarm
// is ongoing, into alarms once it is terminal. Whoever makes an alarm
// terminal deletes it from ongoing (applier.terminate).
func putState(ongoing, alarms *bucket, id string, st *state) error {
	if st.terminal() {
		return alarms.Put([]byte(id), st.encode())
	}
	return ongoing.Put(ongoingKey(id), st.encode())
}

// ongoingCursor walks the ongoing alarms with their originIds and encoded
// states, in either layout, in the order of their keys: the ids the
// upstream sends as numbers first, in their order, then the others.
type ongoingCursor struct {
	c *cursor
	// byID says that the keys are the originIds (keyedByID).
	byID bool
	// id holds the originId last returned.
	id []byte
	// alarms is a cursor over bucket alarms, for a file of schema
	// version 3 or older, made at its first use.
	alarms *bucket
	ac     *cursor
	ak, av []byte
}

func newOngoingCursor(tx *txn) *ongoingCursor {
	return &ongoingCursor{c: tx.Bucket(bucketOngoing).Cursor(), byID: keyedByID(tx), alarms: tx.Bucket(bucketAlarms)}
}

// First returns the first ongoing alarm's originId and state. The originId
// is valid until the next call.
func (o *ongoingCursor) First() (id, v []byte, err error) { return o.state(o.c.First()) }

// Next returns the next ongoing alarm's originId and state; id is nil after
// the last.
func (o *ongoingCursor) Next() (id, v []byte, err error) { return o.state(o.c.Next()) }

// state returns the originId and the state of the ongoing alarm whose key
// in bucket ongoing is k and value v. In the layout of schema version 3 or
// older, both buckets are in originId order: a cursor walks the alarms
// beside the ongoing ones, stepping over a few ended alarms and seeking
// past more, instead of a search from the root for each.
func (o *ongoingCursor) state(k, v []byte) ([]byte, []byte, error) {
	if k == nil {
		return nil, nil, nil
	}
	if len(v) > 0 {
		if o.byID {
			return k, v, nil
		}
		o.id = appendOngoingID(o.id[:0], k)
		return o.id, v, nil
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
// alarm of a store in the layout of schema version 5, and writes back the
// states fn reports changed. fn must not make an alarm terminal, nor write
// to bucket ongoing, nor keep the originId, which is valid until the next
// call.
func updateOngoing(tx *txn, fn func(id []byte, st *state) (bool, error)) error {
	ongoing := tx.Bucket(bucketOngoing)
	c := ongoing.Cursor()
	var id []byte
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(v) == 0 {
			return fmt.Errorf("ongoing alarm %q has no state in bucket %q: %w", k, bucketOngoing, errCorrupt)
		}
		id = appendOngoingID(id[:0], k)
		st, err := decodeState(v)
		if err != nil {
			return fmt.Errorf("alarm %q: %w", id, err)
		}
		changed, err := fn(id, &st)
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
			return fmt.Errorf("ongoing alarm %q: not found after its write: %w", id, errCorrupt)
		}
	}
	return nil
}

// moveOngoingStates moves a store of schema version 4 or older, whose keys
// in bucket ongoing are the originIds, to the layout of version 5: the
// state of each ongoing alarm, byte for byte, under its key there (from
// alarms, for version 3 or older; an id that is its own key stays where it
// is). It runs in the transaction of the first read-write Open, after the
// migrations of the older versions.
func moveOngoingStates(tx *txn) error {
	ongoing, alarms := tx.Bucket(bucketOngoing), tx.Bucket(bucketAlarms)
	type move struct {
		id, state []byte
		inAlarms  bool
	}
	var moves []move
	c := ongoing.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(v) != 0 {
			// Schema version 4: the state under the originId.
			if !bytes.Equal(ongoingKey(string(k)), k) {
				moves = append(moves, move{bytes.Clone(k), bytes.Clone(v), false})
			}
			continue
		}
		st := alarms.Get(k)
		if st == nil {
			return fmt.Errorf("ongoing alarm %q has no state: %w", k, errCorrupt)
		}
		moves = append(moves, move{bytes.Clone(k), bytes.Clone(st), true})
	}
	// Every old key out before any new one in: a new key may be the old
	// key of another alarm.
	for _, m := range moves {
		if err := ongoing.Delete(m.id); err != nil {
			return err
		}
		if !m.inAlarms {
			continue
		}
		if err := alarms.Delete(m.id); err != nil {
			return err
		}
	}
	for _, m := range moves {
		if err := ongoing.Put(ongoingKey(string(m.id)), m.state); err != nil {
			return err
		}
	}
	return nil
}
