package store

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// DeadLetterFilter selects dead letters. Its zero value selects all.
type DeadLetterFilter struct {
	// Sink keeps the dead letters of one sink.
	Sink string
	// Since keeps those given up on at or after it.
	Since time.Time
	// EventID keeps the dead letters of one event ("<originId>:<transition>"),
	// or, without a transition, of every transition of one alarm: the text
	// relay deadletters --event takes. An upstream originId may hold ':', so
	// "A:start" names both alarm A's start and the alarm "A:start";
	// OnlyEvent and OriginID say which.
	EventID string
	// OnlyEvent makes EventID name the one event alone, never an alarm.
	OnlyEvent bool
	// OriginID keeps the dead letters of one alarm, by its originId exactly.
	OriginID string
}

func (f DeadLetterFilter) match(d *DeadLetter) bool {
	switch {
	case !f.Since.IsZero() && d.At.Before(f.Since):
		return false
	case f.OriginID != "" && d.OriginID != f.OriginID:
		return false
	case f.EventID != "" && d.EventID != f.EventID && (f.OnlyEvent || d.OriginID != f.EventID):
		return false
	}
	return true
}

// mayMatchOrigin reports whether a record of the alarm origin can match
// f's OriginID and EventID: the alarm's originId itself, or an event id of
// it (event.ID: "<originId>:<transition>").
func (f DeadLetterFilter) mayMatchOrigin(origin []byte) bool {
	if f.OriginID != "" && string(origin) != f.OriginID {
		return false
	}
	if f.EventID == "" {
		return true
	}
	rest, ok := strings.CutPrefix(f.EventID, string(origin))
	return ok && (rest == "" || rest[0] == ':')
}

// FindDeadLetters returns the dead letters f selects, with their bodies,
// by sink name, then oldest first.
func (s *Store) FindDeadLetters(f DeadLetterFilter) ([]DeadLetter, error) {
	return s.findRecords(bucketDead, recordScan{filter: f, bodies: true}, "dead letters")
}

// ListDeadLetters is FindDeadLetters without the bodies: what a list
// shows, which copies no event out of the store.
func (s *Store) ListDeadLetters(f DeadLetterFilter) ([]DeadLetter, error) {
	return s.findRecords(bucketDead, recordScan{filter: f}, "dead letters")
}

// FindWithheld returns the entries f selects of the sinks' suppressed logs,
// with their bodies: those alarm management withheld from a sink and those
// recorded as dropped (reason starting with DroppedPrefix), by sink name,
// then oldest first.
func (s *Store) FindWithheld(f DeadLetterFilter) ([]DeadLetter, error) {
	return s.findRecords(bucketSuppressed, recordScan{filter: f, bodies: true}, "withheld entries")
}

// ListWithheld is FindWithheld without the bodies.
func (s *Store) ListWithheld(f DeadLetterFilter) ([]DeadLetter, error) {
	return s.findRecords(bucketSuppressed, recordScan{filter: f}, "withheld entries")
}

