package e2e

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/notify/console"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// reliabilityRules sends every event to the bus and the console, and urgent
// and severe ones to a signed webhook. Alarm management is off for all of
// them (suppress: false): these tests check that every transition reaches
// every routed sink, which the simulator's chattering devices would
// otherwise keep from people.
const reliabilityRules = `sinks:
  - name: bus
    type: nats
    jetstream: true
    create_stream: RELAY_E2E
  - name: ops
    type: webhook
    url: %s
    secret_env: E2E_OPS_WEBHOOK_SECRET
  - name: console
    type: console
routes:
  - name: everything
    to: [bus, console]
    continue: true
    suppress: false
  - name: urgent
    match: { levels: [0, 1] }
    to: [ops]
    suppress: false
`

// reliabilityRoutes is what reliabilityRules sends an event to.
func reliabilityRoutes(level int) []string {
	if level <= 1 {
		return []string{"bus", "console", "ops"}
	}
	return []string{"bus", "console"}
}

// storm schedules n alarms starting at random moments within span from
// begin, each ending (a tenth of them as invalid) after minLife to maxLife,
// with levels weighted 1:2:3:4 from urgent to minor. It returns their ids and
// when the last one ends.
func storm(t *testing.T, s *sim.Server, rng *rand.Rand, n int, begin time.Time, span, minLife, maxLife time.Duration) ([]string, time.Time) {
	t.Helper()
	ids := make([]string, 0, n)
	var last time.Time
	for range n {
		start := begin.Add(time.Duration(rng.Int64N(int64(span))))
		end := start.Add(minLife + time.Duration(rng.Int64N(int64(maxLife-minLife))))
		level := 3
		switch w := rng.IntN(10); {
		case w < 1:
			level = 0
		case w < 3:
			level = 1
		case w < 6:
			level = 2
		}
		id, err := s.Schedule(sim.Scheduled{
			Alarm: sim.AlarmSpec{Level: level}, StartAt: start, EndAt: end, Invalid: rng.IntN(10) == 0,
		})
		if err != nil {
			t.Fatalf("scheduling the storm: %v", err)
		}
		ids = append(ids, id)
		if end.After(last) {
			last = end
		}
	}
	return ids, last
}

// TestCrashRecovery kills the relay with SIGKILL at random moments while a
// storm of alarm starts and ends arrives, restarts it each time, and checks
// that afterwards every transition the simulator's history implies is in
// JetStream exactly once, every routed webhook and console line arrived at
// least once, and a final SIGTERM leaves the outboxes empty.
func TestCrashRecovery(t *testing.T) {
	skipShort(t)
	// Runs beside the rate-limit test, which mostly waits for its window.
	t.Parallel()
	const (
		rate   = 600
		alarms = 2000
		kills  = 6
		seed   = 7
	)
	rng := rand.New(rand.NewPCG(seed, seed))
	s := startSim(t, sim.Options{Seed: seed, RateLimit: rate, Stations: 5, AppSecret: newSecret(t, "app-")})
	ns := natstest.StartServer(t, natstest.Config{})
	hookSecret := newSecret(t, "whsec_")
	hook := notifytest.NewReceiver(t, hookSecret)
	dir := t.TempDir()
	env := relayEnv(s, rate, dir, writeRules(t, dir, fmt.Sprintf(reliabilityRules, hook.URL())))
	env["RELAY_NATS_URL"] = ns.URL()
	env["E2E_OPS_WEBHOOK_SECRET"] = hookSecret

	began := time.Now()
	p := startRelay(t, "relay#1", env)
	procs := []*relayProc{p}
	// The first run has opened the store: every alarm of the storm comes
	// after it and is news, not history.
	p.opsAddr(15 * time.Second)
	ids, lastEnd := storm(t, s, rng, alarms, time.Now().Add(500*time.Millisecond), 15*time.Second, 500*time.Millisecond, 6*time.Second)

	for k := range kills {
		life := 300*time.Millisecond + time.Duration(rng.Int64N(int64(3*time.Second)))
		select {
		case <-p.done:
			t.Fatalf("%s exited on its own: %v", p.name, p.err)
		case <-time.After(life):
		}
		p.kill()
		t.Logf("killed %s after %s", p.name, life.Round(time.Millisecond))
		p = startRelay(t, fmt.Sprintf("relay#%d", k+2), env)
		procs = append(procs, p)
	}
	waitReady(t, p, p.opsAddr(15*time.Second), 15*time.Second)

	waitAlarmsOver(t, p, s, lastEnd)
	byID, want := expectedEvents(s, ids)
	if len(want) != 2*alarms {
		t.Fatalf("simulator implies %d events for %d alarms that all ended, want %d", len(want), alarms, 2*alarms)
	}
	var wantHook []string
	for _, id := range want {
		originID, _ := eventOf(id)
		if byID[originID].Level <= 1 {
			wantHook = append(wantHook, id)
		}
	}

	bus := newStreamReader(t, ns.URL(), "RELAY_E2E")
	waitDelivered(t, p, 45*time.Second, bus, len(want), hook, wantHook)
	caughtUp := time.Since(began)

	bodies := checkStreamAndWebhook(t, bus, byID, want, hook, wantHook, false)
	waitFor(t, p, 45*time.Second, "every console line", func() error {
		lines := consoleCounts(procs...)
		missing := 0
		for _, id := range want {
			ev, err := event.Unmarshal(bodies[id])
			if err != nil {
				return err
			}
			if lines[console.Line(&ev)] == 0 {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d events have no console line", missing, len(want))
		}
		return nil
	})

	code, took := p.terminate(20 * time.Second)
	if code != 0 {
		t.Errorf("%s exited with code %d after SIGTERM, want 0", p.name, code)
	}
	checkStopped(t, p)
	checkStore(t, env["RELAY_STATE_PATH"], []string{"bus", "ops", "console"})
	for _, q := range procs {
		checkNoSecrets(t, q.name+" stderr", q.stderr.String(), env["RELAY_APP_SECRET"], hookSecret)
	}

	hookDups, lineDups := 0, 0
	for _, n := range acceptedIDs(hook) {
		hookDups += n - 1
	}
	for _, n := range consoleCounts(procs...) {
		lineDups += n - 1
	}
	st := s.Stats()
	t.Logf("%d alarms, %d events, %d kills: caught up %s after the first start; SIGTERM exit in %s; "+
		"repeats after crashes (allowed, at least once): %d webhook, %d console; simulator: %d requests, %d rate-limit violations",
		alarms, len(want), kills, caughtUp.Round(time.Millisecond), took.Round(time.Millisecond),
		hookDups, lineDups, st.Requests, st.Violations)
}
