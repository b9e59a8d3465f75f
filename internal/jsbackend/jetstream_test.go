package jsbackend

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/testwait"
)

// openHolder opens the state of tenant in a new directory as the holder of
// lease revision fence, as a replica taking the tenant over does. Its
// record log is compacted by every Prune that leaves garbage (see churn).
func openHolder(t *testing.T, tenant string, fence uint64, clk clock.Clock, snapshotAfter int64) *store.Store {
	t.Helper()
	s, _ := openHolderBackend(t, tenant, fence, clk, snapshotAfter)
	return s
}

// openHolderBackend is openHolder that also returns the store's backend.
func openHolderBackend(t *testing.T, tenant string, fence uint64, clk clock.Clock, snapshotAfter int64) (*store.Store, *jsBackend) {
	t.Helper()
	b, err := New(suite.nc, Options{
		Tenant: tenant, Fence: fence, Holder: fmt.Sprintf("replica-%d", fence), Replicas: 3, SnapshotAfter: snapshotAfter,
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(filepath.Join(t.TempDir(), "relay.db"), store.Options{Clock: clk, Backend: b, CompactFloor: 1})
	if err != nil {
		t.Fatalf("open as holder %d: %v", fence, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, b.(*jsBackend)
}

// dump returns every key of every bucket of s, nested buckets by path. It
// reads a snapshot of s, restored to a file of its own: the store holds
// its file locked.
func dump(t *testing.T, s *store.Store) map[string]string {
	t.Helper()
	var content bytes.Buffer
	if _, err := s.WriteSnapshot(&content); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dump.db")
	if err := store.RestoreSnapshot(path, &content); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := make(map[string]string)
	var walk func(prefix string, b *bolt.Bucket) error
	walk = func(prefix string, b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(prefix+"/"+string(k), b.Bucket(k))
			}
			out[prefix+"/"+hex.EncodeToString(k)] = hex.EncodeToString(v)
			return nil
		})
	}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(string(name), b) })
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// recordsGen returns the generation of the record log of s: the number
// under key recordsGen of its bucket meta.
func recordsGen(t *testing.T, s *store.Store) uint64 {
	t.Helper()
	v, err := hex.DecodeString(dump(t, s)["meta/"+hex.EncodeToString([]byte("recordsGen"))])
	if err != nil || len(v) != 8 {
		t.Fatalf("meta recordsGen: %x (%v)", v, err)
	}
	return binary.BigEndian.Uint64(v)
}

