package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
)

// journal returns every entry of the store's journal, in its order.
func journal(t *testing.T, s *Store) []JournalEntry {
	t.Helper()
	var out []JournalEntry
	if err := s.Journal(time.Time{}, time.Time{}, func(e *JournalEntry) error {
		out = append(out, *e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// journalOf returns the journal entry of id, failing when there is none.
func journalOf(t *testing.T, s *Store, id string) JournalEntry {
	t.Helper()
	for _, e := range journal(t, s) {
		if e.OriginID == id {
			return e
		}
	}
	t.Fatalf("the journal has no entry of %s", id)
	return JournalEntry{}
}

// TestJournalKeepsEachStartAndItsEnd: every field a route matches on or a
// report shows is kept from the start, and the end adds its status and
// recovery time.
func TestJournalKeepsEachStartAndItsEnd(t *testing.T) {
	s, clk, _ := newStore(t, Options{})
	a := ongoing("a1")
	a.Level = 0
	a.EventType, a.SystemID, a.DeviceName, a.DeviceTemplateCode = "fault", "sys1", "PCS-1", "PCS"
	apply(t, s, Batch{Observed: []event.Alarm{a}}, to("bus"))
	started := clk.Now()
	want := JournalEntry{
		OriginID: "a1", TenantID: "t1", StationID: "s1", StationName: "Alpha", SystemID: "sys1",
		DeviceSN: "SN-a1", DeviceName: "PCS-1", DeviceTemplateCode: "PCS", EventCode: "Ea1",
		EventDesc: "overheating", EventType: "fault", Level: 0, Status: event.StatusOngoing,
		OccurredAt: a.OccurredAt, DetectedAt: started,
	}
	if got := journalOf(t, s, "a1"); got != want {
		t.Fatalf("journal entry after the start:\n got %+v\nwant %+v", got, want)
	}

	clk.Advance(time.Minute)
	end := rec("a1", event.StatusEnded, t0.Add(30*time.Second))
	apply(t, s, Batch{Observed: []event.Alarm{end}}, to("bus"))
	want.Status, want.RecoveredAt = event.StatusEnded, end.RecoveredAt
	if got := journalOf(t, s, "a1"); got != want {
		t.Fatalf("journal entry after the end:\n got %+v\nwant %+v", got, want)
	}

	// The start event of the entry is what a route matches on.
	ev := want.Event()
	if ev.ID != "a1:start" || ev.Data.Transition != event.Start || ev.Data.Level != 0 || ev.Data.EventCode != "Ea1" ||
		ev.Data.DeviceTemplateCode != "PCS" || ev.Data.StationName != "Alpha" || ev.Data.EventType != "fault" ||
		ev.Data.SystemID != "sys1" || ev.Data.DeviceName != "PCS-1" || ev.Data.TenantID != "t1" {
		t.Fatalf("Event() = %+v", ev.Data)
	}
}

// TestJournalOfFindsOneAlarmsEntry: the entry of one alarm, among others
// that occurred at the same millisecond, and none for an unknown alarm.
func TestJournalOfFindsOneAlarmsEntry(t *testing.T) {
	s, _, _ := newStore(t, Options{Retention: 72 * time.Hour})
	if s.Retention() != 72*time.Hour {
		t.Fatalf("Retention() = %s, want 72h", s.Retention())
	}
	a1, a2 := ongoing("a1"), ongoing("a2")
	a2.OccurredAt = a1.OccurredAt
	apply(t, s, Batch{Observed: []event.Alarm{a1, a2, rec("a2", event.StatusEnded, t0.Add(time.Minute))}}, to("bus"))
	for _, id := range []string{"a1", "a2"} {
		e, ok, err := s.JournalOf(id)
		if err != nil || !ok || e.OriginID != id || e.EventCode != "E"+id {
			t.Fatalf("JournalOf(%s) = %+v, %v, %v", id, e, ok, err)
		}
		if want := journalOf(t, s, id); e != want {
			t.Fatalf("JournalOf(%s) = %+v, want %+v", id, e, want)
		}
	}
	if _, ok, err := s.JournalOf("nope"); ok || err != nil {
		t.Fatalf("JournalOf(nope) = %v, %v; want none", ok, err)
	}
}

func TestJournalRecordsHowEachAlarmEnded(t *testing.T) {
	vanished := t0.Add(10 * time.Minute)
	realEnd := t0.Add(5 * time.Minute)
	tests := []struct {
		name      string
		batches   []Batch
		status    int
		recovered time.Time
	}{
		{"start and end in one batch",
			[]Batch{{Observed: []event.Alarm{ongoing("a1"), rec("a1", event.StatusEnded, realEnd)}}},
			event.StatusEnded, realEnd},
		{"an end with no start",
			[]Batch{{Observed: []event.Alarm{rec("a1", event.StatusEnded, realEnd)}}},
			event.StatusEnded, realEnd},
		{"invalid",
			[]Batch{{Observed: []event.Alarm{ongoing("a1")}}, {Observed: []event.Alarm{rec("a1", event.StatusInvalid, realEnd)}}},
			event.StatusInvalid, realEnd},
		{"an inferred end",
			[]Batch{{Observed: []event.Alarm{ongoing("a1")}}, {Inferred: []Inferred{{OriginID: "a1", At: vanished}}}},
			event.StatusEnded, vanished},
		{"a real end after an inferred one corrects the recovery time",
			[]Batch{{Observed: []event.Alarm{ongoing("a1")}}, {Inferred: []Inferred{{OriginID: "a1", At: vanished}}},
				{Observed: []event.Alarm{rec("a1", event.StatusEnded, realEnd)}}},
			event.StatusEnded, realEnd},
		{"an invalid after the end changes nothing",
			[]Batch{{Observed: []event.Alarm{ongoing("a1")}}, {Observed: []event.Alarm{rec("a1", event.StatusEnded, realEnd)}},
				{Observed: []event.Alarm{rec("a1", event.StatusInvalid, vanished)}}},
			event.StatusEnded, realEnd},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, _ := newStore(t, Options{})
			for _, b := range tt.batches {
				apply(t, s, b, to("bus"))
			}
			all := journal(t, s)
			if len(all) != 1 {
				t.Fatalf("journal holds %d entries, want 1: %+v", len(all), all)
			}
			if e := all[0]; e.Status != tt.status || !e.RecoveredAt.Equal(tt.recovered) {
				t.Fatalf("entry: status %d, recovered %s; want %d, %s", e.Status, e.RecoveredAt, tt.status, tt.recovered)
			}
		})
	}
}

// TestJournalFlagsSilentStartsAndSkipsHistory: alarms recorded without a
// start at a first run in record mode are journaled and flagged; alarms that
// were history when first seen started nothing and have no entry.
func TestJournalFlagsSilentStartsAndSkipsHistory(t *testing.T) {
	s, _, _ := newStore(t, Options{Bootstrap: BootstrapRecord})
	history := rec("old", event.StatusEnded, t0.Add(-time.Minute))
	if res := apply(t, s, Batch{Observed: []event.Alarm{history}, FirstContact: true}, to("bus")); len(res.Events) != 0 {
		t.Fatalf("history: events %v, want none", eventIDs(res.Events))
	}
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("quiet")}, CompleteCurrent: true, FirstListing: true}, to("bus"))
	res := apply(t, s, Batch{Observed: []event.Alarm{ongoing("new")}}, to("bus"))
	if got := eventIDs(res.Events); !slices.Equal(got, []string{"new:start"}) {
		t.Fatalf("events %v, want [new:start]", got)
	}
	got := map[string]bool{}
	for _, e := range journal(t, s) {
		got[e.OriginID] = e.Silent
	}
	if want := map[string]bool{"quiet": true, "new": false}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("journal (originId: silent) = %v, want %v", got, want)
	}
	apply(t, s, Batch{Observed: []event.Alarm{rec("quiet", event.StatusEnded, t0.Add(time.Minute))}}, to("bus"))
	if e := journalOf(t, s, "quiet"); !e.Silent || e.Status != event.StatusEnded {
		t.Fatalf("silent alarm after its end: %+v", e)
	}
}

