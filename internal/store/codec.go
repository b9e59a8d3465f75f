package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// The values of the store are small hand-written binary records: bbolt hands
// out values from the memory map, and these decode without reflection and,
// for the header that Apply checks on every observed record, without
// allocating. Each record starts with its format byte so that a later version
// can read older records.
const (
	stateFormat  = 5
	recordFormat = 1
	entryFormat  = 1
	deadFormat   = 1
)

// errCorrupt is wrapped by every decoding failure.
var errCorrupt = errors.New("corrupt value")

// Flags of an alarm's state.
const (
	flagSeenOngoing = 1 << iota // an upstream record with status 1 was seen
	flagSeenEnded               // ... with status 0
	flagSeenInvalid             // ... with status -1
	flagStarted                 // the start was produced or recorded silently
	flagEnded                   // the alarm ended (the first terminal status was 0)
	flagInvalid                 // the alarm was invalidated (the first terminal status was -1)
	flagInferred                // the end was inferred, not read upstream
	flagSilent                  // the start was recorded silently (RELAY_BOOTSTRAP=record)
)

// seenFlag returns the flag that records that an upstream record with status
// was seen.
func seenFlag(status int) uint8 {
	switch status {
	case event.StatusOngoing:
		return flagSeenOngoing
	case event.StatusEnded:
		return flagSeenEnded
	}
	return flagSeenInvalid
}

// stateFormatV1 is the state of schema version 1, which had no record
// reference (the record was in a bucket of its own).
const stateFormatV1 = 1

// stateFormatV2 is the state of schema version 2, which had no delivery
// ledger: its alarm's ends are routed by the rules in force (sinks 0).
const stateFormatV2 = 2

// stateFormatV3 is the state of schema version 3: its times were whole
// varints (last seen 8 bytes at a fixed place) and its strings were
// written as they are.
const stateFormatV3 = 3

// stateFormatV4 is the state of schema version 4 (main from 150d99d, the
// relay released with it): format 5's layout, but a compact string other
// than a number was its length plus one and its bytes (reader.compactV4),
// with no serial numbers of letters and a number.
const stateFormatV4 = 4

// state is what the store keeps of one alarm in the alarms bucket. The full
// upstream record of an ongoing alarm lives in the record log, read only to
// build its inferred end; the state holds a reference to it.
type state struct {
	flags     uint8
	lastSeen  int64 // ms
	level     int
	occurred  int64 // ms
	recovered int64 // ms; the vanish time for an inferred end
	firstSeen int64 // ms
	pruneAt   int64 // ms; the key of the ended index while terminal
	deviceSN  string
	stationID string
	rec       recordRef // the record of an ongoing alarm
	// sinks is the delivery ledger's set of the sinks the alarm's start was
	// enqueued for (see sinkSets), where its end and invalid go; 0 for an
	// alarm started before the ledger, whose ends the rules route.
	sinks uint64
}

// stateHeaderLen is the fixed part of an encoded state of formats 1 to 3:
// format, flags and last seen.
const stateHeaderLen = 1 + 1 + 8

func (s *state) terminal() bool { return s.flags&(flagEnded|flagInvalid) != 0 }

// status returns the alarm's upstream status: 1 while ongoing, else that of
// its first terminal transition.
func (s *state) status() int {
	switch {
	case s.flags&flagEnded != 0:
		return event.StatusEnded
	case s.flags&flagInvalid != 0:
		return event.StatusInvalid
	}
	return event.StatusOngoing
}

func (s *state) tracked(originID string) Tracked {
	t := Tracked{
		OriginID:   originID,
		DeviceSN:   s.deviceSN,
		StationID:  s.stationID,
		Level:      s.level,
		Status:     s.status(),
		OccurredAt: fromMs(s.occurred),
		FirstSeen:  fromMs(s.firstSeen),
		LastSeen:   fromMs(s.lastSeen),
	}
	if s.terminal() {
		t.RecoveredAt = fromMs(s.recovered)
	}
	return t
}

