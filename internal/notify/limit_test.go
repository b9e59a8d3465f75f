package notify_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify"
)

// TestLimiterWaitPastTheDeadlineReservesNothing: an attempt bounded to less
// than the wait gets a *WaitError naming the wait at once, and spends no
// slot, so that retrying after it finds the slot free.
func TestLimiterWaitPastTheDeadlineReservesNothing(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	l := notify.NewLimiter(clk, notify.Window{N: 1, Per: time.Minute})
	if err := l.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		err := l.Wait(ctx)
		var we *notify.WaitError
		if !errors.As(err, &we) || we.Wait != time.Minute {
			t.Fatalf("Wait = %v, want a WaitError of 1m", err)
		}
		if res := notify.WaitResult(err); !res.Retry || res.RetryAfter != time.Minute {
			t.Fatalf("WaitResult = %+v, want a retry after 1m", res)
		}
	}
	clk.Advance(time.Minute)
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after the minute: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the slot after the minute was taken by the waits that gave up")
	}
}

// TestLimiterBlockHoldsBackAWaitAlreadyAsleep: a rate-limit answer that
// arrives while a message waits for its slot holds that message back too.
func TestLimiterBlockHoldsBackAWaitAlreadyAsleep(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	l := notify.NewLimiter(clk, notify.Window{N: 1, Per: 10 * time.Second})
	if err := l.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := make(chan time.Time, 1)
	go func() {
		if err := l.Wait(context.Background()); err == nil {
			done <- clk.Now()
		}
	}()
	if !clk.BlockUntil(1, 5*time.Second) {
		t.Fatal("the second Wait did not go to sleep")
	}
	l.Block(time.Minute)
	for clk.Now().Before(time.Unix(0, 0).Add(2 * time.Minute)) {
		select {
		case at := <-done:
			if want := time.Unix(0, 0).Add(time.Minute); at.Before(want) {
				t.Fatalf("the waiting message went out at %s, inside the block until %s", at, want)
			}
			return
		default:
		}
		if clk.Waiters() > 0 {
			next, _ := clk.NextDeadline()
			clk.Set(next)
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the waiting message never went out")
}
