package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/relay-energy/relay/cmd/relaybench/internal/memphase"
	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/tracing"
)

// The systems under test, in table order.
const (
	sysRelay = "relay"
	sysNaive = string(naive)
	sysEager = string(eager)
)

var systemNames = []string{sysRelay, sysNaive, sysEager}

// config is what one run of the suite does.
type config struct {
	Seed  int64   `json:"seed"`
	Speed float64 `json:"speed"`
	// ChurnSlots is how long the steady-churn phase measures (P1, P2).
	ChurnSlots int   `json:"churn_slots"`
	Churn      churn `json:"churn"`
	// StormAlarms start at once in the storm phase (P4), which ends when
	// every system delivered every level-0 start, or after StormCapSlots.
	StormAlarms   int `json:"storm_alarms"`
	StormCapSlots int `json:"storm_cap_slots"`
	// HistoryAlarms ended before the first run of the history phase (P8),
	// which runs HistorySlots.
	HistoryAlarms int `json:"history_alarms"`
	HistorySlots  int `json:"history_slots"`
	// PipelineEvents go through store, route and JetStream (P5).
	PipelineEvents int `json:"pipeline_events"`
	// WebhookAlarms start and go through store, route, alarm management
	// and the signed webhook sink to a local receiver (P5, webhook).
	WebhookAlarms int `json:"webhook_alarms"`
	// MemoryAlarms are tracked by the relay whose memory is measured (P6).
	MemoryAlarms int `json:"memory_alarms"`
	// Tenants are served by one relay process in the tenants phase, on the
	// clock of tenantsSpeed, measured over TenantsSpan of upstream time
	// after TenantsWarm.
	Tenants     int           `json:"tenants"`
	TenantsWarm time.Duration `json:"-"`
	TenantsSpan time.Duration `json:"-"`
	// TakeoverTTLs are the lease TTLs the takeover phase runs with, each
	// with TakeoverKills kills of a replica holding some of
	// TakeoverTenants tenants, polled at TakeoverRate requests a minute.
	TakeoverTTLs    []time.Duration `json:"-"`
	TakeoverKills   int             `json:"takeover_kills"`
	TakeoverTenants int             `json:"takeover_tenants"`
	TakeoverRate    int             `json:"takeover_rate"`
	// FrontierRates are the request rates a minute, and FrontierUpstreams
	// the upstream variants (by name), of the frontier phase.
	FrontierRates     []int    `json:"frontier_rates"`
	FrontierUpstreams []string `json:"frontier_upstreams"`
	// AccountsTenants are the numbers of tenants of one upstream host the
	// accounts phase runs (P12).
	AccountsTenants []int `json:"accounts_tenants"`
	// Phases are the phases run, in suite order; the figures of the others
	// are reported as not run.
	Phases []string `json:"phases"`
}

// The phases of the suite, in the order they run.
const (
	phaseChurn    = "churn"
	phaseUpstream = "upstream"
	phaseStorm    = "storm"
	phaseHistory  = "history"
	phasePipeline = "pipeline"
	phaseWebhook  = "webhook"
	phaseMemory   = "memory"
	phaseTenants  = "tenants"
	phaseTakeover = "takeover"
	phaseFrontier = "frontier"
	phaseAccounts = "accounts"
)

// allPhases are the phases --phases knows, in suite order; defaultPhases
// those the suite runs without it. The tenants, takeover, frontier and
// accounts phases take minutes more than the suite's six, and run only
// when named.
var (
	allPhases = []string{phaseChurn, phaseUpstream, phaseStorm, phaseHistory, phasePipeline, phaseWebhook, phaseMemory,
		phaseTenants, phaseTakeover, phaseFrontier, phaseAccounts}
	defaultPhases = []string{phaseChurn, phaseUpstream, phaseStorm, phaseHistory, phasePipeline, phaseWebhook, phaseMemory}
)

// tenantsLoad is the tenants of the tenants phase times its clock's speed:
// 1,000 tenants at the real rate make 167 upstream requests a second, which
// one relay process and the simulators serve on two shared cores with time
// to spare.
const tenantsLoad = 1000

