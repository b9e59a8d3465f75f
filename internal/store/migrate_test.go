package store

import (
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
)

// v1Manifest is what testdata/v1/relay.db, a store written in schema
// version 1 by the relay of that layout, holds (testdata/v1/genv1_test.go).
type v1Manifest struct {
	Ongoing  []string            `json:"ongoing"`
	Ended    []string            `json:"ended"`
	Pending  map[string][]string `json:"pending"`
	Memory   map[string]string   `json:"memory"`
	Dead     map[string][]string `json:"dead"`
	KV       map[string]string   `json:"kv"`
	Journal  int                 `json:"journal"`
	Inferred []struct {
		OriginID   string    `json:"originId"`
		At         time.Time `json:"at"`
		DetectedAt time.Time `json:"detectedAt"`
		Now        time.Time `json:"now"`
		Event      string    `json:"event"`
	} `json:"inferred"`
}

// v1Store copies the version-1 store of testdata into a new directory and
// returns its path and what it holds.
func v1Store(t *testing.T) (string, v1Manifest) {
	t.Helper()
	var m v1Manifest
	data, err := os.ReadFile("testdata/v1/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("testdata/v1/relay.db.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "relay.db")
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path, m
}

// metaValue reads a number of the meta bucket of the store at path.
func metaValue(t *testing.T, s *Store, key []byte) uint64 {
	t.Helper()
	var v uint64
	if err := s.view(func(tx *txn) error {
		var err error
		v, err = metaUint(tx.Bucket(bucketMeta), key)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestOpenMigratesAStoreOfSchemaVersion1(t *testing.T) {
	boltOnly(t, "a file of schema version 1 is a bbolt file")
	path, m := v1Store(t)
	now := m.Inferred[0].Now
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	journalV1 := journal(t, ro)
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	s := reopen(t, path, Options{Clock: clock.NewFake(now)})

	if v := metaValue(t, s, metaVersion); v != schemaVersion {
		t.Fatalf("schema version after Open = %d, want %d", v, schemaVersion)
	}
	if err := s.view(func(tx *txn) error {
		if tx.Bucket(bucketRecords) != nil {
			t.Errorf("the records bucket is still there")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(recordLogPath(path, 1)); err != nil {
		t.Fatalf("no record log: %v", err)
	}

	ongoing, err := s.Ongoing()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range ongoing {
		ids = append(ids, a.OriginID)
		if !hasRecord(t, s, a.OriginID) {
			t.Errorf("ongoing alarm %s has no record after the migration", a.OriginID)
		}
	}
	if !slices.Equal(ids, m.Ongoing) {
		t.Fatalf("ongoing alarms after the migration = %v, want %v", ids, m.Ongoing)
	}
	var recs []string
	if err := s.OngoingRecords(func(a *event.Alarm) error {
		recs = append(recs, a.OriginID)
		if len(a.Raw) == 0 || a.DeviceSN == "" {
			t.Errorf("record of %s lost fields: %+v", a.OriginID, a)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(recs, m.Ongoing) {
		t.Fatalf("OngoingRecords = %v, want %v", recs, m.Ongoing)
	}
	for _, id := range m.Ended {
		a, ok, err := s.Alarm(id)
		if err != nil || !ok || a.Status == event.StatusOngoing {
			t.Errorf("ended alarm %s after the migration: %+v, %t, %v", id, a, ok, err)
		}
	}
	for sink, want := range m.Pending {
		es, err := s.Pending(sink, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range es {
			got = append(got, e.EventID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("outbox of %s after the migration = %v, want %v", sink, got, want)
		}
	}
	for sink, want := range m.Dead {
		ds, err := s.DeadLetters(sink)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != len(want) || ds[0].EventID != want[0] {
			t.Errorf("dead letters of %s after the migration = %+v, want %v", sink, ds, want)
		}
	}
	for key, want := range m.Memory {
		sink, id, _ := strings.Cut(key, "/")
		mem, err := s.Memory(sink, id)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(mem)
		if string(got) != want {
			t.Errorf("memory of %s after the migration = %s, want %s", key, got, want)
		}
	}
	for key, want := range m.KV {
		ns, k, _ := strings.Cut(key, "/")
		if v, err := s.Get(ns, k); err != nil || string(v) != want {
			t.Errorf("value %s after the migration = %q, %v; want %q", key, v, err, want)
		}
	}
	if got := journal(t, s); len(got) != m.Journal || !reflect.DeepEqual(got, journalV1) {
		t.Errorf("journal after the migration (%d entries):\n%+v\nwant (%d entries)\n%+v", len(got), got, m.Journal, journalV1)
	}

	// The inferred ends built from the migrated records are, byte for byte,
	// the events the relay of schema version 1 built from its own.
	for _, inf := range m.Inferred {
		res := apply(t, s, Batch{Inferred: []Inferred{{OriginID: inf.OriginID, At: inf.At}}, DetectedAt: inf.DetectedAt}, to("bus", "ops"))
		if len(res.Events) != 1 {
			t.Fatalf("inferred end of %s: %d events", inf.OriginID, len(res.Events))
		}
		body, err := res.Events[0].Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if string(body) != inf.Event {
			t.Errorf("inferred end of %s after the migration:\n got %s\nwant %s", inf.OriginID, body, inf.Event)
		}
	}
	if live := metaValue(t, s, metaRecordsLive); live == 0 {
		t.Fatalf("no live record bytes after the migration")
	}

	// A second Open migrates nothing and keeps the log.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, Options{Clock: clock.NewFake(now)})
	again, err := s.Ongoing()
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != len(m.Ongoing)-len(m.Inferred) {
		t.Fatalf("ongoing alarms after reopening = %d, want %d", len(again), len(m.Ongoing)-len(m.Inferred))
	}
	for _, a := range again {
		if !hasRecord(t, s, a.OriginID) {
			t.Errorf("ongoing alarm %s has no record after reopening", a.OriginID)
		}
	}
}

// TestOpenReadOnlyReadsAStoreOfSchemaVersion1: relay report on a copy of a
// state file written before the record log, which it must not migrate.
func TestOpenReadOnlyReadsAStoreOfSchemaVersion1(t *testing.T) {
	path, m := v1Store(t)
	s, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var recs []string
	if err := s.OngoingRecords(func(a *event.Alarm) error { recs = append(recs, a.OriginID); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(recs, m.Ongoing) {
		t.Fatalf("OngoingRecords = %v, want %v", recs, m.Ongoing)
	}
	if err := s.view(func(tx *txn) error {
		if v := binary.BigEndian.Uint64(tx.Bucket(bucketMeta).Get(metaVersion)); v != 1 {
			t.Errorf("schema version = %d, want 1: a read-only open migrated", v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if matches, _ := filepath.Glob(path + ".records.*"); len(matches) != 0 {
		t.Fatalf("a read-only open created %v", matches)
	}
}

// A store written before the delivery ledger (schema version 1) is given
// what the ledger needs once: its ongoing alarms the sets the rules route
// their starts to, its dead start a ledger record with its waiting end
// parked beside it. Its ends then go where their starts went, whatever the
// level or the rules do next, and none goes out beside a dead start.
func TestAdoptLedgerGivesAlarmsFromBeforeTheLedgerTheirSets(t *testing.T) {
	boltOnly(t, "a file of schema version 1 is a bbolt file")
	path, m := v1Store(t)
	s := reopen(t, path, Options{Clock: clock.NewFake(m.Inferred[0].Now)})
	dead := "af63a84c86019430"
	if got := pendingIDs(t, s, "ops"); !slices.Contains(got, dead+":end") {
		t.Fatalf("ops' outbox before: %v; want the dead start's end waiting (what the fixture holds)", got)
	}
	alarms, starts, err := s.AdoptLedger(to("bus", "ops"), nil)
	if err != nil || alarms != len(m.Ongoing) || starts != 1 {
		t.Fatalf("AdoptLedger = %d alarms, %d dead starts, %v; want %d and 1", alarms, starts, err, len(m.Ongoing))
	}
	for _, id := range m.Ongoing {
		if sinks, ok, err := s.StartSinks(id); err != nil || !ok || !slices.Equal(sinks, []string{"bus", "ops"}) {
			t.Fatalf("sinks of %s: %v, %v, %v; want bus and ops", id, sinks, ok, err)
		}
	}
	if got := pendingIDs(t, s, "ops"); slices.Contains(got, dead+":end") {
		t.Fatalf("ops' outbox after: %v; the end of a dead start waits to go out alone", got)
	}
	ds, err := s.DeadLetters("ops")
	if err != nil || len(ds) != 2 || ds[1].EventID != dead+":end" || !strings.HasPrefix(ds[1].Reason, ParkedPrefix) {
		t.Fatalf("ops' dead letters: %+v, %v; want the start and its end parked beside it", ds, err)
	}
	// An end of an adopted alarm goes to its set, not where the rules of
	// the moment send it.
	id := m.Ongoing[0]
	apply(t, s, Batch{Observed: []event.Alarm{rec(id, event.StatusEnded, m.Inferred[0].Now)}}, to("elsewhere"))
	if got := pendingIDs(t, s, "ops"); !slices.Contains(got, id+":end") {
		t.Fatalf("ops' outbox: %v; want %s's end where its start went", got, id)
	}
	if alarms, starts, err := s.AdoptLedger(to("other"), nil); err != nil || alarms+starts != 0 {
		t.Fatalf("a second AdoptLedger: %d, %d, %v; want nothing done", alarms, starts, err)
	}
}
