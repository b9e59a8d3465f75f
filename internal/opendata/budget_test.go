package opendata

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
)

var t0 = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

// waitAsync starts a budget wait and returns a channel that gets its start
// time (or the zero time on error).
func waitAsync(ctx context.Context, b *Budget, p Priority) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		at, err := b.wait(ctx, p, nil)
		if err != nil {
			at = time.Time{}
		}
		ch <- at
	}()
	return ch
}

func mustWaitNow(t *testing.T, b *Budget, p Priority) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	at, err := b.wait(ctx, p, nil)
	if err != nil {
		t.Fatalf("wait with a free slot: %v", err)
	}
	return at
}

func receive(t *testing.T, ch <-chan time.Time) time.Time {
	t.Helper()
	select {
	case at := <-ch:
		return at
	case <-time.After(2 * time.Second):
		t.Fatal("waiter did not get a slot")
	}
	return time.Time{}
}

func TestBudgetNeverStartsMoreThanLimitInAWindow(t *testing.T) {
	clk := clock.NewFake(t0)
	b := newBudget(clk, 10)
	for i := range 10 {
		if at := mustWaitNow(t, b, PriorityInventory); !at.Equal(t0) {
			t.Fatalf("start %d at %s, want %s", i, at, t0)
		}
	}
	if got := b.InUse(); got != 10 {
		t.Fatalf("InUse = %d, want 10", got)
	}
	want := t0.Add(budgetWindow + budgetMargin)
	if got := b.NextFree(); !got.Equal(want) {
		t.Fatalf("NextFree = %s, want %s", got, want)
	}
	ch := waitAsync(context.Background(), b, PriorityInventory)
	if !clk.BlockUntil(1, time.Second) {
		t.Fatal("eleventh waiter did not sleep on the clock")
	}
	clk.Advance(budgetWindow) // 60 s: still inside window + margin
	select {
	case <-ch:
		t.Fatal("eleventh request started within 60 s of the first ten")
	case <-time.After(20 * time.Millisecond):
	}
	if got := b.InUse(); got != 0 {
		t.Fatalf("InUse 60 s later = %d, want 0 (starts in the last 60 s)", got)
	}
	clk.Advance(budgetMargin)
	if at := receive(t, ch); !at.Equal(want) {
		t.Fatalf("eleventh start at %s, want %s", at, want)
	}
}

func TestBudgetServesHigherPriorityFirst(t *testing.T) {
	clk := clock.NewFake(t0)
	b := newBudget(clk, 1)
	mustWaitNow(t, b, PriorityInventory)

	inventory := waitAsync(context.Background(), b, PriorityInventory)
	clk.BlockUntil(1, time.Second)
	sweep := waitAsync(context.Background(), b, PrioritySweep)
	alarm := waitAsync(context.Background(), b, PriorityAlarm)
	// Give the late waiters time to register before the slot frees.
	deadline := time.Now().Add(time.Second)
	for b.Waiting() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	slot := budgetWindow + budgetMargin
	order := []struct {
		name string
		ch   <-chan time.Time
	}{{"alarm", alarm}, {"sweep", sweep}, {"inventory", inventory}}
	for i, w := range order {
		if !clk.BlockUntil(1, time.Second) {
			t.Fatalf("%s: no waiter sleeping on the clock", w.name)
		}
		clk.Advance(slot)
		want := t0.Add(time.Duration(i+1) * slot)
		if at := receive(t, w.ch); !at.Equal(want) {
			t.Fatalf("%s started at %s, want %s (served %d of 3)", w.name, at, want, i+1)
		}
	}
}

func TestBudgetAIMD(t *testing.T) {
	clk := clock.NewFake(t0)
	b := newBudget(clk, 10)
	start := mustWaitNow(t, b, PriorityAlarm)
	if !b.signal(start, 0) {
		t.Fatal("first signal did not halve the limit")
	}
	if got := b.Limit(); got != 5 {
		t.Fatalf("limit after a signal = %d, want 5", got)
	}
	if b.signal(start, 0) {
		t.Fatal("a second signal from a request started before the halving halved again")
	}
	clk.Advance(time.Second)
	later := mustWaitNow(t, b, PriorityAlarm)
	if !b.signal(later, 0) {
		t.Fatal("a signal from a request started after the halving did not halve")
	}
	if got := b.Limit(); got != 2 {
		t.Fatalf("limit after two halvings = %d, want 2", got)
	}
	clk.Advance(budgetWindow - time.Second)
	if got := b.Limit(); got != 2 {
		t.Fatalf("limit grew before a full window: %d", got)
	}
	for want := 3; want <= 10; want++ {
		clk.Advance(time.Second)
		if got := b.Limit(); got != want {
			t.Fatalf("limit after %d clean windows = %d, want %d", want-2, got, want)
		}
		clk.Advance(budgetWindow - time.Second)
	}
	clk.Advance(10 * budgetWindow)
	if got := b.Limit(); got != 10 {
		t.Fatalf("limit grew past the configured rate: %d", got)
	}
	for range 20 {
		b.signal(clk.Now(), 0)
		clk.Advance(time.Second)
	}
	if got := b.Limit(); got != 1 {
		t.Fatalf("limit after many signals = %d, want the floor 1", got)
	}
}

