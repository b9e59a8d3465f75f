package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/plant"
)

// DefaultDeadLetterLimit is how many dead letters one sink holds at most
// unless Options.DeadLetterLimit says otherwise: weeks of a storm against a
// sink that refuses everything, and still a state file and pages that stay
// small (docs/design.md §5, "Dead letters").
const DefaultDeadLetterLimit = 10_000

// DeadLetterLimit returns how many dead letters one sink holds at most
// (Options.DeadLetterLimit); 0 for a store opened read only.
func (s *Store) DeadLetterLimit() int { return s.deadLimit }

// discard is what the bound on a sink's dead letters discarded of one
// alarm in one transaction.
type discard struct {
	sink, origin string
	// letters are the dead letters discarded, without their bodies.
	letters []DeadLetter
}

// addedDead notes that the transaction gave sink dead letters.
func (t *txn) addedDead(sink string) {
	if t.deadAdded == nil {
		t.deadAdded = map[string]bool{}
	}
	t.deadAdded[sink] = true
}

// boundDead brings each sink tx gave dead letters back to the store's
// limit: while the sink holds more, the dead letters of the alarm whose
// dead letter is the oldest go, all of them (a start with the entries
// parked beside it: never a parked end whose start stays, nor a start
// whose end stays), each recorded in the sink's suppressed log as dropped
// (without its body), and a start in the delivery ledger as dropped, so
// that what comes later of its alarm is recorded as dropped too.
func (s *Store) boundDead(tx *txn) ([]discard, error) {
	if s.deadLimit <= 0 || len(tx.deadAdded) == 0 {
		return nil, nil
	}
	sinks := make([]string, 0, len(tx.deadAdded))
	for sink := range tx.deadAdded {
		sinks = append(sinks, sink)
	}
	slices.Sort(sinks)
	var out []discard
	for _, sink := range sinks {
		db := tx.Bucket(bucketDead).Bucket([]byte(sink))
		if db == nil {
			continue
		}
		for over := deadOver(db, s.deadLimit); over > 0; {
			d, err := s.discardOldest(tx, db, sink)
			if err != nil {
				return nil, fmt.Errorf("dead letters of sink %q past the limit of %d: %w", sink, s.deadLimit, err)
			}
			out = append(out, d)
			over -= len(d.letters)
		}
	}
	return out, nil
}

// deadOver returns how many more dead letters than limit db holds, 0 when
// it holds no more, reading no more than limit keys from the newest and the
// excess.
func deadOver(db *bucket, limit int) int {
	c := db.Cursor()
	k, _ := c.Last()
	for i := 0; i < limit && k != nil; i++ {
		k, _ = c.Prev()
	}
	over := 0
	for ; k != nil; k, _ = c.Prev() {
		over++
	}
	return over
}

// discardOldest discards the dead letters of the alarm whose dead letter
// is the oldest of sink's db, as boundDead says.
func (s *Store) discardOldest(tx *txn, db *bucket, sink string) (discard, error) {
	c := db.Cursor()
	k, v := c.First()
	first, err := peekDeadOrigin(v)
	if err != nil {
		return discard{}, fmt.Errorf("dead letter %x: %w", k, err)
	}
	origin := string(first)
	var keys [][]byte
	for ; k != nil; k, v = c.Next() {
		o, err := peekDeadOrigin(v)
		if err != nil {
			return discard{}, fmt.Errorf("dead letter %x: %w", k, err)
		}
		if string(o) == origin {
			keys = append(keys, bytes.Clone(k))
		}
	}
	if s.plant.On(plant.DeadLetterLimitSplitsAnAlarm) {
		keys = keys[:1]
	}
	now := s.clock.Now()
	why := fmt.Sprintf("sink %q held more than %d dead letters, and those of alarm %s were the oldest", sink, s.deadLimit, origin)
	d := discard{sink: sink, origin: origin}
	start := false
	for _, k := range keys {
		l, _, err := decodeDeadFields(sink, binary.BigEndian.Uint64(k), db.Get(k))
		if err != nil {
			return discard{}, err
		}
		if err := db.Delete(k); err != nil {
			return discard{}, err
		}
		if err := putDropped(tx, &l.Entry, DropDeadLetterLimit, why+"; it was a dead letter since "+
			l.At.UTC().Format(time.RFC3339)+": "+l.Reason, toNs(now)); err != nil {
			return discard{}, err
		}
		start = start || l.Transition == event.Start
		d.letters = append(d.letters, l)
	}
	if kind, _ := ledgerRecord(tx, sink, origin); (start || kind == ledgerDead) && !s.plant.On(plant.DeadLetterLimitSplitsAnAlarm) {
		if err := putLedger(tx, sink, origin, ledgerDropped, "its start was discarded: "+why); err != nil {
			return discard{}, err
		}
	}
	return d, nil
}

// reportDiscarded counts and logs, once their transaction is committed,
// the dead letters the bound discarded.
func (s *Store) reportDiscarded(ds []discard) {
	for _, d := range ds {
		s.countDropped(d.sink, DropDeadLetterLimit, len(d.letters))
		ids := make([]string, 0, len(d.letters))
		for _, l := range d.letters {
			ids = append(ids, l.EventID)
		}
		s.log.Warn("dead letters discarded: the sink held more than its limit, and the oldest alarm's went "+
			"(listed in its suppressed log: relay deadletters withheld; raise RELAY_DEAD_LETTER_LIMIT or replay or drop dead letters)",
			"sink", d.sink, "alarm", d.origin, "events", ids, "limit", s.deadLimit)
	}
}
