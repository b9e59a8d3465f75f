package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/plant"
)

// The delivery ledger (docs/design.md §5, "Delivery ledger") is the one
// authority on where an alarm's end goes: to exactly the sinks its start was
// enqueued for, whatever the rules say by then. It is kept in three places,
// each written in the transaction that decides it:
//
//   - the alarm's state holds the id of its sink set, the sinks its start was
//     enqueued for (interned in bucketSinkSets, since most alarms share a few
//     sets): Apply routes a start by the rules and an end by the set;
//   - the sink's memory of the alarm says what became of a start that left the
//     outbox: sent (the sink's own memory: a thread, an incident, a message),
//     withheld by alarm management (relay.suppressed) or digested
//     (relay.digest), which alarm management's verdict on the end follows;
//   - bucketLedger holds, per sink, the starts that are not on their way: a
//     dead letter (the alarm's later entries are parked beside it, so that a
//     replay sends the pair in order and a drop drops both), or dropped (its
//     later entries are dropped too, recorded with the reason).

// Kinds of a ledger record in bucketLedger.
const (
	// ledgerDead: the start is a dead letter of the sink.
	ledgerDead = 'd'
	// ledgerDropped: the start was dropped, by an operator or with its
	// sink; the reason follows the kind byte.
	ledgerDropped = 'x'
)

// Reasons an entry is recorded as dropped instead of sent: the label of
// relay_dropped_total, and the start of the reason in the suppressed log.
const (
	// DropSinkRemoved: the rules no longer name its sink (not renamed).
	DropSinkRemoved = "sink-removed"
	// DropStartDropped: its alarm's start was dropped at that sink.
	DropStartDropped = "start-dropped"
	// DropEndNotWanted: an end or invalid of a sink whose rules say
	// send_resolved: false.
	DropEndNotWanted = "end-not-wanted"
	// DropDeadLetterLimit: a dead letter discarded because its sink held
	// more than Options.DeadLetterLimit, with its alarm's others there.
	DropDeadLetterLimit = "dead-letter-limit"
)

// DroppedPrefix starts the suppressed log's reason of every entry recorded
// as dropped.
const DroppedPrefix = "dropped"

// ParkedPrefix starts the reason of every dead letter parked beside its
// alarm's start.
const ParkedPrefix = "parked"

func droppedReason(kind, detail string) string {
	return DroppedPrefix + " (" + kind + "): " + detail
}

func parkedReason(origin string) string {
	return ParkedPrefix + " beside its start, a dead letter of this sink: replay or drop them together (--event " + origin + ")"
}

// setPlusRules, in an alarm's state, marks a set that an alarm started
// before the ledger got from a Join (AlarmTx.Join): its end goes where the
// rules in force route it, as before the ledger, and to the joined sinks
// too. Set ids are small numbers (NextSequence): the bit is never theirs.
const setPlusRules = 1 << 62

// setID returns the id of the alarm's sink set, without setPlusRules.
func (s *state) setID() uint64 { return s.sinks &^ setPlusRules }

// ledgered reports whether the alarm's set says where its end goes: it has
// one, and not one that adds to the rules' routing.
func (s *state) ledgered() bool { return s.sinks != 0 && s.sinks&setPlusRules == 0 }

// sinkSets interns the sink sets of one transaction.
type sinkSets struct {
	b     *bucket
	byKey map[string]uint64
	byID  map[uint64][]string
}

func newSinkSets(tx *txn) *sinkSets {
	return &sinkSets{b: tx.Bucket(bucketSinkSets), byKey: map[string]uint64{}, byID: map[uint64][]string{}}
}

func setKey(names []string) string { return strings.Join(names, "\x00") }

// id returns the id of the set names, in this order, adding it when new.
// Ids start at 1: 0 is an alarm without a set.
func (ss *sinkSets) id(names []string) (uint64, error) {
	key := setKey(names)
	if id, ok := ss.byKey[key]; ok {
		return id, nil
	}
	nk := append([]byte{'n'}, key...)
	if v := ss.b.Get(nk); v != nil {
		if len(v) != 8 {
			return 0, fmt.Errorf("sink set %q: %w", key, errCorrupt)
		}
		id := binary.BigEndian.Uint64(v)
		ss.byKey[key] = id
		return id, nil
	}
	id, err := ss.b.NextSequence()
	if err != nil {
		return 0, err
	}
	idb := binary.BigEndian.AppendUint64(nil, id)
	if err := ss.b.Put(nk, idb); err != nil {
		return 0, err
	}
	if err := ss.b.Put(append([]byte{'i'}, idb...), []byte(key)); err != nil {
		return 0, err
	}
	ss.byKey[key] = id
	ss.byID[id] = slices.Clone(names)
	return id, nil
}

