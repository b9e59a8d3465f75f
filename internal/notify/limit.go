package notify

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/relay-energy/relay/internal/clock"
)

// Window is one rate limit of a vendor: at most N messages in any Per.
type Window struct {
	N   int
	Per time.Duration
}

// Limiter keeps the messages to one destination (a Slack channel, a DingTalk
// robot, a PagerDuty routing key) within the vendor's limits: each Wait
// reserves the earliest time at which one more message keeps every window,
// and a vendor's rate-limit answer can hold every message back for a while.
// Sinks that post to the same destination share one Limiter (see Limits). It
// is safe for concurrent use.
type Limiter struct {
	clock   clock.Clock
	windows []Window
	keep    int

	mu      sync.Mutex
	sent    []time.Time // reserved times, oldest first, at most keep
	blocked time.Time   // no message before this
}

// NewLimiter returns a Limiter of windows on clk.
func NewLimiter(clk clock.Clock, windows ...Window) *Limiter {
	l := &Limiter{clock: clk, windows: windows}
	for _, w := range windows {
		l.keep = max(l.keep, w.N)
	}
	return l
}

// WaitError is what Wait returns when the next message may not be sent
// before ctx's deadline: Wait then reserves nothing, and the caller should
// try again after Wait (a Result's RetryAfter).
type WaitError struct {
	// Wait is how long until a message may be sent.
	Wait time.Duration
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("the destination's rate limit allows the next message in %s, after this attempt's deadline", e.Wait.Round(time.Millisecond))
}

// Wait blocks until one more message may be sent, or ctx ends. The time it
// reserves stays reserved even when ctx ends first: a limit is never
// exceeded by a cancelled wait. When the time is past ctx's deadline, Wait
// reserves nothing and returns a *WaitError at once, so that a caller whose
// attempt is bounded does not spend a slot it cannot use. A Block that comes
// while Wait sleeps holds it back too.
func (l *Limiter) Wait(ctx context.Context) error {
	l.mu.Lock()
	now := l.clock.Now()
	at := l.next(now)
	wait := at.Sub(now)
	if deadline, ok := ctx.Deadline(); ok && wait > 0 && wait > time.Until(deadline) {
		l.mu.Unlock()
		return &WaitError{Wait: wait}
	}
	if l.keep > 0 {
		l.sent = append(l.sent, at)
		if len(l.sent) > l.keep {
			l.sent = append(l.sent[:0], l.sent[len(l.sent)-l.keep:]...)
		}
	}
	l.mu.Unlock()
	for wait > 0 {
		if err := l.sleep(ctx, wait); err != nil {
			return err
		}
		l.mu.Lock()
		now = l.clock.Now()
		wait = l.blocked.Sub(now)
		l.mu.Unlock()
	}
	return nil
}

// next returns the earliest time at or after now at which one more message
// keeps every window and no block holds it back. l.mu is held.
func (l *Limiter) next(now time.Time) time.Time {
	at := now
	if l.blocked.After(at) {
		at = l.blocked
	}
	if n := len(l.sent); n > 0 && l.sent[n-1].After(at) {
		at = l.sent[n-1]
	}
	for _, w := range l.windows {
		if n := len(l.sent); w.N > 0 && n >= w.N {
			if free := l.sent[n-w.N].Add(w.Per); free.After(at) {
				at = free
			}
		}
	}
	return at
}

func (l *Limiter) sleep(ctx context.Context, d time.Duration) error {
	timer := l.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C():
		return nil
	}
}

// Block holds every message back until d from now, as a vendor's rate-limit
// answer asks.
func (l *Limiter) Block(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until := l.clock.Now().Add(d); until.After(l.blocked) {
		l.blocked = until
	}
}

// Limits hands out one Limiter per destination, so that two sinks posting to
// one destination, or a sink rebuilt by a reload, share its limits. It is
// safe for concurrent use.
type Limits struct {
	clock clock.Clock
	mu    sync.Mutex
	by    map[string]*Limiter
}

// NewLimits returns an empty set of limiters on clk (the real clock when nil).
func NewLimits(clk clock.Clock) *Limits {
	if clk == nil {
		clk = clock.Real()
	}
	return &Limits{clock: clk, by: map[string]*Limiter{}}
}

// Get returns the Limiter of key, making it with windows the first time. The
// key may hold a secret (a robot's token): it never leaves this map.
func (l *Limits) Get(key string, windows ...Window) *Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by[key] == nil {
		l.by[key] = NewLimiter(l.clock, windows...)
	}
	return l.by[key]
}
