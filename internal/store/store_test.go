package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/store/storetest"
)

// t0, rec and ongoing are storetest's T0, Record and Ongoing, which the
// tests of the JetStream backend share.
var (
	t0      = storetest.T0
	rec     = storetest.Record
	ongoing = storetest.Ongoing
)

// newStore opens a store in a new file under t.TempDir with a fake clock at
// t0, closed when the test ends.
func newStore(t *testing.T, opts Options) (*Store, *clock.Fake, string) {
	t.Helper()
	fake := clock.NewFake(t0)
	if opts.Clock == nil {
		opts.Clock = fake
	}
	path := filepath.Join(t.TempDir(), "relay.db")
	return reopen(t, path, opts), fake, path
}

// reopen opens the store file at path, closed when the test ends.
func reopen(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, withBackend(t, path, opts))
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// to routes every event to sinks.
func to(sinks ...string) Router { return func(*event.Event) []string { return sinks } }

// eventIDs lists the ids of evs, never nil.
func eventIDs(evs []event.Event) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

func apply(t *testing.T, s *Store, b Batch, route Router) Result {
	t.Helper()
	if b.DetectedAt.IsZero() {
		b.DetectedAt = s.clock.Now()
	}
	res, err := s.Apply(context.Background(), b, route)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return res
}

