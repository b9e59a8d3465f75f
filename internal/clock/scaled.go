package clock

import (
	"sync"
	"time"
)

// Scaled is a Clock that runs speed times faster than the wall
// clock: it reads base when it is made, and every real second later it reads
// speed seconds later. Timers of d fire after d/speed of real time.
//
// Running the simulator, the relay and the baselines of relaybench on one
// scaled clock runs them with their production settings (10 requests per minute, 6 s slots,
// 10 min confirm timeout, a 60 s rate-limit window with its 1 s margin) in a
// fraction of the time, and every figure it measures is in real-rate time.
// The price: local processing time (HTTP, JSON, bbolt commits, JetStream
// round trips) counts speed times over, so latencies measured on it are
// upper bounds of the real ones.
type Scaled struct {
	speed float64
	base  time.Time // scaled time at real
	real  time.Time // wall time, with its monotonic reading
}

// NewScaled returns a clock that reads base now and runs speed times
// faster than the wall clock.
func NewScaled(base time.Time, speed float64) *Scaled {
	return &Scaled{speed: speed, base: base, real: time.Now()}
}

// ScaledAt returns a clock running speed times faster than the wall
// clock that read base at the wall time realUnixNano. Another process builds
// the same clock from the same three numbers.
func ScaledAt(base time.Time, realUnixNano int64, speed float64) *Scaled {
	now := time.Now()
	// Re-anchor on a monotonic reading so that the clock cannot jump when
	// the wall clock is stepped.
	elapsed := now.Sub(time.Unix(0, realUnixNano))
	return &Scaled{speed: speed, base: base.Add(time.Duration(float64(elapsed) * speed)), real: now}
}

// Now returns the scaled time.
func (c *Scaled) Now() time.Time {
	return c.base.Add(time.Duration(float64(time.Since(c.real)) * c.speed))
}

// Anchor returns the scaled time and the wall time (Unix ns) of one instant,
// from which ScaledAt builds the same clock elsewhere.
func (c *Scaled) Anchor() (time.Time, int64) {
	return c.base, c.real.UnixNano()
}

// Speed returns how many times faster than the wall clock c runs.
func (c *Scaled) Speed() float64 { return c.speed }

// ToReal converts a scaled duration into the real duration it takes.
func (c *Scaled) ToReal(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.speed)
}

// After returns a channel that receives the scaled time once d of scaled time
// has passed.
func (c *Scaled) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// NewTimer returns a timer that fires once d of scaled time has passed. Like
// timers since Go 1.23, it never delivers a value armed before the latest
// Stop or Reset.
func (c *Scaled) NewTimer(d time.Duration) Timer {
	t := &scaledTimer{clk: c, ch: make(chan time.Time, 1)}
	t.mu.Lock()
	t.armLocked(d)
	t.mu.Unlock()
	return t
}

// scaledTimer is a timer of a Scaled clock.
type scaledTimer struct {
	clk *Scaled
	ch  chan time.Time

	mu  sync.Mutex
	gen uint64 // bumped by Stop and Reset, so that older firings are dropped
	t   *time.Timer
}

// armLocked starts a real timer for d of scaled time; t.mu must be held.
func (t *scaledTimer) armLocked(d time.Duration) {
	gen := t.gen
	t.t = time.AfterFunc(max(t.clk.ToReal(d), 0), func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.gen != gen {
			return
		}
		select {
		case t.ch <- t.clk.Now():
		default:
		}
	})
}

// C returns the channel the timer fires on.
func (t *scaledTimer) C() <-chan time.Time { return t.ch }

// Stop prevents the timer from firing and reports whether it had not fired
// yet (or had fired into a channel nobody read).
func (t *scaledTimer) Stop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stopLocked()
}

func (t *scaledTimer) stopLocked() bool {
	t.gen++
	active := t.t.Stop()
	select {
	case <-t.ch:
		active = true
	default:
	}
	return active
}

// Reset makes the timer fire after d of scaled time from now, dropping any
// earlier firing, and reports whether it had been active.
func (t *scaledTimer) Reset(d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	active := t.stopLocked()
	t.armLocked(d)
	return active
}
