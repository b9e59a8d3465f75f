package opendata

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/relay-energy/relay/internal/clock"
)

// Priority orders requests that wait for the rate budget: a waiter of a
// higher priority (a smaller value) is always served before one of a lower
// priority, and waiters of one priority are served in arrival order.
type Priority int

// The priorities of upstream requests, highest first.
const (
	// PriorityAlarm is for the current and confirm alarm polls.
	PriorityAlarm Priority = iota
	// PrioritySweep is for the recovered-alarm sweep.
	PrioritySweep
	// PriorityInventory is for lists, station detail, real-time and
	// history data; it is the priority of a request whose context names none.
	PriorityInventory
)

// String returns the priority's name, as used in logs.
func (p Priority) String() string {
	switch p {
	case PriorityAlarm:
		return "alarm"
	case PrioritySweep:
		return "sweep"
	case PriorityInventory:
		return "inventory"
	}
	return "priority-" + strconv.Itoa(int(p))
}

type priorityKey struct{}

// WithPriority returns a context whose requests wait for the rate budget with
// priority p. Requests made with a context that carries no priority use
// PriorityInventory.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

func priorityOf(ctx context.Context) Priority {
	if p, ok := ctx.Value(priorityKey{}).(Priority); ok {
		return p
	}
	return PriorityInventory
}

const (
	// budgetWindow is the upstream's rate-limit window.
	budgetWindow = time.Minute
	// budgetMargin is added to the window before a start frees its slot, so
	// that network jitter between our start and the server's arrival count
	// cannot put RateLimit+1 arrivals into one of the server's windows.
	budgetMargin = time.Second
	// maxRetryAfter caps a Retry-After the upstream asks for, so that a
	// wrong header cannot stop every request for hours.
	maxRetryAfter = 15 * time.Minute
)

// Budget is the rate budget shared by every request of one Client: a sliding
// window log that never lets more than Limit requests start in any window of
// 60 s (plus a margin of 1 s for network jitter), served by priority. On a
// rate-limit signal the effective limit halves; it then grows back by one per
// 60 s without a signal, up to the configured rate (AIMD). It is safe for
// concurrent use.
type Budget struct {
	clock clock.Clock
	max   int

	mu sync.Mutex
	// limit is the effective limit, 1..max.
	limit int
	// changedAt is when limit last changed; growth counts windows from it.
	changedAt time.Time
	// decreasedAt is when limit last halved: a signal from a request that
	// started before it is a consequence of the old rate and does not halve
	// the limit again.
	decreasedAt time.Time
	// starts holds the start times still occupying a slot, oldest first.
	starts []time.Time
	// blockedUntil is the earliest start a Retry-After allows.
	blockedUntil time.Time
	waiters      []*budgetWaiter
	seq          uint64
	// wake is closed and replaced whenever the head waiter may have changed
	// or the limit moved, so that waiters re-evaluate.
	wake chan struct{}
}

type budgetWaiter struct {
	p   Priority
	seq uint64
}

// newBudget returns a budget of perMinute requests per minute on clk.
func newBudget(clk clock.Clock, perMinute int) *Budget {
	if perMinute < 1 {
		perMinute = 1
	}
	return &Budget{
		clock:     clk,
		max:       perMinute,
		limit:     perMinute,
		changedAt: clk.Now(),
		wake:      make(chan struct{}),
	}
}

// Limit returns the effective limit: the most requests allowed to start in
// any 60 s now, after AIMD.
func (b *Budget) Limit() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refreshLocked(b.clock.Now())
	return b.limit
}

// Spacing returns the mean time between requests that keeps within the
// effective limit: the window, with its margin, divided by the limit.
func (b *Budget) Spacing() time.Duration {
	return (budgetWindow + budgetMargin) / time.Duration(b.Limit())
}

// InUse returns how many requests started in the last 60 s.
func (b *Budget) InUse() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inUseLocked(b.clock.Now())
}

// Waiting returns how many requests wait for a slot now.
func (b *Budget) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}

// NextFree returns the earliest time a request may start, ignoring requests
// already waiting; it is now or earlier when a slot is free.
func (b *Budget) NextFree() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	b.refreshLocked(now)
	return b.nextFreeLocked(now)
}

