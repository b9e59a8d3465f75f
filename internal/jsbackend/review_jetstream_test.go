package jsbackend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/testwait"
)

// Tests from a review of the JetStream backend. Each failed on the code it
// was written against; the comment says what an operator would see.

// incompressible returns n ongoing alarms whose raw records carry 1,200
// random bytes each, so that their changeset hardly compresses.
func incompressible(prefix string, n int) []event.Alarm {
	var obs []event.Alarm
	for i := range n {
		x := ongoing(fmt.Sprintf("%s-%d", prefix, i))
		noise := make([]byte, 1200)
		_, _ = rand.Read(noise)
		x.Raw = fmt.Appendf(nil, `{"originId":%q,"status":1,"noise":%q}`, x.OriginID, hex.EncodeToString(noise))
		obs = append(obs, x)
	}
	return obs
}

// openOn opens the state of opts.Tenant over nc in a new directory, as a
// new holder; the store is closed when the test ends.
func openOn(t *testing.T, nc *nats.Conn, opts Options, clk clock.Clock) (*store.Store, error) {
	t.Helper()
	if opts.Holder == "" {
		opts.Holder = fmt.Sprintf("replica-%d", opts.Fence)
	}
	b, err := New(nc, opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(filepath.Join(t.TempDir(), "relay.db"), store.Options{Clock: clk, Backend: b})
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, err
}

// since returns the bytes of changesets b counts since the last snapshot.
func since(b *jsBackend) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.since
}

// A replica counts only the changesets it wrote itself toward the next
// snapshot (jsBackend.since starts at 0 at every restore), so a tenant
// whose holders change before any one of them has written SnapshotAfter
// bytes (a rolling deploy every day, a replica that restarts, leases that
// move) is never snapshotted: the operator sees the state stream grow
// without bound and every takeover replay every changeset since the
// tenant's first day, slower each time.
func TestReviewJetStreamSnapshotCountsChangesetsOfEarlierHolders(t *testing.T) {
	needsCluster(t)
	fake := clock.NewFake(t0)
	const tenant, after = "review-since", 64 << 10
	// write commits about 0.6 × SnapshotAfter of changesets.
	write := func(s *store.Store, bk *jsBackend, name string) {
		start := since(bk)
		for i := 0; since(bk)-start < after*6/10; i++ {
			apply(t, s, store.Batch{Observed: incompressible(fmt.Sprintf("%s-%d", name, i), 10)}, to("bus"))
		}
	}
	a, ab := openHolderBackend(t, tenant, 1, fake, after)
	write(a, ab, "a")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if seq := lastSnapshotSeq(t, tenant); seq != 0 {
		t.Fatalf("a snapshot after %d bytes of changesets, under the %d that call for one", since(ab), after)
	}
	// The stream now holds about 0.6 × SnapshotAfter of changesets; the
	// next holder adds as much again, so that a snapshot is due.
	b, bb := openHolderBackend(t, tenant, 2, fake, after)
	write(b, bb, "b")
	testwait.For(t, 30*time.Second, "snapshot once the stream holds 1.2 × SnapshotAfter of changesets, written by two holders",
		func() bool { return lastSnapshotSeq(t, tenant) > 0 })
}

