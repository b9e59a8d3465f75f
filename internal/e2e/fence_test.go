package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// pauseRules sends every event to a webhook and to five Slack channels,
// each paced at one message a second, so that every Slack sink has a
// backlog and waits for its pace when a replica is paused: five chances
// for a message to slip out at the resume. The URL of the webhook is the
// replica's tap (%s).
const pauseRules = `sinks:
  - name: ops
    type: webhook
    url: %s/hook
    secret_env: E2E_OPS_WEBHOOK_SECRET
  - { name: oncall-1, type: slack, channel: C0PAUSE1, digest: false }
  - { name: oncall-2, type: slack, channel: C0PAUSE2, digest: false }
  - { name: oncall-3, type: slack, channel: C0PAUSE3, digest: false }
  - { name: oncall-4, type: slack, channel: C0PAUSE4, digest: false }
  - { name: oncall-5, type: slack, channel: C0PAUSE5, digest: false }
routes:
  - name: everything
    to: [ops, oncall-1, oncall-2, oncall-3, oncall-4, oncall-5]
    suppress: false
`

// pauseTTL is the lease TTL of the pause test, short so that a pause of
// twice the TTL is short too.
const pauseTTL = 3 * time.Second

// tap is one replica's way to the fake Slack and the webhook receiver: a
// reverse proxy that notes when each request arrived, so that every request
// the fakes get is known to come from the replica that was given this tap's
// URL.
type tap struct {
	srv *httptest.Server

	mu       sync.Mutex
	arrivals []arrival
}

// arrival is one request that came through a tap.
type arrival struct {
	at   time.Time
	what string
}

// startTap starts a tap that passes /api/... to slack and the rest to hook.
func startTap(t *testing.T, slack *notifytest.Slack, hook *notifytest.Receiver) *tap {
	t.Helper()
	proxy := func(raw string) *httputil.ReverseProxy {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	}
	toSlack, toHook := proxy(slack.APIURL()), proxy(hook.URL())
	tp := &tap{}
	tp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tp.mu.Lock()
		tp.arrivals = append(tp.arrivals, arrival{at: time.Now(), what: r.Method + " " + r.URL.Path})
		tp.mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/api/") {
			toSlack.ServeHTTP(w, r)
			return
		}
		toHook.ServeHTTP(w, r)
	}))
	t.Cleanup(tp.srv.Close)
	return tp
}

// between returns the arrivals at or after from and before to.
func (tp *tap) between(from, to time.Time) []arrival {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []arrival
	for _, a := range tp.arrivals {
		if !a.at.Before(from) && a.at.Before(to) {
			out = append(out, a)
		}
	}
	return out
}

// signal sends sig to the replica's process.
func (p *relayProc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("%v to %s: %v", sig, p.name, err)
	}
}