func TestBudgetHonoursRetryAfter(t *testing.T) {
	clk := clock.NewFake(t0)
	b := newBudget(clk, 10)
	start := mustWaitNow(t, b, PriorityAlarm)
	b.signal(start, 30*time.Second)
	if got, want := b.NextFree(), t0.Add(30*time.Second); !got.Equal(want) {
		t.Fatalf("NextFree after Retry-After 30s = %s, want %s", got, want)
	}
	ch := waitAsync(context.Background(), b, PriorityAlarm)
	clk.BlockUntil(1, time.Second)
	clk.Advance(30 * time.Second)
	if at := receive(t, ch); !at.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("start after Retry-After at %s", at)
	}
	b.signal(clk.Now(), 24*time.Hour)
	if got, want := b.NextFree(), clk.Now().Add(maxRetryAfter); !got.Equal(want) {
		t.Fatalf("NextFree after Retry-After 24h = %s, want capped at %s", got, want)
	}
}

func TestBudgetWaiterLeavesOnCancel(t *testing.T) {
	clk := clock.NewFake(t0)
	b := newBudget(clk, 1)
	mustWaitNow(t, b, PriorityInventory)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := b.wait(ctx, PriorityAlarm, nil)
		errc <- err
	}()
	clk.BlockUntil(1, time.Second)
	low := waitAsync(context.Background(), b, PriorityInventory)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait returned %v, want context.Canceled", err)
	}
	clk.BlockUntil(1, time.Second)
	clk.Advance(budgetWindow + budgetMargin)
	if at := receive(t, low); at.IsZero() {
		t.Fatal("the remaining waiter failed")
	}
	if got := b.InUse(); got != 1 {
		t.Fatalf("InUse = %d, want 1: the cancelled wait must record no start", got)
	}
}

func TestARestartedClientHonoursThePreviousProcessesStarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db.budget")
	clk := clock.NewFake(time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC))
	first := newBudget(clk, 10)
	for i := 0; i < 10; i++ {
		if _, err := first.wait(context.Background(), PriorityAlarm, nil); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	if err := writeBudgetFile(path, first.Starts()); err != nil {
		t.Fatal(err)
	}
	// The first process dies; a new one starts 20 s after the last request.
	clk.Advance(10 * time.Second)
	starts, err := readBudgetFile(path)
	if err != nil || len(starts) != 10 {
		t.Fatalf("read %d starts, err %v", len(starts), err)
	}
	second := newBudget(clk, 10)
	second.Preload(starts)
	if second.InUse() != 10 {
		t.Fatalf("in use after preload = %d, want 10", second.InUse())
	}
	// The earliest slot frees 61 s after the first start, 8:01:01.
	if want := time.Date(2026, 11, 22, 8, 1, 1, 0, time.UTC); !second.NextFree().Equal(want) {
		t.Fatalf("next free = %v, want %v", second.NextFree(), want)
	}
	stepped := newBudget(clk, 10)
	stepped.Preload([]time.Time{clk.Now().Add(time.Hour)})
	if stepped.InUse() != 1 {
		t.Fatalf("a start after now (the clock stepped back) was dropped: in use %d", stepped.InUse())
	}
	missing, err := readBudgetFile(filepath.Join(t.TempDir(), "none"))
	if err != nil || missing != nil {
		t.Fatalf("missing file: %v %v", missing, err)
	}
	if err := os.WriteFile(path, []byte("12 yesterday\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readBudgetFile(path); err == nil || !strings.Contains(err.Error(), `"yesterday"`) {
		t.Fatalf("bad file: %v", err)
	}
}
