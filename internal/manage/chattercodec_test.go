package manage

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// sameChatter reports whether a and b hold the same history: the same
// instants, counts and texts.
func sameChatter(a, b chatterState) bool {
	if !a.Since.Equal(b.Since) || a.Count != b.Count || a.Announcer != b.Announcer || a.Note != b.Note || len(a.Starts) != len(b.Starts) {
		return false
	}
	for i := range a.Starts {
		x, y := a.Starts[i], b.Starts[i]
		if !x.At.Equal(y.At) || x.Origin != y.Origin || x.Sent != y.Sent || x.N != y.N {
			return false
		}
	}
	return true
}

// chatterTimes are instants a history may hold: an upstream's occurrence
// time may be anything RFC 3339 can say.
var chatterTimes = []time.Time{
	{},
	time.Date(2026, 11, 29, 8, 0, 0, 123456789, time.UTC),
	time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
	time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
	time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	time.Date(2026, 3, 1, 10, 0, 0, 0, time.FixedZone("CST", 8*3600)),
	time.Unix(0, 0).UTC(),
}

func randomChatter(r *rand.Rand) chatterState {
	texts := []string{"", "1700000000000000001", "a:b/../<x>\x00", "北区 🔥", strings.Repeat("z", 300)}
	var st chatterState
	if r.IntN(2) == 0 {
		st.Since = chatterTimes[1+r.IntN(len(chatterTimes)-1)]
		st.Count = r.IntN(1000)
		st.Announcer = texts[r.IntN(len(texts))]
		st.Note = texts[r.IntN(len(texts))]
	}
	for range r.IntN(14) {
		st.Starts = append(st.Starts, chatterStart{
			At: chatterTimes[r.IntN(len(chatterTimes))].Add(time.Duration(r.Int64N(int64(time.Hour)))), Origin: texts[r.IntN(len(texts))],
			Sent: r.IntN(2) == 0, N: r.IntN(3) * r.IntN(500),
		})
	}
	return st
}

// TestChatterHistoriesReadBackAsWritten: every history reads back from its
// binary form as it was, and a history written as JSON by an earlier
// version reads as encoding/json reads it.
func TestChatterHistoriesReadBackAsWritten(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		st := randomChatter(r)
		got, err := decodeChatter(encodeChatter(&st))
		if err != nil || !sameChatter(got, st) {
			t.Fatalf("history %d: %+v\nread back as %+v (error %v)", i, st, got, err)
		}
		old, err := json.Marshal(st)
		if err != nil {
			continue // past year 9999: JSON cannot say it, the binary form can
		}
		var want chatterState
		if err := json.Unmarshal(old, &want); err != nil {
			t.Fatal(err)
		}
		if got, err := decodeChatter(old); err != nil || !sameChatter(got, want) {
			t.Fatalf("history %d as JSON %s: read as %+v (error %v), encoding/json reads %+v", i, old, got, err, want)
		}
	}
}

// TestAStartsChatterHistoryIsSmall: the history the delivery loop writes
// for the first start of a device and code, in the transaction it commits
// before the start goes out, takes well under half of the JSON it was.
func TestAStartsChatterHistoryIsSmall(t *testing.T) {
	st := chatterState{Starts: []chatterStart{{At: time.Date(2026, 11, 29, 8, 0, 0, 123000000, time.UTC), Origin: "1700000000000012345", Sent: true}}}
	b := encodeChatter(&st)
	old, _ := json.Marshal(st)
	if len(b) > 40 || 2*len(b) > len(old) {
		t.Errorf("a one-start history takes %d bytes (%x), as JSON %d", len(b), b, len(old))
	}
}

// TestABrokenChatterHistoryIsAnError: a binary history cut short or with
// bytes after its end is an error (the caller starts it again), not a
// history that reads as something else, and never a panic.
func TestABrokenChatterHistoryIsAnError(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		st := randomChatter(r)
		b := encodeChatter(&st)
		for n := 1; n < len(b); n++ {
			if _, err := decodeChatter(b[:n]); err == nil {
				t.Fatalf("%x cut to %d bytes reads without an error", b, n)
			}
		}
		if _, err := decodeChatter(append(b, 0)); err == nil {
			t.Fatalf("%x with a byte after it reads without an error", b)
		}
	}
	for _, b := range [][]byte{nil, {}, {chatterFormat}, {chatterFormat, 1, 0x80}, {chatterFormat, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}} {
		if _, err := decodeChatter(b); err == nil {
			t.Errorf("%x reads without an error", b)
		}
	}
}

func FuzzDecodeChatter(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		st := randomChatter(r)
		f.Add(encodeChatter(&st))
	}
	f.Add([]byte(`{"starts":[{"at":"2026-11-29T08:00:00Z","origin":"a","sent":true}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeChatter(b)
		if err != nil || len(b) == 0 || b[0] != chatterFormat {
			return
		}
		// What reads writes back as what it read.
		again, err := decodeChatter(encodeChatter(&st))
		if err != nil || !sameChatter(again, st) {
			t.Fatalf("%x read as %+v, which writes back as %+v (error %v)", b, st, again, err)
		}
	})
}
