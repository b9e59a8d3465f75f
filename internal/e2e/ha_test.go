package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/ha"
	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// haRules sends every event to the bus and the console, urgent ones to the
// webhook, and the urgent ones of one station to Slack (which paces itself
// at one message a second), with alarm management and the storm digest
// off, so that every transition reaches every routed sink.
const haRules = `sinks:
  - name: bus
    type: nats
    jetstream: true
    create_stream: RELAY_E2E
  - name: ops
    type: webhook
    url: %s
    secret_env: E2E_OPS_WEBHOOK_SECRET
  - name: oncall
    type: slack
    channel: C0HA
    digest: false
  - name: console
    type: console
routes:
  - name: everything
    to: [bus, console]
    continue: true
    suppress: false
  - name: urgent-of-one-station
    match: { levels: [0], station_ids: [%q] }
    to: [ops, oncall]
    suppress: false
  - name: urgent
    match: { levels: [0] }
    to: [ops]
    suppress: false
`

// haTTL is the lease TTL of the replicas of these tests, a third of the
// default: a takeover also restores the state and logs in, which takes a
// second or two on a loaded machine under the race detector.
const haTTL = 5 * time.Second

// haEnv is the environment of replica id of a three-server state cluster,
// with its local cache in a directory of its own under dir.
func haEnv(t *testing.T, base map[string]string, cluster *natstest.Cluster, id, dir string) map[string]string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, id), 0o700); err != nil {
		t.Fatal(err)
	}
	env := make(map[string]string, len(base)+6)
	for k, v := range base {
		env[k] = v
	}
	env["RELAY_NATS_URL"] = cluster.URL()
	env["RELAY_STATE_BACKEND"] = "jetstream"
	env["RELAY_STATE_REPLICAS"] = "3"
	env["RELAY_LEASE_TTL"] = haTTL.String()
	env["RELAY_REPLICA_ID"] = id
	env["RELAY_STATE_PATH"] = filepath.Join(dir, id, "relay.db")
	return env
}

// holder returns the replica of procs that serves the tenant now: the last
// one to log "tenant started" without "tenant stopped" after it.
func holder(procs []*relayProc) *relayProc {
	var best *relayProc
	var at string
	for _, p := range procs {
		if p.exited() {
			continue
		}
		lines, _ := p.logLines()
		started := ""
		for _, l := range lines {
			switch l.str("msg") {
			case "tenant started":
				started = l.str("time")
			case "tenant stopped":
				started = ""
			}
		}
		if started != "" && started > at {
			best, at = p, started
		}
	}
	return best
}

// nameOf names p, or says none.
func nameOf(p *relayProc) string {
	if p == nil {
		return "no replica"
	}
	return p.name
}

