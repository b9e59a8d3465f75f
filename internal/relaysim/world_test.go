package relaysim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/plant"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/service"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/testwait"
)

// t0 is when every run's fake clock starts: a Monday, 08:00 UTC.
var t0 = time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)

const (
	slackToken = "xoxb-relaysim-token"
	hookSecret = "whsec_cmVsYXlzaW0tc2lnbmluZy1zZWNyZXQ="
	// grace is the service's default shutdown grace (RELAY_SHUTDOWN_GRACE),
	// and reloadDrain how long a reload lets the old deliveries drain
	// (service.reloadDrain): both on the relay's clock.
	grace       = 20 * time.Second
	reloadDrain = 10 * time.Second
	// settleLimit is how long, in real time, one settle may take before the
	// run is declared stuck.
	settleLimit = 30 * time.Second
)

// harnessOptions switch what the simulated relay runs.
type harnessOptions struct {
	// endsByRules routes ends by the rules in force instead of the
	// delivery ledger: the switch that proves the ledger matters. A store
	// without a ledger routes ends by the rules in any case; one with it
	// takes the switch as store.Options.EndsByRules.
	endsByRules bool
	// logs, when set, receives the relay's log.
	logs io.Writer
	// plant switches on faults in the relay's code, for the proof that
	// the invariants catch them (internal/plant).
	plant plant.Set
	// from is the schema version of the state file of testdata/upgrade the
	// run starts from (runOps reads it from the operations); 0 starts from
	// an empty store.
	from int
	// deadLimit bounds each sink's dead letters (store.Options.
	// DeadLetterLimit; 0: the store's default): runSeed sets a small one for
	// one seed in three, so that the bound discards dead letters while
	// ends are parked, replayed and dropped.
	deadLimit int
	// pageBytes bounds the bytes of a delivery loop's page (deliver.
	// Options.PageBytes; 0: the default, which the simulation's events
	// never reach): runSeed sets one of a few events, or one below an
	// event, for one seed in eight each, so that pages stop at their
	// bytes, not their count.
	pageBytes int
}

// alarm is the model of one upstream alarm.
type alarm struct {
	id, station, device, code string
	level                     int
	// startLevel is the level the alarm started at, which its start
	// event carries.
	startLevel          int
	occurred, recovered time.Time
	status              int
	// relevels are its level changes, in order.
	relevels []levelAt
	// acked are the spans it was acknowledged, in order; the last may be
	// open (zero to).
	acked []ackSpan
	// firstSeen is when a poll result first listed it; escalating says
	// the rules then escalated it (the urgent route took its level, and
	// escalated to an existing hook).
	firstSeen  time.Time
	escalating bool
}

// ackSpan is a span of time an alarm was acknowledged.
type ackSpan struct{ from, to time.Time }

// levelAt is a level an alarm took at a time.
type levelAt struct {
	at    time.Time
	level int
}

// levelAt returns the level the alarm had at t.
func (a *alarm) levelAt(t time.Time) int {
	level := a.startLevel
	for _, l := range a.relevels {
		if l.at.After(t) {
			break
		}
		level = l.level
	}
	return level
}

func (a *alarm) record() event.Alarm {
	raw, _ := json.Marshal(map[string]any{"originId": a.id, "status": a.status, "level": a.level})
	return event.Alarm{
		OriginID: a.id, Status: a.status, Level: a.level, EventCode: a.code, EventDesc: "Fault " + a.code,
		TenantID: "T1", StationID: a.station, StationName: "Station " + a.station, SystemID: "SYS-" + a.station,
		DeviceSN: a.device, DeviceName: "Device " + a.device, OccurredAt: a.occurred, RecoveredAt: a.recovered, Raw: raw,
	}
}

// enqueued is when an event was first enqueued for a destination.
type enqueued struct {
	at    time.Time
	order int
	// level is the level of the event enqueued: a start announced at a
	// destination when its alarm's level rose carries the new level.
	level int
	// notWanted marks an end routed to a sink whose rules said
	// send_resolved: false when it came.
	notWanted bool
}

// silenceRec is the model of one silence added by an operation.
type silenceRec struct {
	id         string
	match      route.Match
	start, end time.Time
	// order is the world's order when it was added.
	order int
}

