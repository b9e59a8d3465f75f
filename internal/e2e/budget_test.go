package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/opendata/sim"
)

// TestRelayAPIBesideRelayRunStaysWithinTheLimit: an operator loops
// `relay api stations` on the host where `relay run` polls; the two share
// the request budget file, so the simulator (10 requests a minute per IP)
// counts no violation, and the calls still get through.
func TestRelayAPIBesideRelayRunStaysWithinTheLimit(t *testing.T) {
	skipShort(t)
	t.Parallel()
	s := startSim(t, sim.Options{Seed: 3, RateLimit: 10, Churn: sim.Churn{StartsPerMinute: 6}})
	dir := t.TempDir()
	env := relayEnv(s, 10, dir, writeRules(t, dir, "sinks:\n  - name: out\n    type: console\nroutes:\n  - name: all\n    to: [out]\n"))
	p := startRelay(t, "relay", env)
	waitReady(t, p, p.opsAddr(20*time.Second), 30*time.Second)

	var vars []string
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	sort.Strings(vars)
	// 40 s are enough: on its own the relay spends its 10 requests a
	// minute, so any request of relay api that did not wait for the shared
	// budget would be a violation within the first minute.
	ctx, cancel := context.WithTimeout(t.Context(), 55*time.Second)
	defer cancel()
	until := time.Now().Add(40 * time.Second)
	calls := 0
	for time.Now().Before(until) {
		cmd := exec.CommandContext(ctx, relayBinary(t), "api", "stations")
		cmd.Env = vars
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			t.Fatalf("relay api stations: %v\n%s", err, out)
		}
		calls++
	}
	st := s.Stats()
	if st.Violations != 0 {
		t.Fatalf("the simulator counted %d rate-limit violations with relay api beside relay run; want 0", st.Violations)
	}
	if most := s.MaxArrivals(time.Minute); most > 10 {
		t.Fatalf("%d requests arrived within one minute; want at most 10", most)
	}
	if calls == 0 {
		t.Fatal("no relay api call finished in 40 s")
	}
	if err := p.alive(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d relay api calls beside relay run; budget file %s", calls, filepath.Join(dir, "relay.db.budget"))
}
