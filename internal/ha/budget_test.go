package ha_test

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/ha"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/testwait"
)

var epoch = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

func newBudget(t *testing.T, nc *nats.Conn, bucket, baseURL string) *ha.Budget {
	t.Helper()
	b, err := ha.NewBudget(newJS(t, nc), ha.BudgetConfig{
		Bucket: bucket, Replicas: 3, Group: "egress-1", BaseURL: baseURL, Timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newClient returns a client of s on clk, sharing shared when it is not
// nil, logging to logs when that is not nil.
func newClient(t *testing.T, s *sim.Server, clk clock.Clock, shared opendata.SharedBudget, logs *syncBuffer) *opendata.Client {
	t.Helper()
	id, secret := s.Credentials()
	cfg := opendata.Config{BaseURL: s.URL(), AppID: id, AppSecret: secret, RateLimit: 10, Clock: clk, Timeout: 5 * time.Second}
	if shared != nil {
		cfg.Shared = shared
	}
	if logs != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	c, err := opendata.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTwoReplicasOfOneEgressGroupStayWithinTheUpstreamLimit: two clients
// with budgets of their own, each on its own NATS connection, request as fast
// as their budgets let them from one simulator (one IP). Sharing the group's
// budget in KV, the simulator counts no rate-limit violation and never more
// than 10 arrivals in a minute; without it, it counts violations.
func TestTwoReplicasOfOneEgressGroupStayWithinTheUpstreamLimit(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	for _, shared := range []bool{true, false} {
		name := map[bool]string{true: "shared", false: "not shared"}[shared]
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(epoch)
			s := sim.StartTest(t, sim.Options{RateLimit: 10, Clock: clk})
			if shared {
				// The first reservation makes the bucket, replicated on three
				// servers; on a loaded machine that outlasts a reservation's
				// 2 s timeout, and a client that cannot reach the bucket goes
				// on alone on its own budget, as it should, which is not what
				// this test measures. Made here with a start long past, which
				// holds no slot.
				warm := newBudget(t, c.Connect(), "budget", s.URL())
				testwait.For(t, 30*time.Second, "the shared budget's bucket to be made", func() bool {
					_, err := warm.Reserve(t.Context(), epoch.Add(-time.Hour), 10, opendata.Bid{})
					return err == nil
				})
			}
			var clients []*opendata.Client
			for range 2 {
				var b opendata.SharedBudget
				if shared {
					b = newBudget(t, c.Connect(), "budget", s.URL())
				}
				clients = append(clients, newClient(t, s, clk, b, nil))
			}
			const perClient = 30
			var (
				active atomic.Int32
				wg     sync.WaitGroup
			)
			active.Store(int32(len(clients)))
			for _, cl := range clients {
				wg.Go(func() {
					defer active.Add(-1)
					for range perClient {
						// A refused request is what is counted; the client
						// goes on.
						_, _ = cl.TenantStations(t.Context(), opendata.StationListQuery{})
					}
				})
			}
			// The fake clock moves only while every client still running
			// sleeps on it: never while a request is between its
			// reservation and its arrival, as real time would not jump.
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
		drive:
			for {
				select {
				case <-done:
					break drive
				default:
				}
				n := int(active.Load())
				if n > 0 && clk.BlockUntil(n, 5*time.Millisecond) && clk.Waiters() >= int(active.Load()) {
					if next, ok := clk.NextDeadline(); ok {
						clk.Set(next)
					}
				}
			}
			st := s.Stats()
			maxArr := s.MaxArrivals(time.Minute)
			t.Logf("%d requests over %v of simulated time: %d violations, at most %d arrivals in a minute",
				st.Requests, clk.Now().Sub(epoch).Round(time.Second), st.Violations, maxArr)
			if shared {
				if st.Violations != 0 || maxArr > 10 {
					t.Fatalf("sharing the budget: %d violations and %d arrivals in a minute; want 0 and at most 10", st.Violations, maxArr)
				}
				if st.Requests < 2*perClient {
					t.Fatalf("%d requests arrived; want %d and the logins", st.Requests, 2*perClient)
				}
			} else if st.Violations == 0 {
				t.Fatal("without the shared budget the simulator counted no violation: the test cannot tell sharing from not")
			}
		})
	}
}

// TestConcurrentReservationsAdmitExactlyTheLimit: many reservations at one
// instant from two processes race on the key; compare-and-set admits exactly
// the limit, and the next window admits the limit again.
func TestConcurrentReservationsAdmitExactlyTheLimit(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	budgets := []*ha.Budget{
		newBudget(t, c.Connect(), "budget", "https://upstream.example:8443"),
		newBudget(t, c.Connect(), "budget", "https://UPSTREAM.example:8443/other/path"),
	}
	// Each process records a start long before, one after the other:
	// opening the bucket is not what this test races.
	for _, b := range budgets {
		if _, err := b.Reserve(ctxTimeout(t, 10*time.Second), epoch.Add(-time.Hour), 10, opendata.Bid{}); err != nil {
			testwait.For(t, 10*time.Second, "the budget bucket cannot be opened", func() bool {
				_, err := b.Reserve(ctxTimeout(t, 10*time.Second), epoch.Add(-time.Hour), 10, opendata.Bid{})
				return err == nil
			})
		}
	}
	for _, at := range []time.Time{epoch, epoch.Add(61 * time.Second)} {
		var (
			admitted atomic.Int32
			wg       sync.WaitGroup
		)
		for i := range 8 {
			wg.Go(func() {
				for range 4 {
					wait, err := budgets[i%2].Reserve(t.Context(), at, 10, opendata.Bid{})
					if err != nil {
						t.Errorf("Reserve: %v", err)
						return
					}
					if wait == 0 {
						admitted.Add(1)
					} else if want := at.Add(61 * time.Second).Sub(at); wait > want {
						t.Errorf("wait %v, want at most %v", wait, want)
					}
				}
			})
		}
		wg.Wait()
		if got := admitted.Load(); got != 10 {
			t.Fatalf("at %v: %d of 32 concurrent reservations admitted; want exactly 10", at, got)
		}
	}
}

// TestAnUnreachableSharedBudgetIsWarnedAboutOnceAndPollingGoesOn: while the
// group's KV cannot be reached, every request still goes out within the
// client's own budget after the reservation's timeout, the client warns once,
// and says so once when the budget is shared again.
func TestAnUnreachableSharedBudgetIsWarnedAboutOnceAndPollingGoesOn(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	p := c.StartProxy(0)
	nc := connectVia(t, p)
	clk := clock.NewFake(epoch)
	s := sim.StartTest(t, sim.Options{RateLimit: 10, Clock: clk})
	// The bucket exists, as it does after the first replica's first start.
	if _, err := newJS(t, c.Connect()).CreateKeyValue(ctxTimeout(t, 10*time.Second), jetstream.KeyValueConfig{
		Bucket: "budget", History: 1, TTL: 2 * time.Minute, Replicas: 3,
	}); err != nil {
		t.Fatal(err)
	}
	b, err := ha.NewBudget(newJS(t, nc), ha.BudgetConfig{
		Bucket: "budget", Replicas: 3, Group: "egress-1", BaseURL: s.URL(), Timeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	client := newClient(t, s, clk, b, logs)
	request := func() {
		t.Helper()
		if err := drive(clk, func() error {
			_, err := client.TenantStations(t.Context(), opendata.StationListQuery{})
			return err
		}); err != nil {
			t.Fatalf("request: %v", err)
		}
	}
	request()
	p.Blackhole()
	for range 3 {
		request()
	}
	p.Heal()
	made := 4
	testwait.For(t, 10*time.Second, "the budget was not shared again after the partition healed", func() bool {
		request()
		made++
		return strings.Contains(logs.String(), "shared with other processes again")
	})
	out := logs.String()
	if n := strings.Count(out, "cannot share the request budget"); n != 1 {
		t.Fatalf("warned %d times, want once:\n%s", n, out)
	}
	if n := strings.Count(out, "shared with other processes again"); n != 1 {
		t.Fatalf("said %d times that the budget is shared again, want once:\n%s", n, out)
	}
	if st := s.Stats(); st.Requests != made+1 || st.Violations != 0 {
		t.Fatalf("%d requests and %d violations; want %d (and the login) and 0", st.Requests, st.Violations, made)
	}
	// The starts made while the bucket was out of reach were recorded with
	// the first reservation after it: the other replicas count them.
	if made+1 <= 10 {
		kv, err := newJS(t, c.Connect()).KeyValue(ctxTimeout(t, 5*time.Second), "budget")
		if err != nil {
			t.Fatal(err)
		}
		_, key, _ := strings.Cut(b.String(), "/")
		e, err := kv.Get(ctxTimeout(t, 5*time.Second), key)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(string(e.Value()), ",") + 1; got != made+1 {
			t.Fatalf("the group's key holds %d starts (%s); want all %d made", got, e.Value(), made+1)
		}
	}
}

// TestBudgetRefusesBadSettings: the errors name the value.
func TestBudgetRefusesBadSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  ha.BudgetConfig
		want string
	}{
		{"group with a dot", ha.BudgetConfig{Group: "a.b", BaseURL: "https://x"}, `egress group "a.b"`},
		{"no group", ha.BudgetConfig{BaseURL: "https://x"}, `egress group ""`},
		{"no host", ha.BudgetConfig{Group: "g", BaseURL: "/path"}, `base URL "/path" has no host`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ha.NewBudget(nil, tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewBudget = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// drive runs f while moving clk to each deadline f's client sleeps for, so
// that waits for the rate budget pass at once.
func drive(clk *clock.Fake, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	for {
		select {
		case err := <-done:
			return err
		default:
		}
		if clk.BlockUntil(1, 5*time.Millisecond) {
			if next, ok := clk.NextDeadline(); ok {
				clk.Set(next)
			}
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// groupBidder returns the budget of egress group egress-1 at baseURL, in
// bucket budget, as replica name bids in it.
func groupBidder(t *testing.T, nc *nats.Conn, name, baseURL string) *ha.Budget {
	t.Helper()
	b, err := ha.NewBudget(newJS(t, nc), ha.BudgetConfig{Bucket: "budget", Replicas: 3, Group: "egress-1", BaseURL: baseURL,
		Bidder: name, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reserveBid reserves a start at at with bid in b, trying again until the
// bucket takes it, and returns how long the request must wait.
func reserveBid(t *testing.T, b *ha.Budget, at time.Time, bid opendata.Bid) time.Duration {
	t.Helper()
	var wait time.Duration
	testwait.For(t, 30*time.Second, "a reservation to reach the bucket", func() bool {
		w, err := b.Reserve(t.Context(), at, 10, bid)
		wait = w
		return err == nil
	})
	return wait
}

// TestTheGroupsMostUrgentRequestTakesTheFreeSlot: a replica whose tenant's
// request waits with the larger backlog takes the next free slot of the
// group's budget, although another replica's request with a smaller one
// asked first; a bid whose request went away stops counting; a key written
// by a relay before bids is read.
func TestTheGroupsMostUrgentRequestTakesTheFreeSlot(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	nc := c.Connect()
	bidder := func(name, baseURL string) *ha.Budget { return groupBidder(t, nc, name, baseURL) }
	reserve := func(b *ha.Budget, at time.Time, bid opendata.Bid) time.Duration {
		t.Helper()
		return reserveBid(t, b, at, bid)
	}
	calm, busy := bidder("calm", "https://upstream.example"), bidder("busy", "https://upstream.example")
	for range 10 {
		if w := reserve(calm, epoch, opendata.Bid{}); w != 0 {
			t.Fatalf("one of the first ten starts waits %s", w)
		}
	}
	// The budget is full until epoch + 61 s: the busy tenant's request
	// waits for it, with its bid in the key.
	if w := reserve(busy, epoch.Add(30*time.Second), opendata.Bid{Backlog: 50}); w != 31*time.Second {
		t.Fatalf("a request while the budget is full waits %s; want 31s", w)
	}
	free := epoch.Add(61 * time.Second)
	if w := reserve(calm, free, opendata.Bid{Backlog: 5}); w == 0 {
		t.Fatal("the calm tenant took the free slot while the busy one bid more for it")
	}
	if w := reserve(busy, free, opendata.Bid{Backlog: 50}); w != 0 {
		t.Fatalf("the busy tenant's request waits %s for the free slot it bid most for", w)
	}
	if w := reserve(calm, free.Add(250*time.Millisecond), opendata.Bid{Backlog: 5}); w != 0 {
		t.Fatalf("the calm tenant waits %s once the busy one took its slot", w)
	}
	// An overdue tenant goes before any backlog.
	other := "https://other.example"
	calm, busy = bidder("calm", other), bidder("busy", other)
	for range 10 {
		reserve(calm, epoch, opendata.Bid{})
	}
	reserve(calm, epoch.Add(30*time.Second), opendata.Bid{Overdue: time.Second})
	if w := reserve(busy, free, opendata.Bid{Backlog: 1e6}); w == 0 {
		t.Fatal("a tenant with a backlog took the slot an overdue tenant bid for")
	}
	// The overdue tenant's request went away: its bid stops counting.
	if w := reserve(busy, free.Add(4*time.Second), opendata.Bid{Backlog: 1e6}); w != 0 {
		t.Fatalf("a bid of a request that went away still holds the slot: wait %s", w)
	}
	// A relay before bids wrote a bare array of starts.
	old := bidder("calm", "https://old.example")
	kv, err := newJS(t, nc).KeyValue(t.Context(), "budget")
	if err != nil {
		t.Fatal(err)
	}
	_, key, _ := strings.Cut(old.String(), "/")
	starts := make([]string, 10)
	for i := range starts {
		starts[i] = strconv.FormatInt(epoch.UnixMilli(), 10)
	}
	if _, err := kv.Put(t.Context(), key, []byte("["+strings.Join(starts, ",")+"]")); err != nil {
		t.Fatal(err)
	}
	if w := reserve(old, epoch.Add(time.Second), opendata.Bid{}); w != 60*time.Second {
		t.Fatalf("with ten starts of a relay before bids, a request waits %s; want 60s", w)
	}
}
