package opendata_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// TestBudgetFileIsSharedByProcesses: two clients with budgets of their own,
// as relay run and relay api in two processes have, share the budget file;
// taking turns at full speed they stay within the upstream's 10 requests per
// minute together.
func TestBudgetFileIsSharedByProcesses(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "relay.db.budget")
	h := newHarness(t, sim.Options{RateLimit: 10}, func(c *opendata.Config) {
		c.RateLimit, c.BudgetFile = 10, file
	})
	// The second client talks to the first client's simulator on the same
	// fake clock: one upstream, one IP, two processes.
	id, secret := h.sim.Credentials()
	second, err := opendata.New(opendata.Config{
		BaseURL: h.sim.URL(), AppID: id, AppSecret: secret, RateLimit: 10, Clock: h.clk, BudgetFile: file,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		c := h.client
		if i%2 == 1 {
			c = second
		}
		if _, err := drive(h, func() ([]opendata.Station, error) { return c.TenantStations(t.Context(), opendata.StationListQuery{}) }); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	st := h.sim.Stats()
	if st.Violations != 0 {
		t.Fatalf("the simulator counted %d rate-limit violations; want 0", st.Violations)
	}
	if got := h.sim.MaxArrivals(time.Minute); got > 10 {
		t.Fatalf("%d requests arrived within one minute; want at most 10", got)
	}
}
