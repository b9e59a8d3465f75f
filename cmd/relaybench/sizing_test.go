package main

import (
	"context"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/opendata/sim"
)

// TestMain lets the test binary be the relay process of the tenants and
// takeover phases, which run os.Executable with the relay child flag.
func TestMain(m *testing.M) {
	if slices.Contains(os.Args[1:], "-"+relayChildFlag) {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestTenantsAndTakeoverPhasesMeasureEveryTenantAndEveryKill runs the
// tenants phase with three tenants in one process and the takeover phase
// with one kill, and checks that every event due arrived, that the
// simulators saw no rate-limit violation and no two pollers of one tenant
// at once, that the figures are measured and plausible, and that the
// report shows them.
func TestTenantsAndTakeoverPhasesMeasureEveryTenantAndEveryKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs relay processes and a three-server NATS cluster for about 20 s")
	}
	if raceEnabled {
		// The phases' relay processes are this test binary: under the race
		// detector they run several times slower than the scaled clock
		// allows for, and the CPU they take is what the phases measure.
		// The behaviour they rely on (replicas taking a tenant over,
		// tenants side by side) is tested with -race in internal/e2e and
		// internal/service.
		t.Skip("measures timing and CPU of child processes: run it without -race (go test ./cmd/relaybench)")
	}
	cfg := fullConfig()
	cfg.Phases = []string{phaseTenants, phaseTakeover}
	cfg.Speed = 30
	cfg.Tenants = 3
	cfg.TenantsWarm, cfg.TenantsSpan = time.Minute, 2*time.Minute
	cfg.TakeoverTTLs = []time.Duration{3 * time.Second}
	cfg.TakeoverKills, cfg.TakeoverTenants, cfg.TakeoverRate = 1, 2, 60
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := &bench{cfg: cfg, dir: t.TempDir(), log: slog.New(slog.DiscardHandler), progress: t.Logf}
	figs, err := b.run(ctx)
	if err != nil {
		t.Fatal(err)
	}

	tn := figs.Tenants
	if tn == nil {
		t.Fatal("the tenants phase reported nothing")
	}
	t.Logf("tenants: %+v", *tn)
	if tn.Tenants != 3 || tn.Speed != 30 || tn.SpanHours != cfg.TenantsSpan.Hours() {
		t.Errorf("tenants %d at %g× over %g h, want 3 at 30× over %g h", tn.Tenants, tn.Speed, tn.SpanHours, cfg.TenantsSpan.Hours())
	}
	if d := tn.Deliveries; d.Expected == 0 || d.missing() != 0 || d.Complete != 4 {
		t.Errorf("tenants phase deliveries %+v: want every event due to each of the 4 tenants (3 + the one-tenant process) delivered", d)
	}
	if tn.RealRateViolations != 0 || tn.Requests == 0 {
		t.Errorf("simulators counted %d requests and %d rate-limit violations (%d at the real rate), want requests and no violation at the real rate",
			tn.Requests, tn.Violations, tn.RealRateViolations)
	}
	// Plausible, not fast: some CPU, less than a whole core per tenant;
	// some memory, less than a GiB.
	for name, v := range map[string]float64{"CPU per tenant-hour": tn.cpuPerTenantHour(), "one-tenant CPU": tn.OneCPU} {
		if !(v > 0 && v < 3600) {
			t.Errorf("%s = %g CPU s, want more than 0 and less than 3600", name, v)
		}
	}
	for name, v := range map[string]uint64{"VmRSS": tn.RSS, "RssAnon": tn.Anon, "one-tenant VmRSS": tn.OneRSS, "state on disk": uint64(tn.StateBytes)} {
		if v == 0 || v > 1<<30 {
			t.Errorf("%s = %d bytes, want more than 0 and less than 1 GiB", name, v)
		}
	}

	if len(figs.Takeover) != 1 {
		t.Fatalf("the takeover phase reported %d TTLs, want 1", len(figs.Takeover))
	}
	to := figs.Takeover[0]
	t.Logf("takeover: %+v", to)
	if to.Kills != 1 || len(to.Takeovers) == 0 {
		t.Errorf("%d kills, %d takeovers measured; want 1 kill and a takeover of each tenant the killed replica held", to.Kills, len(to.Takeovers))
	}
	for _, v := range to.Takeovers {
		if f := float64(v); math.IsInf(f, 0) || f <= 0 {
			t.Errorf("takeover %g s: want a positive time, the killed replica's tenant polled again", f)
		}
	}
	if to.Overlaps != 0 {
		t.Errorf("%d pairs of replicas polled one tenant at once, want none", to.Overlaps)
	}
	if d := to.Deliveries; d.Expected == 0 || d.missing() != 0 {
		t.Errorf("takeover deliveries %+v: want every event due delivered across the kill", d)
	}

	rep := buildReport(cfg, []runFigures{figs}, "cmd", time.Now())
	for _, rw := range rep.Rows {
		if !strings.HasPrefix(rw.ID, "S") {
			continue
		}
		if rw.NotRun || math.IsNaN(float64(rw.Values[sysRelay])) {
			t.Errorf("row %s %q: not measured", rw.ID, rw.What)
		}
		if rw.Met == "NOT MET" && !strings.Contains(rw.What, "takeover after SIGKILL") {
			t.Errorf("row %s %q = %v: NOT MET", rw.ID, rw.What, rw.Values[sysRelay])
		}
	}
}

func TestRealRateViolationsKeepRefusalsThatLocalDelayDoesNotExplain(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	// ten requests admitted 6 s apart from one address, then an eleventh
	// refused gap after the first of them.
	refusedAfter := func(ip string, gap time.Duration) []sim.Arrival {
		var as []sim.Arrival
		for i := range 10 {
			as = append(as, sim.Arrival{At: t0.Add(time.Duration(i) * 6 * time.Second), IP: ip})
		}
		return append(as, sim.Arrival{At: t0.Add(gap), IP: ip, Limited: true})
	}
	tests := []struct {
		name     string
		arrivals []sim.Arrival
		speed    float64
		want     int
	}{
		{"at the real rate every refusal counts", refusedAfter("a", 59500*time.Millisecond), 1, 1},
		{"at 5× a shortfall of 1.5 s is 0.3 s of local delay, inside the margin", refusedAfter("a", 59500*time.Millisecond), 5, 0},
		{"at 5× a shortfall of 4.5 s is 0.9 s of local delay, still inside", refusedAfter("a", 56500*time.Millisecond), 5, 0},
		{"at 5× a shortfall of 6 s is more than the margin", refusedAfter("a", 55*time.Second), 5, 1},
		{"eleven requests in 30 s count at any speed", refusedAfter("a", 30*time.Second), 30, 1},
		{"a refusal with fewer than the limit admitted counts", []sim.Arrival{{At: t0, IP: "a", Limited: true}}, 5, 1},
		{"addresses are counted apart", append(refusedAfter("a", 59*time.Second)[:10], sim.Arrival{At: t0.Add(59 * time.Second), IP: "b", Limited: true}), 5, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := realRateViolations(tt.arrivals, 10, time.Minute, tt.speed); got != tt.want {
				t.Fatalf("realRateViolations = %d, want %d", got, tt.want)
			}
		})
	}
}