func (s silenceRec) active(t time.Time) bool { return !t.Before(s.start) && t.Before(s.end) }

// report is what the deliverer said became of one entry, and when.
type report struct {
	fate   deliver.Fate
	reason string
	at     time.Time
}

// world is one simulation run: the fakes of the receivers, the model of
// the upstream and of what operators did, and the relay running on a fake
// clock: its store, rules, silences, alarm management and deliveries,
// wired as internal/service wires one tenant.
type world struct {
	t    *testing.T
	opt  harnessOptions
	clk  *clock.Fake
	q    testwait.Quiet
	log  *slog.Logger
	dir  string
	env  map[string]string
	ctx  context.Context
	path string // the state file
	file string // the rules file

	slack       *notifytest.Slack
	slackGate   *gate
	hook, audit *notifytest.Receiver
	hookGate    *gate
	auditGate   *gate

	rules    ruleSet
	alarms   []*alarm
	ongoing  []*alarm
	nextID   int
	silences []silenceRec
	// windows are the maintenance windows the rules opened, each ending
	// early when a reload replaced it.
	windows []window
	// cuts counts what may cut a delivery between the receiver's accepting
	// and the store's recording: crashes, restarts, and reloads that
	// restarted the deliveries.
	cuts int
	// What the run did, for classify: reloads that changed the sinks,
	// renamed the Slack sink or edited the routes' levels, and replays.
	sinkReloads, renames, routeEdits, replays int
	// reminders and announced are read from the fake Slack by delivered:
	// the reminders posted, and the alarms announced as chattering.
	reminders []delivery
	announced map[string]bool
	// ackViolations are what acknowledgements broke as they were made: a
	// click applied twice, an allowed person refused or another let in.
	ackViolations []violation
	// escalatedAt is when each alarm escalation reached was first
	// escalated, read from the store by check.
	escalatedAt map[string]time.Time
	// clicks are, by alarm, the clicks applied to it from the Slack
	// channel, which a chat may hand over again.
	clicks map[string][]notify.Action
	// reloads are when the rules were reloaded.
	reloads []time.Time
	// upgraded is what the state file the run started from held; nil for
	// an empty store.
	upgraded *upgraded

	mu sync.Mutex
	// routed holds, per destination, each event routed there and when it
	// was first enqueued.
	routed map[string]map[string]enqueued
	// order counts the poll results applied and the silences added, so
	// that what came first is known at one instant of the fake clock.
	order int
	// reports holds, per destination and event, what the deliverers said
	// became of it.
	reports map[string]map[string][]report
	// dropped holds, per destination, the events whose dead letters an
	// operator dropped.
	dropped map[string]map[string]bool

	// fenced is set while the relay's lease is lost: its fence refuses,
	// and the gates count the requests that reach them without having
	// passed it (unfenced).
	fenced atomic.Bool

	run *relayRun
}

// passedHeader marks a request the sinks' fenced transport let through.
// Every request that reaches a receiver while the lease is lost must carry
// it: it passed the fence before the loss, as design §14 ("Fenced sends")
// allows, for it was on the wire then (a request the relay abandoned at a
// crash may arrive long after, on a busy machine). A request without it
// went round the fence. (Counting the requests not yet answered at the loss
// missed those abandoned requests: seed 9116, about 1 run in 10 under load.)
const passedHeader = "X-Relaysim-Fence-Passed"

// fencePassed marks the requests the fence let through.
type fencePassed struct{}

func (fencePassed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(passedHeader, "1")
	return http.DefaultTransport.RoundTrip(r)
}

// errLeaseLost is the fence's refusal while the simulated lease is lost.
var errLeaseLost = errors.New("the tenant's lease is lost")

// fence is the simulated relay's fence: a replica's lease check.
func (w *world) fence() error {
	if w.fenced.Load() {
		return errLeaseLost
	}
	return nil
}

// gateRequests counts the requests that reached the receivers' gates.
func (w *world) gateRequests() int64 {
	return w.slackGate.requests.Load() + w.hookGate.requests.Load() + w.auditGate.requests.Load()
}

// fencedSends counts the requests that reached a receiver while the lease
// was lost without having passed the fence.
func (w *world) fencedSends() int64 {
	return w.slackGate.unfenced.Load() + w.hookGate.unfenced.Load() + w.auditGate.unfenced.Load()
}

