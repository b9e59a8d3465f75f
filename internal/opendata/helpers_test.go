package opendata_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// epoch is when every test's fake clock starts.
var epoch = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

// harness is a simulator and a client on one fake clock, with the client's
// traffic and logs recorded.
type harness struct {
	sim    *sim.Server
	clk    *clock.Fake
	client *opendata.Client
	wire   *wiretap
	logs   *syncBuffer
	secret string
}

// newHarness starts a simulator for opts (rate limit off unless opts sets
// one) and a client of it (600 requests per minute unless cfg says
// otherwise). cfg may adjust the client's configuration.
func newHarness(t *testing.T, opts sim.Options, cfg func(*opendata.Config)) *harness {
	t.Helper()
	clk := clock.NewFake(epoch)
	opts.Clock = clk
	if opts.RateLimit == 0 {
		opts.RateLimit = -1
	}
	s := sim.StartTest(t, opts)
	id, secret := s.Credentials()
	h := &harness{sim: s, clk: clk, wire: &wiretap{next: http.DefaultTransport}, logs: &syncBuffer{}, secret: secret}
	c := opendata.Config{
		BaseURL:    s.URL(),
		AppID:      id,
		AppSecret:  secret,
		RateLimit:  600,
		Clock:      clk,
		HTTPClient: &http.Client{Transport: h.wire},
		Timeout:    5 * time.Second,
		Logger:     slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if cfg != nil {
		cfg(&c)
	}
	client, err := opendata.New(c)
	if err != nil {
		t.Fatalf("opendata.New: %v", err)
	}
	h.client = client
	return h
}

// drive runs f while moving the fake clock to each deadline the client
// sleeps for, so that waits for the rate budget pass at once.
func drive[T any](h *harness, f func() (T, error)) (T, error) {
	return driveWhen(h, func() bool { return true }, f)
}

// driveWhen is drive that moves the clock only while ready reports true.
// Callers running requests concurrently use it to hold the clock still while
// a request is between its start and its arrival, as real time would be.
func driveWhen[T any](h *harness, ready func() bool, f func() (T, error)) (T, error) {
	var (
		res  T
		err  error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		res, err = f()
	}()
	for {
		select {
		case <-done:
			return res, err
		default:
		}
		if h.clk.BlockUntil(1, 5*time.Millisecond) && ready() {
			if next, ok := h.clk.NextDeadline(); ok {
				h.clk.Set(next)
			}
		}
	}
}

// logins returns how many logins the simulator granted.
func (h *harness) logins() int { return h.sim.Stats().Logins }

// requests returns how many requests of endpoint reached the simulator.
func (h *harness) requests(endpoint string) int { return h.sim.Stats().Endpoints[endpoint].Requests }

// wiretap records what crosses the wire that tests must check: the tokens
// the upstream issued and the Authorization headers the client sent.
type wiretap struct {
	next http.RoundTripper

	mu     sync.Mutex
	tokens []string
	auth   []string
}

func (w *wiretap) RoundTrip(r *http.Request) (*http.Response, error) {
	if a := r.Header.Get("Authorization"); a != "" {
		w.mu.Lock()
		w.auth = append(w.auth, a)
		w.mu.Unlock()
	}
	resp, err := w.next.RoundTrip(r)
	if err == nil {
		if tok := resp.Header.Get("Token"); tok != "" {
			w.mu.Lock()
			w.tokens = append(w.tokens, tok)
			w.mu.Unlock()
		}
	}
	return resp, err
}

func (w *wiretap) issued() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.tokens...)
}

func (w *wiretap) authHeaders() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.auth...)
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
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

// nodeIDs returns the node ids of the fleet's devices that have one.
func nodeIDs(f sim.Fleet) []string {
	var out []string
	for _, d := range f.Devices {
		if d.NodeID != "" {
			out = append(out, d.NodeID)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func mustNotContain(t *testing.T, what, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			t.Fatalf("%s contains a secret (%.4s...): %s", what, s, text)
		}
	}
}
