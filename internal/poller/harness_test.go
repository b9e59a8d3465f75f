package poller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/store"
)

// t0 is when every scenario starts, on the fake clock.
var t0 = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

// harness runs one scenario: the simulator, the real client and the real
// store on one fake clock, and a poller driven slot by slot.
type harness struct {
	t        *testing.T
	ctx      context.Context
	clk      *clock.Fake
	sim      *sim.Server
	tap      *tap
	path     string
	store    *store.Store
	client   *opendata.Client
	p        *Poller
	metrics  *Metrics
	log      *slog.Logger
	logs     *syncBuffer
	seq      atomic.Int64 // orders requests and events
	confirm  time.Duration
	lookback time.Duration
	// rate is the relay's rate limit, 10 requests a minute unless a test
	// that covers many hours of the fake clock lowers it.
	rate int

	mu     sync.Mutex
	events []event.Event
	evSeq  []int64
}

// newHarness starts a simulator on a fake clock; open builds the rest.
// Tests may change confirm and lookback before the first open.
func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessWith(t, nil)
}

// newHarnessWith is newHarness with the simulator's options changed by opts,
// for an upstream that misbehaves.
func newHarnessWith(t *testing.T, opts func(*sim.Options)) *harness {
	t.Helper()
	clk := clock.NewFake(t0)
	h := &harness{
		t:        t,
		ctx:      t.Context(),
		clk:      clk,
		path:     filepath.Join(t.TempDir(), "relay.db"),
		confirm:  time.Minute,
		lookback: 24 * time.Hour,
		rate:     10,
		logs:     &syncBuffer{},
	}
	h.log = slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, h.logs), &slog.HandlerOptions{Level: slog.LevelInfo}))
	o := sim.Options{Seed: 7, Clock: clk, RateLimit: 10}
	if opts != nil {
		opts(&o)
	}
	h.sim = sim.StartTest(t, o)
	h.tap = &tap{base: http.DefaultTransport, seq: &h.seq,
		hideRecovered: map[string]bool{}, hideCurrent: map[string]int{}}
	return h
}

// open opens the store (creating it on the first call) and builds a new
// client and poller, as a process start does.
func (h *harness) open(mode store.Bootstrap) {
	h.t.Helper()
	st, err := store.Open(h.path, store.Options{Bootstrap: mode, Clock: h.clk, LockTimeout: time.Second})
	if err != nil {
		h.t.Fatalf("open store: %v", err)
	}
	h.store = st
	h.t.Cleanup(func() { _ = st.Close() })
	id, secret := h.sim.Credentials()
	h.client, err = opendata.New(opendata.Config{
		BaseURL: h.sim.URL(), AppID: id, AppSecret: secret, RateLimit: h.rate, Clock: h.clk,
		HTTPClient: &http.Client{Transport: h.tap}, Logger: h.log,
	})
	if err != nil {
		h.t.Fatalf("client: %v", err)
	}
	h.metrics = NewMetrics(prometheus.NewRegistry())
	h.p, err = New(Config{
		Client: h.client, Store: st, RateLimit: h.rate, Lookback: h.lookback,
		SweepOverlap: 2 * time.Minute, ConfirmTimeout: h.confirm, SweepEvery: 4,
		Clock: h.clk, Logger: h.log, Metrics: h.metrics, OnEvents: h.record,
	})
	if err != nil {
		h.t.Fatalf("poller: %v", err)
	}
	if err := h.p.load(); err != nil {
		h.t.Fatalf("load: %v", err)
	}
}

// spaced makes the poller send one request a slot, as it does once the
// upstream refused a request sent right after another (bursts_admitted
// refuted): for tests of what happens between a current read and the query
// that would otherwise follow it in the same slot.
func (h *harness) spaced() {
	h.t.Helper()
	h.p.facts.BurstAnswered(true)
	if h.p.pairing() {
		h.t.Fatal("the poller still pairs requests")
	}
}

// close stops the process: the poller is dropped and the store closed.
func (h *harness) close() {
	h.t.Helper()
	if err := h.store.Close(); err != nil {
		h.t.Fatalf("close store: %v", err)
	}
	h.p = nil
}

func (h *harness) record(evs []event.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range evs {
		h.events = append(h.events, e)
		h.evSeq = append(h.evSeq, h.seq.Add(1))
	}
}

// step runs one slot and moves the clock to the start of the next. While the
// slot waits for the client's budget, the clock is moved to the budget's
// next deadline, as time would pass.
func (h *harness) step() {
	h.t.Helper()
	done := make(chan time.Time, 1)
	go func() { done <- h.p.step(h.ctx) }()
	limit := time.After(20 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case next := <-done:
			h.clk.Set(next)
			return
		case <-limit:
			h.t.Fatal("a slot did not end within 20 s of real time")
		case <-tick.C:
			if at, ok := h.clk.NextDeadline(); ok {
				h.clk.Set(at)
			}
		}
	}
}

func (h *harness) steps(n int) {
	h.t.Helper()
	for range n {
		h.step()
	}
}

// until steps until cond holds, failing after max slots.
func (h *harness) until(what string, max int, cond func() bool) {
	h.t.Helper()
	for range max {
		if cond() {
			return
		}
		h.step()
	}
	if !cond() {
		h.t.Fatalf("%s: not reached within %d slots; events %v", what, max, h.got())
	}
}