// relayRun is the relay between a start and a stop or crash.
type relayRun struct {
	store    *store.Store
	silences *silence.Silences
	rules    *service.Rules
	manager  *manage.Manager
	limits   *notify.Limits

	sinks  []route.Sink
	d      *deliver.Deliverer
	cancel context.CancelFunc
	done   chan struct{}

	// stopSchedule stops alarm management's clock work and waits for it.
	stopSchedule func()
	// draining is set while the deliverer drains.
	draining bool
}

func newWorld(t *testing.T, opt harnessOptions) (*world, error) {
	w := &world{
		t: t, opt: opt, clk: clock.NewFake(t0), dir: t.TempDir(), ctx: t.Context(),
		env:     map[string]string{"SIM_HOOK_SECRET": hookSecret},
		rules:   defaultRules(),
		routed:  map[string]map[string]enqueued{},
		clicks:  map[string][]notify.Action{},
		reports: map[string]map[string][]report{},
		dropped: map[string]map[string]bool{},
	}
	w.path = filepath.Join(stateDir(t, w.dir), "relay.db")
	w.file = filepath.Join(w.dir, "rules.yaml")
	logs := opt.logs
	if logs == nil {
		logs = io.Discard
	}
	w.log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	w.slack = notifytest.NewSlack(t, slackToken)
	w.slack.Stamp(w.clk.Now)
	w.slackGate = newGate(t, w.slack.APIURL())
	w.hook = notifytest.NewReceiver(t, hookSecret)
	w.hookGate = newGate(t, w.hook.URL())
	w.audit = notifytest.NewReceiver(t, hookSecret)
	w.auditGate = newGate(t, w.audit.URL())
	for _, g := range []*gate{w.slackGate, w.hookGate, w.auditGate} {
		g.fenced = &w.fenced
	}
	if err := w.writeRules(); err != nil {
		return nil, err
	}
	if err := w.startFrom(opt.from); err != nil {
		return nil, err
	}
	if err := w.start(); err != nil {
		return nil, err
	}
	return w, nil
}

// stateDir is where a run keeps its state file: in Linux's shared-memory
// file system when there is one, since the store syncs every commit to disk
// and the syncs would take four fifths of a run's time; else in dir.
func stateDir(t *testing.T, dir string) string {
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		return dir
	}
	shm, err := os.MkdirTemp("/dev/shm", "relaysim-")
	if err != nil {
		return dir
	}
	t.Cleanup(func() { _ = os.RemoveAll(shm) })
	return shm
}

func (w *world) writeRules() error {
	text := w.rules.yaml(w.hookGate.url(), w.auditGate.url())
	if err := os.WriteFile(w.file, []byte(text), 0o600); err != nil {
		return fmt.Errorf("writing the rules: %w", err)
	}
	return nil
}

func (w *world) gateOf(dest string) *gate {
	switch dest {
	case destPager:
		return w.slackGate
	case destHook:
		return w.hookGate
	}
	return w.auditGate
}

// start opens the state file and starts the relay's delivery side, as
// service.openTenant does: store, silences, rules, alarm management, sinks
// (renamed ones adopted first) and their deliverer.
func (w *world) start() error {
	st, err := store.Open(w.path, store.Options{Clock: w.clk, LockTimeout: time.Second, EndsByRules: w.opt.endsByRules, Plant: w.opt.plant, DeadLetterLimit: w.opt.deadLimit})
	if err != nil {
		return err
	}
	r := &relayRun{store: st, limits: notify.NewLimits(w.clk)}
	if r.silences, err = silence.Open(st, w.clk); err != nil {
		st.Close()
		return err
	}
	if r.rules, err = service.LoadRules(w.file, w.lookup, w.log); err != nil {
		st.Close()
		return err
	}
	r.manager, err = manage.New(manage.Options{Store: st, Rules: r.rules.Current, Silences: r.silences, Clock: w.clk, Logger: w.log,
		Fence: w.fence, Shelf: r.silences, Plant: w.opt.plant})
	if err != nil {
		st.Close()
		return err
	}
	targets, err := w.targets(r, r.rules.Current())
	if err != nil {
		st.Close()
		return err
	}
	if err := adoptRenamed(st, r.rules.Current(), w.log); err != nil {
		st.Close()
		return err
	}
	if err := w.startDeliverer(r, r.rules.Current(), targets); err != nil {
		st.Close()
		return err
	}
	r.rules.OnReload(func(nr *route.Rules) error { return w.restartDeliveries(r, nr) }, nil)
	sctx, scancel := context.WithCancel(context.WithoutCancel(w.ctx))
	sdone := make(chan struct{})
	go func() { defer close(sdone); w.schedule(sctx, r) }()
	r.stopSchedule = func() { scancel(); <-sdone }
	w.run = r
	return w.settle()
}