// TestJournalFollowsAMovedOccurrence: an upstream that restamps an alarm's
// occurrence moves its entry, so that the end still finds it and nothing is
// left ongoing for ever.
func TestJournalFollowsAMovedOccurrence(t *testing.T) {
	s, clk, _ := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1")}}, to("bus"))
	moved := ongoing("a1")
	moved.OccurredAt = t0.Add(-2 * time.Hour)
	clk.Advance(LastSeenResolution)
	apply(t, s, Batch{Observed: []event.Alarm{moved}}, to("bus"))
	end := rec("a1", event.StatusEnded, t0.Add(time.Hour))
	end.OccurredAt = moved.OccurredAt
	apply(t, s, Batch{Observed: []event.Alarm{end}}, to("bus"))
	all := journal(t, s)
	if len(all) != 1 || !all[0].OccurredAt.Equal(moved.OccurredAt) || all[0].Status != event.StatusEnded {
		t.Fatalf("journal = %+v; want one ended entry at %s", all, moved.OccurredAt)
	}
	// Its times stay what they were, whatever they are counted from.
	if !all[0].DetectedAt.Equal(t0) || !all[0].RecoveredAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("journal entry detected at %s, recovered at %s; want %s and %s", all[0].DetectedAt, all[0].RecoveredAt, t0, t0.Add(time.Hour))
	}
}

