package store

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
)

// v3Manifest is what testdata/v3/relay.db, a store written in schema
// version 3 by the relay of that layout (d978c72), holds
// (testdata/v3/genv3_test.go), and what testdata/v4/relay.db, written in
// schema version 4 by main's relay of 70d7ffc, holds
// (testdata/v4/genv4_test.go).
type v3Manifest struct {
	Ongoing []string            `json:"ongoing"`
	Ended   []string            `json:"ended"`
	Pending map[string][]string `json:"pending"`
	Dead    map[string][]string `json:"dead"`
	Journal int                 `json:"journal"`
	// Tracked is what the relay that wrote the file showed of each alarm
	// (Alarm); testdata/v4 only.
	Tracked map[string]Tracked `json:"tracked"`
	Ends    []struct {
		OriginID   string    `json:"originId"`
		Inferred   bool      `json:"inferred"`
		At         time.Time `json:"at"`
		DetectedAt time.Time `json:"detectedAt"`
		Event      string    `json:"event"`
		Sinks      []string  `json:"sinks"`
	} `json:"ends"`
}

// fixtureStore copies the store of testdata/<dir>, with its record log,
// into a new directory and returns its path and what it holds.
func fixtureStore(t *testing.T, dir string) (string, v3Manifest) {
	t.Helper()
	var m v3Manifest
	data, err := os.ReadFile(filepath.Join("testdata", dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "relay.db")
	for _, name := range []string{"relay.db", "relay.db.records.1"} {
		f, err := os.Open(filepath.Join("testdata", dir, name+".gz"))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(zr)
		_ = f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(filepath.Dir(path), name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return path, m
}

// v3View is what a store shows of the alarms of the version-3 file.
type v3View struct {
	ongoing []string
	tracked map[string]Tracked
	states  map[string][]byte // encoded, byte for byte
	records []string
	journal []JournalEntry
	stale   int
}

func viewV3(t *testing.T, s *Store, m v3Manifest) v3View {
	t.Helper()
	v := v3View{tracked: map[string]Tracked{}, states: map[string][]byte{}}
	ongoing, err := s.Ongoing()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ongoing {
		v.ongoing = append(v.ongoing, a.OriginID)
	}
	for _, id := range append(slices.Clone(m.Ongoing), m.Ended...) {
		a, ok, err := s.Alarm(id)
		if err != nil || !ok {
			t.Fatalf("alarm %s: %v, %v", id, ok, err)
		}
		v.tracked[id] = a
		if err := s.view(func(tx *txn) error {
			st, _ := findState(tx, id)
			v.states[id] = bytes.Clone(st)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.OngoingRecords(func(a *event.Alarm) error {
		v.records = append(v.records, a.OriginID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	v.journal = journal(t, s)
	if v.stale, err = s.CountOngoingBefore(t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	return v
}

// A store of schema version 3 is read as it was, copy or not, and its first
// read-write Open moves each ongoing alarm's state, byte for byte, into
// bucket ongoing: every alarm still tracked, and every end after the restart
// the event the relay of version 3 produced, at the sinks its start went to.
func TestOpenMovesTheOngoingStatesOfSchemaVersion3(t *testing.T) {
	testOpenMovesOngoingStates(t, "v3", 3)
}

// A store of schema version 4 as main wrote it (70d7ffc: each ongoing
// alarm's state under its originId in bucket ongoing, states of format 4
// whose strings but numbers are their length plus one and their bytes) is
// read as it was, copy or not, and its first read-write Open moves each
// ongoing state, byte for byte, under its key of version 5: every alarm
// still tracked as that relay showed it, and every end after the restart
// the event that relay produced, at the sinks its start went to.
func TestOpenMovesTheOngoingStatesOfSchemaVersion4(t *testing.T) {
	testOpenMovesOngoingStates(t, "v4", 4)
}

// testOpenMovesOngoingStates checks the move of the store of
// testdata/<dir>, of schema version from, to the current one.
func testOpenMovesOngoingStates(t *testing.T, dir string, from uint64) {
	boltOnly(t, "a file of an older schema version is a bbolt file")
	path, m := fixtureStore(t, dir)
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	before := viewV3(t, ro, m)
	if v := metaValue(t, ro, metaVersion); v != from {
		t.Fatalf("the fixture's schema version = %d, want %d", v, from)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before.ongoing, m.Ongoing) || !slices.Equal(before.records, m.Ongoing) || len(before.journal) != m.Journal {
		t.Fatalf("read-only, the version-%d file shows %v ongoing, records of %v and %d journal entries; want %v and %d",
			from, before.ongoing, before.records, len(before.journal), m.Ongoing, m.Journal)
	}
	if before.stale != len(m.Ongoing) {
		t.Fatalf("CountOngoingBefore on the version-%d file = %d, want %d", from, before.stale, len(m.Ongoing))
	}
	for id, want := range m.Tracked {
		if got := before.tracked[id]; !reflect.DeepEqual(got, want) {
			t.Errorf("read-only, alarm %s of the version-%d file reads as\n%+v\nwant what the relay that wrote it showed:\n%+v", id, from, got, want)
		}
	}

	now := m.Ends[0].DetectedAt
	s := reopen(t, path, Options{Clock: clock.NewFake(now)})
	if v := metaValue(t, s, metaVersion); v != schemaVersion {
		t.Fatalf("schema version after Open = %d, want %d", v, schemaVersion)
	}
	after := viewV3(t, s, m)
	if want := keyOrder(m.Ongoing); !slices.Equal(after.ongoing, want) || !slices.Equal(after.records, want) {
		t.Fatalf("after the move, ongoing %v and records of %v; want %v: numbered ids by number, then the others",
			after.ongoing, after.records, want)
	}
	after.ongoing, after.records = before.ongoing, before.records
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("after the move:\n%+v\nwant what the version-%d file showed:\n%+v", after, from, before)
	}
	if err := s.view(func(tx *txn) error {
		ongoing, alarms := tx.Bucket(bucketOngoing), tx.Bucket(bucketAlarms)
		for _, id := range m.Ongoing {
			if v := ongoing.Get(ongoingKey(id)); !bytes.Equal(v, before.states[id]) {
				t.Errorf("ongoing alarm %s: %x in bucket ongoing, want its state %x", id, v, before.states[id])
			}
			if alarms.Get([]byte(id)) != nil {
				t.Errorf("ongoing alarm %s still has a state in bucket alarms", id)
			}
		}
		for _, id := range m.Ended {
			if ongoing.Get(ongoingKey(id)) != nil || alarms.Get([]byte(id)) == nil {
				t.Errorf("ended alarm %s: not in bucket alarms alone", id)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for sink, want := range m.Pending {
		if got := pendingIDs(t, s, sink); !slices.Equal(got, want) {
			t.Errorf("outbox of %s after the move = %v, want %v", sink, got, want)
		}
	}
	for sink, want := range m.Dead {
		ds, err := s.DeadLetters(sink)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range ds {
			got = append(got, d.EventID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("dead letters of %s after the move = %v, want %v", sink, got, want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	moved, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	records, err := os.ReadFile(path + ".records.1")
	if err != nil {
		t.Fatal(err)
	}

	// The records of the ongoing alarms, read again unchanged after the
	// restart, change nothing: no alarm starts a second time.
	{
		cp := filepath.Join(t.TempDir(), "relay.db")
		if err := os.WriteFile(cp, moved, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cp+".records.1", records, 0o600); err != nil {
			t.Fatal(err)
		}
		c := reopen(t, cp, Options{Clock: clock.NewFake(now)})
		var recs []event.Alarm
		if err := c.OngoingRecords(func(a *event.Alarm) error {
			recs = append(recs, *a)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(m.Ongoing) {
			t.Fatalf("%d records of ongoing alarms after the move, want %d", len(recs), len(m.Ongoing))
		}
		if res := apply(t, c, Batch{Observed: recs, DetectedAt: now}, to("other")); len(res.Events) != 0 {
			t.Errorf("the ongoing alarms' records, read again after the move, produced %d events, the first %s", len(res.Events), res.Events[0].ID)
		}
		if o, _ := c.Ongoing(); len(o) != len(m.Ongoing) {
			t.Errorf("%d alarms ongoing after their records were read again, want %d", len(o), len(m.Ongoing))
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// Each end, on its own copy of the moved file, is byte for byte the
	// event the relay that wrote the file built, enqueued where the start
	// went whatever the rules say now.
	for _, end := range m.Ends {
		cp := filepath.Join(t.TempDir(), "relay.db")
		if err := os.WriteFile(cp, moved, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cp+".records.1", records, 0o600); err != nil {
			t.Fatal(err)
		}
		c := reopen(t, cp, Options{Clock: clock.NewFake(end.DetectedAt)})
		b := Batch{Inferred: []Inferred{{OriginID: end.OriginID, At: end.At}}, DetectedAt: end.DetectedAt}
		if !end.Inferred {
			a, ok, err := c.Alarm(end.OriginID)
			if err != nil || !ok {
				t.Fatalf("alarm %s: %v, %v", end.OriginID, ok, err)
			}
			var rec event.Alarm
			if err := c.OngoingRecords(func(r *event.Alarm) error {
				if r.OriginID == a.OriginID {
					rec = *r
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			rec.Status, rec.RecoveredAt = event.StatusEnded, end.At
			b = Batch{Observed: []event.Alarm{rec}, DetectedAt: end.DetectedAt}
		}
		counts := map[string]int{}
		for _, sink := range []string{"bus", "ops", "other"} {
			counts[sink] = len(pendingIDs(t, c, sink))
		}
		res := apply(t, c, b, to("other"))
		if len(res.Events) != 1 {
			t.Fatalf("end of %s: %d events", end.OriginID, len(res.Events))
		}
		body, err := res.Events[0].Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if string(body) != end.Event {
			t.Errorf("end of %s after the move:\n got %s\nwant %s", end.OriginID, body, end.Event)
		}
		var sinks []string
		for _, sink := range []string{"bus", "ops", "other"} {
			if len(pendingIDs(t, c, sink)) > counts[sink] {
				sinks = append(sinks, sink)
			}
		}
		if !slices.Equal(sinks, end.Sinks) {
			t.Errorf("end of %s after the move went to %v, want %v", end.OriginID, sinks, end.Sinks)
		}
		// Its journal entry, written by that relay, now says how it ended,
		// and nothing else of it changed.
		var want JournalEntry
		for _, e := range before.journal {
			if e.OriginID == end.OriginID {
				want = e
			}
		}
		want.Status, want.RecoveredAt = event.StatusEnded, end.At
		if got, ok, err := c.JournalOf(end.OriginID); err != nil || !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("journal entry of %s after its end: %+v, %v, %v; want %+v", end.OriginID, got, ok, err, want)
		}
		if all := journal(t, c); len(all) != m.Journal {
			t.Errorf("%d journal entries after the end of %s, want %d", len(all), end.OriginID, m.Journal)
		}
		if o, _ := c.Ongoing(); len(o) != len(m.Ongoing)-1 {
			t.Errorf("%d alarms ongoing after the end of %s, want %d", len(o), end.OriginID, len(m.Ongoing)-1)
		}
		if err := c.view(func(tx *txn) error {
			if tx.Bucket(bucketOngoing).Get(ongoingKey(end.OriginID)) != nil || tx.Bucket(bucketAlarms).Get([]byte(end.OriginID)) == nil {
				t.Errorf("ended alarm %s: not in bucket alarms alone", end.OriginID)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// A second Open moves nothing.
	s = reopen(t, path, Options{Clock: clock.NewFake(now)})
	again := viewV3(t, s, m)
	again.ongoing, again.records = before.ongoing, before.records
	if !reflect.DeepEqual(again, before) {
		t.Fatalf("after reopening:\n%+v\nwant\n%+v", again, before)
	}
	if v := binary.BigEndian.Uint64(metaBytes(t, s, metaVersion)); v != schemaVersion {
		t.Fatalf("schema version after reopening = %d", v)
	}
}

// metaBytes returns the value of key in the meta bucket of s.
func metaBytes(t *testing.T, s *Store, key []byte) []byte {
	t.Helper()
	var v []byte
	if err := s.view(func(tx *txn) error {
		v = bytes.Clone(tx.Bucket(bucketMeta).Get(key))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// keyOrder returns ids in the order of their keys in bucket ongoing.
func keyOrder(ids []string) []string {
	out := slices.Clone(ids)
	slices.SortFunc(out, func(a, b string) int { return bytes.Compare(ongoingKey(a), ongoingKey(b)) })
	return out
}

// An originId's key in bucket ongoing gives it back exactly, no two ids
// share one, and numbered ids keep their order, 10 bytes each.
func TestOngoingKeys(t *testing.T) {
	ids := []string{"0", "7", "9", "10", "63", "105", "999", "1000", "1185685023527438795", "1185685023527448795",
		"18446744073709551615", "18446744073709551616", "07", "007", "-1", "a", "af63b54c8601aa47", "A912",
		"\x00", "\x00\x01", "\x01", "\x01\x00", "\x02", "\x00\x02\x00\x00\x00\x00\x00\x00\x00\x07", "设备"}
	seen := map[string]string{}
	for _, id := range ids {
		k := ongoingKey(id)
		if got := string(appendOngoingID(nil, k)); got != id {
			t.Errorf("%q: key %x reads back as %q", id, k, got)
		}
		if other, ok := seen[string(k)]; ok {
			t.Errorf("%q and %q share key %x", id, other, k)
		}
		seen[string(k)] = id
		if _, ok := event.NumericID(id); ok && len(k) != 10 {
			t.Errorf("numbered id %q: key of %d bytes", id, len(k))
		}
	}
	numbers := []string{"0", "7", "9", "10", "63", "105", "999", "1000", "1185685023527438795", "1185685023527448795", "18446744073709551615"}
	if got := keyOrder(slices.Clone(numbers)); !slices.Equal(got, numbers) {
		t.Errorf("numbered ids in the order %v, want %v", got, numbers)
	}
}