// scheduleEvery is service.scheduleEvery.
const scheduleEvery = 30 * time.Second

// schedule is service.schedule: alarm management's work by the clock,
// reminders and the silences with notify_on_expire that ended.
func (w *world) schedule(ctx context.Context, r *relayRun) {
	t := w.clk.NewTimer(scheduleEvery)
	defer t.Stop()
	var ticked time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		t.Reset(scheduleEvery)
		now := w.clk.Now()
		if ended, err := r.silences.TakeExpired(now); err == nil && len(ended) > 0 {
			ids := make([]string, len(ended))
			for i, s := range ended {
				ids[i] = s.ID
			}
			_, _ = r.manager.Reannounce(ids)
		}
		if err := r.manager.Escalate(ctx); err != nil {
			w.log.Warn("escalation", "err", err)
		}
		if now.Sub(ticked) >= manage.TickEvery {
			ticked = now
			if err := r.manager.Tick(ctx); err != nil {
				w.log.Warn("reminders and daily summaries", "err", err)
			}
		}
	}
}

func (w *world) lookup(k string) (string, bool) { v, ok := w.env[k]; return v, ok }

// targets builds the sinks of rules, as service.buildTargets does.
func (w *world) targets(r *relayRun, rules *route.Rules) ([]deliver.Target, error) {
	transport := notify.FencedTransport(w.fence, fencePassed{})
	if w.opt.plant.On(plant.FenceBypassed) {
		transport = http.DefaultTransport
	}
	deps := sinktype.Deps{
		Env:   sinktype.Env{SlackToken: slackToken, SlackAPIURL: w.slackGate.url()},
		Clock: w.clk, Logger: w.log, HTTP: &http.Client{Transport: transport}, Limits: r.limits,
		Fence:          w.fence,
		TemplateFailed: func(string, *event.Event, error) {},
	}
	targets := make([]deliver.Target, 0, len(rules.Sinks))
	for _, s := range rules.Sinks {
		sink, err := s.Config.Build(w.ctx, s.Name, deps)
		if err != nil {
			return nil, fmt.Errorf("sink %q: %w", s.Name, err)
		}
		targets = append(targets, deliver.Target{Sink: sink, MaxAge: s.MaxAge, MaxRetryAfter: s.MaxRetryAfter})
	}
	return targets, nil
}

// adoptRenamed is service.adoptRenamed: a sink renamed in rules (same
// destination, new name) takes the memory and pending entries of its old
// name.
func adoptRenamed(st *store.Store, rules *route.Rules, log *slog.Logger) error {
	st.SetResolvedOff(rules.ResolvedOff())
	dests := make(map[string]string, len(rules.Sinks))
	for _, s := range rules.Sinks {
		dests[s.Name] = s.Destination()
	}
	if alarms, dead, err := st.AdoptLedger(rules.SinksFor, dests); err != nil {
		return err
	} else if alarms+dead > 0 {
		log.Info("state written before the delivery ledger: its ongoing alarms' ends now go where the rules in force send their starts, "+
			"and its dead starts keep their ends", "alarms", alarms, "dead_starts", dead)
	}
	renamed, removed, err := st.AdoptSinks(dests, manage.SinkNamespaces...)
	for _, rn := range renamed {
		log.Info("sink renamed", "from", rn.From, "to", rn.To, "pending", rn.Entries)
	}
	for _, rm := range removed {
		log.Info("sink removed", "sink", rm.Sink, "dropped", len(rm.Dropped))
	}
	return err
}

