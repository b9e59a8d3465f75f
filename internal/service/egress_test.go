package service

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/ha"
	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// Two replicas of one egress group, each serving one of two tenants of the
// same upstream (one simulator, two accounts, one limit per IP), run for ten
// minutes of upstream time at the production rate of 10 requests per minute
// each: the simulator counts no rate-limit violation, while each replica's
// own budget alone would have let them send twice the limit together.
func TestTwoReplicasOfOneEgressGroupStayWithinTheUpstreamLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two replicas for ten minutes of scaled time")
	}
	t.Parallel()
	// The clock runs 10 times faster than real time: ten minutes take 60 s.
	// A request's real latency counts 10 times over on it, and the budget
	// has a margin of 1 s for latency, 100 ms of real time: at 30 times,
	// the jitter of a loaded machine under the race detector alone made the
	// simulator count arrivals closer than the starts were, and at 15 times
	// (67 ms) once in a CI run beside other suites.
	const speed = 10
	clk := clock.NewScaled(time.Now().UTC().Truncate(time.Second), speed)
	up := sim.StartTest(t, sim.Options{Clock: clk, RateLimit: 10, MoreApps: map[string]string{"second-app": "second-secret"}})
	appID, secret := up.Credentials()
	cluster := natstest.StartCluster(t, 1)
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	writeFile(t, rules, goodRules)

	// Two tenant ids that rendezvous hashing gives to different replicas.
	replicas := []string{"east", "west"}
	var ids []string
	for i := 0; len(ids) < 2; i++ {
		id := fmt.Sprintf("tenant-%d", i)
		if len(ids) == 0 || ha.Owner(id, replicas) != ha.Owner(ids[0], replicas) {
			ids = append(ids, id)
		}
	}
	tenants := filepath.Join(dir, "tenants.yaml")
	writeFile(t, tenants, fmt.Sprintf(`tenants:
  - id: %s
    base_url: %s
    app_id: %s
    app_secret_env: FIRST_SECRET
  - id: %s
    base_url: %s
    app_id: second-app
    app_secret_env: SECOND_SECRET
`, ids[0], up.URL(), appID, ids[1], up.URL()))

	ctx, cancel := context.WithCancel(context.Background())
	var dones []chan error
	for _, r := range replicas {
		env := map[string]string{
			"RELAY_TENANTS_FILE": tenants, "RELAY_RULES": rules, "RELAY_STATE_DIR": filepath.Join(dir, r),
			"RELAY_STATE_BACKEND": "jetstream", "RELAY_NATS_URL": cluster.URL(), "RELAY_REPLICA_ID": r,
			"RELAY_LEASE_TTL": "3s", "RELAY_EGRESS_GROUP": "office-nat", "RELAY_LISTEN": "127.0.0.1:0",
			"RELAY_SHUTDOWN_GRACE": "1s", "FIRST_SECRET": secret, "SECOND_SECRET": "second-secret",
		}
		if err := os.MkdirAll(filepath.Join(dir, r), 0o700); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(context.Background(), envconfig.MapLookuper(env))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		dones = append(dones, done)
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		go func() {
			done <- Run(ctx, Options{Config: cfg, Lookup: lookup, Clock: clk, Console: &syncBuffer{}})
		}()
	}
	defer func() {
		cancel()
		for _, d := range dones {
			if err := <-d; err != nil {
				t.Errorf("run: %v", err)
			}
		}
	}()

	// Both tenants polled: two tokens in use.
	deadline := time.Now().Add(30 * time.Second)
	for len(up.TokenUses()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("after 30s, %d tenants poll", len(up.TokenUses()))
		}
		time.Sleep(50 * time.Millisecond)
	}
	up.ResetStats()
	begin := clk.Now()
	for clk.Now().Sub(begin) < 10*time.Minute {
		time.Sleep(100 * time.Millisecond)
	}
	st := up.Stats()
	uses := up.TokenUses()
	var perToken []string
	for _, u := range uses {
		perToken = append(perToken, fmt.Sprint(u.Requests))
	}
	t.Logf("10 minutes of upstream time: %d requests (%s by token since each login), %d violations",
		st.Requests, strings.Join(perToken, ", "), st.Violations)
	if st.Violations != 0 {
		t.Errorf("the simulator counted %d rate-limit violations, want 0", st.Violations)
	}
	// Busy enough that the group's budget, not idleness, kept them within
	// it: together they had the limit's worth, 100 requests in 10 minutes.
	if st.Requests < 80 {
		t.Errorf("%d requests in 10 minutes: the replicas did not use the budget, so the test proves nothing", st.Requests)
	}
}