func ongoingRecords(t *testing.T, s *store.Store) []event.Alarm {
	t.Helper()
	var out []event.Alarm
	if err := s.OngoingRecords(func(a *event.Alarm) error { out = append(out, *a); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// churn makes s go through what a relay's store goes through: alarms start
// and end, entries are delivered, values are kept, ended alarms pruned,
// and the record log compacted.
func churn(t *testing.T, s *store.Store, fake *clock.Fake, rounds int) {
	t.Helper()
	for r := range rounds {
		var obs []event.Alarm
		for i := range 40 {
			a := ongoing(fmt.Sprintf("r%d-%d", r, i))
			a.EventDesc = fmt.Sprintf("overheating in round %d", r)
			obs = append(obs, a)
		}
		if r > 0 {
			for i := range 36 {
				obs = append(obs, rec(fmt.Sprintf("r%d-%d", r-1, i), event.StatusEnded, fake.Now()))
			}
		}
		apply(t, s, store.Batch{Observed: obs, Marks: map[string]time.Time{"sweep": fake.Now()}}, to("bus", "chat"))
		entries, err := s.Pending("bus", 30)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := s.Delivered(e, map[string]string{"ts": "1700000000." + e.EventID[:6]}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Put(store.KV{NS: "silences", Key: fmt.Sprintf("s%d", r), Value: []byte("until tomorrow")}); err != nil {
			t.Fatal(err)
		}
		fake.Advance(store.DefaultRetention + time.Hour)
		if _, err := s.Prune(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// A replica that takes a tenant over restores exactly the state the last
// holder committed, through snapshots, purges and compactions, and from
// then on every write of the old holder is refused.
func TestJetStreamTakeoverRestoresTheStateAndFencesTheOldHolder(t *testing.T) {
	needsCluster(t)
	fake := clock.NewFake(t0)
	tenant := "takeover"
	a := openHolder(t, tenant, 1, fake, 16<<10)
	churn(t, a, fake, 12)
	// Let a snapshot land, then write more after it.
	testwait.For(t, 30*time.Second, "a snapshot", func() bool { return lastSnapshotSeq(t, tenant) > 0 })
	churn(t, a, fake, 3)
	if gen := recordsGen(t, a); gen < 3 {
		t.Fatalf("the record log is in generation %d: the churn should have compacted it at least twice", gen)
	}
	want, wantRecs := dump(t, a), ongoingRecords(t, a)

	b := openHolder(t, tenant, 2, fake, 16<<10)
	if got := dump(t, b); !reflect.DeepEqual(got, want) {
		t.Fatalf("the restored state differs from the last holder's: %d keys, want %d\n%s", len(got), len(want), diffKeys(got, want))
	}
	if got := ongoingRecords(t, b); !reflect.DeepEqual(got, wantRecs) {
		t.Fatalf("the restored records differ: %d, want %d", len(got), len(wantRecs))
	}

	_, err := a.Apply(context.Background(), store.Batch{Observed: []event.Alarm{ongoing("late")}, DetectedAt: fake.Now()}, to("bus"))
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Apply by the old holder = %v, want ErrFenced", err)
	}
	if _, found, _ := a.Alarm("late"); found {
		t.Fatal("the refused Apply was committed locally")
	}
	if got := dump(t, a); !reflect.DeepEqual(got, want) {
		t.Fatal("the refused Apply changed the old holder's file")
	}
	// The new holder goes on from there, and a third restores both.
	apply(t, b, store.Batch{Observed: []event.Alarm{ongoing("after")}}, to("bus"))
	c := openHolder(t, tenant, 3, fake, 16<<10)
	if got, want := dump(t, c), dump(t, b); !reflect.DeepEqual(got, want) {
		t.Fatalf("the third holder's state differs:\n%s", diffKeys(got, want))
	}
	// A holder of an older lease cannot take the tenant back.
	bk, err := New(suite.nc, Options{Tenant: tenant, Fence: 2, Holder: "replica-2", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(filepath.Join(t.TempDir(), "relay.db"), store.Options{Clock: fake, Backend: bk}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Open with an older lease = %v, want ErrFenced", err)
	}
}

// A transaction larger than one message is stored as one atomic batch of
// parts, and restored whole.
func TestJetStreamLargeTransactionIsOneAtomicBatch(t *testing.T) {
	needsCluster(t)
	fake := clock.NewFake(t0)
	tenant := "large"
	a := openHolder(t, tenant, 1, fake, 1<<40)
	apply(t, a, store.Batch{Observed: incompressible("big", 1500)}, to("bus"))
	last := lastMsgOf(t, tenant, "log")
	if last == nil {
		t.Fatal("no changeset in the stream")
	}
	if parts := last.Header.Get(hdrParts); parts == "1" || parts == "" {
		t.Fatalf("the Apply of 1,500 incompressible records was stored in %q part(s), want several", parts)
	}
	b := openHolder(t, tenant, 2, fake, 1<<40)
	if got, want := dump(t, b), dump(t, a); !reflect.DeepEqual(got, want) {
		t.Fatalf("the restored state differs:\n%s", diffKeys(got, want))
	}
	if got := ongoingRecords(t, b); len(got) != 1500 {
		t.Fatalf("restored %d ongoing records, want 1500", len(got))
	}
}

func lastSnapshotSeq(t *testing.T, tenant string) uint64 {
	t.Helper()
	if m := lastMsgOf(t, tenant, "snap"); m != nil {
		return m.Sequence
	}
	return 0
}

// lastMsgOf returns the last message of tenant's subject kind (log, snap,
// fence) in the default state stream, or nil.
func lastMsgOf(t *testing.T, tenant, kind string) *jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(suite.nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, DefaultStateStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(ctx, DefaultStatePrefix+"."+tenant+"."+kind)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// diffKeys says, in a few lines, which keys differ.
func diffKeys(got, want map[string]string) string {
	var out string
	n := 0
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			if n < 8 {
				out += fmt.Sprintf("  %s: got %.60q, want %.60q\n", k, g, w)
			}
			n++
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			if n < 8 {
				out += fmt.Sprintf("  %s: not wanted\n", k)
			}
			n++
		}
	}
	return fmt.Sprintf("%d keys differ\n%s", n, out)
}
