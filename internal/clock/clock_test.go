package clock

import (
	"testing"
	"time"
)

func TestFakeFiresTimersInDeadlineOrderWhenAdvanced(t *testing.T) {
	start := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	f := NewFake(start)
	late := f.NewTimer(2 * time.Minute)
	early := f.After(time.Minute)
	if f.Waiters() != 2 {
		t.Fatalf("waiters = %d, want 2", f.Waiters())
	}
	f.Advance(59 * time.Second)
	select {
	case <-early:
		t.Fatal("timer fired before its deadline")
	default:
	}
	f.Advance(time.Second)
	if got := <-early; !got.Equal(start.Add(time.Minute)) {
		t.Fatalf("fired at %v, want %v", got, start.Add(time.Minute))
	}
	if f.Waiters() != 1 {
		t.Fatalf("waiters = %d, want 1", f.Waiters())
	}
	if !late.Reset(time.Second) {
		t.Fatal("Reset of an active timer reported inactive")
	}
	if f.Waiters() != 1 {
		t.Fatalf("waiters after Reset = %d, want 1", f.Waiters())
	}
	f.Advance(time.Second)
	<-late.C()
	if late.Stop() {
		t.Fatal("Stop after firing reported active")
	}
}

func TestFakeBlockUntilSeesATimerAddedByAnotherGoroutine(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	done := make(chan struct{})
	go func() {
		<-f.After(time.Hour)
		close(done)
	}()
	if !f.BlockUntil(1, 5*time.Second) {
		t.Fatal("the goroutine's timer never became pending")
	}
	f.Advance(time.Hour)
	<-done
	if f.BlockUntil(1, 20*time.Millisecond) {
		t.Fatal("BlockUntil reported a pending timer after it fired")
	}
}
