package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// bucketJournal holds one entry per alarm start, keyed by journalKey: what
// the alarm figures of a report need (docs/design.md §11), written by Apply
// in the transaction that produces the start, and completed by the one that
// ends the alarm. Entries are pruned with their alarms.
var bucketJournal = []byte("journal")

// JournalEntry is what the journal keeps of one alarm: the fields routes
// match on and a report shows, the alarm's times and how it ended.
type JournalEntry struct {
	OriginID           string
	TenantID           string
	StationID          string
	StationName        string
	SystemID           string
	DeviceSN           string
	DeviceName         string
	DeviceTemplateCode string
	EventCode          string
	EventDesc          string
	EventType          string
	// Level is the level of the start.
	Level int
	// Status is 1 while the alarm is ongoing, then 0 (ended) or -1
	// (invalid), as for Tracked.
	Status int
	// OccurredAt is the upstream's occurrence time, the journal's order.
	OccurredAt time.Time
	// DetectedAt is when relay produced (or silently recorded) the start.
	DetectedAt time.Time
	// RecoveredAt is zero while the alarm is ongoing; for an inferred end it
	// is the vanish time until the real recovery record is found.
	RecoveredAt time.Time
	// Silent marks an alarm recorded without a start event: one ongoing at
	// the first run with RELAY_BOOTSTRAP=record.
	Silent bool
}

// Event returns a start event of the alarm, as produced when it started but
// without the upstream record, for matching it against routes.
func (j *JournalEntry) Event() *event.Event {
	ev := event.New(event.Alarm{
		OriginID:           j.OriginID,
		Status:             event.StatusOngoing,
		Level:              j.Level,
		EventCode:          j.EventCode,
		EventDesc:          j.EventDesc,
		EventType:          j.EventType,
		TenantID:           j.TenantID,
		StationID:          j.StationID,
		StationName:        j.StationName,
		SystemID:           j.SystemID,
		DeviceSN:           j.DeviceSN,
		DeviceName:         j.DeviceName,
		DeviceTemplateCode: j.DeviceTemplateCode,
		OccurredAt:         j.OccurredAt,
	}, event.Start, j.DetectedAt, false)
	return &ev
}

// journalChunk and journalWalk are how many entries one read transaction of
// Journal and JournalActive decodes, and walks at most: a report over weeks
// then never holds a read transaction long enough to keep the writer from
// reusing pages.
const (
	journalChunk = 1024
	journalWalk  = 16 * journalChunk
)

// Journal calls fn with each journal entry of an alarm that occurred at or
// after from and before to, in order of occurrence, then of originId. A zero
// to reads to the end. The entries are read in short read transactions and
// fn runs outside them: it may keep the entry and call the store. The first
// error fn returns stops the walk and is returned.
func (s *Store) Journal(from, to time.Time, fn func(*JournalEntry) error) error {
	if err := s.walkJournal(from, to, nil, fn); err != nil {
		return fmt.Errorf("dedupe: journal: %w", err)
	}
	return nil
}

// JournalOf returns the journal entry of alarm originID, and false when
// the journal has none: an alarm relay never saw start, or one pruned.
func (s *Store) JournalOf(originID string) (JournalEntry, bool, error) {
	t, found, err := s.Alarm(originID)
	if err != nil || !found {
		return JournalEntry{}, false, err
	}
	// The entry's key is the alarm's latest occurrence time, to the ms.
	from := t.OccurredAt.Truncate(time.Millisecond)
	var out JournalEntry
	errFound := errors.New("found")
	err = s.Journal(from, from.Add(time.Millisecond), func(e *JournalEntry) error {
		if e.OriginID != originID {
			return nil
		}
		out, found = *e, true
		return errFound
	})
	if err != nil && !errors.Is(err, errFound) {
		return JournalEntry{}, false, err
	}
	return out, found, nil
}