// encode writes s in format 5: the format and the flags, then varints, the
// level and last seen, which Apply reads for every record (peekState), and
// each other time as its distance from one before it (first seen from last
// seen, the occurrence from first seen; a terminal alarm's recovery from
// the occurrence and its prune time from the recovery), a few bytes each
// instead of six or eight; the device's serial number and the station's id
// as compact strings (appendCompact); the record's reference and the sink
// set. Differences wrap around, so that any times, a hostile upstream's
// too, come back exactly.
func (s *state) encode() []byte {
	b := make([]byte, 2, 2+8*binary.MaxVarintLen64+len(s.deviceSN)+len(s.stationID)+12)
	b[0] = stateFormat
	b[1] = s.flags
	b = binary.AppendVarint(b, int64(s.level))
	b = binary.AppendVarint(b, s.lastSeen)
	b = binary.AppendVarint(b, s.lastSeen-s.firstSeen)
	b = binary.AppendVarint(b, s.firstSeen-s.occurred)
	if s.terminal() {
		b = binary.AppendVarint(b, s.recovered-s.occurred)
		b = binary.AppendVarint(b, s.pruneAt-s.recovered)
	} else {
		b = binary.AppendVarint(b, s.recovered)
		b = binary.AppendVarint(b, s.pruneAt)
	}
	b = appendCompact(b, s.deviceSN)
	b = appendCompact(b, s.stationID)
	b = binary.AppendUvarint(b, uint64(s.rec.n))
	if s.rec.n != 0 {
		b = binary.AppendUvarint(b, s.rec.off)
		b = binary.BigEndian.AppendUint64(b, s.rec.hash)
	}
	return binary.AppendUvarint(b, s.sinks)
}

// stateHeader is the part of a state Apply needs to tell that a record
// changes nothing; peekState reads it without allocating.
type stateHeader struct {
	flags    uint8
	lastSeen int64
	level    int
}

func peekState(b []byte) (stateHeader, error) {
	if len(b) >= 2 && (b[0] == stateFormat || b[0] == stateFormatV4) {
		// Read without a reader: this runs for every record.
		level, n := binary.Varint(b[2:])
		if n <= 0 {
			return stateHeader{}, fmt.Errorf("alarm state: %w", errCorrupt)
		}
		lastSeen, m := binary.Varint(b[2+n:])
		if m <= 0 {
			return stateHeader{}, fmt.Errorf("alarm state: %w", errCorrupt)
		}
		return stateHeader{flags: b[1], lastSeen: lastSeen, level: int(level)}, nil
	}
	if len(b) < stateHeaderLen || (b[0] != stateFormatV3 && b[0] != stateFormatV2 && b[0] != stateFormatV1) {
		return stateHeader{}, fmt.Errorf("alarm state: %w", errCorrupt)
	}
	level, n := binary.Varint(b[stateHeaderLen:])
	if n <= 0 {
		return stateHeader{}, fmt.Errorf("alarm state: %w", errCorrupt)
	}
	return stateHeader{flags: b[1], lastSeen: int64(binary.BigEndian.Uint64(b[2:])), level: int(level)}, nil
}

func decodeState(b []byte) (state, error) {
	if len(b) >= 2 && (b[0] == stateFormat || b[0] == stateFormatV4) {
		return decodeStateV4(b)
	}
	h, err := peekState(b)
	if err != nil {
		return state{}, err
	}
	r := reader{b: b[stateHeaderLen:]}
	s := state{flags: h.flags, lastSeen: h.lastSeen}
	s.level = int(r.varint())
	s.occurred = r.varint()
	s.recovered = r.varint()
	s.firstSeen = r.varint()
	s.pruneAt = r.varint()
	s.deviceSN = r.string()
	s.stationID = r.string()
	if b[0] != stateFormatV1 {
		s.rec = r.recordRef()
	}
	if b[0] == stateFormatV3 {
		s.sinks = r.uvarint()
	}
	if r.err != nil || len(r.b) != 0 {
		return state{}, fmt.Errorf("alarm state: %w", errCorrupt)
	}
	return s, nil
}

