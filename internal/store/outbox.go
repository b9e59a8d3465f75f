package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/plant"
)

// Pending returns up to limit entries of sink's outbox, oldest first.
func (s *Store) Pending(sink string, limit int) ([]Entry, error) {
	return s.PendingAfter(sink, 0, limit)
}

// PendingAfter returns up to limit entries of sink's outbox whose sequence
// number is above after, oldest first: the next page of a delivery loop that
// left the entries before it waiting (an alarm held down).
func (s *Store) PendingAfter(sink string, after uint64, limit int) ([]Entry, error) {
	return s.PendingPage(sink, after, limit, 0)
}

// PendingPage is PendingAfter with a bound on the page's bytes as well: it
// stops before the entry whose body would take the page's bodies past
// maxBytes, but always returns the first entry, whatever its size. A
// maxBytes of 0 does not bound the page. A delivery loop holds a few pages
// under a backlog: the bound keeps them small when the events are large.
func (s *Store) PendingPage(sink string, after uint64, limit, maxBytes int) ([]Entry, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("dedupe: pending of sink %q: limit %d is not positive", sink, limit)
	}
	if maxBytes < 0 {
		return nil, fmt.Errorf("dedupe: pending of sink %q: byte bound %d is negative", sink, maxBytes)
	}
	var out []Entry
	size := 0
	err := s.view(func(tx *txn) error {
		b := tx.Bucket(bucketOutbox).Bucket([]byte(sink))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(seqKey(after + 1)); k != nil && len(out) < limit; k, v = c.Next() {
			if len(k) != 8 {
				return fmt.Errorf("outbox key %x: %w", k, errCorrupt)
			}
			e, body, err := decodeEntryFields(sink, binary.BigEndian.Uint64(k), v)
			if err != nil {
				return err
			}
			if size += len(body); maxBytes > 0 && size > maxBytes && (len(out) > 0 || s.plant.On(plant.PageRefusesALargeEntry)) {
				break
			}
			// The bytes Apply built, while cached, are the same as the
			// stored ones; else a copy, which outlives the transaction.
			if cached, ok := s.events.body(e.EventID); ok && bytes.Equal(cached, body) {
				e.Body = cached
			} else {
				e.Body = bytes.Clone(body)
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dedupe: pending of sink %q: %w", sink, err)
	}
	return out, nil
}

// Delivery is one delivered entry and the memory its sink keeps of the
// entry's alarm (nil to leave the memory as it is).
type Delivery struct {
	Entry  Entry
	Memory map[string]string
	// Suppressed, when set, says why alarm management withheld the entry
	// from its sink (hold, silence, maintenance...): it leaves the outbox
	// all the same, and is kept in the sink's suppressed log with the reason
	// until the retention prunes it.
	Suppressed string
}

// Delivered removes e from its outbox and, in the same transaction, stores
// memory (when not nil) as the sink's memory of e's alarm.
func (s *Store) Delivered(e Entry, memory map[string]string) error {
	return s.DeliveredBatch([]Delivery{{Entry: e, Memory: memory}})
}

// DeliveredBatch does what Delivered does for every delivery of ds, in one
// transaction: a sink that acknowledges many entries at once (such as
// JetStream publishes in flight) pays for one commit instead of one per
// entry. If one entry is not pending, nothing is written and the error wraps
// ErrNotPending and names it.
func (s *Store) DeliveredBatch(ds []Delivery) error {
	return s.Settle(ds, nil)
}

// Settle does what DeliveredBatch does and writes kvs, in one transaction:
// what a delivery changed in the state of alarm management (a digest, a
// chatter history) is kept if and only if the delivery is.
func (s *Store) Settle(ds []Delivery, kvs []KV) error {
	if len(ds) == 0 && len(kvs) == 0 {
		return nil
	}
	mems := make([][]byte, len(ds))
	for i, d := range ds {
		if d.Memory == nil {
			continue
		}
		m, err := json.Marshal(d.Memory)
		if err != nil {
			return fmt.Errorf("dedupe: memory of sink %q for alarm %q: %w", d.Entry.Sink, d.Entry.OriginID, err)
		}
		mems[i] = m
	}
	err := s.update(func(tx *txn, delta map[string]int) error {
		for i, d := range ds {
			e := &d.Entry
			stored, err := takePending(tx, e, delta, d.Suppressed != "")
			if err != nil {
				return err
			}
			if d.Suppressed != "" && !s.plant.On(plant.WithheldUnrecorded) {
				sb, err := tx.Bucket(bucketSuppressed).CreateBucketIfNotExists([]byte(e.Sink))
				if err != nil {
					return fmt.Errorf("dedupe: suppressed log of sink %q: %w", e.Sink, err)
				}
				rec := DeadLetter{Entry: stored, Reason: d.Suppressed, At: s.clock.Now()}
				if err := sb.Put(seqKey(e.Seq), encodeDead(&rec)); err != nil {
					return fmt.Errorf("dedupe: suppressed log of sink %q: %w", e.Sink, err)
				}
			}
			if mems[i] == nil {
				continue
			}
			mb, err := tx.Bucket(bucketMemory).CreateBucketIfNotExists([]byte(e.Sink))
			if err != nil {
				return fmt.Errorf("dedupe: memory of sink %q: %w", e.Sink, err)
			}
			if err := mb.Put([]byte(e.OriginID), mems[i]); err != nil {
				return fmt.Errorf("dedupe: memory of sink %q for alarm %q: %w", e.Sink, e.OriginID, err)
			}
		}
		return putKV(tx, kvs)
	})
	if err != nil {
		return err
	}
	for _, d := range ds {
		s.events.release(d.Entry.EventID)
	}
	return nil
}

// Enqueue appends an entry for e's alarm to the end of sink's outbox, enqueued
// now, and returns its sequence number: what alarm management sends of its
// own accord (an alarm announced again when its silence expires). e.Sink and
// e.Seq are ignored.
func (s *Store) Enqueue(sink string, e Entry) (uint64, error) {
	seq, _, err := s.enqueue(sink, e, false)
	return seq, err
}

// EnqueueIfOngoing does what Enqueue does when e's alarm is ongoing and, for
// a start, when no start of the alarm waits in sink's outbox already (an
// escalation step's), checked in the same transaction, so that a start
// announced again can never come after its alarm's end, nor twice. It
// reports whether it enqueued.
func (s *Store) EnqueueIfOngoing(sink string, e Entry) (bool, error) {
	_, done, err := s.enqueue(sink, e, true)
	return done, err
}

func (s *Store) enqueue(sink string, e Entry, ifOngoing bool) (uint64, bool, error) {
	var seq uint64
	e.EnqueuedAt = s.clock.Now()
	err := s.update(func(tx *txn, delta map[string]int) error {
		if ifOngoing {
			if _, ongoing := findState(tx, e.OriginID); !ongoing {
				return errUnchanged
			}
		}
		if ifOngoing && e.Transition == event.Start {
			if waits, err := startWaits(tx, sink, e.OriginID); err != nil || waits {
				return cmp.Or(err, errUnchanged)
			}
		}
		ob, err := tx.Bucket(bucketOutbox).CreateBucketIfNotExists([]byte(sink))
		if err != nil {
			return err
		}
		if seq, err = ob.NextSequence(); err != nil {
			return err
		}
		delta[sink]++
		return ob.Put(seqKey(seq), encodeEntry(&e))
	})
	if err != nil {
		return 0, false, fmt.Errorf("dedupe: enqueueing %s for sink %q: %w", e.EventID, sink, err)
	}
	if seq == 0 {
		return 0, false, nil
	}
	s.signal(sink)
	return seq, true, nil
}

// Suppressed returns the entries alarm management withheld from sink, oldest
// first, each with the reason in DeadLetter.Reason and when in At.
func (s *Store) Suppressed(sink string) ([]DeadLetter, error) {
	out, err := s.deadRecords(bucketSuppressed, sink)
	if err != nil {
		return nil, fmt.Errorf("dedupe: suppressed entries of sink %q: %w", sink, err)
	}
	return out, nil
}

// deadRecords reads sink's bucket of root (dead letters, suppressed
// entries), oldest first.
func (s *Store) deadRecords(root []byte, sink string) ([]DeadLetter, error) {
	var out []DeadLetter
	err := s.view(func(tx *txn) error {
		b := tx.Bucket(root).Bucket([]byte(sink))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return fmt.Errorf("%s key %x: %w", root, k, errCorrupt)
			}
			d, err := decodeDead(sink, binary.BigEndian.Uint64(k), v)
			if err != nil {
				return err
			}
			out = append(out, d)
			return nil
		})
	})
	return out, err
}

