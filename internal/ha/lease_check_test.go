package ha

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relay-energy/relay/internal/natstest"
)

// TestAHolderPausedPastItsLeaseFindsItLostAtItsFirstCheck: a process paused
// (SIGSTOP) past its lease's validity resumes with its monotonic clock gone
// on; the first Check after it, before the renewal goroutine ran, says the
// lease is lost and ends its context, every later Check says so too, and
// the release frees the key for the next holder at once.
func TestAHolderPausedPastItsLeaseFindsItLostAtItsFirstCheck(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 1)
	js, err := jetstream.New(c.Connect())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// Renewals every 10 s: none runs during the test.
	cfg := LeaseConfig{Bucket: "leases", TTL: time.Minute, Holder: "paused"}
	ls, err := OpenLeases(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ls.Acquire(ctx, "tenant-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Check(); err != nil {
		t.Fatalf("Check of a lease just acquired = %v, want nil", err)
	}

	// The pause: when the process runs again, the monotonic clock is past
	// the validity the last renewal gave.
	l.mu.Lock()
	l.validUntil = time.Now().Add(-time.Millisecond)
	l.mu.Unlock()
	for i := range 2 {
		if err := l.Check(); !errors.Is(err, ErrLost) {
			t.Fatalf("Check %d after the pause = %v, want ErrLost", i+1, err)
		}
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("the lease's context was not ended by the Check that found it lost")
	}

	if err := l.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	cfg.Holder = "next"
	next, err := OpenLeases(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	nl, err := next.Acquire(ctx, "tenant-1")
	if err != nil {
		t.Fatalf("the next holder cannot acquire the lease after the release: %v", err)
	}
	if err := nl.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