// TestReplicaKilledDuringAStormIsTakenOver runs three replicas on a state
// replicated by three NATS servers, kills the one that holds the tenant with
// SIGKILL while a storm arrives, and checks that another replica takes
// the tenant over within twice the lease TTL, that no two replicas
// ever polled the tenant at the same moment, and that afterwards every event
// is in JetStream exactly once, every webhook id arrived, and every Slack end
// is threaded under its start.
func TestReplicaKilledDuringAStormIsTakenOver(t *testing.T) {
	skipShort(t)
	// Runs beside the rate-limit and crash tests, which mostly wait.
	t.Parallel()
	const (
		rate   = 600
		alarms = 400
		seed   = 11
	)
	rng := rand.New(rand.NewPCG(seed, seed))
	s := startSim(t, sim.Options{Seed: seed, RateLimit: rate, Stations: 5, AppSecret: newSecret(t, "app-")})
	cluster := natstest.StartCluster(t, 3)
	hookSecret := newSecret(t, "whsec_")
	hook := notifytest.NewReceiver(t, hookSecret)
	slackToken := newSecret(t, "xoxb-")
	slack := notifytest.NewSlack(t, slackToken)
	dir := t.TempDir()
	station := s.Fleet().Stations[0].ID
	base := relayEnv(s, rate, dir, writeRules(t, dir, fmt.Sprintf(haRules, hook.URL(), station)))
	base["E2E_OPS_WEBHOOK_SECRET"] = hookSecret
	base["RELAY_SLACK_TOKEN"] = slackToken
	base["RELAY_SLACK_API_URL"] = slack.APIURL()

	var procs []*relayProc
	start := func(name, id string) *relayProc {
		p := startRelay(t, name, haEnv(t, base, cluster, id, dir))
		procs = append(procs, p)
		return p
	}
	live := []*relayProc{start("r1", "r1"), start("r2", "r2"), start("r3", "r3")}
	ids := map[*relayProc]string{live[0]: "r1", live[1]: "r2", live[2]: "r3"}
	waitFor(t, nil, 30*time.Second, "a replica to serve the tenant", func() error {
		if holder(live) == nil {
			return fmt.Errorf("no replica logged \"tenant started\"")
		}
		return nil
	})
	alarmIDs, lastEnd := storm(t, s, rng, alarms, time.Now().Add(500*time.Millisecond), 9*time.Second, 500*time.Millisecond, 4*time.Second)

	var takeovers []time.Duration
	for k := range 1 {
		time.Sleep(1500*time.Millisecond + time.Duration(rng.Int64N(int64(time.Second))))
		// The holder: the first one, or, after a kill, the replica that
		// took over, or the one that came back and owns the tenant again
		// by rendezvous hashing.
		var victim *relayProc
		waitFor(t, nil, 4*haTTL, "a replica to serve the tenant", func() error {
			if victim = holder(live); victim == nil {
				return fmt.Errorf("no replica serves the tenant")
			}
			return nil
		})
		victim.kill()
		killed := time.Now()
		var next *relayProc
		waitFor(t, nil, 4*haTTL, "another replica to take the tenant over", func() error {
			if next = holder(live); next == nil || next == victim {
				return fmt.Errorf("no replica serves the tenant yet")
			}
			return nil
		})
		// The takeover is when the new holder polled: the first use of a
		// token issued after the kill.
		var polled time.Time
		waitFor(t, nil, 4*haTTL, "the new holder to poll", func() error {
			for _, u := range s.TokenUses() {
				if u.First.After(killed) {
					polled = u.First
					return nil
				}
			}
			return fmt.Errorf("no token used since the kill")
		})
		took := polled.Sub(killed)
		takeovers = append(takeovers, took)
		t.Logf("kill %d: %s killed; %s polled %s later", k+1, victim.name, next.name, took.Round(time.Millisecond))
		if took > 2*haTTL {
			t.Errorf("kill %d: the tenant was taken over %s after the kill, more than twice the lease TTL (%s)", k+1, took, 2*haTTL)
		}
		// The killed replica comes back as a new process.
		for i, p := range live {
			if p == victim {
				live[i] = start(fmt.Sprintf("%s#%d", ids[victim], k+2), ids[victim])
				ids[live[i]] = ids[victim]
			}
		}
	}

	waitAlarmsOver(t, nil, s, lastEnd)
	byID, want := expectedEvents(s, alarmIDs)
	var wantHook []string
	for _, id := range want {
		if originID, _ := eventOf(id); byID[originID].Level == 0 {
			wantHook = append(wantHook, id)
		}
	}
	bus := newStreamReader(t, cluster.URL(), "RELAY_E2E")
	waitDelivered(t, nil, 60*time.Second, bus, len(want), hook, wantHook)
	checkStreamAndWebhook(t, bus, byID, want, hook, wantHook, false)

	urgent := map[string]sim.Alarm{}
	for id, a := range byID {
		if a.Level == 0 && a.StationID == station {
			urgent[id] = a
		}
	}
	waitFor(t, nil, time.Duration(2*len(urgent)+30)*time.Second, "every urgent start and end of the station in Slack", func() error {
		got := slackEventIDs(slack.Calls(), urgent)
		for id, a := range urgent {
			if got[id+":start"] == 0 {
				return fmt.Errorf("no start message for %s", id)
			}
			end := id + ":end"
			if a.Status == sim.StatusInvalid {
				end = id + ":invalid"
			}
			if got[end] == 0 {
				var seen []string
				for _, c := range slack.Calls() {
					if slackMentions(c, id) {
						seen = append(seen, fmt.Sprintf("%s ts=%s thread=%s err=%q text=%.80q", c.Method, c.TS, c.ThreadTS, c.Error, c.Text))
					}
				}
				return fmt.Errorf("no reply in the start's thread for %s; calls naming it: %q", end, seen)
			}
		}
		return nil
	})
	for id, n := range slackEventIDs(slack.Calls(), urgent) {
		if n > 1 {
			t.Logf("Slack: %s posted %d times (at least once across a kill)", id, n)
		}
	}
	if o := s.PollerOverlaps(); len(o) > 0 {
		t.Errorf("two replicas polled the tenant at the same moment %d times; first: %+v", len(o), o[0])
	}
	st := s.Stats()
	t.Logf("%d alarms, %d events; takeovers %v (TTL %s); simulator: %d requests, %d rate-limit violations, %d tokens",
		alarms, len(want), takeovers, haTTL, st.Requests, st.Violations, len(s.TokenUses()))
	for _, p := range procs {
		checkNoSecrets(t, p.name+" stderr", p.stderr.String(), base["RELAY_APP_SECRET"], hookSecret, slackToken)
	}
}

