package opendata

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
)

// runPagedTenants runs loops on b until slots grants were made in all,
// moving the fake clock to each next free slot once every tenant waits, for
// tenants whose read of the current alarms takes pages[i] requests: tenant i's Demand.Since moves only at
// every pages[i]-th slot it gets, as a poller's lastRead moves only once a
// snapshot was read to its end (every page, or every level of a storm).
func runPagedTenants(t *testing.T, b *Budget, clk *clock.Fake, tenants []*tenantLoop, pages []int, slots int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	var mu sync.Mutex
	granted := 0
	done := make(chan struct{})
	for i, tl := range tenants {
		b.setDemand(tl.share, Demand{Rate: tl.rate, Since: clk.Now()})
		wg.Go(func() {
			for n := 1; ; n++ {
				at, err := b.wait(ctx, PriorityAlarm, tl.share)
				if err != nil {
					return
				}
				if n%pages[i] == 0 {
					b.setDemand(tl.share, Demand{Rate: tl.rate, Since: at})
					tl.mu.Lock()
					tl.grants = append(tl.grants, at)
					tl.mu.Unlock()
				}
				mu.Lock()
				granted++
				if granted == slots {
					close(done)
				}
				mu.Unlock()
			}
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not all %d slots granted within a minute of real time", slots)
		}
		if b.Waiting() < len(tenants) {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		if next, ok := clk.NextDeadline(); ok {
			clk.Set(next)
		} else {
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// TestReadBoundHoldsBesideATenantWhoseReadTakesManyRequests: a tenant whose
// current alarms take 40 requests to read to their end (an account with
// thousands of ongoing alarms, a fleet-wide communication loss: its
// snapshot pages, or it is read level by level, and the poller's confirms
// of what vanished come between the pages) stays overdue for the whole
// read once it is past the floor, with the oldest read of all. The other
// tenants, quiet plants read in one request, must still be read within
// ReadBound: an overdue tenant must not keep the slots from the other
// overdue tenants for its every page.
func TestReadBoundHoldsBesideATenantWhoseReadTakesManyRequests(t *testing.T) {
	clk := clock.NewFake(t0)
	b, err := NewBudget(BudgetConfig{RateLimit: 10, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	tenants := newTenants(b, 0, 1.0/3600, 1.0/3600, 1.0/3600)
	bound := b.ReadBound()
	runPagedTenants(t, b, clk, tenants, []int{40, 1, 1, 1}, 600)
	for i, tl := range tenants[1:] {
		if gap := tl.maxGap(t0); gap > bound {
			t.Errorf("quiet tenant %d waited %s between two reads; ReadBound is %s", i+2, gap, bound)
		}
	}
}

// TestAnOverdueTenantsBidsTakeTurnsInTheEgressGroup: across the replicas of
// an egress group a request bids its tenant's Bid, the longer overdue
// first. A tenant whose read takes many requests stays overdue with the
// oldest read for all of them, and its every request would beat the other
// replicas' overdue tenants: after its first request as an overdue tenant,
// the next ones must not beat an overdue tenant that has had no turn since.
func TestAnOverdueTenantsBidsTakeTurnsInTheEgressGroup(t *testing.T) {
	clk := clock.NewFake(t0)
	b, err := NewBudget(BudgetConfig{RateLimit: 10, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	storm, _ := b.join(), b.join()
	b.setDemand(storm, Demand{Rate: 1.0 / 60, Since: t0})
	// The other replica's tenant (its own Budget there: same floor) was
	// read a little after the storm tenant.
	elsewhere, err := NewBudget(BudgetConfig{RateLimit: 10, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	quiet, _ := elsewhere.join(), elsewhere.join()
	elsewhere.setDemand(quiet, Demand{Since: t0.Add(10 * time.Second)})
	clk.Set(t0.Add(b.Floor() + time.Minute))
	ctx := context.Background()
	for i := range 3 {
		at, err := b.wait(ctx, PriorityAlarm, storm)
		if err != nil {
			t.Fatal(err)
		}
		mine, theirs := b.bid(storm, at), elsewhere.bid(quiet, at)
		if i > 0 && mine.Beats(theirs) {
			t.Fatalf("the storm tenant's request %d as overdue bids %+v and beats the other replica's overdue tenant's %+v, unread since its own turn", i+1, mine, theirs)
		}
		clk.Set(b.NextFree())
	}
}

// TestATenantThatJoinsIsReadWithinTheFloor: a tenant that joins a busy
// budget (its poller started, or its lease moved to this replica after a
// failover) has never read its current alarms: its Demand's Since is zero
// and it counts no backlog, so the others' backlogs take the slots until it
// is overdue. It is read within the floor and a slot per tenant, the bound
// docs/design.md §4 states for every tenant. Counting its wait from when it
// joined instead read it within a round, but a tenant whose poller tells no
// Since later on (restarted, reading a storm level by level) then took every
// slot but the floor's: the accounts phase's mean start latency at 20
// tenants went from 1.03x the square-root bound to 1.2x.
func TestATenantThatJoinsIsReadWithinTheFloor(t *testing.T) {
	clk := clock.NewFake(t0)
	b, err := NewBudget(BudgetConfig{RateLimit: 10, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	const others = 7
	var shares []*share
	for range others {
		shares = append(shares, b.join())
	}
	// The others have been read in turn for an hour, at a transition in
	// six minutes each.
	ask := func(s *share) *budgetWaiter {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.seq++
		w := &budgetWaiter{p: PriorityAlarm, seq: b.seq, share: s, granted: make(chan struct{})}
		b.waiters = append(b.waiters, w)
		return w
	}
	waiting := map[*share]*budgetWaiter{}
	for _, s := range shares {
		b.setDemand(s, Demand{Rate: 1.0 / 360, Since: t0})
		waiting[s] = ask(s)
	}
	step := func() *share {
		clk.Set(b.NextFree())
		b.mu.Lock()
		b.grantLocked(clk.Now())
		b.mu.Unlock()
		for s, w := range waiting {
			if w.done {
				b.setDemand(s, Demand{Rate: s.demand.Rate, Since: w.at})
				waiting[s] = ask(s)
				return s
			}
		}
		t.Fatal("no waiter was granted the free slot")
		return nil
	}
	for clk.Now().Before(t0.Add(time.Hour)) {
		step()
	}
	// The new tenant joins; its poller reports the prior rate (one start
	// and one end in two minutes) and no read yet.
	joined := b.join()
	b.setDemand(joined, Demand{Rate: 1.0 / 60})
	waiting[joined] = ask(joined)
	n := len(shares) + 1
	bound := floorSlots*n + n
	for slot := 1; ; slot++ {
		if step() == joined {
			break
		}
		if slot > bound {
			t.Fatalf("the tenant that joined waits more than %d slots (the floor, %d, and one per tenant) for its first read",
				bound, floorSlots*n)
		}
	}
}