// decodeStateV4 decodes a state of format 5 (state.encode) or 4, which
// differ in their compact strings alone.
func decodeStateV4(b []byte) (state, error) {
	r := reader{b: b[2:]}
	s := state{flags: b[1]}
	s.level = int(r.varint())
	s.lastSeen = r.varint()
	s.firstSeen = s.lastSeen - r.varint()
	s.occurred = s.firstSeen - r.varint()
	if s.terminal() {
		s.recovered = s.occurred + r.varint()
		s.pruneAt = s.recovered + r.varint()
	} else {
		s.recovered = r.varint()
		s.pruneAt = r.varint()
	}
	if b[0] == stateFormatV4 {
		s.deviceSN = r.compactV4()
		s.stationID = r.compactV4()
	} else {
		s.deviceSN = r.compact()
		s.stationID = r.compact()
	}
	s.rec = r.recordRef()
	s.sinks = r.uvarint()
	if r.err != nil || len(r.b) != 0 {
		return state{}, fmt.Errorf("alarm state: %w", errCorrupt)
	}
	return s, nil
}

// recordRef reads the reference to a record of the record log: its length,
// then, unless 0, its offset and hash.
func (r *reader) recordRef() recordRef {
	n := r.uvarint()
	if n > frameHeaderLen+maxFrameBody {
		r.err = errCorrupt
	}
	if n == 0 || r.err != nil {
		return recordRef{}
	}
	return recordRef{n: uint32(n), off: r.uvarint(), hash: r.uint64()}
}

// encodeAlarm writes every field of an upstream alarm record, its raw JSON
// last. Times keep millisecond precision, the precision of the upstream.
func encodeAlarm(a *event.Alarm) []byte {
	strs := alarmStrings(a)
	n := 1 + 4*binary.MaxVarintLen64 + len(a.Raw)
	for _, s := range strs {
		n += binary.MaxVarintLen64 + len(*s)
	}
	b := make([]byte, 1, n)
	b[0] = recordFormat
	b = binary.AppendVarint(b, int64(a.Status))
	b = binary.AppendVarint(b, int64(a.Level))
	b = binary.AppendVarint(b, toMs(a.OccurredAt))
	b = binary.AppendVarint(b, toMs(a.RecoveredAt))
	for _, s := range strs {
		b = appendString(b, *s)
	}
	return append(b, a.Raw...)
}

func decodeAlarm(b []byte) (event.Alarm, error) {
	if len(b) < 1 || b[0] != recordFormat {
		return event.Alarm{}, fmt.Errorf("alarm record: %w", errCorrupt)
	}
	r := reader{b: b[1:]}
	var a event.Alarm
	a.Status = int(r.varint())
	a.Level = int(r.varint())
	a.OccurredAt = fromMs(r.varint())
	a.RecoveredAt = fromMs(r.varint())
	for _, s := range alarmStrings(&a) {
		*s = r.string()
	}
	if r.err != nil {
		return event.Alarm{}, fmt.Errorf("alarm record: %w", errCorrupt)
	}
	if len(r.b) > 0 {
		a.Raw = append([]byte(nil), r.b...)
	}
	return a, nil
}

// alarmStrings lists the string fields of an alarm in their encoded order.
// A field added to event.Alarm must be added here, with a new recordFormat;
// TestAlarmCodecKeepsEveryField fails until it is.
func alarmStrings(a *event.Alarm) [13]*string {
	return [13]*string{
		&a.OriginID, &a.EventCode, &a.EventDesc, &a.EventType, &a.TenantID,
		&a.TenantName, &a.StationID, &a.StationName, &a.SystemID, &a.DeviceID,
		&a.DeviceSN, &a.DeviceName, &a.DeviceTemplateCode,
	}
}

// encodeEntry writes an outbox entry; the sink and the sequence number
// are the bucket and the key.
func encodeEntry(e *Entry) []byte {
	b := make([]byte, 1, 1+3*binary.MaxVarintLen64+len(e.EventID)+len(e.OriginID)+len(e.Transition)+len(e.Body))
	b[0] = entryFormat
	b = appendEntryFields(b, e)
	return append(b, e.Body...)
}