// takePending deletes e from its outbox and returns the entry as stored,
// with its body when withBody is set.
func takePending(tx *txn, e *Entry, delta map[string]int, withBody bool) (Entry, error) {
	b := tx.Bucket(bucketOutbox).Bucket([]byte(e.Sink))
	key := seqKey(e.Seq)
	var v []byte
	if b != nil {
		v = b.Get(key)
	}
	if v == nil {
		return Entry{}, fmt.Errorf("dedupe: sink %q entry %d (%s): %w", e.Sink, e.Seq, e.EventID, ErrNotPending)
	}
	decode := decodeEntry
	if !withBody {
		decode = decodeEntryHeader
	}
	stored, err := decode(e.Sink, e.Seq, v)
	if err != nil {
		return Entry{}, fmt.Errorf("dedupe: %w", err)
	}
	if e.EventID != "" && stored.EventID != e.EventID {
		return Entry{}, fmt.Errorf("dedupe: sink %q entry %d holds event %s, not %s: %w",
			e.Sink, e.Seq, stored.EventID, e.EventID, ErrNotPending)
	}
	if err := b.Delete(key); err != nil {
		return Entry{}, fmt.Errorf("dedupe: sink %q entry %d: %w", e.Sink, e.Seq, err)
	}
	delta[e.Sink]--
	return stored, nil
}

