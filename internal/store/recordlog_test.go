package store

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// logSize returns the size of the record log of the store at path.
func logSize(t *testing.T, s *Store) int64 {
	t.Helper()
	st, err := os.Stat(recordLogPath(s.path, s.logGen))
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// records returns the records OngoingRecords gives, by originId.
func records(t *testing.T, s *Store) map[string]event.Alarm {
	t.Helper()
	out := map[string]event.Alarm{}
	if err := s.OngoingRecords(func(a *event.Alarm) error { out[a.OriginID] = *a; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRecordIsAppendedOnlyWhenItChanges(t *testing.T) {
	s, fake, _ := newStore(t, Options{})
	a := benchAlarm(1)
	apply(t, s, Batch{Observed: []event.Alarm{a}}, nil)
	size := logSize(t, s)

	// A LastSeen refresh rewrites the state, not the record.
	fake.Advance(LastSeenResolution + time.Second)
	apply(t, s, Batch{Observed: []event.Alarm{a}}, nil)
	if got, _, _ := s.Alarm(a.OriginID); !got.LastSeen.Equal(fake.Now()) {
		t.Fatalf("LastSeen = %s, want %s", got.LastSeen, fake.Now())
	}
	if got := logSize(t, s); got != size {
		t.Fatalf("a LastSeen refresh appended %d bytes to the record log", got-size)
	}

	steps := []struct {
		name   string
		change func(*event.Alarm)
		after  time.Duration
	}{
		{"a level change", func(a *event.Alarm) { a.Level = (a.Level + 1) % 4 }, time.Second},
		{"another description, seen at the next refresh", func(a *event.Alarm) { a.EventDesc = "reworded" }, LastSeenResolution},
	}
	for _, step := range steps {
		step.change(&a)
		fake.Advance(step.after)
		apply(t, s, Batch{Observed: []event.Alarm{a}}, nil)
		if got := logSize(t, s); got <= size {
			t.Fatalf("%s appended nothing to the record log", step.name)
		}
		size = logSize(t, s)
		if got := records(t, s)[a.OriginID]; got.EventDesc != a.EventDesc || got.Level != a.Level {
			t.Fatalf("after %s the stored record is %+v", step.name, got)
		}
	}
}

func TestCorruptRecordIsAClearError(t *testing.T) {
	s, _, path := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1")}}, nil)
	f, err := os.OpenFile(recordLogPath(path, 1), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, int64(stateOf(t, s, "a1").rec.off)+frameHeaderLen+3); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	_, err = s.Apply(context.Background(), Batch{Inferred: []Inferred{{OriginID: "a1", At: t0}}, DetectedAt: t0}, nil)
	if err == nil {
		t.Fatal("an inferred end from a corrupt record succeeded")
	}
	for _, want := range []string{recordLogPath(path, 1), `alarm "a1"`, "checksum mismatch"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if got, _, _ := s.Alarm("a1"); got.Status != event.StatusOngoing {
		t.Fatalf("a1 after the failed Apply: %+v", got)
	}
}

// TestGarbageAfterTheLastFrameIsIgnored: a torn frame at the end of the log
// (a crash while appending, or a commit that failed) is never read, and new
// frames go after it.
func TestGarbageAfterTheLastFrameIsIgnored(t *testing.T) {
	s, fake, path := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{benchAlarm(1)}}, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(recordLogPath(path, 1), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(appendFrame(nil, encodeAlarm(new(benchAlarm(2))))[:40]); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	s = reopen(t, path, Options{Clock: fake})
	apply(t, s, Batch{Observed: []event.Alarm{benchAlarm(3)}}, nil)
	got := records(t, s)
	if len(got) != 2 || got[benchAlarm(1).OriginID].DeviceName != benchAlarm(1).DeviceName ||
		got[benchAlarm(3).OriginID].DeviceName != benchAlarm(3).DeviceName {
		t.Fatalf("records after a torn tail: %+v", got)
	}
}

func TestOpenNeedsTheRecordLogOfItsGeneration(t *testing.T) {
	s, _, path := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1")}}, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(recordLogPath(path, 1)); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, Options{})
	if err == nil {
		t.Fatal("Open without the record log succeeded")
	}
	for _, want := range []string{recordLogPath(path, 1) + " is missing", "restore both together"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestOpenDeletesRecordLogsOfOtherGenerations(t *testing.T) {
	s, fake, path := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1")}}, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	leftover := recordLogPath(path, 2) // a compaction a crash interrupted
	if err := os.WriteFile(leftover, []byte(recordLogMagic+"partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(filepath.Dir(path), "other.db.records.2")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, Options{Clock: fake})
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatalf("the leftover %s is still there (%v)", leftover, err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("Open deleted the record log of another store: %v", err)
	}
	if !hasRecord(t, s, "a1") {
		t.Fatal("a1 lost its record")
	}
}

func TestPruneCompactsTheRecordLog(t *testing.T) {
	s, fake, path := newStore(t, Options{Retention: time.Hour})
	s.compactFloor = 1
	alarms := make([]event.Alarm, 40)
	for i := range alarms {
		alarms[i] = benchAlarm(i)
	}
	apply(t, s, Batch{Observed: alarms}, nil)
	// The ends of 36 alarms leave their records as garbage; their journal
	// entries keep theirs.
	var ends []event.Alarm
	for _, a := range alarms[:36] {
		a.Status = event.StatusEnded
		a.RecoveredAt = fake.Now()
		ends = append(ends, a)
	}
	fake.Advance(time.Minute)
	apply(t, s, Batch{Observed: ends}, nil)
	before := records(t, s)
	journalBefore := journal(t, s)
	size := logSize(t, s)

	// Readers keep reading while the log is compacted.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if got := records(t, s); len(got) != len(before) {
				t.Errorf("OngoingRecords during the compaction gave %d records, want %d", len(got), len(before))
				return
			}
			if got := journal(t, s); len(got) != len(journalBefore) {
				t.Errorf("Journal during the compaction gave %d entries, want %d", len(got), len(journalBefore))
				return
			}
		}
	})
	if _, err := s.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()

	if s.logGen != 2 {
		t.Fatalf("generation after Prune = %d, want 2", s.logGen)
	}
	if _, err := os.Stat(recordLogPath(path, 1)); !os.IsNotExist(err) {
		t.Fatalf("the compacted log is still there (%v)", err)
	}
	if got := logSize(t, s); got >= size*2/3 {
		t.Fatalf("the log is %d bytes after the compaction, %d before", got, size)
	}
	if live := metaValue(t, s, metaRecordsLive); int64(live) != logSize(t, s)-int64(len(recordLogMagic)) {
		t.Fatalf("live bytes %d, log of %d bytes holding only live frames", live, logSize(t, s))
	}
	after := records(t, s)
	if len(after) != len(before) {
		t.Fatalf("%d records after the compaction, %d before", len(after), len(before))
	}
	for id, a := range before {
		if b := after[id]; b.DeviceName != a.DeviceName || string(b.Raw) != string(a.Raw) {
			t.Fatalf("record of %s changed in the compaction: %+v, was %+v", id, b, a)
		}
	}
	if got := journal(t, s); !reflect.DeepEqual(got, journalBefore) {
		t.Fatalf("journal after the compaction:\n%+v\nwant\n%+v", got, journalBefore)
	}

	// The new generation takes new frames, and survives a reopen.
	apply(t, s, Batch{Observed: []event.Alarm{benchAlarm(100)}}, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, Options{Clock: fake, Retention: time.Hour})
	res := apply(t, s, Batch{Inferred: []Inferred{{OriginID: alarms[38].OriginID, At: fake.Now()}, {OriginID: benchAlarm(100).OriginID, At: fake.Now()}}}, nil)
	if got := eventIDs(res.Events); !slices.Equal(got, []string{alarms[38].OriginID + ":end", benchAlarm(100).OriginID + ":end"}) {
		t.Fatalf("inferred ends after the compaction = %v", got)
	}
	if res.Events[0].Data.Alarm == nil || string(res.Events[0].Data.Alarm) != string(alarms[38].Raw) {
		t.Fatalf("the inferred end after the compaction lost the record: %+v", res.Events[0].Data)
	}
}

func TestPruneLeavesASmallRecordLogAlone(t *testing.T) {
	s, fake, path := newStore(t, Options{Retention: time.Hour})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1"), ongoing("a2")}}, nil)
	apply(t, s, Batch{Observed: []event.Alarm{rec("a1", event.StatusEnded, t0)}}, nil)
	fake.Advance(2 * time.Hour)
	if _, err := s.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(recordLogPath(path, 1)); err != nil || s.logGen != 1 {
		t.Fatalf("a log under the floor was compacted: generation %d (%v)", s.logGen, err)
	}
}

// stateOf returns the stored state of alarm id.
func stateOf(t *testing.T, s *Store, id string) state {
	t.Helper()
	var st state
	if err := s.view(func(tx *txn) error {
		var err error
		st, err = decodeState(first(findState(tx, id)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestOpenReadOnlyReadsTheRecordLogOfACopy: a copy of the state file with
// its record log gives the same records and journal; the state file alone
// is refused with what is missing.
func TestOpenReadOnlyReadsTheRecordLogOfACopy(t *testing.T) {
	s, _, path := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{benchAlarm(1), benchAlarm(2)}}, nil)
	want := records(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{path, recordLogPath(path, 1)} {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(name)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ro, err := OpenReadOnly(filepath.Join(dir, "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := records(t, ro); len(got) != len(want) || got[benchAlarm(2).OriginID].DeviceName != benchAlarm(2).DeviceName {
		t.Fatalf("records of the copy = %+v, want %+v", got, want)
	}
	if e := journal(t, ro); len(e) != 2 || e[0].DeviceName == "" || e[0].EventDesc != benchAlarm(1).EventDesc {
		t.Fatalf("journal of the copy = %+v", e)
	}

	if err := os.Remove(recordLogPath(filepath.Join(dir, "relay.db"), 1)); err != nil {
		t.Fatal(err)
	}
	alone, err := OpenReadOnly(filepath.Join(dir, "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	err = alone.OngoingRecords(func(*event.Alarm) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "is missing") {
		t.Fatalf("OngoingRecords without the record log = %v, want it to say the log is missing", err)
	}
	err = alone.Journal(t0.Add(-time.Hour), time.Time{}, func(*JournalEntry) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "is missing") {
		t.Fatalf("Journal without the record log = %v, want it to say the log is missing", err)
	}
}

// first returns its first argument: the state of findState, without
// whether the alarm is ongoing.
func first(v []byte, _ bool) []byte { return v }
