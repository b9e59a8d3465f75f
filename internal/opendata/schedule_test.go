package opendata

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
)

// tenantLoop is a tenant of a shared budget as its poller is: it asks for
// a slot, reads its current alarms at the slot it gets (its Demand's Since
// moves there), and asks again at once, for as long as the test runs.
type tenantLoop struct {
	share  *share
	rate   float64 // transitions a second
	mu     sync.Mutex
	grants []time.Time
}

// runTenants runs loops on b until slots grants were made in all, moving
// the fake clock to each next free slot once every tenant waits, and
// returns the tenants' grants.
func runTenants(t *testing.T, b *Budget, clk *clock.Fake, tenants []*tenantLoop, slots int) {
	t.Helper()
	pages := make([]int, len(tenants))
	for i := range pages {
		pages[i] = 1
	}
	runPagedTenants(t, b, clk, tenants, pages, slots)
}

func newTenants(b *Budget, rates ...float64) []*tenantLoop {
	out := make([]*tenantLoop, len(rates))
	for i, r := range rates {
		out[i] = &tenantLoop{share: b.join(), rate: r}
	}
	return out
}

func (tl *tenantLoop) count(from time.Time) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	n := 0
	for _, g := range tl.grants {
		if !g.Before(from) {
			n++
		}
	}
	return n
}

// maxGap returns the longest time between two grants of tl from from on.
func (tl *tenantLoop) maxGap(from time.Time) time.Duration {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var gap time.Duration
	prev := from
	for _, g := range tl.grants {
		if g.Before(from) {
			continue
		}
		gap = max(gap, g.Sub(prev))
		prev = g
	}
	return gap
}

// meanWait returns the mean time an arrival at the tenants' rates waits for
// the next grant of its tenant, from from to the tenants' last grants: an
// arrival uniform in a gap of length T waits T/2, so a tenant's arrivals
// wait Σ T² / (2 Σ T).
func meanWait(tenants []*tenantLoop, from time.Time) time.Duration {
	var sum, rates float64
	for _, tl := range tenants {
		tl.mu.Lock()
		var sq, span float64
		prev := time.Time{}
		for _, g := range tl.grants {
			if g.Before(from) {
				continue
			}
			if !prev.IsZero() {
				gap := g.Sub(prev).Seconds()
				sq += gap * gap
				span += gap
			}
			prev = g
		}
		tl.mu.Unlock()
		if span > 0 {
			sum += tl.rate * sq / (2 * span)
			rates += tl.rate
		}
	}
	return time.Duration(sum / rates * float64(time.Second))
}

// sqrtBound is the square-root rule's mean wait for tenants of those rates
// polled in turn at spacing: (Σ √λ)² / (2 Λ) slots.
func sqrtBound(tenants []*tenantLoop, spacing time.Duration) time.Duration {
	var roots, rates float64
	for _, tl := range tenants {
		roots += math.Sqrt(tl.rate)
		rates += tl.rate
	}
	return time.Duration(roots * roots / (2 * rates) * float64(spacing))
}

// TestSharedBudgetServesTenantsByTheSquareRootOfTheirRates: four tenants
// whose accounts produce transitions at rates 49 : 16 : 4 : 1 get the slots
// of one budget about as 7 : 4 : 2 : 1, the square-root rule, and their
// alarms wait within 10% of that rule's mean; first come, first served
// gives each a quarter, and the alarms wait longer.
func TestSharedBudgetServesTenantsByTheSquareRootOfTheirRates(t *testing.T) {
	const base = 1.0 / 600 // one transition in 10 minutes
	rates := []float64{49 * base, 16 * base, 4 * base, base}
	spacing := (budgetWindow + budgetMargin) / 10
	run := func(s Schedule) []*tenantLoop {
		clk := clock.NewFake(t0)
		b, err := NewBudget(BudgetConfig{RateLimit: 10, Clock: clk, Schedule: s})
		if err != nil {
			t.Fatal(err)
		}
		tenants := newTenants(b, rates...)
		runTenants(t, b, clk, tenants, 900)
		return tenants
	}
	// The first minutes settle the tenants' reads into their rhythm.
	from := t0.Add(10 * time.Minute)
	latency, fifo := run(ScheduleLatency), run(ScheduleFIFO)
	var counts [4]int
	all := 0
	for i, tl := range latency {
		counts[i] = tl.count(from)
		all += counts[i]
	}
	// A tenant gets a whole number of slots between reads, and a backlog
	// compared at whole slots serves the quieter tenants a little sooner
	// than the rule's periods: the shares are the rule's within 30%, and
	// what matters, the mean wait, within 10%.
	want := [4]float64{7.0 / 14, 4.0 / 14, 2.0 / 14, 1.0 / 14}
	for i := range counts {
		got := float64(counts[i]) / float64(all)
		if math.Abs(got-want[i]) > 0.3*want[i] || i > 0 && counts[i] >= counts[i-1] {
			t.Errorf("tenant %d (rate %g/min) got %d of %d slots (%.3f); want %.3f ± 30%% (square-root rule), fewer than a busier tenant",
				i+1, latency[i].rate*60, counts[i], all, got, want[i])
		}
	}
	bound := sqrtBound(latency, spacing)
	got, first := meanWait(latency, from), meanWait(fifo, from)
	t.Logf("mean wait: latency %s, fifo %s, square-root bound %s", got, first, bound)
	if got > bound*11/10 {
		t.Errorf("mean wait %s; want within 10%% of the square-root rule's %s", got, bound)
	}
	if first < got*5/4 {
		t.Errorf("first come, first served waits %s, latency %s: want the schedule a fifth shorter at least", first, got)
	}
}

