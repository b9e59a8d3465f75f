package opendata

import (
	"net/url"
	"strings"
	"time"
)

// The upstream limits requests per address, not per account: the tenants of
// one upstream host that a process (or an egress group) serves share one
// Budget. Which tenant's request a free slot goes to is the Budget's
// Schedule; docs/design.md §4 ("Tenants of one budget") says why this rule.

// Schedule is how a Budget shared by several tenants hands out its slots.
type Schedule int

const (
	// ScheduleLatency hands each slot to the tenant whose waiting
	// transitions have waited longest in sum (Demand.Backlog), after the
	// tenants overdue for the floor, oldest first. Waiting for a slot for
	// transitions that happen at a rate λ since a read a ago costs λa²/2,
	// and serving the largest such cost first polls each tenant at a
	// frequency proportional to the square root of its rate: the schedule
	// that minimises the mean detection latency of Poisson arrivals polled
	// in turn. A tenant's own requests keep their priorities.
	ScheduleLatency Schedule = iota
	// ScheduleFIFO hands each slot to the request that waited longest, of
	// the highest priority waiting, whatever its tenant: first come, first
	// served, as tenants with budgets of their own sharing a budget file
	// are served. It is kept for comparison (relaybench's accounts phase).
	ScheduleFIFO
)

// String names the schedule, as logs and the console say it.
func (s Schedule) String() string {
	if s == ScheduleFIFO {
		return "fifo"
	}
	return "latency"
}

// floorSlots sets the floor: a tenant whose alarms were last read floorSlots
// × tenants × spacing ago gets the next slot, whatever the others' backlog.
// The floor can take at most 1/floorSlots of the slots for current reads:
// enough to bound a quiet tenant's wait, too little to undo the schedule.
const floorSlots = 4

// asideReads is how many requests a tenant's poller may make in a row for
// other queries than its current read (the poller's maxAside is 2): the
// floor's bound counts them.
const asideReads = 2

// Demand is what a tenant of a Budget tells it about the alarm transitions
// waiting to be detected in its upstream account, so that the Budget can
// weigh the tenant's requests against the others' (ScheduleLatency). Its
// poller sets it (Client.SetDemand) after every answer.
type Demand struct {
	// Rate is how many transitions a second a read of the tenant's current
	// alarms is expected to find: the starts and ends of its account as
	// learned from its answers (internal/learn, Rates).
	Rate float64
	// Since is when the tenant's current alarms were last read to their
	// end; the transitions since then wait for its next read. Zero while
	// they never were.
	Since time.Time
	// Pending counts the transitions known to wait for a request: alarms
	// that vanished from a current read and were not yet looked up among
	// the recovered ones. PendingSince is when they happened, on average.
	Pending      int
	PendingSince time.Time
}

// Backlog returns how long the transitions not yet detected at now have
// waited, in sum, in transition-seconds: Rate × a² / 2 for the transitions
// expected since the last read a ago (they arrive evenly, so on average
// each has waited a/2), plus the known ones' waits.
func (d Demand) Backlog(now time.Time) float64 {
	var b float64
	if !d.Since.IsZero() && now.After(d.Since) {
		a := now.Sub(d.Since).Seconds()
		b = d.Rate * a * a / 2
	}
	if d.Pending > 0 && now.After(d.PendingSince) {
		b += float64(d.Pending) * now.Sub(d.PendingSince).Seconds()
	}
	return b
}

// share is one tenant of a Budget: a Client's part in it.
type share struct {
	// joined is when the tenant joined the budget.
	joined time.Time
	// demand is the tenant's latest Demand; reported says it set one.
	demand   Demand
	reported bool
	// served is when the tenant was last granted a slot; floorServed when
	// it was last granted one as an overdue tenant, floorBefore when the
	// one before that was (the turn the latest grant was given in).
	served, floorServed, floorBefore time.Time
}

// floorTurn orders the overdue tenants: the one unread longest first, but a
// tenant already granted a slot as overdue since its last read queues
// behind the others from that grant, so that a tenant whose read takes
// several requests (pages, levels, its confirms between them), or never
// succeeds, takes one slot in turn with the others overdue and not all of
// them.
func (s *share) floorTurn() time.Time {
	since := s.since()
	if s.floorServed.After(since) {
		return s.floorServed
	}
	return since
}

// since is when the tenant's transitions began to wait: its last read of
// the current alarms, or, for a tenant that tells no Demand (a client used
// for inventory), its last slot.
func (s *share) since() time.Time {
	if s.reported {
		if s.demand.Since.IsZero() {
			return s.joined
		}
		return s.demand.Since
	}
	if s.served.After(s.joined) {
		return s.served
	}
	return s.joined
}

// floorLocked returns the floor of the budget now: how long a tenant may go
// without a read of its current alarms before it is served first.
func (b *Budget) floorLocked() time.Duration {
	return time.Duration(floorSlots*max(len(b.shares), 1)) * b.spacingLocked()
}