// TestJournalValueCodec: an entry's value reads back as written, its times
// counted from its key's occurrence whatever they are, and one a relay of
// schema version 2 or 3 wrote (format 2) reads as it did.
func TestJournalValueCodec(t *testing.T) {
	ms := t0.UnixMilli()
	for _, tt := range []struct {
		occ int64
		j   journalValue
	}{
		{ms, journalValue{detected: ms + 4000, level: 2, ref: recordRef{n: 300, off: 70_000_000}}},
		{ms, journalValue{flags: journalSilent | journalEnded, detected: ms + 4000, recovered: ms + 3_600_000, level: 0, ref: recordRef{n: 1, off: 0}}},
		{ms, journalValue{flags: journalInvalid, detected: ms - 5000, recovered: ms - 1, level: -1, ref: recordRef{n: 9, off: 1 << 40}}},
		{0, journalValue{flags: journalEnded, detected: math.MaxInt64, recovered: math.MinInt64, level: 7, ref: recordRef{n: 2, off: 3}}},
	} {
		v := tt.j.append(nil, tt.occ)
		got, err := parseJournal(tt.occ, v)
		if err != nil {
			t.Fatal(err)
		}
		want := tt.j
		want.format, want.refAt = journalFormat, len(v)-len(appendJournalRef(nil, tt.j.ref))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("format 3 read as %+v, want %+v", got, want)
		}
		if len(v) > 16 && tt.occ == ms {
			t.Errorf("format 3 takes %d bytes for times near the occurrence", len(v))
		}
		// Format 2: the times 8 bytes each, after the flags.
		old := []byte{journalFormatV2, tt.j.flags}
		old = binary.BigEndian.AppendUint64(old, uint64(tt.j.detected))
		old = binary.BigEndian.AppendUint64(old, uint64(tt.j.recovered))
		old = binary.AppendVarint(old, int64(tt.j.level))
		old = appendJournalRef(old, tt.j.ref)
		got, err = parseJournal(tt.occ, old)
		if err != nil {
			t.Fatal(err)
		}
		want.format, want.refAt = journalFormatV2, len(old)-len(appendJournalRef(nil, tt.j.ref))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("format 2 read as %+v, want %+v", got, want)
		}
	}
	for _, v := range [][]byte{nil, {journalFormat}, {journalFormat, 0}, {journalFormatV2, 0, 1, 2}, {9, 0, 0, 0, 2, 1}} {
		if _, err := parseJournal(ms, v); !errors.Is(err, errCorrupt) {
			t.Errorf("parseJournal(%x) = %v, want errCorrupt", v, err)
		}
	}
}

// TestJournalFollowsAMoveWithinOneBatch: the same when the start and the
// restamped records come in one batch. A restamped repeat that changes
// nothing else leaves the state, and so the entry, where it was; the end
// moves both. The entry is always where the state says the alarm occurred.
func TestJournalFollowsAMoveWithinOneBatch(t *testing.T) {
	moved := ongoing("a1")
	moved.OccurredAt = t0.Add(-2 * time.Hour)
	end := rec("a1", event.StatusEnded, t0.Add(time.Hour))
	end.OccurredAt = moved.OccurredAt
	for _, tt := range []struct {
		name     string
		batch    []event.Alarm
		occurred time.Time
		status   int
	}{
		{"start, move", []event.Alarm{ongoing("a1"), moved}, t0.Add(-time.Hour), event.StatusOngoing},
		{"start, move, end", []event.Alarm{ongoing("a1"), moved, end}, moved.OccurredAt, event.StatusEnded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _, _ := newStore(t, Options{})
			apply(t, s, Batch{Observed: tt.batch}, to("bus"))
			all := journal(t, s)
			tr, _, _ := s.Alarm("a1")
			if len(all) != 1 || !all[0].OccurredAt.Equal(tt.occurred) || !tr.OccurredAt.Equal(tt.occurred) || all[0].Status != tt.status {
				t.Fatalf("journal = %+v, state at %s; want one entry at %s with status %d", all, tr.OccurredAt, tt.occurred, tt.status)
			}
		})
	}
}

