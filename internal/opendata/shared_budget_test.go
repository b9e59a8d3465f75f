package opendata_test

import (
	"context"
	"path/filepath"
	"strings"
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

// TestAdmitStartHoldsEachStartForTheWindowAndMargin: the rule every shared
// budget applies, at its edges.
func TestAdmitStartHoldsEachStartForTheWindowAndMargin(t *testing.T) {
	t.Parallel()
	now := epoch
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	tests := []struct {
		name     string
		starts   []time.Time
		limit    int
		wantWait time.Duration
		wantKept int // starts kept, before now is appended
	}{
		{"empty", nil, 10, 0, 0},
		{"room left", []time.Time{ago(time.Second), ago(2 * time.Second)}, 3, 0, 2},
		{"full: the oldest frees 61 s after it started",
			[]time.Time{ago(5 * time.Second), ago(50 * time.Second), ago(10 * time.Second)}, 3, 11 * time.Second, 0},
		{"a start 61 s ago holds no slot", []time.Time{ago(61 * time.Second), ago(time.Second)}, 2, 0, 1},
		{"a start 60.9 s ago still holds one", []time.Time{ago(60900 * time.Millisecond), ago(time.Second)}, 2, 100 * time.Millisecond, 0},
		{"a start in the future counts as now", []time.Time{now.Add(time.Hour)}, 1, 61 * time.Second, 0},
		{"a limit below 1 is 1", nil, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept, wait := opendata.AdmitStart(tt.starts, now, tt.limit)
			if wait != tt.wantWait {
				t.Fatalf("wait = %v, want %v", wait, tt.wantWait)
			}
			if wait > 0 {
				if kept != nil {
					t.Fatalf("a refused start returned a list to record: %v", kept)
				}
				return
			}
			if len(kept) != tt.wantKept+1 || !kept[len(kept)-1].Equal(now) {
				t.Fatalf("kept %v, want %d starts and now last", kept, tt.wantKept)
			}
			for i := 1; i < len(kept); i++ {
				if kept[i].Before(kept[i-1]) {
					t.Fatalf("kept %v is not oldest first", kept)
				}
			}
		})
	}
}

// TestABudgetFileAndASharedBudgetTogetherAreRefused: a client shares its
// budget in one place; two would each admit a start the other refused.
func TestABudgetFileAndASharedBudgetTogetherAreRefused(t *testing.T) {
	t.Parallel()
	_, err := opendata.New(opendata.Config{
		BaseURL: "http://127.0.0.1:1", AppID: "app", AppSecret: "secret",
		BudgetFile: filepath.Join(t.TempDir(), "budget"), Shared: admitAll{},
	})
	if err == nil || !strings.Contains(err.Error(), "both a budget file and a shared budget") {
		t.Fatalf("New = %v, want an error naming both", err)
	}
}

// admitAll is a SharedBudget that admits every start.
type admitAll struct{}

func (admitAll) Reserve(context.Context, time.Time, int, opendata.Bid) (time.Duration, error) {
	return 0, nil
}