// Switching RELAY_STATE_BACKEND from bbolt to jetstream with the same
// RELAY_STATE_DIR: the first Open on JetStream finds the tenant's stream
// empty and deletes the bbolt file, the only copy of the state, without a
// word. The operator sees relay notify a start for every ongoing alarm
// again (and lose the Slack threads, the dead letters and the journal). It
// should refuse (naming the file and what to do) or import the file.
func TestReviewJetStreamFirstOpenDoesNotDeleteABboltStore(t *testing.T) {
	needsCluster(t)
	fake := clock.NewFake(t0)
	path := filepath.Join(t.TempDir(), "relay.db")
	s, err := store.Open(path, store.Options{Clock: fake, Backend: store.Bolt()})
	if err != nil {
		t.Fatal(err)
	}
	apply(t, s, store.Batch{Observed: []event.Alarm{ongoing("kept")}}, to("bus"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	bk, err := New(suite.nc, Options{Tenant: "review-migrate", Fence: 1, Holder: "replica-1", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	js, err := store.Open(path, store.Options{Clock: fake, Backend: bk})
	if err != nil {
		t.Logf("refused: %v", err)
		return
	}
	defer js.Close()
	if _, found, err := js.Alarm("kept"); err != nil || !found {
		t.Fatalf("the first Open on JetStream of a bbolt store's file: alarm %q found=%v (%v): the bbolt state was deleted", "kept", found, err)
	}
	// The file was imported: another replica restores it from JetStream.
	other := openHolder(t, "review-migrate", 2, fake, 1<<40)
	if _, found, err := other.Alarm("kept"); err != nil || !found {
		t.Fatalf("a replica taking the imported tenant over: alarm %q found=%v (%v)", "kept", found, err)
	}
	// A second bbolt file for a tenant JetStream holds already is refused,
	// not imported over it, and left in place.
	path2 := filepath.Join(t.TempDir(), "relay.db")
	s2, err := store.Open(path2, store.Options{Clock: fake, Backend: store.Bolt()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	bk3, err := New(suite.nc, Options{Tenant: "review-migrate", Fence: 3, Holder: "replica-3", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(path2, store.Options{Clock: fake, Backend: bk3}); err == nil || !strings.Contains(err.Error(), "already holds the state of tenant review-migrate") {
		t.Fatalf("Open on JetStream of a second bbolt file of a tenant JetStream holds: %v, want a refusal", err)
	}
	if _, err := os.Stat(path2); err != nil {
		t.Fatalf("the refused file: %v", err)
	}
}

// createStateStream creates stream name on subjects prefix.> as an
// operator might have, with cfg's other fields, and deletes it when the
// test ends.
func createStateStream(t *testing.T, nc *nats.Conn, cfg jetstream.StreamConfig) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, cfg.Name)
	})
}

// An existing state stream with a maximum message size (max_msg_size, which
// the operator may set like any limit) smaller than the backend's parts
// (the server's payload limit less 8 KiB, up to 1 MiB): Open accepts it,
// and every transaction whose changeset is larger than that limit is
// refused by the server ("message size exceeds maximum allowed"). The
// operator sees the first large poll result fail, then the same poll fail
// again forever, with no alarm relayed. Open should refuse the stream, or
// the parts should fit under its limit.
func TestReviewJetStreamStreamMaxMsgSizeIsHonoured(t *testing.T) {
	needsCluster(t)
	const stream, prefix = "REVIEW_MAXMSG", "review.maxmsg"
	createStateStream(t, suite.nc, jetstream.StreamConfig{
		Name: stream, Subjects: []string{prefix + ".>"}, Storage: jetstream.FileStorage, Replicas: 3,
		Duplicates: 2 * time.Minute, AllowAtomicPublish: true, MaxMsgSize: 128 << 10,
	})
	fake := clock.NewFake(t0)
	opts := Options{Tenant: "t", Fence: 1, Stream: stream, Prefix: prefix, Replicas: 3}
	a, err := openOn(t, suite.nc, opts, fake)
	if err != nil {
		t.Logf("refused: %v", err)
		return
	}
	if _, err := a.Apply(context.Background(), store.Batch{Observed: incompressible("big", 300), DetectedAt: fake.Now()}, to("bus")); err != nil {
		t.Fatalf("Open accepted a stream of max_msg_size 128 KiB, and an Apply of 300 records then fails: %v", err)
	}
	opts.Fence = 2
	b, err := openOn(t, suite.nc, opts, fake)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := dump(t, b), dump(t, a); !reflect.DeepEqual(got, want) {
		t.Fatalf("the restored state differs:\n%s", diffKeys(got, want))
	}
}

// An existing state stream in memory storage (as an operator might create
// it "for speed"): Open accepts it, although the state of every tenant is
// then lost when the servers restart together (an upgrade, a power cut).
// The operator sees the next holder restore an empty state without an
// error, and relay notify a start for every ongoing alarm again. Open
// should refuse a state stream that is not on file storage.
func TestReviewJetStreamStateSurvivesARestartOfTheServers(t *testing.T) {
	needsCluster(t)
	const stream, prefix = "REVIEW_MEMORY", "review.memory"
	createStateStream(t, suite.nc, jetstream.StreamConfig{
		Name: stream, Subjects: []string{prefix + ".>"}, Storage: jetstream.MemoryStorage, Replicas: 3,
		Duplicates: 2 * time.Minute, AllowAtomicPublish: true,
	})
	fake := clock.NewFake(t0)
	opts := Options{Tenant: "t", Fence: 1, Stream: stream, Prefix: prefix, Replicas: 3, Timeout: 5 * time.Second}
	a, err := openOn(t, suite.nc, opts, fake)
	if err != nil {
		if !strings.Contains(err.Error(), "is kept in memory") {
			t.Fatalf("refused for another reason: %v", err)
		}
		t.Logf("refused: %v", err)
		return
	}
	// What an accepted memory stream would lose: the servers restart.
	c := suite.cluster
	nc := suite.nc
	apply(t, a, store.Batch{Observed: []event.Alarm{ongoing("kept")}}, to("bus"))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range c.Size() {
		c.Stop(i)
	}
	for i := range c.Size() {
		c.Restart(i)
	}
	c.WaitReady(3)
	opts.Fence = 2
	var b *store.Store
	deadline := time.Now().Add(60 * time.Second)
	for {
		// The stream's leader may take a moment to be elected.
		if b, err = openOn(t, nc, opts, fake); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("open after the restart: %v", err)
	}
	if _, found, err := b.Alarm("kept"); err != nil || !found {
		t.Fatalf("after a restart of the servers the state is gone: alarm %q found=%v (%v)", "kept", found, err)
	}
}