func (w *world) startDeliverer(r *relayRun, rules *route.Rules, targets []deliver.Target) error {
	d, err := deliver.NewDeliverer(r.store, targets, deliver.Options{
		Clock: w.clk, Logger: w.log, Gate: r.manager, Poll: time.Hour, OnReport: w.onReport, Fence: w.fence,
		PageBytes: w.opt.pageBytes,
	})
	if err != nil {
		return err
	}
	sinks := make([]notify.Sink, len(targets))
	for i, t := range targets {
		sinks[i] = t.Sink
	}
	r.manager.SetSinks(sinks)
	ctx, cancel := context.WithCancel(context.WithoutCancel(w.ctx))
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	r.sinks, r.d, r.cancel, r.done = rules.Sinks, d, cancel, done
	return nil
}

// restartDeliveries is service.deliveryLoop.restart: when the sinks
// changed, the new ones are built, the old deliverer drains for up to
// reloadDrain (on the fake clock, moved meanwhile) under the rules it ran
// under, renamed sinks are adopted, alarm management takes the new rules
// and the new deliverer starts; when they did not, alarm management takes
// the new rules at once.
func (w *world) restartDeliveries(r *relayRun, rules *route.Rules) error {
	if sameSinks(r.sinks, rules.Sinks) {
		r.manager.Use(rules)
		return nil
	}
	targets, err := w.targets(r, rules)
	if err != nil {
		return err
	}
	w.cuts++
	w.sinkReloads++
	if err := w.drain(r, reloadDrain); err != nil {
		return err
	}
	if err := adoptRenamed(r.store, rules, w.log); err != nil {
		w.log.Error("rules reload: renamed sinks keep no memory of earlier alarms", "err", err)
	}
	r.manager.Use(rules)
	return w.startDeliverer(r, rules, targets)
}

func sameSinks(a, b []route.Sink) bool {
	return slices.EqualFunc(a, b, func(x, y route.Sink) bool { return x.Same(y) })
}

// drain drains the running deliverer for up to limit of the fake clock,
// which it moves timer by timer, then stops it.
func (w *world) drain(r *relayRun, limit time.Duration) error {
	r.draining = true
	defer func() { r.draining = false }()
	ctx, cancel := context.WithCancel(context.Background())
	drained := make(chan struct{})
	go func() { _ = r.d.Drain(ctx); close(drained) }()
	end := w.clk.Now().Add(limit)
	for {
		if err := w.settle(); err != nil {
			cancel()
			return err
		}
		select {
		case <-drained:
			cancel()
			r.cancel()
			<-r.done
			return w.settle()
		default:
		}
		next, ok := w.clk.NextDeadline()
		if !ok || next.After(end) {
			w.clk.Set(end)
			if err := w.settle(); err != nil {
				cancel()
				return err
			}
			cancel()
			<-drained
			r.cancel()
			<-r.done
			return w.settle()
		}
		w.clk.Set(next)
	}
}

// stop ends the running relay: a clean stop drains for the shutdown
// grace; a crash cuts everything at once, attempts in flight included.
func (w *world) stop(crash bool) error {
	r := w.run
	w.run = nil
	w.cuts++
	r.stopSchedule()
	if crash {
		r.cancel()
		<-r.done
	} else if err := w.drain(r, grace); err != nil {
		return err
	}
	return r.store.Close()
}

// apply feeds records as one poll result, routed by the rules in force
// with alarm management observing each event before it is routed, as the
// service's poller does (poller.Config.Observe).
func (w *world) apply(recs ...*alarm) error {
	alarms := make([]event.Alarm, len(recs))
	for i, a := range recs {
		alarms[i] = a.record()
		if a.firstSeen.IsZero() {
			a.firstSeen = w.clk.Now()
			a.escalating = w.rules.escalate && w.rules.names[destHook] != "" && w.rules.names[destPager] != "" &&
				slices.Contains(w.rules.urgent, a.level)
		}
	}
	r := w.run
	w.order++
	at := enqueued{at: w.clk.Now(), order: w.order}
	_, err := r.store.Apply(w.ctx, store.Batch{Observed: alarms, DetectedAt: at.at}, func(ev *event.Event) []string {
		r.manager.Observe(ev)
		sinks := r.rules.Route(ev)
		w.mu.Lock()
		var to []string
		if ev.Data.Transition == event.Start || w.opt.endsByRules {
			for _, s := range sinks {
				to = append(to, destOf(s))
			}
		} else {
			// The delivery ledger sends an end where its start went.
			start := ev.Data.OriginID + ":" + string(event.Start)
			for _, d := range dests {
				if _, ok := w.routed[d][start]; ok {
					to = append(to, d)
				}
			}
		}
		for _, d := range to {
			if w.routed[d] == nil {
				w.routed[d] = map[string]enqueued{}
			}
			if _, ok := w.routed[d][ev.ID]; !ok {
				e := at
				e.level = ev.Data.Level
				e.notWanted = d == destAudit && ev.Data.Transition != event.Start && w.rules.auditNoResolved && !w.opt.endsByRules
				w.routed[d][ev.ID] = e
			}
		}
		w.mu.Unlock()
		return sinks
	})
	return err
}

