package dedupe

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"time"
)

// DeadLetterFilter selects dead letters. Its zero value selects all.
type DeadLetterFilter struct {
	// Sink keeps the dead letters of one sink.
	Sink string
	// Since keeps those given up on at or after it.
	Since time.Time
	// EventID keeps the dead letters of one event ("<originId>:<transition>"),
	// or, without a transition, of every transition of one alarm.
	EventID string
}

func (f DeadLetterFilter) match(d *DeadLetter) bool {
	switch {
	case !f.Since.IsZero() && d.At.Before(f.Since):
		return false
	case f.EventID != "" && d.EventID != f.EventID && d.OriginID != f.EventID:
		return false
	}
	return true
}

// FindDeadLetters returns the dead letters f selects, by sink name, then
// oldest first.
func (s *Store) FindDeadLetters(f DeadLetterFilter) ([]DeadLetter, error) {
	var out []DeadLetter
	err := s.view(func(tx *txn) error {
		return eachDead(tx, f, func(_ *bucket, d DeadLetter) error {
			out = append(out, d)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("dedupe: dead letters: %w", err)
	}
	return out, nil
}

// DeadLetterCounts returns how many dead letters each sink holds.
func (s *Store) DeadLetterCounts() (map[string]int, error) {
	out := map[string]int{}
	err := s.view(func(tx *txn) error {
		return tx.Bucket(bucketDead).ForEachBucket(func(k []byte) error {
			out[string(k)] = tx.Bucket(bucketDead).Bucket(k).Stats().KeyN
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("dedupe: dead letters: %w", err)
	}
	return out, nil
}

// ReplayDeadLetters puts the dead letters f selects back into their sinks'
// outboxes, at the end, to be attempted again as new entries (enqueued now,
// so that max_age starts again). The order of each alarm's transitions is
// kept: entries of the same alarms still waiting in the outbox move behind
// the replayed ones, everything in the order it was first enqueued. It
// returns the dead letters replayed.
func (s *Store) ReplayDeadLetters(f DeadLetterFilter) ([]DeadLetter, error) {
	var out []DeadLetter
	now := s.clock.Now()
	err := s.update(func(tx *txn, delta map[string]int) error {
		type item struct {
			seq   uint64
			entry Entry
		}
		bySink := map[string][]item{}
		var remove []func() error
		err := eachDead(tx, f, func(b *bucket, d DeadLetter) error {
			out = append(out, d)
			bySink[d.Sink] = append(bySink[d.Sink], item{d.Seq, d.Entry})
			key := seqKey(d.Seq)
			remove = append(remove, func() error { return b.Delete(key) })
			return nil
		})
		if err != nil {
			return err
		}
		if len(out) == 0 {
			return errUnchanged
		}
		for _, rm := range remove {
			if err := rm(); err != nil {
				return err
			}
		}
		for sink, items := range bySink {
			ob, err := tx.Bucket(bucketOutbox).CreateBucketIfNotExists([]byte(sink))
			if err != nil {
				return err
			}
			origins := map[string]bool{}
			for _, it := range items {
				origins[it.entry.OriginID] = true
			}
			// Pending entries of the same alarms go behind the replayed ones.
			var later [][]byte
			c := ob.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				e, err := decodeEntry(sink, binary.BigEndian.Uint64(k), v)
				if err != nil {
					return err
				}
				if origins[e.OriginID] {
					items = append(items, item{e.Seq, e})
					later = append(later, slices.Clone(k))
				}
			}
			for _, k := range later {
				if err := ob.Delete(k); err != nil {
					return err
				}
			}
			delta[sink] -= len(later)
			slices.SortStableFunc(items, func(a, b item) int { return cmp.Compare(a.seq, b.seq) })
			for _, it := range items {
				seq, err := ob.NextSequence()
				if err != nil {
					return err
				}
				e := it.entry
				e.EnqueuedAt = now
				if err := ob.Put(seqKey(seq), encodeEntry(&e)); err != nil {
					return err
				}
				delta[sink]++
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dedupe: replaying dead letters: %w", err)
	}
	for _, d := range out {
		s.signal(d.Sink)
	}
	return out, nil
}

// DropDeadLetters deletes the dead letters f selects and returns them.
func (s *Store) DropDeadLetters(f DeadLetterFilter) ([]DeadLetter, error) {
	var out []DeadLetter
	err := s.update(func(tx *txn, _ map[string]int) error {
		var keys []func() error
		err := eachDead(tx, f, func(b *bucket, d DeadLetter) error {
			out = append(out, d)
			key := seqKey(d.Seq)
			keys = append(keys, func() error { return b.Delete(key) })
			return nil
		})
		if err != nil {
			return err
		}
		if len(out) == 0 {
			return errUnchanged
		}
		for _, del := range keys {
			if err := del(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dedupe: dropping dead letters: %w", err)
	}
	return out, nil
}

// eachDead calls fn with each dead letter f selects and its bucket, by sink
// name, then in the order they were enqueued.
func eachDead(tx *txn, f DeadLetterFilter, fn func(*bucket, DeadLetter) error) error {
	root := tx.Bucket(bucketDead)
	var sinks []string
	if f.Sink != "" {
		sinks = []string{f.Sink}
	} else if err := root.ForEachBucket(func(k []byte) error {
		sinks = append(sinks, string(k))
		return nil
	}); err != nil {
		return err
	}
	for _, sink := range sinks {
		b := root.Bucket([]byte(sink))
		if b == nil {
			continue
		}
		err := b.ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return fmt.Errorf("dead letter key %x: %w", k, errCorrupt)
			}
			d, err := decodeDead(sink, binary.BigEndian.Uint64(k), v)
			if err != nil {
				return err
			}
			if !f.match(&d) {
				return nil
			}
			return fn(b, d)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
