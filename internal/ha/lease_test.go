package ha_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relay-energy/relay/internal/ha"
	"github.com/relay-energy/relay/internal/testwait"
)

const leaseTTL = 2 * time.Second

func openLeases(t *testing.T, js jetstream.JetStream, holder string) *ha.Leases {
	t.Helper()
	ls, err := ha.OpenLeases(ctxTimeout(t, 10*time.Second), js, ha.LeaseConfig{
		Bucket: "leases", Replicas: 3, TTL: leaseTTL, Holder: holder, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

func release(t *testing.T, l *ha.Lease) {
	t.Helper()
	if err := l.Release(ctxTimeout(t, 2*time.Second)); err != nil {
		t.Fatalf("release %s: %v", l.Tenant(), err)
	}
}

// TestALeaseHasOneHolderAcrossRenewalsReleasesAndMarkers: while a replica
// renews its lease, another cannot acquire it, for several TTLs; a release
// hands it over at once (Create over the delete marker); an operator's purge
// takes it from its holder at the next renewal and leaves it free.
func TestALeaseHasOneHolderAcrossRenewalsReleasesAndMarkers(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	a := openLeases(t, newJS(t, c.Connect()), "replica-a")
	bjs := newJS(t, c.Connect())
	b := openLeases(t, bjs, "replica-b")

	la, err := a.Acquire(ctxTimeout(t, 5*time.Second), "tenant-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(t.Context(), "tenant one"); err == nil || !strings.Contains(err.Error(), `tenant id "tenant one"`) {
		t.Fatalf("Acquire of a tenant id with a space = %v", err)
	}
	token := la.Token()
	for end := time.Now().Add(3 * leaseTTL); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if _, err := b.Acquire(ctxTimeout(t, 2*time.Second), "tenant-1"); !errors.Is(err, ha.ErrHeld) {
			t.Fatalf("another replica's Acquire while the lease is renewed = %v, want ErrHeld", err)
		}
	}
	if err := la.Err(); err != nil {
		t.Fatalf("the renewed lease ended: %v", err)
	}
	if la.Token() != token || la.Revision() <= token {
		t.Fatalf("after renewals token %d revision %d; want the token kept (%d) and a later revision", la.Token(), la.Revision(), token)
	}

	release(t, la)
	if !errors.Is(la.Err(), ha.ErrReleased) {
		t.Fatalf("Err after Release = %v, want ErrReleased", la.Err())
	}
	select {
	case <-la.Done():
	default:
		t.Fatal("Done is open after Release")
	}
	// A follower may answer the read behind Create with the value before
	// the delete for a moment: the next attempt succeeds, well before the
	// TTL.
	released := time.Now()
	var lb *ha.Lease
	testwait.For(t, leaseTTL/2, "the lease could not be acquired within TTL/2 of its release", func() bool {
		lb, err = b.Acquire(ctxTimeout(t, 2*time.Second), "tenant-1")
		if err != nil && !errors.Is(err, ha.ErrHeld) {
			t.Fatalf("Acquire after a release: %v", err)
		}
		return err == nil
	})
	t.Logf("acquired %v after the release", time.Since(released).Round(time.Millisecond))
	if lb.Token() <= la.Revision() {
		t.Fatalf("the next holder's token %d is not above the last revision of the one before, %d", lb.Token(), la.Revision())
	}

	kv, err := bjs.KeyValue(ctxTimeout(t, 5*time.Second), "leases")
	if err != nil {
		t.Fatal(err)
	}
	purged := time.Now()
	if err := kv.Purge(ctxTimeout(t, 5*time.Second), "tenant-1"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lb.Done():
		t.Logf("a purged lease was lost %v after the purge", time.Since(purged).Round(time.Millisecond))
	case <-time.After(leaseTTL):
		t.Fatal("a purged lease was still held a TTL later")
	}
	if !errors.Is(lb.Err(), ha.ErrLost) {
		t.Fatalf("Err of a purged lease = %v, want ErrLost", lb.Err())
	}
	release(t, lb)
	lc, err := a.Acquire(ctxTimeout(t, 5*time.Second), "tenant-1")
	if err != nil {
		t.Fatalf("Acquire over a purge marker: %v", err)
	}
	release(t, lc)
}

// TestALeaseOverwrittenByAnotherWriterIsLostAtOnce: a renewal answered with a
// revision mismatch ends the lease at once, not at its deadline.
func TestALeaseOverwrittenByAnotherWriterIsLostAtOnce(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	js := newJS(t, c.Connect())
	ls := openLeases(t, js, "replica-a")
	l, err := ls.Acquire(ctxTimeout(t, 5*time.Second), "tenant-1")
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctxTimeout(t, 5*time.Second), "leases")
	if err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	if _, err := kv.Put(ctxTimeout(t, 5*time.Second), "tenant-1", []byte(`{"holder":"intruder"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
		t.Logf("lost %v after the key was overwritten", time.Since(written).Round(time.Millisecond))
	case <-time.After(leaseTTL / 2):
		t.Fatal("the lease was still held TTL/2 after another writer took the key; a renewal every TTL/6 must have seen it")
	}
	if !errors.Is(l.Err(), ha.ErrLost) {
		t.Fatalf("Err = %v, want ErrLost", l.Err())
	}
	release(t, l)
	e, err := kv.Get(ctxTimeout(t, 5*time.Second), "tenant-1")
	if err != nil || string(e.Value()) != `{"holder":"intruder"}` {
		t.Fatalf("after releasing a lost lease the key holds %v (%v); the other writer's value must stay", e, err)
	}
}

// TestACutOffHolderGivesItsLeaseUpBeforeTheServersExpireIt: a replica that
// cannot reach NATS (its connection silently partitioned) loses its lease on
// its own clock while the servers still hold the key, so no other replica can
// have acquired it yet; another acquires it within 2 × TTL of the cut.
func TestACutOffHolderGivesItsLeaseUpBeforeTheServersExpireIt(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	p := c.StartProxy(0)
	a := openLeases(t, newJS(t, connectVia(t, p)), "replica-a")
	b := openLeases(t, newJS(t, c.Connect()), "replica-b")
	la, err := a.Acquire(ctxTimeout(t, 5*time.Second), "tenant-1")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(leaseTTL / 2) // a few renewals
	cut := time.Now()
	p.Blackhole()
	select {
	case <-la.Done():
	case <-time.After(leaseTTL):
		t.Fatalf("the cut-off holder still held its lease a TTL after the cut")
	}
	lost := time.Now()
	if !errors.Is(la.Err(), ha.ErrLost) {
		t.Fatalf("Err = %v, want ErrLost", la.Err())
	}
	if _, err := b.Acquire(ctxTimeout(t, 2*time.Second), "tenant-1"); !errors.Is(err, ha.ErrHeld) {
		t.Fatalf("Acquire by another replica the moment the holder gave up = %v; want ErrHeld: the servers must still hold the key", err)
	}
	var lb *ha.Lease
	testwait.For(t, 2*leaseTTL, "no other replica acquired the lease within 2 × TTL of the cut", func() bool {
		lb, err = b.Acquire(ctxTimeout(t, 2*time.Second), "tenant-1")
		return err == nil
	})
	taken := time.Now()
	t.Logf("TTL %v: the holder gave up %v after the cut; another replica held it %v after the cut (%v after the give-up)",
		leaseTTL, lost.Sub(cut).Round(time.Millisecond), taken.Sub(cut).Round(time.Millisecond), taken.Sub(lost).Round(time.Millisecond))
	release(t, lb)
	// Releasing a lease lost while NATS is unreachable returns nil: the
	// servers expire it anyway.
	if err := la.Release(ctxTimeout(t, 500*time.Millisecond)); err != nil {
		t.Fatalf("Release of a lease lost while cut off: %v", err)
	}
}

// TestLeasesRefuseBadSettings: the errors name the value and what is wanted,
// before anything reaches NATS.
func TestLeasesRefuseBadSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  ha.LeaseConfig
		want string
	}{
		{"short TTL", ha.LeaseConfig{TTL: 100 * time.Millisecond, Holder: "a"}, "TTL 100ms: want at least 1s"},
		{"bad holder", ha.LeaseConfig{TTL: time.Second, Holder: "a b"}, `replica id "a b" cannot be a KV key`},
		{"bad bucket", ha.LeaseConfig{Bucket: "a.b", TTL: time.Second, Holder: "a"}, `lease bucket "a.b"`},
		{"replicas", ha.LeaseConfig{Replicas: 7, TTL: time.Second, Holder: "a"}, "7 replicas: want 1 to 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ha.OpenLeases(t.Context(), nil, tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("OpenLeases = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