func TestJournalReadsAnIntervalInOrderOfOccurrence(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	const n = 2*journalChunk + 100 // several read transactions
	batch := make([]event.Alarm, n)
	for i := range batch {
		a := ongoing(fmt.Sprintf("a%05d", i))
		// Occurrences from the newest to the oldest, one a second, the
		// last two sharing one.
		a.OccurredAt = t0.Add(-time.Duration(i) * time.Second)
		if i == n-1 {
			a.OccurredAt = batch[n-2].OccurredAt
		}
		batch[i] = a
	}
	apply(t, s, Batch{Observed: batch}, to("bus"))
	all := journal(t, s)
	if len(all) != n {
		t.Fatalf("journal holds %d entries, want %d", len(all), n)
	}
	if !slices.IsSortedFunc(all, func(a, b JournalEntry) int {
		if c := a.OccurredAt.Compare(b.OccurredAt); c != 0 {
			return c
		}
		return strings.Compare(a.OriginID, b.OriginID)
	}) {
		t.Fatal("the journal is not in order of occurrence, then originId")
	}
	from, until := t0.Add(-1500*time.Second), t0.Add(-100*time.Second)
	var got []string
	if err := s.Journal(from, until, func(e *JournalEntry) error {
		if e.OccurredAt.Before(from) || !e.OccurredAt.Before(until) {
			t.Fatalf("entry %s occurred at %s, outside [%s, %s)", e.OriginID, e.OccurredAt, from, until)
		}
		got = append(got, e.OriginID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1400 || got[0] != "a01500" || got[len(got)-1] != "a00101" {
		t.Fatalf("Journal(from, until) gave %d entries, %v ... %v; want 1400, a01500 ... a00101", len(got), got[:1], got[len(got)-1:])
	}
	stop := errors.New("enough")
	calls := 0
	err := s.Journal(time.Time{}, time.Time{}, func(*JournalEntry) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("Journal with fn failing: %v after %d calls; want fn's error after 1", err, calls)
	}
}

// TestJournalActive: the alarms that occurred before a time and were
// ongoing at another, whenever they occurred: those still ongoing and those
// that ended after it.
func TestJournalActive(t *testing.T) {
	s, clk, _ := newStore(t, Options{})
	var batch []event.Alarm
	for i, occurred := range []time.Duration{-30 * 24 * time.Hour, -48 * time.Hour, -30 * time.Hour, -2 * time.Hour, 0} {
		a := ongoing(fmt.Sprint("a", i))
		a.OccurredAt = t0.Add(occurred)
		batch = append(batch, a)
	}
	// Many ended long ago, to walk several read transactions.
	for i := range journalWalk + 10 {
		a := rec(fmt.Sprintf("h%05d", i), event.StatusEnded, t0.Add(-50*24*time.Hour))
		a.OccurredAt = t0.Add(-51 * 24 * time.Hour)
		batch = append(batch, a)
	}
	clk.Set(t0.Add(time.Hour))
	apply(t, s, Batch{Observed: batch}, to("bus"))
	clk.Advance(time.Hour)
	end1, end2 := rec("a1", event.StatusEnded, t0.Add(-time.Hour)), rec("a2", event.StatusInvalid, t0.Add(-29*time.Hour))
	end1.OccurredAt, end2.OccurredAt = batch[1].OccurredAt, batch[2].OccurredAt
	apply(t, s, Batch{Observed: []event.Alarm{end1, end2}}, to("bus"))
	for _, tt := range []struct {
		name       string
		before, at time.Time
		want       []string
	}{
		{"now", t0.Add(time.Hour), t0.Add(time.Hour), []string{"a0", "a3", "a4"}},
		{"a day before", t0.Add(-24 * time.Hour), t0.Add(-24 * time.Hour), []string{"a0", "a1"}},
		{"ended after the time", t0.Add(-24 * time.Hour), t0.Add(-29*time.Hour - time.Minute), []string{"a0", "a1", "a2"}},
		{"before the journal", t0.Add(-60 * 24 * time.Hour), t0, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			if err := s.JournalActive(tt.before, tt.at, func(e *JournalEntry) error {
				got = append(got, e.OriginID)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("JournalActive(%s, %s) = %v, want %v", tt.before, tt.at, got, tt.want)
			}
		})
	}
}

// TestJournalBackfillsTheOngoingAlarmsOfAnOlderStore: a store written by a
// relay without a journal gets an entry for each ongoing alarm at its next
// open, from the alarm's stored record, and none for ended ones.
func TestJournalBackfillsTheOngoingAlarmsOfAnOlderStore(t *testing.T) {
	s, _, path := newStore(t, Options{})
	a := ongoing("a1")
	a.EventType, a.DeviceName = "fault", "PCS-1"
	apply(t, s, Batch{Observed: []event.Alarm{a, ongoing("a2"), rec("done", event.StatusEnded, t0)}}, to("bus"))
	before := journalOf(t, s, "a1")
	// What a relay without a journal leaves.
	if err := s.update(func(tx *txn, _ map[string]int) error {
		if err := tx.DeleteBucket(bucketJournal); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Delete(metaJournal)
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, Options{Clock: clock.NewFake(t0.Add(time.Hour))})
	var ids []string
	for _, e := range journal(t, s) {
		ids = append(ids, e.OriginID)
	}
	if !slices.Equal(ids, []string{"a1", "a2"}) {
		t.Fatalf("journal after the backfill: %v, want [a1 a2]", ids)
	}
	if got := journalOf(t, s, "a1"); got != before {
		t.Fatalf("backfilled entry:\n got %+v\nwant %+v", got, before)
	}
}

func TestPruneDropsJournalEntriesWithTheirAlarms(t *testing.T) {
	s, clk, _ := newStore(t, Options{Retention: 800 * time.Hour})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1"), ongoing("a2")}}, to("bus"))
	apply(t, s, Batch{Observed: []event.Alarm{rec("a1", event.StatusEnded, t0)}}, to("bus"))
	clk.Advance(801 * time.Hour)
	if n, err := s.Prune(context.Background()); n != 1 || err != nil {
		t.Fatalf("Prune = %d, %v; want 1", n, err)
	}
	all := journal(t, s)
	if len(all) != 1 || all[0].OriginID != "a2" {
		t.Fatalf("journal after the prune = %+v; want the ongoing a2 alone", all)
	}
}

// TestOpenReadOnlyReadsACopyAndWritesNothing: a copied state file is read
// without a change to it, and every write is refused.
func TestOpenReadOnlyReadsACopyAndWritesNothing(t *testing.T) {
	s, _, path := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1")}}, to("bus"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if e := journal(t, ro); len(e) != 1 || e[0].OriginID != "a1" {
		t.Fatalf("journal of the copy = %+v", e)
	}
	if on, err := ro.Ongoing(); err != nil || len(on) != 1 {
		t.Fatalf("Ongoing = %v, %v", on, err)
	}
	if _, err := ro.Apply(context.Background(), Batch{Observed: []event.Alarm{ongoing("a2")}}, to("bus")); err == nil {
		t.Fatal("Apply on a read-only store succeeded")
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Fatal("opening read-only changed the file")
	}
}

func TestOpenReadOnlyRefusesWhatIsNotAStore(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	db, err := bolt.Open(other, 0o600, nil)
	if err == nil {
		err = db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("x")); return err })
	}
	if err == nil {
		err = db.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.db"), "no such file"},
		{empty, "empty"},
		{other, "not a relay store"},
	} {
		_, err := OpenReadOnly(tt.path)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.path) {
			t.Errorf("OpenReadOnly(%s) = %v; want an error naming the file and %q", tt.path, err, tt.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !os.IsNotExist(err) {
		t.Fatalf("OpenReadOnly created the missing file (%v)", err)
	}
}

func TestCountOngoingBefore(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	old, older := ongoing("old"), ongoing("older")
	old.OccurredAt, older.OccurredAt = t0.Add(-25*time.Hour), t0.Add(-48*time.Hour)
	apply(t, s, Batch{Observed: []event.Alarm{old, older, ongoing("new"), rec("ended", event.StatusEnded, t0)}}, to("bus"))
	for _, tt := range []struct {
		before time.Time
		want   int
	}{{t0.Add(-24 * time.Hour), 2}, {t0.Add(-30 * time.Hour), 1}, {t0, 3}, {t0.Add(-time.Hour), 2}} {
		if n, err := s.CountOngoingBefore(tt.before); n != tt.want || err != nil {
			t.Errorf("CountOngoingBefore(%s) = %d, %v; want %d", tt.before, n, err, tt.want)
		}
	}
}