// findRecords returns the records sc selects of root; what names them in
// an error.
func (s *Store) findRecords(root []byte, sc recordScan, what string) ([]DeadLetter, error) {
	var out []DeadLetter
	err := s.view(func(tx *txn) error {
		out = nil
		return eachRecord(tx, root, sc, func(_ *bucket, d DeadLetter) error {
			out = append(out, d)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("dedupe: %s: %w", what, err)
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

// Refusal is a dead letter that ReplayDeadLetters left where it is, and why.
type Refusal struct {
	DeadLetter
	Why string
}

// pairs gathers, for the dead letters f selects, every dead letter of the
// same alarm at the same sink: an alarm's dead letters at a sink are
// replayed and dropped together, its start with the end parked beside it,
// in the order they were enqueued.
func pairs(tx *txn, f DeadLetterFilter) ([][]DeadLetter, error) {
	type key struct{ sink, origin string }
	want := map[key]bool{}
	var order []key
	err := eachRecord(tx, bucketDead, recordScan{filter: f}, func(_ *bucket, d DeadLetter) error {
		k := key{d.Sink, d.OriginID}
		if !want[k] {
			want[k] = true
			order = append(order, k)
		}
		return nil
	})
	if err != nil || len(order) == 0 {
		return nil, err
	}
	var sinks []string
	for _, k := range order {
		if !slices.Contains(sinks, k.sink) {
			sinks = append(sinks, k.sink)
		}
	}
	groups := map[key][]DeadLetter{}
	wanted := func(sink string, origin []byte) bool { return want[key{sink, string(origin)}] }
	err = eachRecord(tx, bucketDead, recordScan{sinks: sinks, origin: wanted, bodies: true}, func(_ *bucket, d DeadLetter) error {
		k := key{d.Sink, d.OriginID}
		groups[k] = append(groups[k], d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([][]DeadLetter, 0, len(order))
	for _, k := range order {
		g := groups[k]
		slices.SortFunc(g, func(a, b DeadLetter) int { return cmp.Compare(a.Seq, b.Seq) })
		out = append(out, g)
	}
	return out, nil
}

// ReplayDeadLetters puts the dead letters f selects back into their sinks'
// outboxes, at the end, to be attempted again as new entries (enqueued now,
// so that max_age starts again). Dead letters go back with every other dead
// letter of the same alarm at the same sink, in the order they were first
// enqueued: a start with the end parked beside it. It returns the dead
// letters replayed, and those it refused with why:
//   - an alarm with entries still waiting in the sink's outbox (the delivery
//     loop owns their order: replay it once they are out);
//   - a start whose alarm is over without its end beside it (its end went out
//     alone before the ledger kept pairs, or was dropped): sent alone it
//     would open an alarm that nothing closes;
//   - an end whose start is no longer held (pruned after the retention);
//   - a sink the rules in force do not name.
func (s *Store) ReplayDeadLetters(f DeadLetterFilter) ([]DeadLetter, []Refusal, error) {
	var out []DeadLetter
	var refused []Refusal
	now := s.clock.Now()
	current := s.currentSinks()
	err := s.update(func(tx *txn, delta map[string]int) error {
		out, refused = nil, nil
		groups, err := pairs(tx, f)
		if err != nil {
			return err
		}
		waiting := map[string]map[string]bool{}
		for _, g := range groups {
			sink, origin := g[0].Sink, g[0].OriginID
			if _, ok := waiting[sink]; !ok {
				if waiting[sink], err = outboxOrigins(tx, sink); err != nil {
					return err
				}
			}
			if why := replayRefusal(tx, current, waiting[sink], s.noResolvedSinks(), g); why != "" && !s.endsByRules {
				for _, d := range g {
					refused = append(refused, Refusal{DeadLetter: d, Why: why})
				}
				continue
			}
			ob, err := outboxOf(tx, sink)
			if err != nil {
				return err
			}
			if s.endsByRules && waiting[sink][origin] {
				// As before the ledger: the alarm's waiting entries move
				// behind the replayed ones, under a delivery loop that may
				// hold one of them.
				if g, err = takeWaiting(ob, delta, sink, origin, g); err != nil {
					return err
				}
			}
			db := tx.Bucket(bucketDead).Bucket([]byte(sink))
			for _, d := range g {
				if d.Reason == waitingReason {
					// Not a dead letter: an entry that waited, moved behind.
					e := d.Entry
					if err := putEntry(ob, delta, sink, &e); err != nil {
						return err
					}
					continue
				}
				if err := db.Delete(seqKey(d.Seq)); err != nil {
					return err
				}
				e := d.Entry
				e.EnqueuedAt = now
				if err := putEntry(ob, delta, sink, &e); err != nil {
					return err
				}
				out = append(out, d)
			}
			if err := deleteLedger(tx, sink, origin); err != nil {
				return err
			}
		}
		if len(out) == 0 {
			return errUnchanged
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("dedupe: replaying dead letters: %w", err)
	}
	for _, d := range out {
		s.signal(d.Sink)
	}
	return out, refused, nil
}

// waitingReason marks, in a replay with Options.EndsByRules, an entry that
// waited in the outbox and moves behind the replayed dead letters.
const waitingReason = "\x00waiting"

// takeWaiting deletes the entries of origin waiting in sink's outbox ob and
// returns g with them added, marked waitingReason, in sequence order.
func takeWaiting(ob *bucket, delta map[string]int, sink, origin string, g []DeadLetter) ([]DeadLetter, error) {
	var keys [][]byte
	err := ob.ForEach(func(k, v []byte) error {
		e, err := decodeEntry(sink, binary.BigEndian.Uint64(k), v)
		if err != nil || e.OriginID != origin {
			return err
		}
		e.Body = slices.Clone(e.Body)
		g = append(g, DeadLetter{Entry: e, Reason: waitingReason})
		keys = append(keys, slices.Clone(k))
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := ob.Delete(k); err != nil {
			return nil, err
		}
	}
	delta[sink] -= len(keys)
	slices.SortFunc(g, func(a, b DeadLetter) int { return cmp.Compare(a.Seq, b.Seq) })
	return g, nil
}

// putEntry appends e to the outbox ob of sink under the next number.
func putEntry(ob *bucket, delta map[string]int, sink string, e *Entry) error {
	seq, err := ob.NextSequence()
	if err != nil {
		return err
	}
	if err := ob.Put(seqKey(seq), encodeEntry(e)); err != nil {
		return err
	}
	delta[sink]++
	return nil
}

// replayRefusal says why the dead letters g, of one alarm at one sink, may
// not be replayed, or "" when they may.
func replayRefusal(tx *txn, current, waiting, noResolved map[string]bool, g []DeadLetter) string {
	sink, origin := g[0].Sink, g[0].OriginID
	if current != nil && !current[sink] {
		return fmt.Sprintf("sink %q is not in the rules in force: define it again, or drop its dead letters", sink)
	}
	if waiting[origin] {
		return fmt.Sprintf("entries of alarm %s still wait in the outbox of sink %q: replay it once they are delivered", origin, sink)
	}
	start := slices.ContainsFunc(g, func(d DeadLetter) bool { return d.Transition == event.Start })
	closed := slices.ContainsFunc(g, func(d DeadLetter) bool { return d.Transition == event.End || d.Transition == event.Invalid })
	// A sink that wants no ends (send_resolved: false) is owed none.
	if start && !closed && !noResolved[sink] {
		if v, _ := findState(tx, origin); v != nil {
			if h, err := peekState(v); err == nil && h.flags&(flagEnded|flagInvalid) != 0 {
				return fmt.Sprintf("alarm %s is over and its end is not beside its start at sink %q (it went out alone, or was dropped): "+
					"replayed alone, the start would open an alarm that nothing closes; drop it instead", origin, sink)
			}
		}
	}
	if !start {
		if kind, _ := ledgerRecord(tx, sink, origin); kind == ledgerDead {
			return fmt.Sprintf("the start of alarm %s at sink %q is no longer held (pruned after the retention): "+
				"replayed alone, its end would close an alarm the sink never saw; drop it instead", origin, sink)
		}
	}
	return ""
}

// outboxOrigins returns the alarms with entries waiting in sink's outbox.
func outboxOrigins(tx *txn, sink string) (map[string]bool, error) {
	out := map[string]bool{}
	b := tx.Bucket(bucketOutbox).Bucket([]byte(sink))
	if b == nil {
		return out, nil
	}
	err := b.ForEach(func(k, v []byte) error {
		h, err := decodeEntryHeader(sink, binary.BigEndian.Uint64(k), v)
		if err != nil {
			return err
		}
		out[h.OriginID] = true
		return nil
	})
	return out, err
}

// DropDeadLetters deletes the dead letters f selects, with every other dead
// letter of the same alarm at the same sink (a start and the end parked
// beside it), and returns them. A dropped start is recorded in the delivery
// ledger: an end of its alarm that comes later is recorded as dropped too.
func (s *Store) DropDeadLetters(f DeadLetterFilter) ([]DeadLetter, error) {
	var out []DeadLetter
	now := s.clock.Now()
	err := s.update(func(tx *txn, _ map[string]int) error {
		out = nil
		groups, err := pairs(tx, f)
		if err != nil {
			return err
		}
		if len(groups) == 0 {
			return errUnchanged
		}
		for _, g := range groups {
			db := tx.Bucket(bucketDead).Bucket([]byte(g[0].Sink))
			start := false
			for _, d := range g {
				if err := db.Delete(seqKey(d.Seq)); err != nil {
					return err
				}
				start = start || d.Transition == event.Start
				out = append(out, d)
			}
			if start {
				why := "its start was dropped by an operator at " + now.UTC().Format(time.RFC3339)
				if err := putLedger(tx, g[0].Sink, g[0].OriginID, ledgerDropped, why); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dedupe: dropping dead letters: %w", err)
	}
	return out, nil
}

// eachDead calls fn with each dead letter f selects, with its body, and
// its bucket, by sink name, then in the order they were enqueued.
func eachDead(tx *txn, f DeadLetterFilter, fn func(*bucket, DeadLetter) error) error {
	return eachRecord(tx, bucketDead, recordScan{filter: f, bodies: true}, fn)
}

// recordScan is what eachRecord reads: the records filter selects, of the
// sinks sinks names when set (else of f.Sink, else of every sink), those
// of an alarm origin allows when set; with their bodies or without.
type recordScan struct {
	filter DeadLetterFilter
	sinks  []string
	origin func(sink string, origin []byte) bool
	bodies bool
}

// eachRecord calls fn with each record sc selects of the per-sink buckets
// of root (dead letters, suppressed logs) and its bucket, by sink name,
// then in key order. A record's originId is read in place first, and the
// rest decoded only for the records it can select: an alarm's History or
// Replay reads that alarm's dead letters, not every one's fields; and a
// body is copied only when asked for.
func eachRecord(tx *txn, rootName []byte, sc recordScan, fn func(*bucket, DeadLetter) error) error {
	root := tx.Bucket(rootName)
	f := sc.filter
	sinks := sc.sinks
	if sinks == nil && f.Sink != "" {
		sinks = []string{f.Sink}
	} else if sinks == nil {
		if err := root.ForEachBucket(func(k []byte) error {
			sinks = append(sinks, string(k))
			return nil
		}); err != nil {
			return err
		}
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
			if f.EventID != "" || f.OriginID != "" || sc.origin != nil {
				origin, err := peekDeadOrigin(v)
				if err != nil {
					return fmt.Errorf("dead letter %s/%d: %w", sink, binary.BigEndian.Uint64(k), err)
				}
				if !f.mayMatchOrigin(origin) || (sc.origin != nil && !sc.origin(sink, origin)) {
					return nil
				}
			}
			d, body, err := decodeDeadFields(sink, binary.BigEndian.Uint64(k), v)
			if err != nil {
				return err
			}
			if !f.match(&d) {
				return nil
			}
			if sc.bodies {
				d.Body = append([]byte(nil), body...)
			}
			return fn(b, d)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