// got returns the events so far as "<id>" or "<id> inferred".
func (h *harness) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, len(h.events))
	for i, e := range h.events {
		out[i] = e.ID
		if e.Data.Inferred {
			out[i] += " inferred"
		}
	}
	return out
}

func (h *harness) event(i int) event.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.events[i]
}

func (h *harness) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.events)
}

// expect fails unless the events so far are exactly want, in order.
func (h *harness) expect(want ...string) {
	h.t.Helper()
	if got := h.got(); strings.Join(got, ",") != strings.Join(want, ",") {
		h.t.Fatalf("events:\n got %v\nwant %v", got, want)
	}
}

// device returns the serial number of the fleet's i-th device.
func (h *harness) device(i int) string { return h.sim.Fleet().Devices[i].SN }

// start starts an alarm of level on device i now.
func (h *harness) start(level, i int) string {
	h.t.Helper()
	id, err := h.sim.StartAlarm(sim.AlarmSpec{DeviceSN: h.device(i), Level: level})
	if err != nil {
		h.t.Fatalf("start alarm: %v", err)
	}
	return id
}

func (h *harness) end(id string, at time.Time) {
	h.t.Helper()
	if err := h.sim.EndAlarm(id, at); err != nil {
		h.t.Fatalf("end alarm: %v", err)
	}
}

func (h *harness) noViolations() {
	h.t.Helper()
	if st := h.sim.Stats(); st.Violations != 0 {
		h.t.Fatalf("the simulator counted %d rate-limit violations; want 0", st.Violations)
	}
}

func start(id string) string    { return id + ":start" }
func end(id string) string      { return id + ":end" }
func inferred(id string) string { return id + ":end inferred" }
func invalid(id string) string  { return id + ":invalid" }

// syncBuffer collects log lines for tests that check them.
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

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// alarmRequest is a getAlarmList request as the tap saw it.
type alarmRequest struct {
	seq       int64
	Current   int      `json:"current"`
	Recovery  bool     `json:"isRecovery"`
	Levels    []int    `json:"eventLevels"`
	DeviceSNs []string `json:"deviceSnList"`
}

// tap is the client's transport: it logs every getAlarmList request, and
// hides alarms from answers the way an upstream could.
type tap struct {
	base http.RoundTripper
	seq  *atomic.Int64

	mu       sync.Mutex
	requests []alarmRequest
	// hideRecovered removes these originIds from every isRecovery=true
	// answer, as an upstream that lost the recovered record would.
	hideRecovered map[string]bool
	// hideCurrent removes an originId from that many isRecovery=false
	// answers, with total lowered to match, so that the snapshot looks
	// complete.
	hideCurrent map[string]int
}

func (tp *tap) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.URL.Path, "/getAlarmList") {
		return tp.base.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	var ar alarmRequest
	if err := json.Unmarshal(body, &ar); err != nil {
		return nil, fmt.Errorf("tap: request body: %w", err)
	}
	ar.seq = tp.seq.Add(1)
	tp.mu.Lock()
	tp.requests = append(tp.requests, ar)
	hide := map[string]bool{}
	if ar.Recovery {
		for id := range tp.hideRecovered {
			hide[id] = true
		}
	} else {
		for id, n := range tp.hideCurrent {
			if n > 0 {
				hide[id] = true
			}
		}
	}
	tp.mu.Unlock()
	resp, err := tp.base.RoundTrip(req)
	if err != nil || len(hide) == 0 {
		return resp, err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	out, removed := hideAlarms(raw, hide)
	if !ar.Recovery {
		tp.mu.Lock()
		for id := range removed {
			tp.hideCurrent[id]--
		}
		tp.mu.Unlock()
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Length", fmt.Sprint(len(out)))
	return resp, nil
}

// hideAlarms removes the records of hide from an answer and lowers its total;
// an answer it cannot read is returned unchanged.
func hideAlarms(raw []byte, hide map[string]bool) ([]byte, map[string]bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var env map[string]any
	if dec.Decode(&env) != nil {
		return raw, nil
	}
	data, ok := env["data"].(map[string]any)
	if !ok {
		return raw, nil
	}
	list, _ := data["dataList"].([]any)
	removed := map[string]bool{}
	kept := list[:0]
	for _, item := range list {
		rec, _ := item.(map[string]any)
		id := fmt.Sprint(rec["originId"])
		if hide[id] {
			removed[id] = true
			continue
		}
		kept = append(kept, item)
	}
	data["dataList"] = kept
	if total, ok := data["total"].(json.Number); ok {
		if n, err := total.Int64(); err == nil {
			data["total"] = n - int64(len(removed))
		}
	}
	out, err := json.Marshal(env)
	if err != nil {
		return raw, nil
	}
	return out, removed
}

func (tp *tap) log() []alarmRequest {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]alarmRequest(nil), tp.requests...)
}

func (tp *tap) last() alarmRequest {
	l := tp.log()
	if len(l) == 0 {
		return alarmRequest{}
	}
	return l[len(l)-1]
}

func (tp *tap) hideFromRecovered(id string) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.hideRecovered[id] = true
}

func (tp *tap) showRecovered(id string) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	delete(tp.hideRecovered, id)
}

func (tp *tap) hideFromCurrent(id string, answers int) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.hideCurrent[id] = answers
}
