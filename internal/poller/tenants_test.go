package poller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/store"
)

// inFlight counts the requests on the wire, so that the test moves the fake
// clock only while none is: time does not pass between a request's start in
// the budget and its arrival at the simulator, as at the real rate.
type inFlight struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (f *inFlight) RoundTrip(r *http.Request) (*http.Response, error) {
	f.n.Add(1)
	defer f.n.Add(-1)
	return f.base.RoundTrip(r)
}

// sharedTenant is one tenant of TestTenantsOfOneHostShareItsBudgetByTheirRates.
type sharedTenant struct {
	account *sim.Server
	p       *Poller
	metrics *Metrics

	mu      sync.Mutex
	started map[string]time.Time // originId: when its start was detected
}

// runSharedTenants runs a poller for each of accounts, served at url, with
// a store of its own and a client on budget, and drives the fake clock clk
// to until: it moves the clock only while every poller is blocked on one of
// its timers (waiting for its slot in the budget, or sleeping until its
// next step) and no request is on the wire. The pollers run on until the
// test ends.
func runSharedTenants(t *testing.T, clk *clock.Fake, url string, budget *opendata.Budget, accounts []*sim.Server, until time.Time) []*sharedTenant {
	t.Helper()
	wire := &inFlight{base: http.DefaultTransport}
	ctx, cancel := context.WithCancel(t.Context())
	var (
		wg     sync.WaitGroup
		stores []*store.Store
	)
	// The pollers stop before their stores close.
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		for _, st := range stores {
			_ = st.Close()
		}
	})
	tenants := make([]*sharedTenant, len(accounts))
	for i, a := range accounts {
		st, err := store.Open(filepath.Join(t.TempDir(), "relay.db"), store.Options{Clock: clk, LockTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, st)
		id, secret := a.Credentials()
		client, err := opendata.New(opendata.Config{BaseURL: url, AppID: id, AppSecret: secret, Clock: clk, Budget: budget,
			HTTPClient: &http.Client{Transport: wire}})
		if err != nil {
			t.Fatal(err)
		}
		tn := &sharedTenant{account: a, metrics: NewMetrics(prometheus.NewRegistry()), started: map[string]time.Time{}}
		tn.p, err = New(Config{Client: client, Store: st, Clock: clk, Metrics: tn.metrics, OnEvents: func(evs []event.Event) {
			tn.mu.Lock()
			defer tn.mu.Unlock()
			for _, e := range evs {
				if e.Data.Transition == event.Start {
					tn.started[e.Data.OriginID] = clk.Now()
				}
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		tenants[i] = tn
		wg.Go(func() {
			if err := tn.p.Run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	deadline := time.Now().Add(2 * time.Minute)
	for clk.Now().Before(until) {
		if time.Now().After(deadline) {
			t.Fatalf("the fake clock reached only %s of %s within 2 minutes", clk.Now().Sub(t0), until.Sub(t0))
		}
		time.Sleep(200 * time.Microsecond)
		if wire.n.Load() > 0 || clk.Waiters() < len(tenants) {
			continue
		}
		if at, ok := clk.NextDeadline(); ok {
			clk.Set(at)
		}
	}
	return tenants
}

// TestTenantsOfOneHostShareItsBudgetByTheirRates: a busy plant and three
// quiet ones, each an account of its own at one upstream address that
// admits 10 requests a minute from it, polled by four pollers on one
// shared budget, on the real client and store. Nothing is refused, every
// alarm's start is detected, the busy tenant's current alarms are read far
// more often than a quiet one's (it learned its rate), and the quiet
// plant's first alarm is found within the budget's read bound.
func TestTenantsOfOneHostShareItsBudgetByTheirRates(t *testing.T) {
	clk := clock.NewFake(t0)
	var accounts []*sim.Server
	for i := range 4 {
		accounts = append(accounts, sim.New(sim.Options{Seed: int64(i + 1), AppID: fmt.Sprintf("owner-%d", i+1), RateLimit: -1, Clock: clk}))
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
	// The busy plant: an alarm every 40 s, each lasting 15 minutes. A
	// quiet plant: one alarm, 80 minutes in.
	const span = 2 * time.Hour
	var busyIDs []string
	for at := t0.Add(40 * time.Second); at.Before(t0.Add(span - 10*time.Minute)); at = at.Add(40 * time.Second) {
		dev := accounts[0].Fleet().Devices[len(busyIDs)%len(accounts[0].Fleet().Devices)].SN
		id, err := accounts[0].Schedule(sim.Scheduled{Alarm: sim.AlarmSpec{DeviceSN: dev, OccurredAt: at}, StartAt: at, EndAt: at.Add(15 * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		busyIDs = append(busyIDs, id)
	}
	quietAt := t0.Add(80 * time.Minute)
	quietID, err := accounts[3].Schedule(sim.Scheduled{Alarm: sim.AlarmSpec{DeviceSN: accounts[3].Fleet().Devices[0].SN, OccurredAt: quietAt},
		StartAt: quietAt, EndAt: quietAt.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	tenants := runSharedTenants(t, clk, srv.URL, budget, accounts, t0.Add(span))
	if st := host.Stats(); st.Violations != 0 || host.MaxArrivals(time.Minute) > 10 {
		t.Fatalf("the host refused %d requests, %d in the worst minute; want none refused", st.Violations, host.MaxArrivals(time.Minute))
	}
	busy := tenants[0]
	busy.mu.Lock()
	for _, id := range busyIDs {
		if _, ok := busy.started[id]; !ok {
			t.Errorf("the busy plant's alarm %s was never detected", id)
		}
	}
	busy.mu.Unlock()
	reads := func(tn *sharedTenant) float64 {
		return testutil.ToFloat64(tn.metrics.polls.WithLabelValues("current", "ok"))
	}
	if b, q := reads(busy), reads(tenants[1]); b < 3*q {
		t.Errorf("current reads: busy plant %g, a quiet one %g; want the busy one read at least 3 times as often", b, q)
	}
	if r := busy.p.Learned().Rates; r.StartsPerHour < 60 {
		t.Errorf("the busy plant's start rate learned: %+v; want about 90 an hour", r)
	}
	quiet := tenants[3]
	quiet.mu.Lock()
	at, ok := quiet.started[quietID]
	quiet.mu.Unlock()
	if bound := budget.ReadBound(); !ok || at.Sub(quietAt) > bound {
		t.Errorf("the quiet plant's first alarm was detected %s after it started (found %v); want within the read bound %s", at.Sub(quietAt), ok, bound)
	}
}
