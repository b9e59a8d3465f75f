package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// soakRules sends every event to the bus and the console.
const soakRules = `sinks:
  - name: bus
    type: nats
    jetstream: true
    create_stream: RELAY_E2E
  - name: console
    type: console
routes:
  - name: everything
    to: [bus, console]
`

// faultInjector fills the simulator with faults of every kind while it runs,
// paced by the relay's own requests so that about one in three is faulted
// whatever the relay's rate: on the alarm list, on login or on whatever
// endpoint comes next; and it expires every token every tokenEvery.
// Rate-limit answers, which halve the relay's rate and hold it back by the
// simulator's window, are injected only rateLimits times.
type faultInjector struct {
	s          *sim.Server
	rng        *rand.Rand
	tokenEvery time.Duration
	rateLimits int

	mu       sync.Mutex
	injected map[string]int
}

// run injects faults until stop is closed.
func (f *faultInjector) run(stop <-chan struct{}) error {
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	tokens := time.NewTicker(f.tokenEvery)
	defer tokens.Stop()
	kinds := []sim.FaultKind{sim.FaultServerError, sim.FaultEnvelope, sim.FaultMalformedJSON, sim.FaultTruncated,
		sim.FaultDelay, sim.FaultExpiredToken, sim.FaultDropAlarm, sim.FaultDropAlarm}
	rateLimitEvery := 8 + f.rng.IntN(5)
	next := 0 // the request count at which the next fault is injected
	for n := 1; ; {
		select {
		case <-stop:
			return nil
		case <-tokens.C:
			f.s.ExpireTokens()
			f.count("expired tokens (ExpireTokens)")
			continue
		case <-poll.C:
		}
		requests := f.s.Stats().Requests
		if requests < next {
			continue
		}
		next = requests + 2 + f.rng.IntN(3)
		ft := sim.Fault{Kind: kinds[f.rng.IntN(len(kinds))]}
		if f.rateLimits > 0 && n%rateLimitEvery == 0 {
			ft.Kind = sim.FaultRateLimited
			f.rateLimits--
		}
		endpoint := sim.EndpointAlarmList
		switch w := f.rng.IntN(10); {
		case ft.Kind == sim.FaultDropAlarm:
		case w == 0:
			endpoint = sim.EndpointLogin
		case w == 1:
			endpoint = sim.AnyEndpoint
		}
		switch ft.Kind {
		case sim.FaultServerError:
			ft.Status = []int{500, 502, 503, 504}[f.rng.IntN(4)]
		case sim.FaultDelay:
			ft.Delay = time.Duration(200+f.rng.IntN(700)) * time.Millisecond
		}
		if err := f.s.InjectFault(endpoint, ft); err != nil {
			return fmt.Errorf("injecting %v on %s: %w", ft.Kind, endpoint, err)
		}
		f.count(ft.Kind.String())
		n++
	}
}

func (f *faultInjector) count(kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.injected[kind]++
}