// loggedAfter returns the time of the first line of p's log with message msg
// logged after t, and whether there is one.
func (p *relayProc) loggedAfter(msg string, t time.Time) (time.Time, bool) {
	lines, _ := p.logLines()
	for _, l := range lines {
		if l.str("msg") != msg {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, l.str("time"))
		if err == nil && at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

// pauses is how many times TestAReplicaPausedPastItsLeaseSendsNothingAfterItResumes
// pauses the holder: 4, or E2E_PAUSES. Without the fence a message slipped
// out at 8 of 12 resumes under the race detector and at 4 of 13 without it
// (docs/design.md §14): 4 pauses catch that about 99 times in 100 in CI,
// which runs with -race, and 3 times in 4 without.
func pauses(t *testing.T) int {
	t.Helper()
	if s := os.Getenv("E2E_PAUSES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("E2E_PAUSES=%q: want a number of pauses, 1 or more", s)
		}
		return n
	}
	return 4
}

// TestAReplicaPausedPastItsLeaseSendsNothingAfterItResumes runs three
// replicas on a state replicated by three NATS servers while alarms keep
// coming, stops the one that holds the tenant (SIGSTOP) for twice the lease
// TTL, lets it go on (SIGCONT), and checks that nothing reaches Slack or the
// webhook from it after it resumed, until it holds the tenant again: its
// lease ran out during the pause and another replica took the tenant over.
// Each replica reaches the fakes through a tap of its own, which tells who
// sent what when. It also logs how long after their start the replicas
// polled first.
func TestAReplicaPausedPastItsLeaseSendsNothingAfterItResumes(t *testing.T) {
	skipShort(t)
	t.Parallel()
	const (
		rate = 600
		seed = 17
	)
	n := pauses(t)
	rng := rand.New(rand.NewPCG(seed, seed))
	s := startSim(t, sim.Options{Seed: seed, RateLimit: rate, Stations: 3, AppSecret: newSecret(t, "app-")})
	cluster := natstest.StartCluster(t, 3)
	hookSecret := newSecret(t, "whsec_")
	hook := notifytest.NewReceiver(t, hookSecret)
	slackToken := newSecret(t, "xoxb-")
	slack := notifytest.NewSlack(t, slackToken)
	dir := t.TempDir()

	ids := []string{"r1", "r2", "r3"}
	taps := map[string]*tap{}
	procs := map[string]*relayProc{}
	var live []*relayProc
	relayBinary(t) // built before the clock starts
	started := time.Now()
	for _, id := range ids {
		tp := startTap(t, slack, hook)
		taps[id] = tp
		if err := os.MkdirAll(filepath.Join(dir, id), 0o700); err != nil {
			t.Fatal(err)
		}
		rules := filepath.Join(dir, id, "rules.yaml")
		if err := os.WriteFile(rules, []byte(fmt.Sprintf(pauseRules, tp.srv.URL)), 0o600); err != nil {
			t.Fatal(err)
		}
		env := haEnv(t, relayEnv(s, rate, dir, rules), cluster, id, dir)
		env["RELAY_LEASE_TTL"] = pauseTTL.String()
		env["E2E_OPS_WEBHOOK_SECRET"] = hookSecret
		env["RELAY_SLACK_TOKEN"] = slackToken
		env["RELAY_SLACK_API_URL"] = tp.srv.URL + "/api/"
		procs[id] = startRelay(t, id, env)
		live = append(live, procs[id])
	}
	waitFor(t, nil, 30*time.Second, "a replica to poll", func() error {
		if len(s.TokenUses()) == 0 {
			return fmt.Errorf("no poll yet")
		}
		return nil
	})
	t.Logf("the replicas started together polled first %s after their start", s.TokenUses()[0].First.Sub(started).Round(10*time.Millisecond))
	// A storm for longer than the pauses take keeps every sink busy: the
	// Slack sinks' backlogs only grow.
	storm(t, s, rng, 40*n, time.Now(), time.Duration(n)*4*pauseTTL, 2*time.Second, 8*time.Second)

	idOf := map[*relayProc]string{}
	for id, p := range procs {
		idOf[p] = id
	}
	var late []string
	for k := range n {
		// The holder, once its Slack sinks have a backlog: each sends at
		// its pace, a message a second.
		var victim *relayProc
		waitFor(t, nil, 10*pauseTTL, "a replica to serve the tenant and send to Slack", func() error {
			if victim = holder(live); victim == nil {
				return fmt.Errorf("no replica serves the tenant")
			}
			now := time.Now()
			got := 0
			for _, a := range taps[idOf[victim]].between(now.Add(-2*time.Second), now) {
				if strings.Contains(a.what, "/api/") {
					got++
				}
			}
			if got < 6 {
				return fmt.Errorf("%s sent %d requests to Slack in the last 2s, want its channels' pace", victim.name, got)
			}
			return nil
		})
		victim.signal(syscall.SIGSTOP)
		time.Sleep(2 * pauseTTL)
		var during *relayProc
		for _, p := range live {
			if p != victim && holder([]*relayProc{p}) != nil {
				during = p
			}
		}
		resumed := time.Now()
		victim.signal(syscall.SIGCONT)
		waitFor(t, victim, 4*pauseTTL, victim.name+" to stop the tenant after it resumed", func() error {
			if _, ok := victim.loggedAfter("tenant stopped", resumed); !ok {
				return fmt.Errorf("no \"tenant stopped\" after the resume")
			}
			return nil
		})
		// What came from it between the resume and its next start of the
		// tenant, under a new lease, was sent under the lease it lost.
		until := time.Now()
		if again, ok := victim.loggedAfter("tenant started", resumed); ok {
			until = again
		}
		sent := taps[idOf[victim]].between(resumed, until)
		t.Logf("pause %d: %s stopped for %s while %s served the tenant; after it resumed it sent %d requests before it stopped",
			k+1, victim.name, 2*pauseTTL, nameOf(during), len(sent))
		for _, a := range sent {
			late = append(late, fmt.Sprintf("pause %d: %s %s %s after it resumed", k+1, victim.name, a.what, a.at.Sub(resumed).Round(time.Millisecond)))
		}
	}
	if len(late) > 0 {
		t.Errorf("a replica paused past its lease sent %d requests after it resumed:\n%s", len(late), strings.Join(late, "\n"))
	}
	var per []string
	for _, id := range ids {
		per = append(per, fmt.Sprintf("%s %d", id, len(taps[id].between(started, time.Now()))))
	}
	t.Logf("requests per replica: %s", strings.Join(per, ", "))
	_, appSecret := s.Credentials()
	for _, p := range live {
		checkNoSecrets(t, p.name+" stderr", p.stderr.String(), appSecret, hookSecret, slackToken)
	}
}
