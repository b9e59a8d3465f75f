package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/relay-energy/relay/internal/plant"
)

// metaSinks holds the destinations of the sinks of the rules last applied,
// a JSON object of sink name to destination.
var metaSinks = []byte("sinks")

// Renamed is a sink whose memory, outbox and dead letters moved to a new
// name.
type Renamed struct {
	From, To    string
	Destination string
	// Memories, Entries and DeadLetters count the alarms remembered, the
	// pending entries and the dead letters that moved.
	Memories, Entries, DeadLetters int
}

// Removed is a sink the new rules no longer name, not even renamed: the
// entries that waited in its outbox were recorded as dropped.
type Removed struct {
	Sink string
	// Dropped are the entries recorded as dropped.
	Dropped []Entry
}

// removedDetail is the reason of the entries of a removed sink.
const removedDetail = "its sink was removed from the rules"

// AdoptSinks records the sinks of the rules being applied, given as sink name
// to destination (such as "slack:C0123"; "" for a sink whose destination
// does not identify it). A sink that is new under its name but has the
// destination of a sink the new rules no longer name is that sink renamed:
// its memory of each alarm (a Slack thread, for instance) and its pending
// entries move to the new name, so that ends are still posted in the
// threads of their starts and nothing waits for a name that is gone. When
// several old sinks had the destination, the one that comes first by name
// is taken. Its dead letters and its place in the delivery ledger move
// too. It returns what moved.
//
// The sink's suppressed log moves too, and so do the values of namespaces
// (see Put) keyed by sink name: in each namespace of sinkKeyed, the key
// equal to the old name and the keys starting with the old name and "\x00".
//
// A sink of the last rules that the new ones do not name, not even renamed,
// is removed: the entries waiting in its outbox are recorded as dropped in
// its suppressed log (never sent), and so are its alarms' ends that come
// later. Its dead letters stay, to be listed and dropped.
func (s *Store) AdoptSinks(dests map[string]string, sinkKeyed ...string) ([]Renamed, []Removed, error) {
	var out []Renamed
	var removed []Removed
	err := s.update(func(tx *txn, delta map[string]int) error {
		out, removed = nil, nil
		meta := tx.Bucket(bucketMeta)
		old := map[string]string{}
		if v := meta.Get(metaSinks); v != nil {
			if err := json.Unmarshal(v, &old); err != nil {
				return fmt.Errorf("sinks of the last rules: %w", errCorrupt)
			}
		}
		names := slices.Sorted(maps.Keys(old))
		taken := map[string]bool{}
		for _, to := range slices.Sorted(maps.Keys(dests)) {
			dest := dests[to]
			if dest == "" {
				continue
			}
			if _, known := old[to]; known {
				continue
			}
			for _, from := range names {
				if _, still := dests[from]; still || taken[from] || old[from] != dest {
					continue
				}
				taken[from] = true
				r := Renamed{From: from, To: to, Destination: dest}
				var err error
				if r.Memories, err = moveBucket(tx.Bucket(bucketMemory), from, to, false); err != nil {
					return err
				}
				if !s.plant.On(plant.RenameLeavesTheOutbox) {
					if r.Entries, err = moveBucket(tx.Bucket(bucketOutbox), from, to, true); err != nil {
						return err
					}
				}
				if _, err = moveRecords(tx, bucketSuppressed, from, to); err != nil {
					return err
				}
				if !s.endsByRules {
					if r.DeadLetters, err = moveRecords(tx, bucketDead, from, to); err != nil {
						return err
					}
					if _, err = moveBucket(tx.Bucket(bucketLedger), from, to, false); err != nil {
						return err
					}
					if err := newSinkSets(tx).rename(from, to); err != nil {
						return err
					}
				}
				if err := renameKeys(tx.Bucket(bucketKV), sinkKeyed, from, to); err != nil {
					return err
				}
				delta[from] -= r.Entries
				delta[to] += r.Entries
				out = append(out, r)
				break
			}
		}
		now := toNs(s.clock.Now())
		for _, from := range names {
			if _, still := dests[from]; still || taken[from] || s.endsByRules {
				continue
			}
			dropped, err := dropPending(tx, delta, from, DropSinkRemoved, removedDetail, now)
			if err != nil {
				return err
			}
			if len(dropped) > 0 {
				removed = append(removed, Removed{Sink: from, Dropped: dropped})
			}
		}
		v, err := json.Marshal(dests)
		if err != nil {
			return err
		}
		if bytes.Equal(v, meta.Get(metaSinks)) && len(out) == 0 && len(removed) == 0 {
			return errUnchanged
		}
		return meta.Put(metaSinks, v)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("dedupe: adopting renamed sinks: %w", err)
	}
	current := make(map[string]bool, len(dests))
	for name := range dests {
		current[name] = true
	}
	s.mu.Lock()
	if !s.endsByRules {
		s.current = current
	}
	s.mu.Unlock()
	for _, r := range removed {
		s.countDropped(r.Sink, DropSinkRemoved, len(r.Dropped))
		for _, e := range r.Dropped {
			s.events.release(e.EventID)
		}
	}
	for _, r := range out {
		if r.Entries > 0 {
			s.signal(r.To)
		}
	}
	return out, removed, nil
}

// moveRecords moves the records of sink from in root (its dead letters or
// its suppressed log) to sink to, numbered after what to's outbox has
// numbered (a record keeps the number of its outbox entry, so that later
// ones never overwrite it), and returns how many moved.
func moveRecords(tx *txn, rootName []byte, from, to string) (int, error) {
	root := tx.Bucket(rootName)
	src := root.Bucket([]byte(from))
	if src == nil {
		return 0, nil
	}
	ob, err := outboxOf(tx, to)
	if err != nil {
		return 0, err
	}
	if bytes.Equal(rootName, bucketDead) {
		tx.addedDead(to)
	}
	var ds []DeadLetter
	err = src.ForEach(func(k, v []byte) error {
		d, err := decodeDead(from, binary.BigEndian.Uint64(k), v)
		if err != nil {
			return err
		}
		d.Body = bytes.Clone(d.Body)
		ds = append(ds, d)
		return nil
	})
	if err != nil {
		return 0, err
	}
	for i := range ds {
		d := &ds[i]
		if d.Seq, err = ob.NextSequence(); err != nil {
			return 0, err
		}
		d.Sink = to
		db, err := root.CreateBucketIfNotExists([]byte(to))
		if err != nil {
			return 0, err
		}
		if err := db.Put(seqKey(d.Seq), encodeDead(d)); err != nil {
			return 0, err
		}
	}
	return len(ds), root.DeleteBucket([]byte(from))
}

// moveBucket moves every key of parent's sub-bucket from into the
// sub-bucket to, and deletes from. It returns how many keys moved. With
// sequence, the keys are outbox sequence numbers: each value gets the next
// number of to, in order, after what to holds. Otherwise a key to already
// holds keeps its value.
func moveBucket(parent *bucket, from, to string, sequence bool) (int, error) {
	src := parent.Bucket([]byte(from))
	if src == nil {
		return 0, nil
	}
	dst, err := parent.CreateBucketIfNotExists([]byte(to))
	if err != nil {
		return 0, err
	}
	n := 0
	err = src.ForEach(func(k, v []byte) error {
		if sequence {
			seq, err := dst.NextSequence()
			if err != nil {
				return err
			}
			k = seqKey(seq)
		} else if dst.Get(k) != nil {
			return nil
		}
		n++
		return dst.Put(bytes.Clone(k), bytes.Clone(v))
	})
	if err != nil {
		return 0, err
	}
	return n, parent.DeleteBucket([]byte(from))
}

// renameKeys moves, in each namespace of kv named in namespaces, the key
// from and the keys starting with from and "\x00" to the same keys under to.
// A key to already holds keeps its value.
func renameKeys(kv *bucket, namespaces []string, from, to string) error {
	for _, ns := range namespaces {
		b := kv.Bucket([]byte(ns))
		if b == nil {
			continue
		}
		type move struct{ old, new, v []byte }
		var moves []move
		prefix := []byte(from + "\x00")
		c := b.Cursor()
		for k, v := c.Seek([]byte(from)); k != nil && bytes.HasPrefix(k, []byte(from)); k, v = c.Next() {
			if string(k) != from && !bytes.HasPrefix(k, prefix) {
				continue
			}
			moves = append(moves, move{bytes.Clone(k), append([]byte(to), k[len(from):]...), bytes.Clone(v)})
		}
		for _, mv := range moves {
			if b.Get(mv.new) == nil {
				if err := b.Put(mv.new, mv.v); err != nil {
					return err
				}
			}
			if err := b.Delete(mv.old); err != nil {
				return err
			}
		}
	}
	return nil
}
