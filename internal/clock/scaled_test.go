package clock

import (
	"testing"
	"time"
)

func TestScaledClockRunsFasterThanRealTime(t *testing.T) {
	base := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	c := NewScaled(base, 1000)
	began := time.Now()
	fired := <-c.After(30 * time.Second)
	real := time.Since(began)
	if real < 25*time.Millisecond || real > 2*time.Second {
		t.Fatalf("a 30 s timer at 1000× took %s of real time, want about 30ms", real)
	}
	if d := fired.Sub(base); d < 30*time.Second {
		t.Fatalf("timer fired at %s after base, want at least 30s", d)
	}
	if now := c.Now(); now.Before(fired) {
		t.Fatalf("Now() = %s is before the firing time %s", now, fired)
	}
}

func TestScaledTimerStopAndReset(t *testing.T) {
	c := NewScaled(time.Now(), 1000)
	tm := c.NewTimer(20 * time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	select {
	case <-tm.C():
		t.Fatal("a stopped timer fired")
	case <-time.After(50 * time.Millisecond):
	}
	if tm.Reset(10 * time.Second) {
		t.Fatal("Reset of a stopped timer reported it active")
	}
	select {
	case <-tm.C():
	case <-time.After(2 * time.Second):
		t.Fatal("a reset timer did not fire")
	}
	// A firing nobody read is dropped by Reset: the channel then delivers
	// the new deadline only.
	tm = c.NewTimer(0)
	time.Sleep(20 * time.Millisecond)
	if !tm.Reset(time.Hour) {
		t.Fatal("Reset of a timer whose firing was not read reported it inactive")
	}
	select {
	case <-tm.C():
		t.Fatal("a stale firing was delivered after Reset")
	case <-time.After(30 * time.Millisecond):
	}
	tm.Stop()
}

func TestScaledClockAtRebuildsTheSameClockElsewhere(t *testing.T) {
	c := NewScaled(time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC), 600)
	base, real := c.Anchor()
	other := ScaledAt(base, real, 600)
	if d := other.Now().Sub(c.Now()); d < -time.Second || d > time.Second {
		t.Fatalf("the rebuilt clock is %s off, want within a second of scaled time", d)
	}
}