// wait blocks until a request of priority p may start, records the start and
// returns its time. It returns the context's error if ctx ends first, and
// then records nothing.
func (b *Budget) wait(ctx context.Context, p Priority) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	b.mu.Lock()
	b.seq++
	w := &budgetWaiter{p: p, seq: b.seq}
	b.waiters = append(b.waiters, w)
	b.broadcastLocked()
	for {
		now := b.clock.Now()
		b.refreshLocked(now)
		wake := b.wake
		if b.headLocked() == w {
			next := b.nextFreeLocked(now)
			if !next.After(now) {
				b.removeLocked(w)
				b.starts = append(b.starts, now)
				b.broadcastLocked()
				b.mu.Unlock()
				return now, nil
			}
			b.mu.Unlock()
			t := b.clock.NewTimer(next.Sub(now))
			if !b.clock.Now().Before(next) {
				// The clock passed next while the timer was being made
				// (a fake clock moved by a test), so it would fire late.
				t.Stop()
				b.mu.Lock()
				continue
			}
			select {
			case <-t.C():
			case <-wake:
				t.Stop()
			case <-ctx.Done():
				t.Stop()
				return time.Time{}, b.abandon(ctx, w)
			}
		} else {
			b.mu.Unlock()
			select {
			case <-wake:
			case <-ctx.Done():
				return time.Time{}, b.abandon(ctx, w)
			}
		}
		b.mu.Lock()
	}
}

// signal reports that a request which started at start was refused for
// exceeding the upstream's rate limit. The effective limit halves (at least
// 1), unless the request started no later than the last halving, whose rate
// it reflects; retryAfter, when positive, keeps every request from starting
// until it has passed (at most 15 minutes). It reports whether the limit
// halved.
func (b *Budget) signal(start time.Time, retryAfter time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	b.refreshLocked(now)
	halved := false
	if b.decreasedAt.IsZero() || start.After(b.decreasedAt) {
		b.limit = max(1, b.limit/2)
		b.decreasedAt, b.changedAt = now, now
		halved = true
	}
	if retryAfter > 0 {
		until := now.Add(min(retryAfter, maxRetryAfter))
		if until.After(b.blockedUntil) {
			b.blockedUntil = until
		}
	}
	b.broadcastLocked()
	return halved
}

func (b *Budget) abandon(ctx context.Context, w *budgetWaiter) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.removeLocked(w)
	b.broadcastLocked()
	return ctx.Err()
}

// refreshLocked drops starts that no longer hold a slot and grows the limit
// by one for every full window since it last changed.
func (b *Budget) refreshLocked(now time.Time) {
	cut := 0
	for cut < len(b.starts) && !b.starts[cut].Add(budgetWindow+budgetMargin).After(now) {
		cut++
	}
	if cut > 0 {
		b.starts = append(b.starts[:0], b.starts[cut:]...)
	}
	for b.limit < b.max && !now.Before(b.changedAt.Add(budgetWindow)) {
		b.limit++
		b.changedAt = b.changedAt.Add(budgetWindow)
	}
}

func (b *Budget) nextFreeLocked(now time.Time) time.Time {
	next := now
	if b.blockedUntil.After(next) {
		next = b.blockedUntil
	}
	if n := len(b.starts); n >= b.limit {
		free := b.starts[n-b.limit].Add(budgetWindow + budgetMargin)
		if free.After(next) {
			next = free
		}
	}
	return next
}

func (b *Budget) inUseLocked(now time.Time) int {
	n := 0
	for _, s := range b.starts {
		if s.After(now.Add(-budgetWindow)) {
			n++
		}
	}
	return n
}

func (b *Budget) headLocked() *budgetWaiter {
	var head *budgetWaiter
	for _, w := range b.waiters {
		if head == nil || w.p < head.p || (w.p == head.p && w.seq < head.seq) {
			head = w
		}
	}
	return head
}

func (b *Budget) removeLocked(w *budgetWaiter) {
	for i, o := range b.waiters {
		if o == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			return
		}
	}
}

func (b *Budget) broadcastLocked() {
	close(b.wake)
	b.wake = make(chan struct{})
}