// spacingLocked is Spacing with b.mu held.
func (b *Budget) spacingLocked() time.Duration {
	return (budgetWindow + budgetMargin) / time.Duration(b.limit)
}

// Floor returns the floor of the schedule now: a tenant whose current
// alarms were last read this long ago gets the next slot, before any
// tenant that was read more recently (ScheduleLatency). It is floorSlots
// (4) × tenants × the spacing: 24.4 s a tenant at 10 requests a minute.
func (b *Budget) Floor() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refreshLocked(b.clock.Now())
	return b.floorLocked()
}

// ReadBound returns the longest a tenant of the budget waits between two
// reads of its current alarms while it keeps asking (ScheduleLatency, and
// while the limit holds): the floor, then one slot for each tenant overdue
// before it and its own, each of them at most asideReads requests for
// other queries before its current read. A quiet tenant's first alarm is
// found within this bound of its start. With one tenant it is zero: it has
// every slot.
func (b *Budget) ReadBound() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refreshLocked(b.clock.Now())
	n := len(b.shares)
	if n < 2 {
		return 0
	}
	return b.floorLocked() + time.Duration((asideReads+1)*n)*b.spacingLocked()
}

// Tenants returns how many tenants share the budget now.
func (b *Budget) Tenants() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.shares)
}

// Schedule returns how the budget hands out its slots.
func (b *Budget) Schedule() Schedule { return b.schedule }

// join adds a tenant to the budget.
func (b *Budget) join() *share {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &share{joined: b.clock.Now()}
	b.shares = append(b.shares, s)
	return s
}

// leave removes a tenant from the budget; its waiting requests, if any,
// stay until they are served or abandoned.
func (b *Budget) leave(s *share) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, o := range b.shares {
		if o == s {
			b.shares = append(b.shares[:i], b.shares[i+1:]...)
			break
		}
	}
	b.broadcastLocked()
}

// setDemand records the latest Demand of tenant s.
func (b *Budget) setDemand(s *share, d Demand) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s.demand, s.reported = d, true
}

// bid is tenant s's Bid at now, for a budget shared across processes.
func (b *Budget) bid(s *share, now time.Time) Bid {
	b.mu.Lock()
	defer b.mu.Unlock()
	var bid Bid
	// The request bids in the turn its own grant was given in: a tenant
	// that already took a slot as overdue since its last read does not
	// bid as overdue again until a floor after it (floorTurn).
	turn := s.since()
	if s.floorBefore.After(turn) {
		turn = s.floorBefore
	}
	if over := now.Sub(turn) - b.floorLocked(); over > 0 {
		bid.Overdue = over
	}
	if s.reported {
		bid.Backlog = s.demand.Backlog(now)
	}
	return bid
}

// first reports whether waiter w goes before waiter o of the same tenant,
// or of any tenant with ScheduleFIFO: a higher priority first, then the one
// that came first.
func (w *budgetWaiter) first(o *budgetWaiter) bool {
	return w.p < o.p || (w.p == o.p && w.seq < o.seq)
}

// pickLocked returns the waiter the slot free at now goes to; b.waiters is
// not empty.
func (b *Budget) pickLocked(now time.Time) *budgetWaiter {
	if b.schedule == ScheduleFIFO {
		head := b.waiters[0]
		for _, w := range b.waiters[1:] {
			if w.first(head) {
				head = w
			}
		}
		return head
	}
	// Each tenant's own order first: its best waiting request stands for
	// it.
	best := make(map[*share]*budgetWaiter, len(b.waiters))
	for _, w := range b.waiters {
		if o, ok := best[w.share]; !ok || w.first(o) {
			best[w.share] = w
		}
	}
	floor := b.floorLocked()
	var pick, overdue *budgetWaiter
	var pickBacklog float64
	for s, w := range best {
		if now.Sub(s.since()) >= floor {
			turn := s.floorTurn()
			if overdue == nil || turn.Before(overdue.share.floorTurn()) ||
				turn.Equal(overdue.share.floorTurn()) && w.first(overdue) {
				overdue = w
			}
			continue
		}
		bl := 0.0
		if s.reported {
			bl = s.demand.Backlog(now)
		}
		if pick == nil || bl > pickBacklog || bl == pickBacklog && w.first(pick) {
			pick, pickBacklog = w, bl
		}
	}
	if overdue != nil {
		return overdue
	}
	return pick
}

// AddressKey names the upstream address of baseURL, for the budgets that
// its tenants share: the host in lower case, with its port unless it is
// the scheme's default (https://h and https://H:443/ are one address). A
// URL without a host is its own key, in lower case.
func AddressKey(baseURL string) string {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || u.Host == "" {
		return strings.ToLower(baseURL)
	}
	host, port := strings.ToLower(u.Host), u.Port()
	if scheme := strings.ToLower(u.Scheme); scheme == "https" && port == "443" || scheme == "http" && port == "80" {
		return strings.TrimSuffix(host, ":"+port)
	}
	return host
}