// TestReplicaCutOffFromNATSStopsPollingBeforeItsLeaseEnds runs three
// replicas, closes the NATS connection of the one that holds the tenant
// (through a proxy that then refuses it; the process stays alive), and
// checks that it polled for the last time before its lease's TTL had passed,
// that another replica took the tenant over, and that no two replicas ever
// polled the tenant at the same moment, with every event in JetStream
// exactly once. (internal/ha tests the tenant's return after a heal.)
func TestReplicaCutOffFromNATSStopsPollingBeforeItsLeaseEnds(t *testing.T) {
	skipShort(t)
	t.Parallel()
	const (
		rate   = 600
		alarms = 120
		seed   = 13
	)
	rng := rand.New(rand.NewPCG(seed, seed))
	s := startSim(t, sim.Options{Seed: seed, RateLimit: rate, Stations: 3, AppSecret: newSecret(t, "app-")})
	cluster := natstest.StartCluster(t, 3)
	dir := t.TempDir()
	base := relayEnv(s, rate, dir, writeRules(t, dir, `sinks:
  - name: bus
    type: nats
    jetstream: true
    create_stream: RELAY_E2E
routes:
  - name: everything
    to: [bus]
    suppress: false
`))
	// The replica that owns the tenant by rendezvous hashing reaches NATS
	// through a proxy.
	ids := []string{"a", "b", "c"}
	owner := ha.Owner(config.DefaultTenantID, ids)
	proxy := cluster.StartProxy(0)
	procs := map[string]*relayProc{}
	var live []*relayProc
	for _, id := range ids {
		env := haEnv(t, base, cluster, id, dir)
		if id == owner {
			env["RELAY_NATS_URL"] = proxy.URL()
		}
		procs[id] = startRelay(t, id, env)
		live = append(live, procs[id])
	}
	waitFor(t, nil, 30*time.Second, "the owner to serve the tenant", func() error {
		if h := holder(live); h != procs[owner] {
			return fmt.Errorf("served by %s", nameOf(h))
		}
		return nil
	})
	alarmIDs, lastEnd := storm(t, s, rng, alarms, time.Now().Add(200*time.Millisecond), 7*time.Second, 500*time.Millisecond, 3*time.Second)
	time.Sleep(2 * time.Second)

	cut := time.Now()
	proxy.Refuse()
	waitFor(t, nil, 4*haTTL, "another replica to take the tenant over", func() error {
		if h := holder(live); h == nil || h == procs[owner] {
			return fmt.Errorf("served by %s", nameOf(h))
		}
		return nil
	})
	if err := procs[owner].alive(); err != nil {
		t.Fatalf("the cut-off replica exited: %v", err)
	}
	var ownerLast time.Time
	for _, u := range s.TokenUses() {
		if u.First.Before(cut) && u.Last.After(ownerLast) {
			ownerLast = u.Last
		}
	}
	t.Logf("connection closed; the cut-off replica polled for the last time %s later", ownerLast.Sub(cut).Round(time.Millisecond))
	if ownerLast.Sub(cut) >= haTTL {
		t.Errorf("the cut-off replica polled %s after its connection was closed, not before its lease's TTL (%s) ended", ownerLast.Sub(cut), haTTL)
	}

	waitAlarmsOver(t, nil, s, lastEnd)
	byID, want := expectedEvents(s, alarmIDs)
	bus := newStreamReader(t, cluster.URL(), "RELAY_E2E")
	waitDelivered(t, nil, 60*time.Second, bus, len(want), nil, nil)
	msgs, err := bus.all()
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, msgs, byID, want)
	if o := s.PollerOverlaps(); len(o) > 0 {
		t.Errorf("two replicas polled the tenant at the same moment %d times; first: %+v", len(o), o[0])
	}
}
