package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// TestAlarmCodecKeepsEveryField fills every field of event.Alarm, so that a
// field added there fails here until the codec stores it.
func TestAlarmCodecKeepsEveryField(t *testing.T) {
	var a event.Alarm
	v := reflect.ValueOf(&a).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch f.Interface().(type) {
		case string:
			f.SetString(fmt.Sprintf("%s-%d", name, i))
		case int:
			f.SetInt(int64(-i - 1))
		case time.Time:
			f.Set(reflect.ValueOf(t0.Add(time.Duration(i) * time.Second)))
		case json.RawMessage:
			f.Set(reflect.ValueOf(json.RawMessage(`{"eventLevel":"1","extra":[1,2]}`)))
		default:
			t.Fatalf("event.Alarm.%s has type %s, which the codec test does not know", name, f.Type())
		}
	}
	got, err := decodeAlarm(encodeAlarm(&a))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, a) {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, a)
	}
}

func TestStateCodec(t *testing.T) {
	tests := []state{
		{},
		{flags: flagSeenOngoing | flagStarted, lastSeen: 1, level: 3, occurred: -5, firstSeen: 9, deviceSN: "SN", stationID: "S"},
		{flags: 0xff, lastSeen: t0.UnixMilli(), level: -1, occurred: t0.UnixMilli(), recovered: t0.UnixMilli() + 1,
			firstSeen: t0.UnixMilli(), pruneAt: t0.UnixMilli() + 2, deviceSN: "设备", stationID: ""},
		// Ids the upstream sends as numbers, and strings that only look
		// like them.
		{flags: flagStarted, deviceSN: "0", stationID: "6538321367171451025", rec: recordRef{n: 300, off: 1 << 40, hash: 7}, sinks: 3},
		{flags: flagStarted, deviceSN: "007", stationID: "18446744073709551615"},
		{flags: flagStarted, deviceSN: "18446744073709551616", stationID: "-1"},
		{flags: flagStarted, deviceSN: " 1", stationID: "1 "},
		// Serial numbers: letters, then a number; and strings that only
		// look like them.
		{flags: flagStarted, deviceSN: "ENV9205498732", stationID: "S0"},
		{flags: flagStarted, deviceSN: "SN0000012345", stationID: "INV-7"},
		{flags: flagStarted, deviceSN: "A18446744073709551616", stationID: "x1y2"},
		{flags: flagStarted, deviceSN: "设备42", stationID: "\x00\x017"},
		// Times far apart, the way a hostile upstream stamps them: the
		// differences wrap around and come back exactly.
		{flags: flagEnded | flagStarted, occurred: math.MinInt64, firstSeen: math.MaxInt64, lastSeen: math.MinInt64,
			recovered: math.MaxInt64, pruneAt: math.MinInt64 + 1},
		{flags: flagStarted, occurred: math.MaxInt64, firstSeen: -1, lastSeen: math.MaxInt64, recovered: 5, pruneAt: -5},
	}
	for i, st := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			b := st.encode()
			got, err := decodeState(b)
			if err != nil {
				t.Fatal(err)
			}
			if got != st {
				t.Fatalf("round trip = %+v, want %+v", got, st)
			}
			h, err := peekState(b)
			if err != nil {
				t.Fatal(err)
			}
			if h != (stateHeader{flags: st.flags, lastSeen: st.lastSeen, level: st.level}) {
				t.Fatalf("peekState = %+v, want the header of %+v", h, st)
			}
		})
	}
}

