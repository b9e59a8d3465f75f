package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/webhook"
)

// run returns the deliveries of the starts of n distinct alarms, a0 to
// a<n-1>, as the Deliverer hands them to SendAll.
func run(t *testing.T, n int) []notify.Delivery {
	ds := make([]notify.Delivery, n)
	for i := range ds {
		ds[i] = sinktest.Delivery(t, sinktest.Event(fmt.Sprintf("a%d", i), 0, event.Start), nil)
	}
	return ds
}

// eventID returns the id of the event a request carries.
func eventID(t *testing.T, r *http.Request) string {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Errorf("reading a request: %v", err)
		return ""
	}
	ev, err := event.Unmarshal(b)
	if err != nil {
		t.Errorf("a request that is not an event: %v", err)
	}
	return ev.ID
}

func newSink(t *testing.T, url string, concurrency int) *webhook.Sink {
	t.Helper()
	s, err := webhook.New(webhook.Config{Name: "ops", URL: url, Concurrency: concurrency,
		Headers: map[string]string{"Authorization": "Bearer HeaderTokenValue77"}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A receiver counting the requests it holds at once never holds more than
// concurrency of a run, and holds that many: its requests wait for each
// other by concurrency before they are answered. Concurrency 1 sends one
// request at a time; 0 is the default, 8.
func TestSendAllHasAtMostConcurrencyRequestsInFlight(t *testing.T) {
	for _, c := range []struct{ concurrency, want int }{{1, 1}, {3, 3}, {0, 8}, {12, 12}} {
		t.Run(fmt.Sprint(c.concurrency), func(t *testing.T) {
			var (
				mu       sync.Mutex
				received []string
			)
			gate := notifytest.NewGate(c.want)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id := eventID(t, r)
				mu.Lock()
				received = append(received, id)
				mu.Unlock()
				if !gate.Pass(5 * time.Second) {
					t.Errorf("%s waited 5 s for %d requests in flight", id, c.want)
				}
				w.WriteHeader(http.StatusNoContent)
			}))
			defer srv.Close()
			ds := run(t, 48)
			out := newSink(t, srv.URL+"/hook", c.concurrency).SendAll(context.Background(), ds)

			mu.Lock()
			defer mu.Unlock()
			if most := gate.Most(); most != c.want {
				t.Errorf("at most %d requests in flight, want %d", most, c.want)
			}
			want := make([]string, len(ds))
			for i, d := range ds {
				want[i] = d.EventID
				if out[i].Err != nil {
					t.Errorf("outcome %d: %v", i, out[i].Err)
				}
			}
			slices.Sort(want)
			slices.Sort(received)
			if !slices.Equal(received, want) {
				t.Errorf("received %v, want each event of the run once", received)
			}
		})
	}
}

// A 429 with Retry-After in the middle of a run stops it: the requests not
// yet sent are not sent, and their outcomes are retries after the same wait;
// requests in flight complete. The errors hold no secret.
func TestSendAllStopsTheRunAtA429WithRetryAfter(t *testing.T) {
	for _, c := range []struct {
		concurrency int
		failing     string
		sent        []string // the requests the receiver gets
	}{
		// One at a time: a0 to a2 are delivered, a3 is refused.
		{1, "a3:start", []string{"a0:start", "a1:start", "a2:start", "a3:start"}},
		// Four at a time: a0, a2 and a3 are in flight when a1 is refused.
		{4, "a1:start", []string{"a0:start", "a1:start", "a2:start", "a3:start"}},
	} {
		t.Run(fmt.Sprint(c.concurrency), func(t *testing.T) {
			var (
				mu       sync.Mutex
				received []string
				all      = make(chan struct{}) // every request of the window came
				release  = make(chan struct{})
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id := eventID(t, r)
				mu.Lock()
				if received = append(received, id); len(received) == c.concurrency {
					close(all)
				}
				mu.Unlock()
				if id == c.failing {
					<-all
					w.Header().Set("Retry-After", "30")
					w.WriteHeader(http.StatusTooManyRequests)
					_, _ = io.WriteString(w, "slow down, Bearer HeaderTokenValue77")
					if c.concurrency > 1 {
						// The others in flight are answered once the sink
						// has had ample time to read the 429.
						time.AfterFunc(300*time.Millisecond, func() { close(release) })
					}
					return
				}
				if c.concurrency > 1 {
					<-release
				}
				w.WriteHeader(http.StatusOK)
			}))
			defer srv.Close()
			ds := run(t, 10)
			out := newSink(t, srv.URL+"/hook?token=QueryTokenValue99", c.concurrency).SendAll(context.Background(), ds)

			mu.Lock()
			got := slices.Sorted(slices.Values(received))
			mu.Unlock()
			if !slices.Equal(got, c.sent) {
				t.Fatalf("the receiver got %v, want %v and nothing after the 429", got, c.sent)
			}
			for i, o := range out {
				id := ds[i].EventID
				if o.Err != nil && (strings.Contains(o.Err.Error(), "TokenValue") || strings.Contains(o.Err.Error(), "token=")) {
					t.Errorf("outcome of %s holds a secret: %v", id, o.Err)
				}
				switch {
				case id == c.failing:
					if o.Err == nil || !o.Result.Retry || o.Result.RetryAfter != 30*time.Second || !strings.Contains(o.Err.Error(), "HTTP 429") {
						t.Errorf("outcome of %s = %+v, want the 429, retried after 30s", id, o)
					}
				case slices.Contains(c.sent, id):
					if o.Err != nil {
						t.Errorf("outcome of %s: %v, want it delivered", id, o.Err)
					}
				default:
					want := fmt.Sprintf(`webhook sink "ops": POST %s not attempted: %s/…?… asked to wait 30s when sent %s`, id, srv.URL, c.failing)
					if o.Err == nil || o.Err.Error() != want {
						t.Errorf("outcome of %s: %v, want %q", id, o.Err, want)
					}
					if _, ok := errors.AsType[*notify.NotAttemptedError](o.Err); !ok {
						t.Errorf("outcome of %s: %T is no *notify.NotAttemptedError", id, o.Err)
					}
					if !o.Result.Retry || o.Result.RetryAfter != 30*time.Second {
						t.Errorf("outcome of %s: retry %v after %s, want a retry after 30s", id, o.Result.Retry, o.Result.RetryAfter)
					}
				}
			}
		})
	}
}

