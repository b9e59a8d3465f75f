// Package clock lets every time-dependent part of relay run on a real clock in
// production and on a fake, hand-advanced clock in tests, so that tests about
// minutes and hours run in milliseconds and never sleep.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers. The zero value of no type implements
// it; use Real or NewFake.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has passed.
	After(d time.Duration) <-chan time.Time
	// NewTimer returns a Timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	// C returns the channel the timer fires on.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was stopped
	// before it fired.
	Stop() bool
	// Reset changes the timer to fire after d; it reports whether the timer
	// had been active.
	Reset(d time.Duration) bool
}

// Real returns the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (realClock) NewTimer(d time.Duration) Timer         { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Fake is a Clock that only moves when told to. Timers fire, in order of their
// deadlines, when Advance or Set moves the time past them. It is safe for
// concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever a timer is added
}

// NewFake returns a fake clock that reads t until it is advanced.
func NewFake(t time.Time) *Fake {
	return &Fake{now: t, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After returns a channel that receives the fake time once it has moved d past now.
func (f *Fake) After(d time.Duration) <-chan time.Time { return f.NewTimer(d).C() }

// NewTimer returns a timer that fires when the fake time reaches now+d. A
// timer with d <= 0 fires at once.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	f.arm(t, d)
	return t
}

// arm schedules t at now+d; f.mu must be held.
func (f *Fake) arm(t *fakeTimer, d time.Duration) {
	t.at = f.now.Add(d)
	if d <= 0 {
		t.fire(f.now)
		return
	}
	t.active = true
	f.timers = append(f.timers, t)
	close(f.changed)
	f.changed = make(chan struct{})
}

// Advance moves the fake time forward by d, firing every timer due on the way.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the fake time to t (never backwards), firing every timer due by then.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.Before(f.now) {
		return
	}
	sort.SliceStable(f.timers, func(i, j int) bool { return f.timers[i].at.Before(f.timers[j].at) })
	keep := f.timers[:0]
	for _, tm := range f.timers {
		if !tm.active {
			continue
		}
		if !tm.at.After(t) {
			tm.active = false
			tm.fire(tm.at)
			continue
		}
		keep = append(keep, tm)
	}
	f.timers = keep
	f.now = t
}

// Waiters returns how many timers are pending. Tests use it to know that the
// code under test has gone to sleep before they advance the clock.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, t := range f.timers {
		if t.active {
			n++
		}
	}
	return n
}

// BlockUntil waits until at least n timers are pending, or returns false when
// the real-time limit passes first.
func (f *Fake) BlockUntil(n int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		f.mu.Lock()
		active := 0
		for _, t := range f.timers {
			if t.active {
				active++
			}
		}
		changed := f.changed
		f.mu.Unlock()
		if active >= n {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		select {
		case <-changed:
		case <-time.After(min(left, 10*time.Millisecond)):
		}
	}
}

// NextDeadline returns the time the earliest pending timer fires at, and
// false when none is pending.
func (f *Fake) NextDeadline() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var next time.Time
	found := false
	for _, t := range f.timers {
		if t.active && (!found || t.at.Before(next)) {
			next, found = t.at, true
		}
	}
	return next, found
}

type fakeTimer struct {
	f      *Fake
	c      chan time.Time
	at     time.Time
	active bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

// fire delivers without blocking; the channel has room for one value, as a
// time.Timer's does.
func (t *fakeTimer) fire(now time.Time) {
	select {
	case t.c <- now:
	default:
	}
}

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.active
	t.active = false
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.active
	t.active = false
	keep := t.f.timers[:0]
	for _, other := range t.f.timers {
		if other != t {
			keep = append(keep, other)
		}
	}
	t.f.timers = keep
	t.f.arm(t, d)
	return was
}