// TestFIFOBudgetServesTenantsInTurn: the same tenants under ScheduleFIFO
// (relaybench's comparison, and what budgets of their own sharing a file
// amount to) each get a third of the slots, whatever their rates.
func TestFIFOBudgetServesTenantsInTurn(t *testing.T) {
	clk := clock.NewFake(t0)
	b, err := NewBudget(BudgetConfig{RateLimit: 10, Clock: clk, Schedule: ScheduleFIFO})
	if err != nil {
		t.Fatal(err)
	}
	const base = 1.0 / 600
	tenants := newTenants(b, 16*base, 4*base, base)
	runTenants(t, b, clk, tenants, 300)
	for i, tl := range tenants {
		if n := tl.count(t0); n < 99 || n > 101 {
			t.Errorf("tenant %d got %d of 300 slots; want 100 (one in turn)", i+1, n)
		}
	}
}

// TestQuietTenantIsReadWithinTheFloor: a tenant that learned no rate at
// all (a plant that never had an alarm) beside busy ones is still served:
// never later than the floor after its last read and the overdue tenants'
// turns (ReadBound), and not much more often than the floor, which takes
// few slots from the others.
func TestQuietTenantIsReadWithinTheFloor(t *testing.T) {
	clk := clock.NewFake(t0)
	b, err := NewBudget(BudgetConfig{RateLimit: 10, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	tenants := newTenants(b, 1.0/60, 1.0/60, 1.0/60, 0)
	floor, bound := b.Floor(), b.ReadBound()
	if want := time.Duration(floorSlots*4) * (budgetWindow + budgetMargin) / 10; floor != want {
		t.Fatalf("Floor = %s; want %s (%d slots a tenant, 4 tenants)", floor, want, floorSlots)
	}
	runTenants(t, b, clk, tenants, 600)
	quiet := tenants[3]
	gap := quiet.maxGap(t0)
	if gap > bound {
		t.Errorf("the quiet tenant waited %s between reads; the bound is %s", gap, bound)
	}
	if gap < floor {
		t.Errorf("the quiet tenant was read every %s at most; the floor is %s: it should have waited for it", gap, floor)
	}
	end := clk.Now()
	if n, most := quiet.count(t0), int(end.Sub(t0)/floor)+1; n == 0 || n > most {
		t.Errorf("the quiet tenant got %d slots in %s; want 1 to %d (one per floor)", n, end.Sub(t0), most)
	}
}

// TestSharedBudgetKeepsATenantsOwnPriorities: a tenant's alarm poll goes
// before its own sweep, and the tenant with the larger backlog gets the
// slot before another's request of higher priority.
func TestSharedBudgetKeepsATenantsOwnPriorities(t *testing.T) {
	clk := clock.NewFake(t0)
	b, err := NewBudget(BudgetConfig{RateLimit: 1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	busy, calm := b.join(), b.join()
	b.setDemand(busy, Demand{Rate: 1, Since: t0})
	b.setDemand(calm, Demand{Rate: 0.001, Since: t0})
	if _, err := b.wait(context.Background(), PriorityAlarm, busy); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 3)
	start := func(name string, s *share, p Priority) {
		go func() {
			if _, err := b.wait(context.Background(), p, s); err == nil {
				order <- name
			}
		}()
		for deadline := time.Now().Add(time.Second); ; {
			b.mu.Lock()
			n := len(b.waiters)
			b.mu.Unlock()
			if n > 0 && time.Now().Before(deadline) && func() bool {
				b.mu.Lock()
				defer b.mu.Unlock()
				return b.waiters[len(b.waiters)-1].share == s && b.waiters[len(b.waiters)-1].p == p
			}() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not start waiting", name)
			}
			time.Sleep(time.Millisecond)
		}
	}
	start("busy sweep", busy, PrioritySweep)
	start("calm alarm", calm, PriorityAlarm)
	start("busy alarm", busy, PriorityAlarm)
	want := []string{"busy alarm", "busy sweep", "calm alarm"}
	for i, w := range want {
		if !clk.BlockUntil(1, time.Second) {
			t.Fatal("no waiter sleeps on the clock")
		}
		clk.Advance(budgetWindow + budgetMargin)
		select {
		case got := <-order:
			if got != w {
				t.Fatalf("slot %d went to %s; want %s", i+1, got, w)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("slot %d went to nobody; want %s", i+1, w)
		}
	}
}

// TestBacklogCountsExpectedAndKnownWaits: the expected wait of the
// transitions since the last read grows with the square of its age, that
// of the vanished alarms known to wait with their age.
func TestBacklogCountsExpectedAndKnownWaits(t *testing.T) {
	now := t0.Add(time.Minute)
	tests := []struct {
		name string
		d    Demand
		want float64
	}{
		{"never read", Demand{Rate: 1}, 0},
		{"read a minute ago", Demand{Rate: 0.5, Since: t0}, 0.5 * 60 * 60 / 2},
		{"read in the future", Demand{Rate: 0.5, Since: now.Add(time.Second)}, 0},
		{"two known for 30 s", Demand{Since: now, Pending: 2, PendingSince: now.Add(-30 * time.Second)}, 60},
		{"both", Demand{Rate: 1.0 / 60, Since: t0, Pending: 1, PendingSince: t0}, 30 + 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.Backlog(now); math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("Backlog = %g; want %g", got, tt.want)
			}
		})
	}
}

// TestAGrantAbandonedFreesItsSlot: a request whose context ends as its slot
// is granted does not keep the slot: the next request gets it at once.
func TestAGrantAbandonedFreesItsSlot(t *testing.T) {
	clk := clock.NewFake(t0)
	b := newBudget(clk, 1)
	w := &budgetWaiter{p: PriorityAlarm, share: &b.own, granted: make(chan struct{})}
	b.mu.Lock()
	b.waiters = append(b.waiters, w)
	b.grantLocked(clk.Now())
	b.mu.Unlock()
	if !w.done || b.InUse() != 1 {
		t.Fatalf("the waiter was not granted the free slot: done %v, in use %d", w.done, b.InUse())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.abandon(ctx, w); err == nil {
		t.Fatal("abandon returned no error")
	}
	if got := b.InUse(); got != 0 {
		t.Fatalf("in use after the granted request was abandoned = %d; want 0", got)
	}
}

// TestSharedBudgetRefusesBadSettings: bad input to a shared budget and to
// its clients gets an error that names it.
func TestSharedBudgetRefusesBadSettings(t *testing.T) {
	if _, err := NewBudget(BudgetConfig{RateLimit: -1}); err == nil || !strings.Contains(err.Error(), "-1") {
		t.Errorf("NewBudget(-1) = %v; want an error naming -1", err)
	}
	if _, err := NewBudget(BudgetConfig{Schedule: Schedule(7)}); err == nil || !strings.Contains(err.Error(), "schedule 7") {
		t.Errorf("NewBudget(schedule 7) = %v; want an error naming it", err)
	}
	b, err := NewBudget(BudgetConfig{RateLimit: 10})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{BaseURL: "http://127.0.0.1:1", AppID: "app", AppSecret: "secret", RateLimit: 5, Budget: b})
	if err == nil || !strings.Contains(err.Error(), "rate limit 5 beside a shared budget of 10") {
		t.Errorf("New with rate limit 5 and a shared budget of 10 = %v; want an error naming both", err)
	}
	c, err := New(Config{BaseURL: "http://127.0.0.1:1", AppID: "app", AppSecret: "secret", Budget: b})
	if err != nil {
		t.Fatal(err)
	}
	if b.Tenants() != 1 || c.Budget() != b {
		t.Fatalf("a client given the budget: tenants %d, its budget the one given %v", b.Tenants(), c.Budget() == b)
	}
	c.Close()
	if b.Tenants() != 0 {
		t.Fatalf("tenants after Close = %d; want 0", b.Tenants())
	}
}