func appendEntryFields(b []byte, e *Entry) []byte {
	b = binary.AppendVarint(b, toNs(e.EnqueuedAt))
	b = binary.AppendVarint(b, int64(e.Level))
	b = appendString(b, e.EventID)
	b = appendString(b, e.OriginID)
	return appendString(b, string(e.Transition))
}

func readEntryFields(r *reader, e *Entry) {
	e.EnqueuedAt = fromNs(r.varint())
	e.Level = int(r.varint())
	e.EventID = r.string()
	e.OriginID = r.string()
	e.Transition = event.Transition(r.string())
}

func decodeEntry(sink string, seq uint64, b []byte) (Entry, error) {
	e, body, err := decodeEntryFields(sink, seq, b)
	e.Body = append([]byte(nil), body...)
	return e, err
}

// decodeEntryHeader decodes an outbox entry without its body.
func decodeEntryHeader(sink string, seq uint64, b []byte) (Entry, error) {
	e, _, err := decodeEntryFields(sink, seq, b)
	return e, err
}

// decodeEntryFields decodes an entry's fields and returns its body as it
// lies in b.
func decodeEntryFields(sink string, seq uint64, b []byte) (Entry, []byte, error) {
	if len(b) < 1 || b[0] != entryFormat {
		return Entry{}, nil, fmt.Errorf("outbox entry %s/%d: %w", sink, seq, errCorrupt)
	}
	e := Entry{Sink: sink, Seq: seq}
	r := reader{b: b[1:]}
	readEntryFields(&r, &e)
	if r.err != nil {
		return Entry{}, nil, fmt.Errorf("outbox entry %s/%d: %w", sink, seq, errCorrupt)
	}
	return e, r.b, nil
}

// encodeDead writes a dead letter, the time it was given up on first so that
// Prune can read it alone.
func encodeDead(d *DeadLetter) []byte {
	b := make([]byte, 1, 1+4*binary.MaxVarintLen64+len(d.EventID)+len(d.OriginID)+len(d.Transition)+len(d.Reason)+len(d.Body))
	b[0] = deadFormat
	b = binary.AppendVarint(b, toNs(d.At))
	b = appendEntryFields(b, &d.Entry)
	b = appendString(b, d.Reason)
	return append(b, d.Body...)
}

func peekDeadAt(b []byte) (int64, error) {
	if len(b) < 1 || b[0] != deadFormat {
		return 0, errCorrupt
	}
	at, n := binary.Varint(b[1:])
	if n <= 0 {
		return 0, errCorrupt
	}
	return at, nil
}

func decodeDead(sink string, seq uint64, b []byte) (DeadLetter, error) {
	d, body, err := decodeDeadFields(sink, seq, b)
	if err != nil {
		return DeadLetter{}, err
	}
	d.Body = append([]byte(nil), body...)
	return d, nil
}

// decodeDeadFields decodes a dead letter's fields and returns its body as
// it lies in b, not copied: what a page of dead letters reads.
func decodeDeadFields(sink string, seq uint64, b []byte) (DeadLetter, []byte, error) {
	if len(b) < 1 || b[0] != deadFormat {
		return DeadLetter{}, nil, fmt.Errorf("dead letter %s/%d: %w", sink, seq, errCorrupt)
	}
	d := DeadLetter{Entry: Entry{Sink: sink, Seq: seq}}
	r := reader{b: b[1:]}
	d.At = fromNs(r.varint())
	readEntryFields(&r, &d.Entry)
	d.Reason = r.string()
	if r.err != nil {
		return DeadLetter{}, nil, fmt.Errorf("dead letter %s/%d: %w", sink, seq, errCorrupt)
	}
	return d, r.b, nil
}

// peekDeadOrigin returns the originId of the dead letter b, as it lies in
// b, without decoding the rest.
func peekDeadOrigin(b []byte) ([]byte, error) {
	if len(b) < 1 || b[0] != deadFormat {
		return nil, errCorrupt
	}
	r := reader{b: b[1:]}
	r.varint() // given up at
	r.varint() // enqueued at
	r.varint() // level
	r.bytes()  // event id
	origin := r.bytes()
	return origin, r.err
}

