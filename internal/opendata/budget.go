package opendata

import (
	"context"
	"fmt"
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

// Budget is the rate budget of one upstream address: a sliding window log
// that never lets more than Limit requests start in any window of 60 s (plus
// a margin of 1 s for network jitter). On a rate-limit signal the effective
// limit halves; it then grows back by one per 60 s without a signal, up to
// the configured rate (AIMD). Every request of a Client waits on its
// Budget; the clients of several tenants of one upstream host may share one
// (Config.Budget), which then hands each free slot to a tenant by its
// Schedule, each tenant's own requests by priority. It is safe for
// concurrent use.
type Budget struct {
	clock    clock.Clock
	max      int
	schedule Schedule

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
	// shares are the tenants of the budget, in the order they joined; own
	// stands for the callers that are none of them (tests).
	shares []*share
	own    share
	// wake is closed and replaced whenever a slot was granted or the limit
	// moved, so that waiters look again at when the next slot frees.
	wake chan struct{}
}

type budgetWaiter struct {
	p     Priority
	seq   uint64
	share *share
	// granted is closed once the request was given a slot, starting at at.
	granted chan struct{}
	at      time.Time
	done    bool
}

// BudgetConfig configures a Budget that several clients share
// (Config.Budget).
type BudgetConfig struct {
	// RateLimit is the most requests started in any minute; default 10.
	RateLimit int
	// Clock drives the window; default the wall clock.
	Clock clock.Clock
	// Schedule is how the tenants' requests are served; default
	// ScheduleLatency.
	Schedule Schedule
	// File, when set, is the budget file of the host (Config.BudgetFile):
	// the starts it holds, made before by this process's predecessor or
	// another process of the host, hold their slots until their window
	// passes. The clients given the budget reserve their starts there.
	File string
}

// NewBudget returns a budget for the clients of the tenants of one
// upstream host, to be given to each in Config.Budget.
func NewBudget(cfg BudgetConfig) (*Budget, error) {
	if cfg.RateLimit < 0 {
		return nil, fmt.Errorf("opendata: rate limit %d: want a positive number of requests per minute", cfg.RateLimit)
	}
	if cfg.Schedule != ScheduleLatency && cfg.Schedule != ScheduleFIFO {
		return nil, fmt.Errorf("opendata: schedule %d: want ScheduleLatency or ScheduleFIFO", cfg.Schedule)
	}
	if cfg.RateLimit == 0 {
		cfg.RateLimit = defaultRateLimit
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	b := newBudget(cfg.Clock, cfg.RateLimit)
	b.schedule = cfg.Schedule
	if cfg.File != "" {
		starts, err := readBudgetFile(cfg.File)
		if err != nil {
			return nil, err
		}
		b.Preload(starts)
	}
	return b, nil
}

// newBudget returns a budget of perMinute requests per minute on clk.
func newBudget(clk clock.Clock, perMinute int) *Budget {
	if perMinute < 1 {
		perMinute = 1
	}
	now := clk.Now()
	return &Budget{
		clock:     clk,
		max:       perMinute,
		limit:     perMinute,
		changedAt: now,
		own:       share{joined: now},
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

// wait blocks until a request of priority p of tenant s (nil: none) may
// start, records the start and returns its time. It returns the context's
// error if ctx ends first, and then records nothing.
func (b *Budget) wait(ctx context.Context, p Priority, s *share) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	if s == nil {
		s = &b.own
	}
	b.mu.Lock()
	b.seq++
	w := &budgetWaiter{p: p, seq: b.seq, share: s, granted: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	for {
		now := b.clock.Now()
		b.grantLocked(now)
		if w.done {
			b.mu.Unlock()
			return w.at, nil
		}
		// Another request got the slot, or none is free: every waiter
		// sleeps until the next one frees, and whichever wakes first
		// hands it out.
		next := b.nextFreeLocked(now)
		wake := b.wake
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
		case <-w.granted:
		case <-wake:
		case <-ctx.Done():
			t.Stop()
			return b.abandon(ctx, w)
		}
		t.Stop()
		b.mu.Lock()
	}
}

// grantLocked hands every slot free at now to a waiter, as the schedule
// says.
func (b *Budget) grantLocked(now time.Time) {
	b.refreshLocked(now)
	granted := false
	for len(b.waiters) > 0 && !b.nextFreeLocked(now).After(now) {
		w := b.pickLocked(now)
		b.removeLocked(w)
		if b.schedule == ScheduleLatency && now.Sub(w.share.since()) >= b.floorLocked() {
			w.share.floorBefore, w.share.floorServed = w.share.floorServed, now
		}
		b.starts = append(b.starts, now)
		w.at, w.done = now, true
		w.share.served = now
		close(w.granted)
		granted = true
	}
	if granted {
		b.broadcastLocked()
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

func (b *Budget) abandon(ctx context.Context, w *budgetWaiter) (time.Time, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.done {
		// The slot was granted as the context ended: the request is not
		// sent, so its start frees the slot again.
		for i := len(b.starts) - 1; i >= 0; i-- {
			if b.starts[i].Equal(w.at) {
				b.starts = append(b.starts[:i], b.starts[i+1:]...)
				break
			}
		}
	}
	b.removeLocked(w)
	b.broadcastLocked()
	return time.Time{}, ctx.Err()
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
	if n := len(b.starts); n > 0 && len(b.shares) > 1 {
		// Tenants that share the budget get its slots evenly spaced: a
		// burst would go to whoever waits when it frees, whatever the
		// schedule, and requests spaced unevenly leave alarms waiting
		// longer on average for the same number of reads.
		if free := b.starts[n-1].Add(b.spacingLocked()); free.After(next) {
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