func (f *faultInjector) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var parts []string
	for k, n := range f.injected {
		parts = append(parts, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// TestUpstreamFaultSoak lets alarms churn while the simulator answers with
// every fault it knows: 5xx, C0001, malformed JSON, truncated bodies, slow
// answers, rate-limit answers, expired tokens and paging glitches. The relay
// must not crash, must produce exactly the transitions the simulator's
// history implies (no false one, none lost, none twice), must stay within
// the rate limit, and must log what went wrong in clear lines.
//
// Injected rate-limit answers carry a Retry-After of the simulator's window,
// so the window here is 6s (60 requests, the average of 600 per minute)
// rather than a minute that would stall the relay for a minute each time.
// The relay's budget promises RELAY_RATE_LIMIT per 60s, not per 6s, and its
// slots do not make room for re-logins, so it runs at 360 per minute: 36
// slots per window, leaving 24 requests for the logins the faults cause. A
// burst (retries outside the budget, a catch-up after a Retry-After) still
// fails the test.
func TestUpstreamFaultSoak(t *testing.T) {
	skipShort(t)
	const (
		seed   = 13
		alarms = 120
	)
	rng := rand.New(rand.NewPCG(seed, seed))
	s := startSim(t, sim.Options{
		Seed: seed, RateLimit: 60, Window: 6 * time.Second, HTTPErrors: true,
		AppSecret: newSecret(t, "app-"),
	})
	ns := natstest.StartServer(t, natstest.Config{})
	dir := t.TempDir()
	env := relayEnv(s, 360, dir, writeRules(t, dir, soakRules))
	env["RELAY_NATS_URL"] = ns.URL()

	p := startRelay(t, "relay", env)
	ops := p.opsAddr(15 * time.Second)
	waitReady(t, p, ops, 15*time.Second)
	begin := time.Now()

	// Alarms: a churning storm, a few that start and end between two polls,
	// and a few that stay ongoing, which must never get an end.
	ids, lastEnd := storm(t, s, rng, alarms, begin.Add(300*time.Millisecond), 18*time.Second, 500*time.Millisecond, 6*time.Second)
	for i := range 3 {
		at := begin.Add(time.Duration(2+5*i) * time.Second)
		id, err := s.Schedule(sim.Scheduled{Alarm: sim.AlarmSpec{Level: i, OccurredAt: at.Add(-2 * time.Second)}, StartAt: at, EndAt: at})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for i := range 4 {
		id, err := s.Schedule(sim.Scheduled{Alarm: sim.AlarmSpec{Level: i}, StartAt: begin.Add(time.Duration(1+4*i) * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}

	faults := &faultInjector{s: s, rng: rng, tokenEvery: 3 * time.Second,
		rateLimits: 1, injected: map[string]int{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var faultErr error
	wg.Go(func() { faultErr = faults.run(stop) })
	stopFaults := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
		s.ClearFaults()
	})
	t.Cleanup(stopFaults)
	sleepUntil(t, p, lastEnd.Add(time.Second))
	stopFaults()
	if faultErr != nil {
		t.Fatal(faultErr)
	}
	faultsEnded := time.Now()

	byID, want := expectedEvents(s, ids)
	bus := newStreamReader(t, ns.URL(), "RELAY_E2E")
	waitDelivered(t, p, 40*time.Second, bus, len(want), nil, nil)
	caughtUp := time.Since(faultsEnded)
	msgs, err := bus.all()
	if err != nil {
		t.Fatal(err)
	}
	// Exactly the simulator's transitions, each with its real times: an end
	// detected before the alarm ended, an inferred end or an end of an alarm
	// still ongoing fails here.
	checkStream(t, msgs, byID, want)

	st := s.Stats()
	if st.Violations != 0 {
		t.Errorf("the simulator refused %d requests for exceeding its rate limit (most in one %s window: %d, limit 60); "+
			"the arrivals up to the first refusal:\n%s",
			st.Violations, 6*time.Second, s.MaxArrivals(6*time.Second), arrivalsBeforeRefusal(s.Arrivals(), 6*time.Second))
	}
	if st.Faults == 0 {
		t.Error("the simulator answered no request with a fault")
	}

	fams, err := scrape(ops)
	if err != nil {
		t.Fatal(err)
	}
	for _, outcome := range []string{"ok", "transient", "auth", "rate_limited"} {
		if v, _ := metricValue(fams, "relay_upstream_requests_total", map[string]string{"outcome": outcome}); v == 0 {
			t.Errorf("relay_upstream_requests_total{outcome=%q} = 0, want the faults counted", outcome)
		}
	}
	if v, _ := metricValue(fams, "relay_upstream_rate_limit_signals_total", nil); v == 0 {
		t.Error("relay_upstream_rate_limit_signals_total = 0, want the injected rate-limit answers counted")
	}
	if v, _ := metricValue(fams, "relay_alarm_transitions_total", map[string]string{"inferred": "true"}); v != 0 {
		t.Errorf("relay_alarm_transitions_total{inferred=\"true\"} = %v, want 0", v)
	}

	code, took := p.terminate(20 * time.Second)
	if code != 0 {
		t.Errorf("relay exited with code %d after SIGTERM, want 0", code)
	}
	checkStopped(t, p)
	checkStore(t, env["RELAY_STATE_PATH"], []string{"bus", "console"})
	checkNoSecrets(t, "relay stderr", p.stderr.String(), env["RELAY_APP_SECRET"])
	summary := checkFaultLog(t, p)

	t.Logf("%d alarms, %d events; faults injected: %s; simulator: %d requests, %d faulted answers, %d violations, "+
		"at most %d requests in %s; caught up %s after the faults stopped; SIGTERM exit in %s",
		len(ids), len(want), faults.summary(), st.Requests, st.Faults, st.Violations, s.MaxArrivals(6*time.Second), 6*time.Second,
		caughtUp.Round(time.Millisecond), took.Round(time.Millisecond))
	t.Logf("relay warnings and errors by message:\n%s", summary)
}

// arrivalsBeforeRefusal lists the arrivals within window before the first
// one the rate limit refused.
func arrivalsBeforeRefusal(arrivals []sim.Arrival, window time.Duration) string {
	for i, a := range arrivals {
		if !a.Limited {
			continue
		}
		var b strings.Builder
		for _, x := range arrivals[:i+1] {
			if a.At.Sub(x.At) < window {
				fmt.Fprintf(&b, "%s %s refused=%v\n", x.At.Format("15:04:05.000"), x.Endpoint, x.Limited)
			}
		}
		return b.String()
	}
	return "(none refused)"
}

// checkFaultLog checks the relay's log after a fault soak: JSON lines only,
// no panic, every warning and error with a message and the facts of the
// case (at least one attribute besides time, level and msg), no value a
// formatting mistake wrote, and the upstream failures reported with the
// endpoint that failed. It returns the warning and error lines counted by
// message.
func checkFaultLog(t *testing.T, p *relayProc) string {
	t.Helper()
	if strings.Contains(p.stderr.String(), "panic") || strings.Contains(p.stderr.String(), "fatal error") {
		t.Errorf("%s's log mentions a panic or fatal error", p.name)
	}
	lines, err := p.logLines()
	if err != nil {
		t.Error(err)
	}
	counts := map[string]int{}
	upstream := 0
	for _, l := range lines {
		for k, v := range l {
			if s, ok := v.(string); ok && (strings.Contains(s, "%!") || strings.Contains(s, "<nil>")) {
				t.Errorf("log line %q: %s = %q is a formatting mistake", l.str("msg"), k, s)
			}
		}
		level := l.str("level")
		if level != "WARN" && level != "ERROR" {
			continue
		}
		msg := l.str("msg")
		counts[level+" "+msg]++
		if msg == "" || l.str("time") == "" || len(l) < 4 {
			t.Errorf("%s line without a message or without any detail: %v", level, l)
		}
		if strings.HasPrefix(l.str("err"), "opendata: ") {
			upstream++
		}
	}
	if upstream == 0 {
		t.Error("the relay logged no warning or error naming the upstream endpoint that failed")
	}
	var out []string
	for m, n := range counts {
		out = append(out, fmt.Sprintf("%5d  %s", n, m))
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}
