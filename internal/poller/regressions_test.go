package poller

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// TestATenantWhoseRequestsAllFailDoesNotStarveTheOthers: four tenants of
// one upstream host on one shared budget; every request of the first
// tenant's account fails (HTTP 503: an account the vendor broke, or an
// answer relay cannot read). Its current alarms are never read, so it is
// overdue for the floor with the oldest read of all, and its poller asks
// again half a spacing after each failed step: it must not take every
// slot. The other three plants' alarms are still found within the
// budget's read bound, and the failing tenant gets no more than a fair
// share of the requests.
func TestATenantWhoseRequestsAllFailDoesNotStarveTheOthers(t *testing.T) {
	clk := clock.NewFake(t0)
	var accounts []*sim.Server
	for i := range 4 {
		accounts = append(accounts, sim.New(sim.Options{Seed: int64(i + 1), AppID: fmt.Sprintf("owner-%d", i+1), RateLimit: -1, Clock: clk}))
	}
	if err := accounts[0].InjectFault(sim.AnyEndpoint, sim.Fault{Kind: sim.FaultServerError, Count: -1}); err != nil {
		t.Fatal(err)
	}
	host, err := sim.NewHost(sim.HostOptions{Clock: clk}, accounts...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(host)
	t.Cleanup(srv.Close)
	budget, err := opendata.NewBudget(opendata.BudgetConfig{RateLimit: 10, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	const span = time.Hour
	// Each healthy plant has one alarm, 20, 35 and 50 minutes in.
	type alarm struct {
		id string
		at time.Time
	}
	alarms := map[int]alarm{}
	for i := 1; i < 4; i++ {
		at := t0.Add(time.Duration(5+15*i) * time.Minute)
		id, err := accounts[i].Schedule(sim.Scheduled{Alarm: sim.AlarmSpec{DeviceSN: accounts[i].Fleet().Devices[0].SN, OccurredAt: at},
			StartAt: at, EndAt: at.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		alarms[i] = alarm{id, at}
	}
	tenants := runSharedTenants(t, clk, srv.URL, budget, accounts, t0.Add(span))
	bound := budget.ReadBound()
	for i := 1; i < 4; i++ {
		tn := tenants[i]
		tn.mu.Lock()
		at, ok := tn.started[alarms[i].id]
		tn.mu.Unlock()
		if !ok || at.Sub(alarms[i].at) > bound {
			t.Errorf("tenant %d's alarm, started %s in, was detected %s after its start (found %v); want within the read bound %s",
				i+1, alarms[i].at.Sub(t0), at.Sub(alarms[i].at), ok, bound)
		}
	}
	ok := func(tn *sharedTenant) float64 {
		return testutil.ToFloat64(tn.metrics.polls.WithLabelValues("current", "ok"))
	}
	all := len(host.Arrivals())
	failed := 0.0
	for _, kind := range []string{"current", "confirm", "sweep", "reconcile", "aged", "contact"} {
		for _, outcome := range []string{"transient", "error"} {
			failed += testutil.ToFloat64(tenants[0].metrics.polls.WithLabelValues(kind, outcome))
		}
	}
	t.Logf("requests at the host %d; the failing tenant's failed polls %g; current reads of the others: %g, %g, %g",
		all, failed, ok(tenants[1]), ok(tenants[2]), ok(tenants[3]))
	if failed > float64(all)/2 {
		t.Errorf("the failing tenant took %g of the host's %d requests; want at most half", failed, all)
	}
}