// JournalActive calls fn with the journal entry of each alarm that occurred
// before before and was ongoing at at: still ongoing, or ended after at. It
// reads entries as Journal does, but tells the alarms it wants from the
// entries' headers and decodes those alone, so that a walk through the whole
// journal before before costs little more than the walk.
func (s *Store) JournalActive(before, at time.Time, fn func(*JournalEntry) error) error {
	limit := toMs(at)
	active := func(k, v []byte) bool {
		// A value that does not parse is decoded, and reported corrupt.
		if len(k) < 8 {
			return true
		}
		j, err := parseJournal(journalOccurred(k), v)
		return err != nil || !j.over() || j.recovered > limit
	}
	if err := s.walkJournal(time.Time{}, before, active, fn); err != nil {
		return fmt.Errorf("dedupe: journal of the alarms ongoing at %s: %w", at.UTC().Format(time.RFC3339), err)
	}
	return nil
}

// walkJournal calls fn with the entries from from to to (zero: the end)
// whose value want accepts (nil: all of them). Each read transaction decodes
// up to journalChunk entries and walks up to journalWalk; fn runs between
// them.
func (s *Store) walkJournal(from, to time.Time, want func(k, v []byte) bool, fn func(*JournalEntry) error) error {
	seek := journalKey(toMs(from), "", 0)
	var end []byte
	if !to.IsZero() {
		end = journalKey(toMs(to), "", 0)
	}
	first := true
	for {
		var chunk []JournalEntry
		done := true
		from := bytes.Clone(seek)
		err := s.view(func(tx *txn) error {
			b := tx.Bucket(bucketJournal)
			if b == nil {
				return nil // a file no relay with a journal has written yet
			}
			var l *recordLog
			defer func() {
				if l != nil {
					s.releaseLog(l)
				}
			}()
			read := func(id []byte, ref recordRef) (event.Alarm, error) {
				if l == nil {
					gen, err := metaUint(tx.Bucket(bucketMeta), metaRecordsGen)
					if err != nil {
						return event.Alarm{}, err
					}
					if l, err = s.acquireLog(gen); err != nil {
						return event.Alarm{}, err
					}
				}
				return readRecord(l, id, ref)
			}
			c := b.Cursor()
			k, v := c.Seek(seek)
			if !first && bytes.Equal(k, seek) {
				k, v = c.Next()
			}
			for walked := 0; k != nil && (end == nil || bytes.Compare(k, end) < 0); k, v = c.Next() {
				if len(chunk) == journalChunk || walked == journalWalk {
					done = false
					return nil
				}
				walked++
				seek = append(seek[:0], k...)
				if want != nil && !want(k, v) {
					continue
				}
				e, err := decodeJournal(k, v, read)
				if err != nil {
					return err
				}
				chunk = append(chunk, e)
			}
			return nil
		})
		if errors.Is(err, errLogRetired) {
			// A compaction moved the strings meanwhile: the same chunk again.
			seek = from
			continue
		}
		if err != nil {
			return err
		}
		first = false
		for i := range chunk {
			if err := fn(&chunk[i]); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
	}
}

// backfillJournal gives each ongoing alarm that has no journal entry one,
// built from its stored upstream record, read through lt: the alarms a relay
// from before the journal started. It runs once in a store's life.
func backfillJournal(tx *txn, lt *logTx) error {
	meta := tx.Bucket(bucketMeta)
	if meta.Get(metaJournal) != nil {
		return nil
	}
	journal := tx.Bucket(bucketJournal)
	err := forEachOngoing(tx, func(k []byte, st *state) error {
		if journal.Get(journalKey(st.occurred, k, 0)) != nil {
			return nil
		}
		rec := event.Alarm{OriginID: string(k), Level: st.level, DeviceSN: st.deviceSN, StationID: st.stationID}
		if st.rec.n != 0 {
			var err error
			if rec, err = lt.record(k, st.rec); err != nil {
				return err
			}
			rec.Level = st.level
		}
		rec.OccurredAt = fromMs(st.occurred) // the key the state knows
		return journal.Put(putJournal(lt, &rec, st.firstSeen, false))
	})
	if err != nil {
		return err
	}
	return meta.Put(metaJournal, []byte{})
}

// journalPut is a journal entry of the batch, waiting for flushJournal.
type journalPut struct{ key, value []byte }

// journalBucket returns the journal's bucket, got at the first call: a
// batch that changes nothing never looks it up.
func (a *applier) journalBucket() *bucket {
	if a.journal == nil {
		a.journal = a.tx.Bucket(bucketJournal)
		// Entries mostly arrive in order of occurrence: full pages halve
		// what a commit writes.
		a.journal.b.FillPercent = 0.9
	}
	return a.journal
}

// journalStart records the start of alarm rec, produced now, or recorded
// without an event when silent. The entry waits for flushJournal.
func (a *applier) journalStart(rec *event.Alarm, silent bool) error {
	k, v := putJournal(a.log, rec, a.detected, silent)
	a.jpend = append(a.jpend, journalPut{key: k, value: v})
	return nil
}

// flushJournal writes the batch's new entries in key order. bbolt inserts
// into a node by moving every entry after the insertion point, so a storm
// listed newest first, written as it comes, would cost the square of its
// size; in order, each entry lands after the one before.
func (a *applier) flushJournal() error {
	if len(a.jpend) == 0 {
		return nil
	}
	slices.SortFunc(a.jpend, func(x, y journalPut) int { return bytes.Compare(x.key, y.key) })
	b := a.journalBucket()
	for _, p := range a.jpend {
		if err := b.Put(p.key, p.value); err != nil {
			return err
		}
	}
	return nil
}

// journalFind returns the value of the entry at k and, for an entry of the
// batch, its index in jpend (else -1); nil when there is none.
func (a *applier) journalFind(k []byte) ([]byte, int) {
	if v := a.journalBucket().Get(k); v != nil {
		return v, -1
	}
	// The latest start first: an alarm that starts and ends in one record.
	for i := len(a.jpend) - 1; i >= 0; i-- {
		if bytes.Equal(a.jpend[i].key, k) {
			return a.jpend[i].value, i
		}
	}
	return nil, -1
}

// journalEnd writes the terminal status and recovery time of st into the
// journal entry of alarm id, if it has one: an alarm that was history when
// first seen has none.
func (a *applier) journalEnd(st *state, id []byte) error {
	k := journalKey(st.occurred, id, 2+5*binary.MaxVarintLen64)
	v, pending := a.journalFind(k)
	if v == nil {
		return nil
	}
	j, err := parseJournal(journalOccurred(k), v)
	if err != nil {
		return fmt.Errorf("journal entry of %q: %w", id, err)
	}
	if j.format == journalFormatV1 {
		// A store of schema version 1 is migrated at Open.
		return fmt.Errorf("journal entry of %q is of format 1: %w", id, errCorrupt)
	}
	j.flags &^= journalEnded | journalInvalid
	switch st.status() {
	case event.StatusEnded:
		j.flags |= journalEnded
	case event.StatusInvalid:
		j.flags |= journalInvalid
	}
	j.recovered = st.recovered
	// One allocation for the key and the new value.
	kn := len(k)
	k = j.append(k, journalOccurred(k))
	k, nv := k[:kn:kn], k[kn:]
	if pending >= 0 {
		a.jpend[pending].value = nv
		return nil
	}
	return a.journal.Put(k, nv)
}

// journalMove moves the journal entry of alarm id from occurrence time from
// to to (ms), when an upstream record moved the alarm's occurrence: the
// entry stays where terminate and Prune, which know the latest occurrence,
// look for it.
func (a *applier) journalMove(id []byte, from, to int64) error {
	old := journalKey(from, id, 0)
	v, pending := a.journalFind(old)
	if v == nil {
		return nil
	}
	// Its times are counted from the occurrence: written again from the
	// new one.
	j, err := parseJournal(journalOccurred(old), v)
	if err != nil {
		return fmt.Errorf("journal entry of %q: %w", id, err)
	}
	if j.format == journalFormatV1 {
		return fmt.Errorf("journal entry of %q is of format 1: %w", id, errCorrupt)
	}
	k := journalKey(to, id, 2+5*binary.MaxVarintLen64)
	kn := len(k)
	k = j.append(k, journalOccurred(k))
	k, nv := k[:kn:kn], k[kn:]
	if pending >= 0 {
		a.jpend[pending].key, a.jpend[pending].value = k, nv
		return nil
	}
	if err := a.journal.Delete(old); err != nil {
		return err
	}
	return a.journal.Put(k, nv)
}

// pruneJournal deletes the journal entry of the alarm whose state v is,
// before Prune deletes the state; the frame of its strings is dead.
func pruneJournal(journal *bucket, lt *logTx, id, v []byte) error {
	if v == nil {
		return nil
	}
	st, err := decodeState(v)
	if err != nil {
		return fmt.Errorf("alarm %q: %w", id, err)
	}
	k := journalKey(st.occurred, id, 0)
	jv := journal.Get(k)
	if jv == nil {
		return nil
	}
	ref, _, err := journalRef(k, jv)
	if err != nil {
		return fmt.Errorf("journal entry of %q: %w", id, err)
	}
	lt.drop(&ref)
	return journal.Delete(k)
}

// The journal's entries: the key is the occurrence time in ms (big-endian,
// negative times as 0) and the originId. The value, in format 3, is the
// format byte, the flags, then varints: the detection time and, once the
// alarm is over, its recovery time, each as its distance in ms from the
// key's occurrence (a few bytes, where formats 1 and 2 took 8 each), the
// level, and the length and offset of the frame of the record log that
// holds the entry's strings. Format 2 (schema versions 2 and 3) held the
// two times as 8 bytes big-endian each after the flags, and format 1
// (schema version 1) the strings themselves instead of a frame: the
// strings, three quarters of an entry, stay out of the memory-mapped file
// like the records. Entries of formats 1 and 2 are read as they are; an
// end or a move writes them again in format 3.
const (
	journalFormatV1 = 1
	journalFormatV2 = 2
	journalFormat   = 3
	// journalHeaderLen is the fixed part of an entry of format 1 or 2.
	journalHeaderLen = 1 + 1 + 8 + 8
)

// Flags of a journal entry.
const (
	journalSilent  = 1 << iota // recorded without a start event
	journalEnded               // the alarm ended
	journalInvalid             // the alarm was invalidated
)

// journalKey returns the key of an entry, with room for its value.
func journalKey[ID string | []byte](occurredMs int64, id ID, room int) []byte {
	k := make([]byte, 8, 8+len(id)+room)
	binary.BigEndian.PutUint64(k, uint64(max(occurredMs, 0)))
	return append(k, id...)
}

// journalStrings lists the string fields of a journal entry in their
// encoded order.
func journalStrings(e *JournalEntry) [10]*string {
	return [10]*string{
		&e.TenantID, &e.StationID, &e.StationName, &e.SystemID, &e.DeviceSN,
		&e.DeviceName, &e.DeviceTemplateCode, &e.EventCode, &e.EventDesc, &e.EventType,
	}
}

// journalAlarm is the part of alarm a that the journal keeps, written to a
// frame of the record log: the strings of a journal entry.
func journalAlarm(a *event.Alarm) event.Alarm {
	return event.Alarm{
		OriginID: a.OriginID, TenantID: a.TenantID, StationID: a.StationID, StationName: a.StationName,
		SystemID: a.SystemID, DeviceSN: a.DeviceSN, DeviceName: a.DeviceName,
		DeviceTemplateCode: a.DeviceTemplateCode, EventCode: a.EventCode, EventDesc: a.EventDesc,
		EventType: a.EventType,
	}
}

// putJournal appends the frame of the journal's strings of alarm a to lt
// and returns the key and the value of the entry of its start, in one
// allocation: bbolt keeps both until the commit.
func putJournal(lt *logTx, a *event.Alarm, detectedMs int64, silent bool) (key, value []byte) {
	ja := journalAlarm(a)
	j := journalValue{detected: detectedMs, level: a.Level}
	lt.put(&j.ref, encodeAlarm(&ja), 0)
	if silent {
		j.flags = journalSilent
	}
	b := journalKey(toMs(a.OccurredAt), a.OriginID, 2+5*binary.MaxVarintLen64)
	kn := len(b)
	b = j.append(b, journalOccurred(b))
	return b[:kn:kn], b[kn:]
}

// journalOccurred returns the occurrence time (ms) of journal key k, which
// the times of its value are counted from.
func journalOccurred(k []byte) int64 { return int64(binary.BigEndian.Uint64(k)) }

// journalValue is what the value of a journal entry holds.
type journalValue struct {
	format byte
	flags  byte
	// detected and recovered are times in ms; recovered is 0 while the
	// alarm is ongoing.
	detected, recovered int64
	level               int
	// ref points at the frame of the entry's strings (formats 2 and 3);
	// refAt is where it starts in the value read.
	ref   recordRef
	refAt int
	// strs are the strings of an entry of format 1, encoded.
	strs []byte
}

// parseJournal reads v, the value of the journal entry whose occurrence
// (its key's) is occ, in ms.
func parseJournal(occ int64, v []byte) (journalValue, error) {
	if len(v) < 2 {
		return journalValue{}, errCorrupt
	}
	j := journalValue{format: v[0], flags: v[1]}
	var r reader
	switch v[0] {
	case journalFormat:
		r.b = v[2:]
		j.detected = occ + r.varint()
		if j.over() {
			j.recovered = occ + r.varint()
		}
	case journalFormatV2, journalFormatV1:
		if len(v) < journalHeaderLen {
			return journalValue{}, errCorrupt
		}
		j.detected = int64(binary.BigEndian.Uint64(v[2:]))
		j.recovered = int64(binary.BigEndian.Uint64(v[10:]))
		r.b = v[journalHeaderLen:]
	default:
		return journalValue{}, errCorrupt
	}
	j.level = int(r.varint())
	if r.err != nil {
		return journalValue{}, errCorrupt
	}
	j.refAt = len(v) - len(r.b)
	if v[0] == journalFormatV1 {
		j.strs = r.b
		return j, nil
	}
	j.ref = recordRef{n: uint32(r.uvarint()), off: r.uvarint()}
	if r.err != nil || len(r.b) != 0 || j.ref.n == 0 {
		return journalValue{}, errCorrupt
	}
	return j, nil
}

// over reports whether the entry's alarm is over (ended or invalidated).
func (j *journalValue) over() bool { return j.flags&(journalEnded|journalInvalid) != 0 }

// append appends j to b in format 3, its times counted from occ (ms).
// Differences wrap around, so that any times come back exactly.
func (j *journalValue) append(b []byte, occ int64) []byte {
	b = append(b, journalFormat, j.flags)
	b = binary.AppendVarint(b, j.detected-occ)
	if j.over() {
		b = binary.AppendVarint(b, j.recovered-occ)
	}
	b = binary.AppendVarint(b, int64(j.level))
	return appendJournalRef(b, j.ref)
}

func appendJournalRef(b []byte, ref recordRef) []byte {
	b = binary.AppendUvarint(b, uint64(ref.n))
	return binary.AppendUvarint(b, ref.off)
}

// journalRef returns the reference to the frame of the strings of the
// journal entry k, v, zero for an entry of format 1, and where the
// reference starts in v: the value ends with it.
func journalRef(k, v []byte) (recordRef, int, error) {
	if len(k) < 8 {
		return recordRef{}, 0, errCorrupt
	}
	j, err := parseJournal(journalOccurred(k), v)
	if err != nil || j.format == journalFormatV1 {
		return recordRef{}, 0, err
	}
	return j.ref, j.refAt, nil
}

// frameReader reads the record of alarm id that ref points at.
type frameReader func(id []byte, ref recordRef) (event.Alarm, error)

// decodeJournal decodes the entry k, v, reading its strings with read.
func decodeJournal(k, v []byte, read frameReader) (JournalEntry, error) {
	if len(k) < 8 {
		return JournalEntry{}, fmt.Errorf("journal key %x: %w", k, errCorrupt)
	}
	j, err := parseJournal(journalOccurred(k), v)
	if err != nil {
		return JournalEntry{}, fmt.Errorf("journal entry of %q: %w", k[8:], err)
	}
	e := JournalEntry{
		OriginID:    string(k[8:]),
		OccurredAt:  fromMs(journalOccurred(k)),
		DetectedAt:  fromMs(j.detected),
		RecoveredAt: fromMs(j.recovered),
		Silent:      j.flags&journalSilent != 0,
		Status:      event.StatusOngoing,
		Level:       j.level,
	}
	switch {
	case j.flags&journalEnded != 0:
		e.Status = event.StatusEnded
	case j.flags&journalInvalid != 0:
		e.Status = event.StatusInvalid
	}
	if j.format == journalFormatV1 {
		r := reader{b: j.strs}
		for _, s := range journalStrings(&e) {
			*s = r.string()
		}
		if r.err != nil || len(r.b) != 0 {
			return JournalEntry{}, fmt.Errorf("journal entry of %q: %w", k[8:], errCorrupt)
		}
		return e, nil
	}
	a, err := read(k[8:], j.ref)
	if err != nil {
		return JournalEntry{}, fmt.Errorf("journal entry: %w", err)
	}
	e.TenantID, e.StationID, e.StationName, e.SystemID = a.TenantID, a.StationID, a.StationName, a.SystemID
	e.DeviceSN, e.DeviceName, e.DeviceTemplateCode = a.DeviceSN, a.DeviceName, a.DeviceTemplateCode
	e.EventCode, e.EventDesc, e.EventType = a.EventCode, a.EventDesc, a.EventType
	return e, nil
}

// CountOngoingBefore returns how many alarms are ongoing now that occurred
// before t: with t a day ago, the stale alarms. It reads the ongoing alarms'
// times alone, without decoding the rest of their state.
func (s *Store) CountOngoingBefore(t time.Time) (int, error) {
	limit := toMs(t)
	n := 0
	err := s.view(func(tx *txn) error {
		c := newOngoingCursor(tx)
		k, v, err := c.First()
		for ; err == nil && k != nil; k, v, err = c.Next() {
			occurred, err := peekOccurred(v)
			if err != nil {
				return fmt.Errorf("ongoing alarm %q: %w", k, err)
			}
			if occurred < limit {
				n++
			}
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("dedupe: counting the ongoing alarms: %w", err)
	}
	return n, nil
}

// peekOccurred reads the occurrence time (ms) of an encoded state.
func peekOccurred(b []byte) (int64, error) {
	if _, err := peekState(b); err != nil {
		return 0, err
	}
	if b[0] == stateFormat || b[0] == stateFormatV4 {
		r := reader{b: b[2:]}
		r.varint() // level
		lastSeen := r.varint()
		occurred := lastSeen - r.varint() - r.varint()
		if r.err != nil {
			return 0, fmt.Errorf("alarm state: %w", errCorrupt)
		}
		return occurred, nil
	}
	r := reader{b: b[stateHeaderLen:]}
	r.varint() // level
	occurred := r.varint()
	if r.err != nil {
		return 0, fmt.Errorf("alarm state: %w", errCorrupt)
	}
	return occurred, nil
}
