package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/poller"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

// recorder keeps, for one system under test, when each event was detected
// (the poll answer that produced it) and when it was delivered to a sink,
// keyed by event id (<originId>:<transition>).
type recorder struct {
	mu        sync.Mutex
	detected  map[string]time.Time
	delivered map[string]time.Time
	// origins holds every originId an event was produced for.
	origins map[string]struct{}
	events  int
}

// newRecorder returns an empty recorder.
func newRecorder() *recorder {
	return &recorder{
		detected:  make(map[string]time.Time),
		delivered: make(map[string]time.Time),
		origins:   make(map[string]struct{}),
	}
}

// detect records that the event of transition tr of originID was produced
// from a poll answered at at. A repeat keeps the first time.
func (r *recorder) detect(originID string, tr event.Transition, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := event.ID(originID, tr)
	if _, ok := r.detected[id]; !ok {
		r.detected[id] = at
	}
	r.origins[originID] = struct{}{}
	r.events++
}

// onEvents returns a poller's OnEvents that records each event's detection,
// at its DetectedAt (clk's now when that cannot be read).
func (r *recorder) onEvents(clk clock.Clock) func([]event.Event) {
	return func(evs []event.Event) {
		for i := range evs {
			d := &evs[i].Data
			at, err := time.Parse(event.TimeLayout, d.DetectedAt)
			if err != nil {
				at = clk.Now()
			}
			r.detect(d.OriginID, d.Transition, at)
		}
	}
}

// deliver records that event id reached its sink at at. A repeat keeps the
// first time.
func (r *recorder) deliver(id string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.delivered[id]; !ok {
		r.delivered[id] = at
	}
}

// detectedAt returns when the event id was detected.
func (r *recorder) detectedAt(id string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.detected[id]
	return t, ok
}

// deliveredAt returns when the event id was delivered.
func (r *recorder) deliveredAt(id string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.delivered[id]
	return t, ok
}

// originIDs returns every originId an event was produced for.
func (r *recorder) originIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.origins))
	for id := range r.origins {
		ids = append(ids, id)
	}
	return ids
}

// deliveredCount returns how many distinct events were delivered.
func (r *recorder) deliveredCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.delivered)
}

// timedSink is a sink that records the moment its inner sink accepted each
// event: for the JetStream sink, when the PubAck arrived.
type timedSink struct {
	notify.Sink
	clk clock.Clock
	rec *recorder
}

// Send makes one attempt with the inner sink and records a success.
func (s timedSink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	res, err := s.Sink.Send(ctx, d)
	if err == nil {
		s.rec.deliver(d.EventID, s.clk.Now())
	}
	return res, err
}

// timedPipeliner is a timedSink whose inner sink takes many deliveries at
// once; the wrapper keeps that ability, so the Deliverer pipelines as it
// would without it.
type timedPipeliner struct {
	timedSink
	p notify.Pipeliner
}

// SendAll makes one attempt at each of ds with the inner sink and records
// the successes.
func (s timedPipeliner) SendAll(ctx context.Context, ds []notify.Delivery) []notify.Outcome {
	out := s.p.SendAll(ctx, ds)
	now := s.clk.Now()
	for k, o := range out {
		if o.Err == nil && k < len(ds) {
			s.rec.deliver(ds[k].EventID, now)
		}
	}
	return out
}

// timed wraps sink so that its deliveries are recorded in rec.
func timed(sink notify.Sink, clk clock.Clock, rec *recorder) notify.Sink {
	t := timedSink{Sink: sink, clk: clk, rec: rec}
	if p, ok := sink.(notify.Pipeliner); ok {
		return timedPipeliner{timedSink: t, p: p}
	}
	return t
}

// benchRules is the rules file of the relay under test: every event to one
// JetStream sink, the shape of the default subject under a per-phase prefix.
const benchRules = `sinks:
  - name: bus
    type: nats
    subject: "bench.%s.{{.TenantID}}.{{.StationID}}.{{.Level}}.{{.Transition}}"
    jetstream: true
routes:
  - name: everything
    to: [bus]
`

// parseBenchRules returns the bench rules with subjects under bench.<phase>.
func parseBenchRules(phase string) (*route.Rules, error) {
	return route.Parse("relaybench-rules.yaml", fmt.Appendf(nil, benchRules, phase), nil)
}