// names returns the sinks of set id.
func (ss *sinkSets) names(id uint64) ([]string, error) {
	if names, ok := ss.byID[id]; ok {
		return names, nil
	}
	v := ss.b.Get(append([]byte{'i'}, binary.BigEndian.AppendUint64(nil, id)...))
	if v == nil {
		return nil, fmt.Errorf("sink set %d: %w", id, errCorrupt)
	}
	var names []string
	if len(v) > 0 {
		names = strings.Split(string(v), "\x00")
	}
	ss.byID[id] = names
	return names, nil
}

// rename replaces the sink from by to in every set that names it.
func (ss *sinkSets) rename(from, to string) error {
	type set struct {
		id    []byte
		names []string
	}
	var sets []set
	c := ss.b.Cursor()
	for k, v := c.Seek([]byte{'i'}); k != nil && k[0] == 'i'; k, v = c.Next() {
		var names []string
		if len(v) > 0 {
			names = strings.Split(string(v), "\x00")
		}
		if slices.Contains(names, from) {
			sets = append(sets, set{bytes.Clone(k[1:]), names})
		}
	}
	for _, st := range sets {
		if err := ss.b.Delete(append([]byte{'n'}, setKey(st.names)...)); err != nil {
			return err
		}
		for i, n := range st.names {
			if n == from {
				st.names[i] = to
			}
		}
		key := setKey(st.names)
		if err := ss.b.Put(append([]byte{'i'}, st.id...), []byte(key)); err != nil {
			return err
		}
		if ss.b.Get(append([]byte{'n'}, key...)) == nil {
			if err := ss.b.Put(append([]byte{'n'}, key...), st.id); err != nil {
				return err
			}
		}
	}
	clear(ss.byKey)
	clear(ss.byID)
	return nil
}