// txID returns the id of the last committed transaction.
func txID(t *testing.T, s *Store) int {
	t.Helper()
	var id int
	if err := s.view(func(tx *txn) error { id = tx.tx.ID(); return nil }); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestOpenFailsClearly(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string)
		opts    Options
		want    string
	}{
		{
			name: "unknown bootstrap mode",
			opts: Options{Bootstrap: "loud"},
			want: `bootstrap mode "loud": want "notify" or "record"`,
		},
		{
			name: "negative retention",
			opts: Options{Retention: -time.Hour},
			want: "retention -1h0m0s is negative",
		},
		{
			name: "newer schema",
			prepare: func(t *testing.T, path string) {
				s, err := Open(path, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if err := s.update(func(tx *txn, _ map[string]int) error {
					return tx.Bucket(bucketMeta).Put(metaVersion, binary.BigEndian.AppendUint64(nil, schemaVersion+1))
				}); err != nil {
					t.Fatal(err)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			},
			want: fmt.Sprintf("schema version %d is newer than the %d this relay knows: the file was written by a newer relay; "+
				"run that relay (or a newer one), or restore a backup of the state file that this relay wrote", schemaVersion+1, schemaVersion),
		},
		{
			name: "bbolt file of something else",
			prepare: func(t *testing.T, path string) {
				db, err := bolt.Open(path, 0o600, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("users")); return err }); err != nil {
					t.Fatal(err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			},
			want: `not a relay store: it has bucket "users" but no "meta"`,
		},
		{
			name: "not a bbolt file",
			prepare: func(t *testing.T, path string) {
				if err := os.WriteFile(path, []byte(strings.Repeat("not a database\n", 1000)), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			want: "dedupe: open ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "relay.db")
			if tt.prepare != nil {
				tt.prepare(t, path)
			}
			s, err := Open(path, tt.opts)
			if err == nil {
				_ = s.Close()
				t.Fatalf("Open succeeded, want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open error = %q, want it to contain %q", err, tt.want)
			}
			if tt.prepare != nil && !strings.Contains(err.Error(), path) {
				t.Fatalf("Open error = %q does not name the file %s", err, path)
			}
		})
	}
}

func TestSecondOpenerGetsErrLocked(t *testing.T) {
	s, _, path := newStore(t, Options{})
	start := time.Now()
	other, err := Open(path, Options{LockTimeout: 50 * time.Millisecond})
	if err == nil {
		_ = other.Close()
		t.Fatal("second Open succeeded while the first holds the file")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open error = %v, want ErrLocked", err)
	}
	want := "dedupe: " + path + " is locked by another process (is another relay running?)"
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("second Open error = %q, want it to contain %q", err, want)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("second Open took %s with a 50ms lock timeout", took)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reopen(t, path, Options{LockTimeout: 50 * time.Millisecond})
}

func TestStateSurvivesReopen(t *testing.T) {
	s, fake, path := newStore(t, Options{})
	apply(t, s, Batch{
		Observed:        []event.Alarm{ongoing("a1"), ongoing("a2")},
		CompleteCurrent: true,
		Marks:           map[string]time.Time{"sweep": t0.Add(-time.Minute)},
	}, to("slack"))
	pending, err := s.Pending("slack", 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delivered(pending[0], map[string]string{"channel": "C1", "ts": "1700000000.000100"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	fake.Advance(48 * time.Hour)
	s = reopen(t, path, Options{Clock: fake})
	if got := s.FirstRun(); !got.Equal(t0) {
		t.Fatalf("FirstRun after reopen = %s, want %s", got, t0)
	}
	if !s.Bootstrapped() {
		t.Fatal("Bootstrapped after reopen = false, want true")
	}
	mem, err := s.Memory("slack", "a1")
	if err != nil {
		t.Fatal(err)
	}
	if mem["channel"] != "C1" || mem["ts"] != "1700000000.000100" || len(mem) != 2 {
		t.Fatalf("Memory after reopen = %v, want channel C1 and ts", mem)
	}
	depth, err := s.Depth()
	if err != nil {
		t.Fatal(err)
	}
	if depth["slack"] != 1 {
		t.Fatalf("Depth after reopen = %v, want slack: 1", depth)
	}
	rest, err := s.Pending("slack", 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := entryIDs(rest); !slices.Equal(got, []string{"a2:start"}) {
		t.Fatalf("Pending after reopen = %v, want [a2:start]", got)
	}
	mark, ok, err := s.Mark("sweep")
	if err != nil || !ok || !mark.Equal(t0.Add(-time.Minute)) {
		t.Fatalf("Mark(sweep) after reopen = %s, %t, %v; want %s", mark, ok, err, t0.Add(-time.Minute))
	}
	if res := apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1"), ongoing("a2")}}, to("slack")); len(res.Events) != 0 {
		t.Fatalf("repeat after reopen produced %v", eventIDs(res.Events))
	}
}

func TestMarks(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	if _, ok, err := s.Mark("sweep"); ok || err != nil {
		t.Fatalf("Mark of a new store = %t, %v; want not found", ok, err)
	}
	sweep := t0.Add(-2 * time.Minute)
	apply(t, s, Batch{Marks: map[string]time.Time{"sweep": sweep}}, nil)
	got, ok, err := s.Mark("sweep")
	if err != nil || !ok || !got.Equal(sweep) {
		t.Fatalf("Mark(sweep) = %s, %t, %v; want %s", got, ok, err, sweep)
	}
	before := txID(t, s)
	apply(t, s, Batch{Marks: map[string]time.Time{"sweep": sweep}}, nil)
	if after := txID(t, s); after != before {
		t.Fatalf("an unchanged watermark committed a transaction (%d -> %d)", before, after)
	}
	apply(t, s, Batch{Marks: map[string]time.Time{"sweep": sweep.Add(time.Minute)}}, nil)
	if got, _, _ := s.Mark("sweep"); !got.Equal(sweep.Add(time.Minute)) {
		t.Fatalf("Mark(sweep) after a move = %s, want %s", got, sweep.Add(time.Minute))
	}
	if _, err := s.Apply(context.Background(), Batch{Marks: map[string]time.Time{"": sweep}}, nil); err == nil {
		t.Fatal("a watermark without a name was accepted")
	}
}

func TestFirstRunAlignsOnceToTheUpstreamClock(t *testing.T) {
	t.Parallel()
	s, _, path := newStore(t, Options{})
	// The upstream's clock runs 2 minutes behind: an alarm it stamps as
	// recovered 1 minute before the relay's first run ended after it.
	got, err := s.AlignFirstRun(-2 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(-2 * time.Minute); !got.Equal(want) || !s.FirstRun().Equal(want) {
		t.Fatalf("first run %s (FirstRun %s); want %s", got, s.FirstRun(), want)
	}
	res, err := s.Apply(t.Context(), Batch{Observed: []event.Alarm{rec("a", 0, t0.Add(-time.Minute))}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Events) != 2 {
		t.Fatalf("an alarm the upstream stamped after the aligned first run produced %d events; want start and end", len(res.Events))
	}
	if got, _ := s.AlignFirstRun(time.Hour); !got.Equal(t0.Add(-2 * time.Minute)) {
		t.Fatalf("a second alignment moved the first run to %s", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, Options{Clock: clock.NewFake(t0)})
	if want := t0.Add(-2 * time.Minute); !s.FirstRun().Equal(want) {
		t.Fatalf("after reopening, first run %s; want %s", s.FirstRun(), want)
	}
}

func TestFirstRunIsNotAlignedAfterTheBootstrap(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t, Options{})
	if _, err := s.Apply(t.Context(), Batch{CompleteCurrent: true}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.AlignFirstRun(time.Hour); err != nil || !got.Equal(t0) {
		t.Fatalf("AlignFirstRun on a bootstrapped store = %s, %v; want %s unchanged", got, err, t0)
	}
}