// A 400 is final for its own delivery: the rest of the run is sent.
func TestSendAllGoesOnAfterA400(t *testing.T) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := eventID(t, r)
		mu.Lock()
		n++
		mu.Unlock()
		if id == "a2:start" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	out := newSink(t, srv.URL, 3).SendAll(context.Background(), run(t, 9))
	if n != 9 {
		t.Fatalf("the receiver got %d requests, want all 9", n)
	}
	for i, o := range out {
		if (o.Err != nil) != (i == 2) || o.Result.Retry {
			t.Errorf("outcome %d = %+v, want only a2:start refused for good", i, o)
		}
	}
}

func TestConcurrencyOption(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       string // the summary, or the problem
	}{
		{"default", "url: https://hooks.example/in\n", "unsigned, timeout 10s, concurrency 8"},
		{"one at a time", "url: https://hooks.example/in\nconcurrency: 1\n", "unsigned, timeout 10s, concurrency 1"},
		{"the most", "url: https://hooks.example/in\nconcurrency: 64\n", "unsigned, timeout 10s, concurrency 64"},
		{"zero", "url: https://hooks.example/in\nconcurrency: 0\n", "rules.yaml:2: sinks[0].concurrency: 0 is out of range: want 1 (one request at a time) to 64 requests in flight at once"},
		{"too many", "url: https://hooks.example/in\nconcurrency: 65\n", "65 is out of range: want 1 (one request at a time) to 64"},
		{"negative", "url: https://hooks.example/in\nconcurrency: -2\n", "-2 is out of range"},
		{"a word", "url: https://hooks.example/in\nconcurrency: eight\n", "sinks[0].concurrency: want a whole number from 1 (one request at a time) to 64, got a string"},
		{"a fraction", "url: https://hooks.example/in\nconcurrency: 2.5\n", "want a whole number from 1 (one request at a time) to 64, got a number"},
		{"a list", "url: https://hooks.example/in\nconcurrency: [8]\n", "got a list"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := sinktest.DecodeErr(webhook.Type, c.yaml, nil)
			if err != nil {
				if !strings.Contains(err.Error(), c.want) {
					t.Fatalf("problem %q, want one saying %q", err, c.want)
				}
				return
			}
			if got := strings.Join(cfg.Summary(), ", "); got != c.want {
				t.Fatalf("summary %q, want %q", got, c.want)
			}
		})
	}
}

func TestNewRefusesConcurrencyOutOfRange(t *testing.T) {
	for _, n := range []int{-1, webhook.MaxConcurrency + 1} {
		_, err := webhook.New(webhook.Config{Name: "ops", URL: "https://hooks.example/in", Concurrency: n})
		if err == nil || !strings.Contains(err.Error(), `webhook sink "ops": concurrency`) || !strings.Contains(err.Error(), "want 1 (one request at a time) to 64") {
			t.Errorf("concurrency %d: %v, want an error naming the range", n, err)
		}
	}
}

// A sink closes the idle connections of the transport it made for itself
// (fenced, under a replica's lease, or not), and leaves those of a
// transport it was given to their owner.
func TestCloseClosesTheIdleConnectionsOfTheSinksOwnTransport(t *testing.T) {
	fence := &notifytest.SwitchFence{}
	for _, tc := range []struct {
		name string
		rt   func() http.RoundTripper
		// closes says Close should close the sink's idle connections.
		closes bool
	}{
		{"the default transport", func() http.RoundTripper { return nil }, true},
		{"a fenced transport", func() http.RoundTripper { return notify.FencedTransport(fence.Check, nil) }, true},
		{"a transport it was given", func() http.RoundTripper { return &http.Transport{} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			open := map[net.Conn]bool{}
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusNoContent)
			}))
			srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
				mu.Lock()
				defer mu.Unlock()
				open[c] = s != http.StateClosed && s != http.StateHijacked
			}
			srv.Start()
			t.Cleanup(srv.Close)
			openConns := func() int {
				mu.Lock()
				defer mu.Unlock()
				n := 0
				for _, o := range open {
					if o {
						n++
					}
				}
				return n
			}
			rt := tc.rt()
			s, err := webhook.New(webhook.Config{Name: "ops", URL: srv.URL, Concurrency: 4, HTTPClient: &http.Client{Transport: rt}})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range s.SendAll(context.Background(), run(t, 8)) {
				if o.Err != nil {
					t.Fatal(o.Err)
				}
			}
			if n := openConns(); n == 0 {
				t.Fatal("no connection open after the run")
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// The server notes a closed connection when it reads the end.
			deadline := time.Now().Add(5 * time.Second)
			for openConns() > 0 && tc.closes && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if n := openConns(); tc.closes && n > 0 {
				t.Errorf("%d of the sink's idle connections still open after Close", n)
			}
			if n := openConns(); !tc.closes && n == 0 {
				t.Error("Close closed the connections of a transport the sink was given")
			}
			if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
				c.CloseIdleConnections()
			}
		})
	}
}