// newBusSink returns the rules' JetStream sink, publishing on env's
// connection and timed into rec.
func newBusSink(rules *route.Rules, env *natsEnv, clk clock.Clock, rec *recorder, log *slog.Logger) (notify.Sink, error) {
	rs, ok := rules.Sink("bus")
	if !ok {
		return nil, fmt.Errorf("bench rules: no sink %q", "bus")
	}
	deps := sinktype.Deps{Clock: clk, Logger: log, NATS: func(context.Context) (*natsgo.Conn, error) { return env.nc, nil }}
	ns, err := rs.Config.Build(context.Background(), rs.Name, deps.Defaults())
	if err != nil {
		return nil, err
	}
	return timed(ns, clk, rec), nil
}

// relaySystem is the relay under test: its opendata client, poller, bbolt
// store and delivery loop to JetStream, wired as the service wires them.
type relaySystem struct {
	rec   *recorder
	store *store.Store
	// metrics holds the poller's own metrics, read for the slot usage.
	metrics *prometheus.Registry

	cancel context.CancelFunc
	wg     sync.WaitGroup
	errMu  sync.Mutex
	err    error
}

// startRelay starts a relay with an empty store in dir, polling s at rate
// requests a minute and delivering to env's stream under bench.<phase>.
func startRelay(ctx context.Context, phase, dir string, s *sim.Server, rate int, env *natsEnv, clk clock.Clock, log *slog.Logger) (*relaySystem, error) {
	rules, err := parseBenchRules(phase)
	if err != nil {
		return nil, err
	}
	rec := newRecorder()
	sink, err := newBusSink(rules, env, clk, rec, log)
	if err != nil {
		return nil, err
	}
	client, err := newClient(s, rate, clk, log)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(filepath.Join(dir, "relay-"+phase+".db"), store.Options{Clock: clk})
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	p, err := poller.New(poller.Config{
		Client:    client,
		Store:     st,
		Router:    func() store.Router { return rules.SinksFor },
		RateLimit: rate,
		Clock:     clk,
		Logger:    log.With("system", "relay", "phase", phase),
		Metrics:   poller.NewMetrics(reg),
		OnEvents:  rec.onEvents(clk),
	})
	if err == nil {
		var d *deliver.Deliverer
		d, err = deliver.NewDeliverer(st, []deliver.Target{{Sink: sink}}, deliver.Options{
			Clock:  clk,
			Logger: log.With("system", "relay", "phase", phase),
		})
		if err == nil {
			ctx, cancel := context.WithCancel(ctx)
			r := &relaySystem{rec: rec, store: st, metrics: reg, cancel: cancel}
			r.wg.Go(func() { r.fail(p.Run(ctx)) })
			r.wg.Go(func() { r.fail(d.Run(ctx)) })
			return r, nil
		}
	}
	st.Close()
	return nil, err
}

// fail keeps the first error of the relay's goroutines.
func (r *relaySystem) fail(err error) {
	if err == nil {
		return
	}
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if r.err == nil {
		r.err = err
	}
}

// stop stops the poller and the delivery loop, closes the store, and returns
// the first error either of them returned.
func (r *relaySystem) stop() error {
	r.cancel()
	r.wg.Wait()
	if err := r.store.Close(); err != nil {
		r.fail(err)
	}
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if r.err != nil {
		return fmt.Errorf("relay: %w", r.err)
	}
	return nil
}

// slotUse returns how many answered requests the poller spent on each kind
// of query (current, confirm, sweep, aged), from its
// relay_poller_polls_total counter.
func (r *relaySystem) slotUse() (map[string]int, error) {
	mfs, err := r.metrics.Gather()
	if err != nil {
		return nil, fmt.Errorf("relay metrics: %w", err)
	}
	use := map[string]int{}
	for _, mf := range mfs {
		if mf.GetName() != "relay_poller_polls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var query, outcome string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "query":
					query = l.GetValue()
				case "outcome":
					outcome = l.GetValue()
				}
			}
			if outcome == "ok" {
				use[query] += int(m.GetCounter().GetValue())
			}
		}
	}
	return use, nil
}

// newClient returns an opendata client of s at rate requests a minute, on
// clk.
func newClient(s *sim.Server, rate int, clk clock.Clock, log *slog.Logger) (*opendata.Client, error) {
	id, secret := s.Credentials()
	return opendata.New(opendata.Config{
		BaseURL:   s.URL(),
		AppID:     id,
		AppSecret: secret,
		RateLimit: rate,
		Clock:     clk,
		Logger:    log,
	})
}