func TestCorruptValuesAreErrors(t *testing.T) {
	st := state{flags: flagStarted, level: 1, deviceSN: "SN-1", stationID: "S1"}
	a := rec("a1", 1, time.Time{})
	e := Entry{EventID: "a1:start", OriginID: "a1", Transition: event.Start, Body: []byte("{}"), EnqueuedAt: t0}
	d := DeadLetter{Entry: e, Reason: "gone", At: t0}
	stateB, alarmB, entryB, deadB := st.encode(), encodeAlarm(&a), encodeEntry(&e), encodeDead(&d)
	tests := []struct {
		name   string
		decode func() error
	}{
		{"state truncated", func() error { _, err := decodeState(stateB[:len(stateB)-2]); return err }},
		{"state with trailing bytes", func() error { _, err := decodeState(append(stateB, 0)); return err }},
		{"state header only", func() error { _, err := peekState(stateB[:3]); return err }},
		{"state of format 3, header only", func() error { _, err := peekState(encodeStateV3(&st)[:stateHeaderLen]); return err }},
		{"compact string truncated", func() error {
			long := state{stationID: "12345678901234567890"}
			b := long.encode()
			_, err := decodeState(b[:len(b)-4])
			return err
		}},
		{"state of an unknown format", func() error { b := st.encode(); b[0] = 9; _, err := decodeState(b); return err }},
		{"record truncated", func() error { _, err := decodeAlarm(alarmB[:8]); return err }},
		{"record empty", func() error { _, err := decodeAlarm(nil); return err }},
		{"entry truncated", func() error { _, err := decodeEntry("bus", 1, entryB[:5]); return err }},
		{"dead letter truncated", func() error { _, err := decodeDead("bus", 1, deadB[:5]); return err }},
		{"dead letter time missing", func() error { _, err := peekDeadAt(deadB[:1]); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.decode(); !errors.Is(err, errCorrupt) {
				t.Fatalf("got %v, want errCorrupt", err)
			}
		})
	}
}

// encodeStateV3 writes st as a relay of schema version 3 (d978c72) did.
func encodeStateV3(s *state) []byte {
	b := make([]byte, stateHeaderLen)
	b[0] = stateFormatV3
	b[1] = s.flags
	binary.BigEndian.PutUint64(b[2:], uint64(s.lastSeen))
	b = binary.AppendVarint(b, int64(s.level))
	b = binary.AppendVarint(b, s.occurred)
	b = binary.AppendVarint(b, s.recovered)
	b = binary.AppendVarint(b, s.firstSeen)
	b = binary.AppendVarint(b, s.pruneAt)
	b = appendString(b, s.deviceSN)
	b = appendString(b, s.stationID)
	b = binary.AppendUvarint(b, uint64(s.rec.n))
	if s.rec.n != 0 {
		b = binary.AppendUvarint(b, s.rec.off)
		b = binary.BigEndian.AppendUint64(b, s.rec.hash)
	}
	return binary.AppendUvarint(b, s.sinks)
}

// A state a relay of schema version 3 wrote reads as it did, and format 5
// takes fewer bytes for the states a relay keeps.
func TestStateOfFormat3ReadsAsItWas(t *testing.T) {
	ongoing := state{flags: flagSeenOngoing | flagStarted, level: 2, occurred: t0.UnixMilli(), firstSeen: t0.UnixMilli() + 4_000,
		lastSeen: t0.UnixMilli() + 86_400_000, deviceSN: "ENV9205498732", stationID: "6538321367171451025",
		rec: recordRef{n: 420, off: 78_000_000, hash: 0x1234567890abcdef}, sinks: 1}
	ended := ongoing
	ended.flags |= flagSeenEnded | flagEnded
	ended.recovered, ended.pruneAt = ongoing.occurred+3_600_000, ongoing.occurred+3_600_000+5_000
	ended.rec = recordRef{}
	for _, st := range []state{ongoing, ended} {
		old := encodeStateV3(&st)
		got, err := decodeState(old)
		if err != nil {
			t.Fatal(err)
		}
		if got != st {
			t.Fatalf("format 3 read as %+v, want %+v", got, st)
		}
		if h, err := peekState(old); err != nil || h != (stateHeader{flags: st.flags, lastSeen: st.lastSeen, level: st.level}) {
			t.Fatalf("peekState of format 3 = %+v, %v", h, err)
		}
		if occ, err := peekOccurred(old); err != nil || occ != st.occurred {
			t.Fatalf("peekOccurred of format 3 = %d, %v", occ, err)
		}
		if occ, err := peekOccurred(st.encode()); err != nil || occ != st.occurred {
			t.Fatalf("peekOccurred of format %d = %d, %v", stateFormat, occ, err)
		}
		t.Logf("format 3: %d bytes, format 5: %d", len(old), len(st.encode()))
		if len(st.encode()) >= len(old)-15 {
			t.Errorf("format 5 takes %d bytes, format 3 %d", len(st.encode()), len(old))
		}
	}
}