// seqKey is the key of an outbox entry or dead letter: its sequence number
// in big-endian order, so that keys sort in the order they were added.
func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), seq) }

// endedKey is the key of the ended index: the prune time, then the originId.
func endedKey(pruneAt int64, originID string) []byte {
	b := make([]byte, 8, 8+len(originID))
	binary.BigEndian.PutUint64(b, uint64(pruneAt))
	return append(b, originID...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendCompact appends s as a compact string: an id the upstream sends as
// a number (event.NumericID) as a 0 and the number's varint, 9 bytes or
// fewer for up to 20 digits; a serial number, letters then such a number
// ("ENV9205498732"), as a 1, the letters and the number's varint; any other
// string as its length plus two and its bytes. reader.compact reads it back
// exactly.
func appendCompact(b []byte, s string) []byte {
	if n, ok := event.NumericID(s); ok {
		return binary.AppendUvarint(append(b, 0), n)
	}
	// The digits that end s, after at least one other byte.
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	start := len(b)
	if i > 0 && i < len(s) {
		if n, ok := event.NumericID(s[i:]); ok {
			b = binary.AppendUvarint(append(b, 1), uint64(i))
			b = append(b, s[:i]...)
			b = binary.AppendUvarint(b, n)
			if len(b)-start < 1+len(s) {
				return b
			}
			b = b[:start] // no shorter than the string itself
		}
	}
	b = binary.AppendUvarint(b, uint64(len(s))+2)
	return append(b, s...)
}

// reader decodes varints and strings, remembering the first failure.
type reader struct {
	b   []byte
	err error
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) uint64() uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.err = errCorrupt
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// bytes reads a string as bytes of the value read, without copying: they
// live as long as the value.
func (r *reader) bytes() []byte {
	if r.err != nil {
		return nil
	}
	l, n := binary.Uvarint(r.b)
	if n <= 0 || l > uint64(len(r.b)-n) {
		r.err = errCorrupt
		return nil
	}
	b := r.b[n : n+int(l)]
	r.b = r.b[n+int(l):]
	return b
}

// compact reads a string appendCompact wrote.
func (r *reader) compact() string {
	if r.err != nil {
		return ""
	}
	l, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return ""
	}
	r.b = r.b[n:]
	switch l {
	case 0:
		return strconv.FormatUint(r.uvarint(), 10)
	case 1:
		prefix := r.bytes()
		num := r.uvarint()
		if r.err != nil {
			return ""
		}
		return string(strconv.AppendUint(append(make([]byte, 0, len(prefix)+20), prefix...), num, 10))
	}
	if l-2 > uint64(len(r.b)) {
		r.err = errCorrupt
		return ""
	}
	s := string(r.b[:l-2])
	r.b = r.b[l-2:]
	return s
}

// compactV4 reads a compact string of a state of format 4: a 0 and a
// number's varint, or any other string's length plus one and its bytes.
func (r *reader) compactV4() string {
	if r.err != nil {
		return ""
	}
	l, n := binary.Uvarint(r.b)
	if n <= 0 || l > uint64(len(r.b)-n)+1 {
		r.err = errCorrupt
		return ""
	}
	r.b = r.b[n:]
	if l == 0 {
		return strconv.FormatUint(r.uvarint(), 10)
	}
	s := string(r.b[:l-1])
	r.b = r.b[l-1:]
	return s
}

func (r *reader) string() string {
	if r.err != nil {
		return ""
	}
	l, n := binary.Uvarint(r.b)
	if n <= 0 || l > uint64(len(r.b)-n) {
		r.err = errCorrupt
		return ""
	}
	s := string(r.b[n : n+int(l)])
	r.b = r.b[n+int(l):]
	return s
}

// Alarm times are kept in epoch milliseconds, the upstream's precision, with
// 0 for the zero time; outbox times in nanoseconds.

func toMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMs(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func toNs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNs(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