// tenantsSpeed is the clock of the tenants phase: as fast as the suite's,
// but no faster than tenantsLoad ÷ Tenants times real time, so that the
// process and the simulators keep up, and the client's margin of 1 s (which
// the clock shrinks too) stays above the pauses of a loaded machine.
func (c config) tenantsSpeed() float64 {
	return max(1, min(c.Speed, float64(tenantsLoad)/float64(max(c.Tenants, 1))))
}

// runs reports whether the configuration runs phase.
func (c config) runs(phase string) bool { return slices.Contains(c.Phases, phase) }

// parsePhases reads a comma-separated list of phases and returns them in
// suite order.
func parsePhases(list string) ([]string, error) {
	want := map[string]bool{}
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(allPhases, name) {
			return nil, fmt.Errorf("unknown phase %q: want a comma-separated list of %s", name, strings.Join(allPhases, ", "))
		}
		want[name] = true
	}
	var out []string
	for _, p := range allPhases {
		if want[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

// Slots of the churn phase before measuring (the bootstrap) and after it
// (so that alarms starting or ending at its end can still be detected).
const (
	warmSlots  = 5
	graceSlots = 30
	// stormWarmSlots run before the storm, so that it hits running systems.
	stormWarmSlots = 20
)

// latencies is one latency distribution in slots, as measured on the
// accelerated clock and as estimated for the real rate (see timing).
type latencies struct {
	Measured summary `json:"measured"`
	RealRate summary `json:"real_rate"`
}

// systemFigures are what one run measured of one system.
type systemFigures struct {
	// Start (P1) and End (P2) latencies: detection minus occurrence, and
	// detection minus the recovery time the simulator recorded.
	Start, End latencies
	// Requests and Violations (P3) count per phase; MaxPerMinute is the
	// most requests that arrived in any 60 s of any phase.
	Requests, Violations map[string]int
	MaxPerMinute         int
	// StormLevel0 (P4) and StormAll run from the storm to the delivery of
	// each level-0 start, and of every start of the storm.
	StormLevel0, StormAll latencies
	// HistoryEvents (P8) counts events of alarms that ended before the
	// first run.
	HistoryEvents int
}

// violations returns the rate-limit refusals of every phase.
func (f *systemFigures) violations() int {
	n := 0
	for _, v := range f.Violations {
		n += v
	}
	return n
}

// timing turns the times a system recorded into latencies. The measured
// latency runs from a reference time (an occurrence, a recovery, a storm)
// to the event's detection or delivery on the accelerated clock. The
// real-rate estimate takes the same path but counts the local work after
// the request that detected the event (its arrival at the simulator) at its
// real duration, as it would weigh at the real rate: the simulator's answer,
// the client's decoding, and for deliveries the bbolt outbox and the
// JetStream round trip. Requests of one system are sequential, so the
// request that detected an event is the system's latest alarm-list arrival
// at or before the event's detection.
type timing struct {
	rec   *recorder
	speed float64
	// arrivals are the system's admitted alarm-list requests, ascending.
	arrivals []time.Time
}

// newTiming returns the timing of the system that recorded rec and polled
// s on a clock of speed.
func newTiming(rec *recorder, s *sim.Server, speed float64) timing {
	var arr []time.Time
	for _, a := range s.Arrivals() {
		if a.Endpoint == sim.EndpointAlarmList && !a.Limited {
			arr = append(arr, a.At)
		}
	}
	slices.SortFunc(arr, time.Time.Compare)
	return timing{rec: rec, speed: speed, arrivals: arr}
}

// latency returns the measured and real-rate latencies of event id from
// ref to its detection (or, with delivered, its delivery), in slots; never
// when it did not happen.
func (t timing) latency(id string, ref time.Time, delivered bool) (measured, realRate float64) {
	det, ok := t.rec.detectedAt(id)
	if !ok {
		return never, never
	}
	end := det
	if delivered {
		if end, ok = t.rec.deliveredAt(id); !ok {
			return never, never
		}
	}
	measured = inSlots(end.Sub(ref))
	i, found := slices.BinarySearchFunc(t.arrivals, det, time.Time.Compare)
	if found {
		i++
	}
	if i == 0 || t.arrivals[i-1].Before(ref) {
		return measured, measured
	}
	a := t.arrivals[i-1]
	return measured, inSlots(a.Sub(ref) + time.Duration(float64(end.Sub(a))/t.speed))
}

// distribution summarises the latencies of ids from their reference times.
func (t timing) distribution(ids []string, refs []time.Time, delivered bool) latencies {
	m, r := make([]float64, len(ids)), make([]float64, len(ids))
	for i, id := range ids {
		m[i], r[i] = t.latency(id, refs[i], delivered)
	}
	return latencies{Measured: summarize(m), RealRate: summarize(r)}
}

// runFigures are what one run of the suite measured.
type runFigures struct {
	Systems  map[string]*systemFigures
	Pipeline pipelineResult
	// Webhook is the webhook figure, and Alertmanager the same work
	// through Alertmanager in the same run (nil without --alertmanager).
	Webhook      pipelineResult
	Alertmanager *amResult
	Memory       memphase.Result
	// Tenants is the tenants phase's figure, nil when it did not run.
	Tenants *tenantsResult
	// Takeover holds the takeover phase's figures, one per lease TTL.
	Takeover []takeoverResult
	// Frontier holds the frontier phase's points, in the order it ran them.
	Frontier []frontierPoint
	// Accounts holds the accounts phase's points, by number of tenants.
	Accounts []accountsPoint
	Elapsed  time.Duration
	// SlotUse counts the relay's answered requests by query in the churn
	// phase.
	SlotUse map[string]int
	// PeakOngoing is the most alarms ongoing at once in the churn phase.
	PeakOngoing int
	// Upstream are the relay's figures against each upstream variant, by
	// name, in the upstream phase.
	Upstream map[string]*upstreamFigures
	// PollCost is the median real time of one request for the current list
	// in the churn phase, from request to decoded answer (baselines' calls,
	// through the same client and simulator code as the relay's).
	PollCost time.Duration
}

// bench runs the suite.
type bench struct {
	cfg  config
	dir  string
	log  *slog.Logger
	nats *natsEnv
	// memrelay is the memory phase's relay process (buildMemrelay).
	memrelay string
	// progress receives one line per phase.
	progress func(format string, args ...any)
	// keepState, when set, is the directory the churn phase leaves its
	// relay's state file in, with what relay report needs beside it (see
	// keepChurn).
	keepState string
	// alertmanager, when set, is the Alertmanager binary the webhook
	// phase measures beside the relay.
	alertmanager string
	// tracer, when on, traces the pipeline and webhook phases (--trace).
	tracer *tracing.Tracer
}

// system is one system under test in a phase.
type system interface {
	stop() error
}

// pace is the request rate and the clock of a phase.
type pace struct {
	// rate is the requests a minute each simulator admits from its system
	// and each system makes.
	rate int
	// speed is how many times faster than real time the clock runs.
	speed float64
}

// slot is one request at the pace's rate: 60 s ÷ rate of scaled time.
func (pc pace) slot() time.Duration { return time.Minute / time.Duration(pc.rate) }

// pace is the suite's own: the production rate on the configured clock.
func (b *bench) pace() pace { return pace{rate: upstreamRate, speed: b.cfg.Speed} }

// phase is one scenario run against some of the systems, each with a
// simulator of its own holding the same alarms.
type phase struct {
	clk  *clock.Scaled
	pace pace
	// names are the systems of the phase, in table order.
	names   []string
	sims    map[string]*sim.Server
	systems map[string]system
	recs    map[string]*recorder
	// t0 is when the systems started.
	t0 time.Time
}

// newPhase starts a simulator of seed per system of names on a fresh scaled
// clock, lets prepare fill each of them identically, and then starts the
// systems against them.
func (b *bench) newPhase(ctx context.Context, name string, seed int64, names []string, prepare func(s *sim.Server, clk clock.Clock) error) (*phase, error) {
	return b.newPhaseWith(ctx, name, seed, names, nil, prepare)
}

// newPhaseWith is newPhase with each system's simulator misbehaving as
// hostile says (nil: none). Systems named relay-<suffix> are relays too.
func (b *bench) newPhaseWith(ctx context.Context, name string, seed int64, names []string,
	hostile func(sys string) sim.Hostile, prepare func(s *sim.Server, clk clock.Clock) error) (*phase, error) {
	return b.newPhaseAt(ctx, name, seed, names, b.pace(), hostile, prepare)
}

// newPhaseAt is newPhaseWith at pc: the simulators admit pc.rate requests a
// minute, the systems make as many, on a clock of pc.speed.
func (b *bench) newPhaseAt(ctx context.Context, name string, seed int64, names []string, pc pace,
	hostile func(sys string) sim.Hostile, prepare func(s *sim.Server, clk clock.Clock) error) (*phase, error) {
	clk := clock.NewScaled(time.Now().UTC().Truncate(time.Second), pc.speed)
	p := &phase{clk: clk, pace: pc, names: names, sims: map[string]*sim.Server{}, systems: map[string]system{}, recs: map[string]*recorder{}}
	for _, sys := range names {
		opts := simOptions(seed, clk)
		opts.RateLimit = pc.rate
		if hostile != nil {
			opts.Hostile = hostile(sys)
		}
		s, err := startSim(opts)
		if err != nil {
			p.close()
			return nil, err
		}
		p.sims[sys] = s
		if err := prepare(s, clk); err != nil {
			p.close()
			return nil, err
		}
	}
	p.t0 = clk.Now()
	for _, sys := range names {
		switch {
		case sys == sysRelay || strings.HasPrefix(sys, sysRelay+"-"):
			id := name
			if sys != sysRelay {
				id = name + strings.TrimPrefix(sys, sysRelay)
			}
			r, err := startRelay(ctx, id, b.dir, p.sims[sys], pc.rate, b.nats, clk, b.log)
			if err != nil {
				p.close()
				return nil, err
			}
			p.systems[sys], p.recs[sys] = r, r.rec
		default:
			bl, err := startBaseline(ctx, baselineKind(sys), p.sims[sys], pc.rate, clk, b.log)
			if err != nil {
				p.close()
				return nil, err
			}
			p.systems[sys], p.recs[sys] = bl, bl.rec
		}
	}
	return p, nil
}

// stopSystems stops the systems and returns their errors.
func (p *phase) stopSystems() error {
	var errs []error
	for _, sys := range p.names {
		if s, ok := p.systems[sys]; ok {
			errs = append(errs, s.stop())
			delete(p.systems, sys)
		}
	}
	return errors.Join(errs...)
}

// close stops whatever still runs, the simulators last.
func (p *phase) close() error {
	err := p.stopSystems()
	for _, s := range p.sims {
		s.Close()
	}
	return err
}

// wait sleeps d of scaled time; it reports false when ctx ended first.
func (p *phase) wait(ctx context.Context, d time.Duration) bool {
	t := p.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// traffic records each simulator's request counts of phase in figs.
func (p *phase) traffic(name string, figs map[string]*systemFigures) {
	for _, sys := range p.names {
		st := p.sims[sys].Stats()
		f := figs[sys]
		if f.Requests == nil {
			f.Requests, f.Violations = map[string]int{}, map[string]int{}
		}
		f.Requests[name] += st.Requests
		f.Violations[name] += st.Violations
		f.MaxPerMinute = max(f.MaxPerMinute, p.sims[sys].MaxArrivals(time.Minute))
	}
}

// inSlots converts a duration of scaled (real-rate) time to slots.
func inSlots(d time.Duration) float64 { return d.Seconds() / slot.Seconds() }

// run runs every phase once.
func (b *bench) run(ctx context.Context) (runFigures, error) {
	began := time.Now()
	figs := runFigures{Systems: map[string]*systemFigures{}}
	for _, sys := range systemNames {
		figs.Systems[sys] = &systemFigures{}
	}
	steps := []struct {
		phase, name string
		fn          func(context.Context, *runFigures) error
	}{
		{phaseChurn, "steady churn (P1, P2, P3)", b.churnPhase},
		{phaseUpstream, "skewed and hostile upstreams (P1, P2, P3)", b.upstreamPhase},
		{phaseStorm, "storm (P4, P3)", b.stormPhase},
		{phaseHistory, "first run on a tenant with history (P8, P3)", b.historyPhase},
		{phasePipeline, "pipeline throughput (P5)", b.pipelinePhase},
		{phaseWebhook, "webhook throughput (P5, webhook)", b.webhookPhase},
		{phaseMemory, "memory with tracked alarms (P6)", b.memoryPhase},
		{phaseTenants, "tenants in one process (S1 to S3)", b.tenantsPhase},
		{phaseTakeover, "takeover of a killed replica (S4 to S6)", b.takeoverPhase},
		{phaseFrontier, "latency by request rate (frontier)", b.frontierPhase},
		{phaseAccounts, "tenants of one upstream host on one budget (P12)", b.accountsPhase},
	}
	for _, s := range steps {
		if !b.cfg.runs(s.phase) {
			continue
		}
		t := time.Now()
		if err := s.fn(ctx, &figs); err != nil {
			return figs, fmt.Errorf("%s: %w", s.name, err)
		}
		b.progress("  %-45s %6.1fs", s.name, time.Since(t).Seconds())
	}
	figs.Elapsed = time.Since(began)
	return figs, nil
}

// churnSpec is one run of steady churn (see runChurn).
type churnSpec struct {
	name string
	// seed draws the fleet and, with salt, the alarms.
	seed int64
	salt uint64
	// names are the systems, each polling a simulator of its own.
	names []string
	pace  pace
	// hostile is how every simulator misbehaves (zero: not at all).
	hostile sim.Hostile
	churn   churn
	// warm runs before the measured window, measure is the window, and
	// grace runs after it, for the events near its end to be detected.
	warm, measure, grace time.Duration
}

// churnRun is a churn that ran to the end of its grace: its phase's
// systems still run (the caller stops them) and its simulators hold what
// they served.
type churnRun struct {
	p     *phase
	sched *churnSchedule
	// from and to bound the measured window.
	from, to time.Time
}

// runChurn starts spec's systems on its churn, each against a simulator of
// its own, and returns once its grace has run.
func (b *bench) runChurn(ctx context.Context, spec churnSpec) (*churnRun, error) {
	sched := &churnSchedule{seed: spec.seed, salt: spec.salt, span: spec.warm + spec.measure, churn: spec.churn}
	p, err := b.newPhaseAt(ctx, spec.name, spec.seed, spec.names, spec.pace, func(string) sim.Hostile { return spec.hostile }, sched.prepare)
	if err != nil {
		return nil, err
	}
	r := &churnRun{p: p, sched: sched, from: p.t0.Add(spec.warm)}
	r.to = r.from.Add(spec.measure)
	if !p.wait(ctx, r.to.Add(spec.grace).Sub(p.clk.Now())) {
		p.close()
		return nil, ctx.Err()
	}
	return r, nil
}

// latencies returns the start and end latencies of sys's alarms that
// occurred, or ended, in the measured window, in slots of the production
// rate (see inSlots).
func (r *churnRun) latencies(sys string) (start, end latencies) {
	s := r.p.sims[sys]
	return churnLatencies(newTiming(r.p.recs[sys], s, r.p.pace.speed), r.sched.plan, r.sched.ids[s], r.from, r.to)
}

// churnPhase measures start and end detection latency under steady churn.
func (b *bench) churnPhase(ctx context.Context, figs *runFigures) error {
	run, err := b.runChurn(ctx, churnSpec{
		name: "churn", seed: b.cfg.Seed, salt: 0xc4, names: systemNames, pace: b.pace(), churn: b.cfg.Churn,
		warm: warmSlots * slot, measure: time.Duration(b.cfg.ChurnSlots) * slot, grace: graceSlots * slot,
	})
	if err != nil {
		return err
	}
	p, sched, to := run.p, run.sched, run.to
	figs.PeakOngoing = peakOngoing(sched.plan, p.t0, to)
	relay := p.systems[sysRelay].(*relaySystem)
	baselines := []*baseline{p.systems[sysNaive].(*baseline), p.systems[sysEager].(*baseline)}
	err = p.stopSystems()
	if err == nil && b.keepState != "" {
		err = b.keepChurn(p, sched, to)
	}
	var calls []time.Duration
	for _, bl := range baselines {
		calls = append(calls, bl.currentCalls...)
	}
	use, uerr := relay.slotUse()
	figs.SlotUse = use
	if len(calls) > 0 {
		slices.Sort(calls)
		figs.PollCost = calls[len(calls)/2]
	}
	for _, sys := range systemNames {
		f := figs.Systems[sys]
		f.Start, f.End = run.latencies(sys)
	}
	p.traffic("churn", figs.Systems)
	return errors.Join(err, uerr, p.close())
}

// churnSchedule draws one plan of steady churn over span on the first
// simulator of a phase and schedules it identically on every simulator,
// recording the originIds each gave the alarms.
type churnSchedule struct {
	seed  int64
	salt  uint64
	span  time.Duration
	churn churn
	plan  []plannedAlarm
	ids   map[*sim.Server][]string
}

// prepare is newPhase's prepare function.
func (c *churnSchedule) prepare(s *sim.Server, clk clock.Clock) error {
	if c.plan == nil {
		rng := rand.New(rand.NewPCG(uint64(c.seed), c.salt))
		now := clk.Now()
		c.plan = planChurn(rng, deviceSNs(s), now, now.Add(c.span), c.churn)
		c.ids = map[*sim.Server][]string{}
	}
	got, err := schedule(s, c.plan)
	c.ids[s] = got
	return err
}

// churnLatencies returns the start and end detection latencies of the
// alarms of plan (with simIDs, their originIds on one simulator) that
// occurred, or ended, from from to to.
func churnLatencies(t timing, plan []plannedAlarm, simIDs []string, from, to time.Time) (start, end latencies) {
	var starts, ends, invalids []string
	var occurred, recovered []time.Time
	for i, a := range plan {
		id := simIDs[i]
		if !a.Occurred.Before(from) && a.Occurred.Before(to) {
			starts = append(starts, event.ID(id, event.Start))
			occurred = append(occurred, a.Occurred)
		}
		if !a.End.Before(from) && a.End.Before(to) {
			ends = append(ends, event.ID(id, event.End))
			invalids = append(invalids, event.ID(id, event.Invalid))
			recovered = append(recovered, a.End)
		}
	}
	start = t.distribution(starts, occurred, false)
	// An alarm ends once, as ended or invalid (or as an inferred end): its
	// end latency is that of whichever event it got.
	m, r := make([]float64, len(ends)), make([]float64, len(ends))
	for i := range ends {
		m1, r1 := t.latency(ends[i], recovered[i], false)
		m2, r2 := t.latency(invalids[i], recovered[i], false)
		m[i], r[i] = min(m1, m2), min(r1, r2)
	}
	return start, latencies{Measured: summarize(m), RealRate: summarize(r)}
}

// peakOngoing returns the most alarms of plan ongoing at once from from to
// to.
func peakOngoing(plan []plannedAlarm, from, to time.Time) int {
	type change struct {
		at time.Time
		by int
	}
	var cs []change
	for _, a := range plan {
		if !a.Occurred.Before(to) || a.End.Before(from) {
			continue
		}
		cs = append(cs, change{a.Occurred, 1}, change{a.End, -1})
	}
	slices.SortFunc(cs, func(x, y change) int {
		if c := x.at.Compare(y.at); c != 0 {
			return c
		}
		return x.by - y.by // ends before starts at the same instant
	})
	n, peak := 0, 0
	for _, c := range cs {
		n += c.by
		if !c.at.After(to) {
			peak = max(peak, n)
		}
	}
	return peak
}

// stormPhase starts StormAlarms alarms at once on a system that runs under
// a light load, and measures when their starts are delivered. The systems
// take their turns: a storm keeps a system busy, and at an accelerated clock
// the others' work would delay its requests by whole seconds of scaled time.
func (b *bench) stormPhase(ctx context.Context, figs *runFigures) error {
	for _, sys := range systemNames {
		if err := b.storm(ctx, sys, figs); err != nil {
			return fmt.Errorf("%s: %w", sys, err)
		}
	}
	return nil
}

// storm runs the storm against one system.
func (b *bench) storm(ctx context.Context, sys string, figs *runFigures) error {
	seed := b.cfg.Seed + 1
	rng := rand.New(rand.NewPCG(uint64(seed), 0x57))
	p, err := b.newPhase(ctx, "storm-"+sys, seed, []string{sys}, func(s *sim.Server, clk clock.Clock) error {
		now := clk.Now()
		plan := planChurn(rng, deviceSNs(s), now, now.Add(time.Duration(stormWarmSlots+b.cfg.StormCapSlots)*slot), background)
		_, err := schedule(s, plan)
		return err
	})
	if err != nil {
		return err
	}
	defer p.close()
	if !p.wait(ctx, stormWarmSlots*slot) {
		return ctx.Err()
	}
	s, rec := p.sims[sys], p.recs[sys]
	all := s.Storm(b.cfg.StormAlarms)
	var at time.Time
	var level0 []string
	for _, id := range all {
		a, ok := s.Alarm(id)
		if !ok {
			return fmt.Errorf("simulator: storm alarm %s unknown", id)
		}
		at = a.OccurredAt
		if a.Level == 0 {
			level0 = append(level0, id)
		}
	}
	// Run until every start of the storm is delivered, or the cap.
	deadline := p.clk.Now().Add(time.Duration(b.cfg.StormCapSlots) * slot)
	for p.clk.Now().Before(deadline) {
		done := true
		for _, id := range all {
			if _, ok := rec.deliveredAt(event.ID(id, event.Start)); !ok {
				done = false
				break
			}
		}
		if done || !p.wait(ctx, slot) {
			break
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	err = p.stopSystems()
	t := newTiming(rec, s, b.cfg.Speed)
	startIDs := func(ids []string) ([]string, []time.Time) {
		evs, refs := make([]string, len(ids)), make([]time.Time, len(ids))
		for i, id := range ids {
			evs[i], refs[i] = event.ID(id, event.Start), at
		}
		return evs, refs
	}
	f := figs.Systems[sys]
	ids, refs := startIDs(level0)
	f.StormLevel0 = t.distribution(ids, refs, true)
	ids, refs = startIDs(all)
	f.StormAll = t.distribution(ids, refs, true)
	p.traffic("storm", figs.Systems)
	return err
}

// background is the light alarm traffic of the storm and history phases.
var background = churn{Ongoing: 100, StartsPerMinute: 1, MeanDuration: time.Hour, MeanMinutes: 60}

// historyPhase starts the systems on a tenant whose alarm list holds
// alarms that ended before the first run, and counts the events sent for
// them.
func (b *bench) historyPhase(ctx context.Context, figs *runFigures) error {
	seed := b.cfg.Seed + 2
	var plan []plannedAlarm
	p, err := b.newPhase(ctx, "history", seed, systemNames, func(s *sim.Server, clk clock.Clock) error {
		if plan == nil {
			rng := rand.New(rand.NewPCG(uint64(seed), 0x4157))
			t0 := clk.Now().Truncate(time.Millisecond)
			devs := deviceSNs(s)
			// Recent history: alarms that occurred and ended within the
			// two minutes before the first run, inside the sweep overlap.
			for range 50 {
				occ := t0.Add(-time.Duration(20+rng.IntN(100)) * time.Second)
				plan = append(plan, plannedAlarm{
					Device: devs[rng.IntN(len(devs))], Level: pickLevel(rng), Occurred: occ,
					End: occ.Add(time.Duration(1+rng.IntN(15)) * time.Second),
				})
			}
			plan = append(plan, planChurn(rng, devs, t0, t0.Add(time.Duration(b.cfg.HistorySlots)*slot), background)...)
		}
		s.Backfill(b.cfg.HistoryAlarms, 7*24*time.Hour)
		_, err := schedule(s, plan)
		return err
	})
	if err != nil {
		return err
	}
	defer p.close()
	if !p.wait(ctx, time.Duration(b.cfg.HistorySlots)*slot) {
		return ctx.Err()
	}
	err = p.stopSystems()
	for _, sys := range systemNames {
		s, rec := p.sims[sys], p.recs[sys]
		n := 0
		for _, id := range rec.originIDs() {
			a, ok := s.Alarm(id)
			if !ok || a.RecoveredAt.IsZero() || !a.RecoveredAt.Before(p.t0) {
				continue
			}
			for _, tr := range event.Transitions {
				if _, ok := rec.detectedAt(event.ID(id, tr)); ok {
					n++
				}
			}
		}
		figs.Systems[sys].HistoryEvents = n
	}
	p.traffic("history", figs.Systems)
	return err
}