// Any string comes back from appendCompact exactly, whatever digits it
// holds and wherever.
func TestCompactStringsComeBackExactly(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789AZaz-_ 0\x00\x01\xff"
	for range 20000 {
		b := make([]byte, r.IntN(24))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		s := string(b)
		enc := appendCompact([]byte{0xee}, s)
		rd := reader{b: enc[1:]}
		if got := rd.compact(); rd.err != nil || got != s || len(rd.b) != 0 {
			t.Fatalf("%q came back as %q (%v, %d bytes left)", s, got, rd.err, len(rd.b))
		}
		if raw := len(binary.AppendUvarint(nil, uint64(len(s))+2)) + len(s); len(enc)-1 > raw {
			t.Fatalf("%q takes %d bytes, more than the %d of its bytes and length", s, len(enc)-1, raw)
		}
	}
}

// encodeStateV4 writes st as a relay of schema version 4 (main's 70d7ffc)
// did: format 5's layout, its compact strings but numbers as their length
// plus one and their bytes.
func encodeStateV4(s *state) []byte {
	b := []byte{stateFormatV4, s.flags}
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
	for _, str := range []string{s.deviceSN, s.stationID} {
		if n, ok := event.NumericID(str); ok {
			b = binary.AppendUvarint(append(b, 0), n)
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(str))+1)
		b = append(b, str...)
	}
	b = binary.AppendUvarint(b, uint64(s.rec.n))
	if s.rec.n != 0 {
		b = binary.AppendUvarint(b, s.rec.off)
		b = binary.BigEndian.AppendUint64(b, s.rec.hash)
	}
	return binary.AppendUvarint(b, s.sinks)
}

// A state a relay of schema version 4 wrote reads as it did, whatever its
// strings, serial numbers and empty ones too; written again, it is of
// format 5.
func TestStateOfFormat4ReadsAsItWas(t *testing.T) {
	base := state{flags: flagSeenOngoing | flagStarted, level: 2, occurred: t0.UnixMilli(), firstSeen: t0.UnixMilli() + 4_000,
		lastSeen: t0.UnixMilli() + 86_400_000, rec: recordRef{n: 420, off: 78_000_000, hash: 0x1234567890abcdef}, sinks: 1}
	strs := []string{"", "0", "7", "007", "SN0000000029", "ENV9205498732", "A18446744073709551616", "6538321367171451025",
		"18446744073709551616", "设备42", "\x00\x017", "\x01", " 1"}
	for _, sn := range strs {
		for _, station := range strs {
			for _, terminal := range []bool{false, true} {
				st := base
				st.deviceSN, st.stationID = sn, station
				if terminal {
					st.flags |= flagSeenEnded | flagEnded
					st.recovered, st.pruneAt = st.occurred+3_600_000, st.occurred+3_600_000+5_000
					st.rec = recordRef{}
				}
				old := encodeStateV4(&st)
				got, err := decodeState(old)
				if err != nil || got != st {
					t.Fatalf("format 4 of %q, %q read as %+v, %v; want %+v", sn, station, got, err, st)
				}
				if h, err := peekState(old); err != nil || h != (stateHeader{flags: st.flags, lastSeen: st.lastSeen, level: st.level}) {
					t.Fatalf("peekState of format 4 = %+v, %v", h, err)
				}
				if occ, err := peekOccurred(old); err != nil || occ != st.occurred {
					t.Fatalf("peekOccurred of format 4 = %d, %v", occ, err)
				}
				if b := got.encode(); b[0] != stateFormat || stateFormat != 5 {
					t.Fatalf("a state read from format 4 is written in format %d", b[0])
				}
			}
		}
	}
	// Truncated anywhere, it is corrupt, never another state.
	st := base
	st.deviceSN, st.stationID = "ENV9205498732", "S0"
	old := encodeStateV4(&st)
	for i := 2; i < len(old); i++ {
		if _, err := decodeState(old[:i]); !errors.Is(err, errCorrupt) {
			t.Fatalf("format 4 truncated to %d bytes: %v, want errCorrupt", i, err)
		}
	}
}