func (w *world) onReport(rep deliver.Report) {
	if rep.Fate == deliver.Retrying {
		return
	}
	d := destOf(rep.Sink)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reports[d] == nil {
		w.reports[d] = map[string][]report{}
	}
	w.reports[d][rep.Entry.EventID] = append(w.reports[d][rep.Entry.EventID], report{rep.Fate, rep.Reason, w.clk.Now()})
}

// advance moves the fake clock by d, letting the relay work at each timer.
func (w *world) advance(d time.Duration) error {
	_, err := w.q.AdvanceTo(w.clk, w.sleepers, w.clk.Now().Add(d), settleLimit)
	return err
}

// settle waits until the relay has nothing left to do at the clock's
// present.
func (w *world) settle() error { return w.q.Settle(w.clk, w.sleepers, settleLimit) }

// sleepers is how many timers the relay holds when it has nothing to do:
// one per sink's delivery loop and one for alarm management's schedule.
// While a deliverer drains, its loops stop as their outboxes empty: none is
// counted on.
func (w *world) sleepers() int {
	r := w.run
	if r == nil || r.draining {
		return 0
	}
	return len(r.sinks) + 1
}

// close stops whatever still runs; the fakes close with the test.
func (w *world) close() {
	if w.run != nil {
		r := w.run
		w.run = nil
		r.stopSchedule()
		r.cancel()
		<-r.done
		_ = r.store.Close()
	}
}

// gate stands in front of a receiver and fails requests on demand: an
// outage (every request answered with a status, and a Retry-After when
// set), or the next few requests refused.
type gate struct {
	srv   *httptest.Server
	path  string
	proxy *httputil.ReverseProxy

	// requests counts every request that reached the gate; unfenced those
	// that reached it while fenced was set without having passed the
	// fence.
	requests atomic.Int64
	unfenced atomic.Int64
	fenced   *atomic.Bool

	mu     sync.Mutex
	down   *answer
	queued []answer
}

// answer is what a gate answers instead of the receiver.
type answer struct {
	status     int
	retryAfter time.Duration
}

func newGate(t *testing.T, target string) *gate {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{path: u.Path}
	g.proxy = httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	g.proxy.ErrorLog = stdlog.New(io.Discard, "", 0)
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.srv.Close)
	return g
}

// url is where sinks send: the gate, with the receiver's path.
func (g *gate) url() string { return g.srv.URL + g.path }

func (g *gate) serve(w http.ResponseWriter, r *http.Request) {
	g.requests.Add(1)
	if g.fenced != nil && g.fenced.Load() && r.Header.Get(passedHeader) == "" {
		g.unfenced.Add(1)
	}
	r.Header.Del(passedHeader)
	g.mu.Lock()
	var a *answer
	switch {
	case g.down != nil:
		a = g.down
	case len(g.queued) > 0:
		a = &g.queued[0]
		g.queued = g.queued[1:]
	}
	g.mu.Unlock()
	if a == nil {
		g.proxy.ServeHTTP(w, r)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	if a.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(a.retryAfter/time.Second)))
	}
	http.Error(w, http.StatusText(a.status), a.status)
}

func (g *gate) setDown(a *answer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = a
}

func (g *gate) queue(a answer, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for range n {
		g.queued = append(g.queued, a)
	}
}

// heal ends an outage and forgets queued failures.
func (g *gate) heal() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down, g.queued = nil, nil
}

var errSkip = errors.New("nothing to do")

// deadLettered reports whether a deliverer dead-lettered event id at dest.
func (w *world) deadLettered(dest, id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.reports[dest][id], func(r report) bool { return r.fate == deliver.DeadLettered })
}