// DeadLetter moves e from its outbox to the sink's dead letters with reason.
// When e is its alarm's start, the delivery ledger records it, and the
// alarm's later entries in the outbox (its acknowledgements, its end, its
// invalid) are parked beside it as dead letters, in the same transaction:
// nothing of the alarm goes out without its start, and a replay sends them
// in order. An end that comes later is parked by Apply, an acknowledgement
// by AlarmTx.Enqueue.
func (s *Store) DeadLetter(e Entry, reason string) error {
	err := s.update(func(tx *txn, delta map[string]int) error {
		stored, err := takePending(tx, &e, delta, true)
		if err != nil {
			return err
		}
		at := s.clock.Now()
		if err := putDead(tx, &DeadLetter{Entry: stored, Reason: reason, At: at}); err != nil {
			return err
		}
		if stored.Transition != event.Start || s.endsByRules {
			return nil
		}
		if err := putLedger(tx, e.Sink, stored.OriginID, ledgerDead, ""); err != nil {
			return err
		}
		// Ongoing or not: an acknowledgement enqueued while the start was
		// still tried follows it too.
		if s.plant.On(plant.AckIgnoresADeadStart) {
			if v, _ := findState(tx, stored.OriginID); v != nil {
				if h, err := peekState(v); err == nil && h.flags&(flagEnded|flagInvalid) == 0 {
					return nil
				}
			}
		}
		_, err = parkPending(tx, delta, e.Sink, stored.OriginID, toNs(at))
		return err
	})
	if err == nil {
		s.events.release(e.EventID)
	}
	return err
}

// DeadLetters returns the dead letters of sink, oldest first. Prune drops
// those older than the retention.
func (s *Store) DeadLetters(sink string) ([]DeadLetter, error) {
	out, err := s.deadRecords(bucketDead, sink)
	if err != nil {
		return nil, fmt.Errorf("dedupe: dead letters of sink %q: %w", sink, err)
	}
	return out, nil
}

// Memory returns the sink's memory of an alarm (nil when it has none).
func (s *Store) Memory(sink, originID string) (map[string]string, error) {
	var m map[string]string
	err := s.view(func(tx *txn) error {
		b := tx.Bucket(bucketMemory).Bucket([]byte(sink))
		if b == nil {
			return nil
		}
		v := b.Get([]byte(originID))
		if v == nil {
			return nil
		}
		return json.Unmarshal(v, &m)
	})
	if err != nil {
		return nil, fmt.Errorf("dedupe: memory of sink %q for alarm %q: %w", sink, originID, err)
	}
	return m, nil
}

// Memories returns the sink's memory of each alarm of originIDs, in order
// (nil where it has none), read in one transaction.
func (s *Store) Memories(sink string, originIDs []string) ([]map[string]string, error) {
	out := make([]map[string]string, len(originIDs))
	err := s.view(func(tx *txn) error {
		b := tx.Bucket(bucketMemory).Bucket([]byte(sink))
		if b == nil {
			return nil
		}
		for i, id := range originIDs {
			v := b.Get([]byte(id))
			if v == nil {
				continue
			}
			if err := json.Unmarshal(v, &out[i]); err != nil {
				return fmt.Errorf("alarm %q: %w", id, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dedupe: memory of sink %q: %w", sink, err)
	}
	return out, nil
}

// Depth returns the number of entries in each sink's outbox, including the
// sinks whose outbox is empty.
func (s *Store) Depth() (map[string]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.depth), nil
}

// Wake returns a channel that receives after entries are added to sink's
// outbox. It holds at most one pending signal.
func (s *Store) Wake(sink string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wakeLocked(sink)
}

func (s *Store) wakeLocked(sink string) chan struct{} {
	ch, ok := s.wake[sink]
	if !ok {
		ch = make(chan struct{}, 1)
		s.wake[sink] = ch
	}
	return ch
}

// signal wakes the delivery of sink without blocking.
func (s *Store) signal(sink string) {
	s.mu.Lock()
	ch := s.wakeLocked(sink)
	s.mu.Unlock()
	select {
	case ch <- struct{}{}:
	default:
	}
}