// uniqueSinks returns names without repeats, in order, and refuses an empty
// name. It returns names itself when nothing repeats.
func uniqueSinks(names []string) ([]string, error) {
	dup := false
	for i, n := range names {
		if n == "" {
			return nil, fmt.Errorf("a sink name is empty")
		}
		if slices.Contains(names[:i], n) {
			dup = true
		}
	}
	if !dup {
		return names, nil
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// ledgerRecord reads what bucketLedger says of the start of origin at sink:
// its kind (0 when nothing) and the reason of a drop.
func ledgerRecord(tx *txn, sink, origin string) (byte, string) {
	b := tx.Bucket(bucketLedger).Bucket([]byte(sink))
	if b == nil {
		return 0, ""
	}
	v := b.Get([]byte(origin))
	if len(v) == 0 {
		return 0, ""
	}
	return v[0], string(v[1:])
}

// putLedger records that the start of origin at sink is a dead letter or
// was dropped (with reason).
func putLedger(tx *txn, sink, origin string, kind byte, reason string) error {
	b, err := tx.Bucket(bucketLedger).CreateBucketIfNotExists([]byte(sink))
	if err != nil {
		return fmt.Errorf("ledger of sink %q: %w", sink, err)
	}
	return b.Put([]byte(origin), append([]byte{kind}, reason...))
}

// deleteLedger forgets what bucketLedger says of origin's start at sink: it
// is on its way again.
func deleteLedger(tx *txn, sink, origin string) error {
	b := tx.Bucket(bucketLedger).Bucket([]byte(sink))
	if b == nil {
		return nil
	}
	return b.Delete([]byte(origin))
}

// outboxOf returns sink's outbox bucket, created when missing.
func outboxOf(tx *txn, sink string) (*bucket, error) {
	b, err := tx.Bucket(bucketOutbox).CreateBucketIfNotExists([]byte(sink))
	if err != nil {
		return nil, fmt.Errorf("outbox of sink %q: %w", sink, err)
	}
	return b, nil
}

// putDead writes d as a dead letter of its sink under its sequence number.
func putDead(tx *txn, d *DeadLetter) error {
	db, err := tx.Bucket(bucketDead).CreateBucketIfNotExists([]byte(d.Sink))
	if err != nil {
		return fmt.Errorf("dead letters of sink %q: %w", d.Sink, err)
	}
	if err := db.Put(seqKey(d.Seq), encodeDead(d)); err != nil {
		return fmt.Errorf("dead letters of sink %q: %w", d.Sink, err)
	}
	tx.addedDead(d.Sink)
	return nil
}

// putDropped writes e into its sink's suppressed log as dropped for kind.
func putDropped(tx *txn, e *Entry, kind, detail string, at int64) error {
	sb, err := tx.Bucket(bucketSuppressed).CreateBucketIfNotExists([]byte(e.Sink))
	if err != nil {
		return fmt.Errorf("suppressed log of sink %q: %w", e.Sink, err)
	}
	d := DeadLetter{Entry: *e, Reason: droppedReason(kind, detail), At: fromNs(at)}
	if err := sb.Put(seqKey(e.Seq), encodeDead(&d)); err != nil {
		return fmt.Errorf("suppressed log of sink %q: %w", e.Sink, err)
	}
	return nil
}

// follow decides on e, a later entry of an alarm whose start was enqueued
// for e.Sink (an end, an invalid, an ack or unack), by what the delivery
// ledger says of that start: at a sink the rules current no longer name
// (nil: every sink counts), or, for an end or invalid, at a sink in
// noResolved (send_resolved: false), it is recorded as dropped, and kind
// says why; beside a start that is a dead letter it is parked as one too;
// after a start that was dropped it is recorded as dropped. It reports whether it took e; if not, e
// goes to the outbox. e takes the next sequence number of the sink's outbox
// when it is taken.
func follow(tx *txn, e *Entry, current, noResolved map[string]bool, at time.Time, planted plant.Set) (took bool, kind string, err error) {
	var why string
	defer func() {
		if took && err == nil {
			err = putFollowed(tx, e, kind, why, at)
		}
	}()
	switch rec, reason := ledgerRecord(tx, e.Sink, e.OriginID); {
	case current != nil && !current[e.Sink]:
		kind, why = DropSinkRemoved, "its sink is no longer in the rules"
	case (noResolved[e.Sink] || planted.On(plant.ResolvedOffEverywhere) && len(noResolved) > 0) &&
		(e.Transition == event.End || e.Transition == event.Invalid) && !planted.On(plant.ResolvedIgnored):
		// Before a dead start's parking: a replay of the start must not
		// send the end.
		kind, why = DropEndNotWanted, "the sink says send_resolved: false"
	case rec == ledgerDead && !planted.On(plant.DeadStartKeepsNothing):
		return true, "", nil
	case rec == ledgerDropped:
		kind, why = DropStartDropped, reason
		if why == "" {
			why = "its start was dropped"
		}
	case rec == ledgerDead:
		return false, "", nil
	case rec != 0:
		return false, "", fmt.Errorf("ledger of sink %q for alarm %q: kind %q: %w", e.Sink, e.OriginID, rec, errCorrupt)
	default:
		return false, "", nil
	}
	return true, kind, nil
}

// putFollowed numbers e in its sink's outbox and writes it parked beside its
// dead start (kind ""), or as dropped for kind.
func putFollowed(tx *txn, e *Entry, kind, why string, at time.Time) error {
	ob, err := outboxOf(tx, e.Sink)
	if err != nil {
		return err
	}
	if e.Seq, err = ob.NextSequence(); err != nil {
		return err
	}
	if kind == "" {
		return putDead(tx, &DeadLetter{Entry: *e, Reason: parkedReason(e.OriginID), At: at})
	}
	return putDropped(tx, e, kind, why, toNs(at))
}

// parkPending moves the entries of origin waiting in sink's outbox to the
// sink's dead letters, parked beside its start, and returns how many moved.
func parkPending(tx *txn, delta map[string]int, sink, origin string, at int64) (int, error) {
	ob := tx.Bucket(bucketOutbox).Bucket([]byte(sink))
	if ob == nil {
		return 0, nil
	}
	var park []Entry
	c := ob.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		h, err := decodeEntryHeader(sink, binary.BigEndian.Uint64(k), v)
		if err != nil {
			return 0, err
		}
		if h.OriginID != origin {
			continue
		}
		e, err := decodeEntry(sink, h.Seq, v)
		if err != nil {
			return 0, err
		}
		park = append(park, e)
	}
	for _, e := range park {
		if err := ob.Delete(seqKey(e.Seq)); err != nil {
			return 0, err
		}
		if err := putDead(tx, &DeadLetter{Entry: e, Reason: parkedReason(origin), At: fromNs(at)}); err != nil {
			return 0, err
		}
	}
	delta[sink] -= len(park)
	return len(park), nil
}

// dropPending records every entry waiting in sink's outbox as dropped for
// kind, and the starts among them in the ledger, so that their alarms' ends
// are dropped too. It returns the entries dropped.
func dropPending(tx *txn, delta map[string]int, sink, kind, detail string, at int64) ([]Entry, error) {
	ob := tx.Bucket(bucketOutbox).Bucket([]byte(sink))
	if ob == nil {
		return nil, nil
	}
	var drop []Entry
	err := ob.ForEach(func(k, v []byte) error {
		e, err := decodeEntry(sink, binary.BigEndian.Uint64(k), v)
		if err != nil {
			return err
		}
		e.Body = bytes.Clone(e.Body)
		drop = append(drop, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range drop {
		e := &drop[i]
		if err := ob.Delete(seqKey(e.Seq)); err != nil {
			return nil, err
		}
		if err := putDropped(tx, e, kind, detail, at); err != nil {
			return nil, err
		}
		if e.Transition == event.Start {
			if err := putLedger(tx, sink, e.OriginID, ledgerDropped, droppedReason(kind, detail)); err != nil {
				return nil, err
			}
		}
	}
	delta[sink] -= len(drop)
	return drop, nil
}

// countDropped adds n entries dropped at sink for kind to DroppedCounts.
func (s *Store) countDropped(sink, kind string, n int) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	s.dropped[[2]string{sink, kind}] += n
	s.mu.Unlock()
}

// DroppedCounts returns, by sink and kind (DropSinkRemoved,
// DropStartDropped), how many entries were recorded as dropped instead of
// sent since the store was opened. They are kept in the sink's suppressed
// log, with the reason.
func (s *Store) DroppedCounts() map[[2]string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[[2]string]int, len(s.dropped))
	for k, v := range s.dropped {
		out[k] = v
	}
	return out
}

// currentSinks returns the sinks of the rules last adopted, nil before
// AdoptSinks. The map is replaced, never changed.
func (s *Store) currentSinks() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

// SetResolvedOff names the sinks whose rules say send_resolved: false, from
// now on until the next call: an end or invalid that the delivery ledger
// sends to one of them is recorded as dropped (DropEndNotWanted) in its
// suppressed log instead of entering its outbox. The service calls it with
// the sinks of the rules in force at start and after each reload.
func (s *Store) SetResolvedOff(sinks []string) {
	var m map[string]bool
	for _, name := range sinks {
		if m == nil {
			m = map[string]bool{}
		}
		m[name] = true
	}
	s.mu.Lock()
	s.noResolved = m
	s.mu.Unlock()
}

// noResolvedSinks returns the sinks SetResolvedOff named last. The map is
// replaced, never changed.
func (s *Store) noResolvedSinks() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.noResolved
}

// StartSinks returns the sinks the start of alarm origin was enqueued for,
// where its end and invalid go, and whether the store has them: an alarm
// the store does not know, or that started before the ledger, has none.
func (s *Store) StartSinks(origin string) ([]string, bool, error) {
	var out []string
	found := false
	err := s.view(func(tx *txn) error {
		v, _ := findState(tx, origin)
		if v == nil {
			return nil
		}
		st, err := decodeState(v)
		if err != nil {
			return err
		}
		if !st.ledgered() {
			return nil
		}
		names, err := newSinkSets(tx).names(st.setID())
		out, found = slices.Clone(names), err == nil
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("dedupe: sinks of alarm %q: %w", origin, err)
	}
	return out, found, nil
}
