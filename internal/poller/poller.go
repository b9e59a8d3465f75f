// Package poller decides, one request slot at a time, which alarm query the
// relay spends its upstream budget on, and turns every answer into a batch
// for the store, which produces the start, end and invalid events
// (docs/design.md §4).
//
// The poller works in steps, evenly spaced at the budget's spacing (61 s
// divided by the rate limit), stretched by the share of steps that send two
// requests. Every step reads the current alarms and, right after, when the
// budget has room, the most valuable other query that is due; one that finds
// no room takes the next step instead of a current read (docs/design.md §4,
// "How a step is chosen", with the latency model):
//
//  1. confirm: alarms that vanished from a current snapshot read to its end
//     are looked up among the recovered alarms: of every device in one page
//     while the window is expected to fit it (which also ends alarms that
//     recovered since the snapshot, and is the sweep too when read whole),
//     else by their devices. The record found gives the real recovery time
//     and final status. An alarm not found within the confirm timeout, and
//     missing from at least two complete snapshots, gets an inferred end at
//     its vanish time; one seen again in any answer before that is still
//     ongoing.
//  2. current: the ongoing alarms of the lookback window, in one page of 500
//     while there are at most 500, else level by level (urgent first), each
//     page applied as it arrives. Only a complete snapshot (every page read,
//     total unchanged, unique originIds equal to total) may declare a known
//     alarm vanished.
//  3. sweep: at most one slot in SweepEvery, the alarms recovered since the
//     last sweep, which catches alarms that started and ended between two
//     current polls.
//  4. reconcile: at most one slot in ReconcileEvery, and one pass at most
//     every two to sixteen minutes as the observed lateness requires, the
//     recovered alarms of older windows back to the late horizon, which
//     catches alarms the upstream listed late (a data logger uploading its
//     backlog, a device whose clock runs behind).
//
// An upstream whose limiter refuses a request sent right after another gets
// one request a step from its first refusal on.
//
// Every window is taken in the upstream's time, from the Date header of its
// answers, and reaches MaxClockSkew past the upstream's now, for devices
// whose clocks run ahead. The poller learns what the upstream actually does:
// the page size it serves, whether it honours eventLevels, how many devices
// one deviceSnList may name, and a total that counts rows it never serves.
//
// Once an hour a slot checks, among the recovered alarms, the ongoing alarms
// that occurred before the lookback window and so can no longer vanish from a
// current snapshot. The poller makes no inventory or enrichment calls: every
// event carries the upstream alarm record, which already names the station,
// system and device.
//
// No upstream failure produces a transition: a failed request ends its
// query, a half-read snapshot is never complete, and a rate-limit refusal
// holds the next slot back by the Retry-After the upstream asked for.
package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync/atomic"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/learn"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/tracing"
)

const (
	// pageSize is the largest alarm page the upstream serves; while the
	// ongoing alarms fit in one page, one request reads them all.
	pageSize = 500
	// maxLevel is the least urgent event level; level-by-level snapshots
	// read levels 0 to maxLevel.
	maxLevel = 3
	// vanishMisses is how many complete snapshots covering an alarm's level
	// must miss it before its end may be inferred: one complete snapshot can
	// still miss a record that slid across a page boundary while an alarm
	// ended and another started between two pages.
	vanishMisses = 2
	// lookupDevices is how many devices one confirm or aged query names
	// until the upstream refuses a list that long.
	lookupDevices = 50
	// confirmSlack widens a confirm query's window before the earliest
	// occurrence it looks for, so that the window holds the occurrence and
	// the recovery whichever of the two the upstream filters on.
	confirmSlack = time.Minute
	// maxAside is how many slots in a row may go to other queries than the
	// current one (confirm, sweep, reconcile, aged) before a current poll,
	// which finds new alarms, has its turn again.
	maxAside = 2
	// paceSteps is how many steps the pace of the current reads averages
	// the paired requests over.
	paceSteps = 32
	// maxReconcilePass is the most time between two reconciliation passes
	// while no alarm was listed later than a sweep reaches back.
	maxReconcilePass = 16 * time.Minute
	// readySlots is how many slots may pass without an upstream answer
	// before the poller is not ready.
	readySlots = 3
	// markSweep names the sweep's watermark in the store; markContact the
	// first contact, in the upstream's time, once it was read.
	markSweep       = "sweep"
	markContact     = "contact"
	markContactFrom = "contactFrom"
	// markListed is stored once the first snapshot of the ongoing alarms
	// was read to its end (the record bootstrap silences what it listed).
	markListed = "listed"

	defaultRateLimit      = 10
	defaultLookback       = 720 * time.Hour
	defaultSweepOverlap   = 2 * time.Minute
	defaultConfirmTimeout = 10 * time.Minute
	defaultSweepEvery     = 8
	minSweepEvery         = 4
	defaultAgedEvery      = time.Hour
	defaultMaxClockSkew   = 24 * time.Hour
	defaultLateHorizon    = 24 * time.Hour
	defaultReconcileEvery = 10
	minReconcileEvery     = 4
	// reconcilePass is the least time between the starts of two passes of
	// reconciliation over the late horizon while alarms are listed late
	// (nextReconcileEvery): in a quiet fleet, where one page holds the
	// whole horizon, it costs one slot in this time.
	reconcilePass = 2 * time.Minute
	// stallAfter is how long the ongoing alarms may go without a complete
	// snapshot before end detection is reported stalled.
	stallAfter = 5 * time.Minute
)

// Config configures a Poller. Client and Store are required; every other
// field has a default.
type Config struct {
	// Client reads the upstream alarm list; its budget is the hard limit on
	// the request rate.
	Client *opendata.Client
	// Store records alarms and produces events.
	Store *store.Store
	// Router returns the router the store gives each produced event to. It
	// is called once per batch, so a reloaded rules file takes effect on the
	// next batch. Nil, or a nil router, sends events to no sink.
	Router func() store.Router
	// Observe, when set, is shown every event the store routes, inside the
	// transaction that produces it and before the router: alarm
	// management (manage.Manager.Observe) learns of a masking alarm before
	// anything it masks can go out.
	Observe func(ev *event.Event)
	// RateLimit is the upstream's limit in requests per minute, which sets
	// the slot length; default 10. The slot also stretches while the
	// client's budget runs at a lower effective limit.
	RateLimit int
	// Lookback is the window of the current query, back from now; default
	// 720h.
	Lookback time.Duration
	// SweepOverlap is how far a sweep reaches back before the previous
	// sweep's end; default 2m.
	SweepOverlap time.Duration
	// ConfirmTimeout is how long after it vanished an alarm whose recovered
	// record is not found gets an inferred end, once two complete snapshots
	// missed it; default 10m.
	ConfirmTimeout time.Duration
	// SweepEvery makes at most one slot in SweepEvery a sweep; default 8,
	// at least 4. Every sweep slot delays the next current poll by a slot.
	SweepEvery int
	// MaxClockSkew is how far past the upstream's now every query window
	// reaches, so that alarms stamped by device clocks that run ahead (or
	// stamp local time as UTC) are still read; default 24h.
	MaxClockSkew time.Duration
	// LateHorizon is how far back, in occurrence or recovery time,
	// reconciliation reads recovered alarms, so that alarms the upstream
	// lists late and already over are still announced; default 24h.
	LateHorizon time.Duration
	// ReconcileEvery makes at most one slot in ReconcileEvery a
	// reconciliation read; default 10, at least 4.
	ReconcileEvery int
	// Clock paces the slots; default the wall clock.
	Clock clock.Clock
	// Logger receives the poller's log lines; default none.
	Logger *slog.Logger
	// Metrics, when set, records the poller's metrics.
	Metrics *Metrics
	// OnEvents, when set, is called with the events of every Apply that
	// produced some, in order, on the polling goroutine, after the store
	// committed them. It must return quickly.
	OnEvents func([]event.Event)
	// Tracer, when on, makes a span of every poll, a trace of its own whose
	// upstream calls are children and to which the transitions its answer
	// produces link (docs/design.md §11, "Traces"); nil makes none.
	Tracer *tracing.Tracer
}

// Poller polls the upstream alarm list and feeds the store. Run drives it;
// Ready and LastSuccess may be called from any goroutine.
type Poller struct {
	cfg        Config
	client     *opendata.Client
	store      *store.Store
	clock      clock.Clock
	log        *slog.Logger
	m          *Metrics
	agedEvery  time.Duration
	running    atomic.Bool
	lastAnswer atomic.Int64 // Unix ns of the last upstream answer; 0 before the first
	// refusals counts the logins refused for their credentials in a row;
	// refusedUntil is when the next try is due (Unix ns).
	refusals     int
	refusedUntil atomic.Int64
	// failedSteps counts the steps in a row that ended in an error, for a
	// tenant that shares its budget with others (step's back-off).
	failedSteps int
	// stall says why end detection is stalled, "" while it is not.
	stall atomic.Value
	// stampSummary is the devices' stamp offsets last taken.
	stampSummary atomic.Pointer[StampSummary]
	// usage counts the queries of the last minute and keeps the last
	// failure (Usage).
	usage usage
	// facts is what was learned of the upstream from the answers
	// (Learned); the scheduler acts on the recovered order, on bursts and
	// on the lateness.
	facts *learn.Upstream

	// The state below belongs to the goroutine running Run.

	// known holds every alarm the store has as ongoing.
	known idMap[tracked]
	// outside holds what the poller keeps of the known alarms older than
	// the lookback window, which current snapshots cannot list: few are.
	outside idMap[outsideAlarm]
	// snap numbers the current snapshots (unit.snap), 0 for none yet.
	snap uint16
	// devices numbers the device serial numbers, which many alarms share,
	// and devNames holds them by number; number 0 is no serial number.
	devices  map[string]uint32
	devNames []string
	// perLevel counts the known alarms by level.
	perLevel map[int]int
	// vanished holds the known alarms missing from a snapshot read to its
	// end: a recovered record found for one proves its end, while only
	// complete snapshots count towards inferring it.
	vanished map[string]*vanish
	firstRun time.Time
	// started is when Run loaded the store, on the relay's clock.
	started time.Time
	// up is what the poller has learnt of the upstream's behaviour, and
	// stamps what it learnt of the devices' clocks.
	up     upstream
	stamps stampOffsets
	// contacted says the first contact was read (or the store comes from
	// a relay that swept before first contacts existed); until then no
	// sweep or reconciliation runs.
	contacted bool
	// floor is the start of the first contact's window: no later sweep or
	// reconciliation window starts before it. legacy says the store was
	// written before first contacts existed: history there is what
	// recovered before its first run.
	floor  time.Time
	legacy bool
	// listed says the store's first snapshot of the ongoing alarms was
	// read to its end (markListed).
	listed bool
	// sweepMark is the end of the last complete sweep. sweepSpan, when
	// not zero, caps the window of the next sweep after a sweep of several
	// pages could not be read whole.
	sweepMark time.Time
	sweepSpan time.Duration

	// The queries in progress, nil when none.
	cur, confirm, sweep, aged, rec, contact, lag *unit
	// recCursor is where the next reconciliation window ends, going back
	// towards the late horizon; zero between passes. recSpan is the window
	// expected to fit one page, recPass when the current pass began.
	recCursor time.Time
	recSpan   time.Duration
	recPass   time.Time
	// levelMode pages the current alarms level by level; level is the next
	// level to read and cycle tracks the pass over the four levels.
	levelMode bool
	level     int
	cycle     cycle
	// sinceSweep, sinceAged and sinceRec count the slots since the last
	// sweep, aged and reconciliation slot, aside the slots in a row spent
	// on other queries than the current one; lastAged is when the last aged
	// query began.
	sinceSweep int
	sinceAged  int
	sinceRec   int
	sinceLag   int
	aside      int
	lastAged   time.Time
	// paired records, for the last paceSteps steps, whether each sent a
	// second request right after its current read; pairedSum counts the
	// true ones. The current reads are paced by their mean, so that both
	// together keep to the budget.
	paired    [paceSteps]bool
	pairedAt  int
	pairedSum int
	// owed says a request was due after a current read but the budget had
	// no room for it: the next step spends its request on it instead.
	owed bool
	// wideSpan is the longest window a confirm query of every device is
	// expected to answer in one page.
	wideSpan time.Duration
	// recEvery is the least time between two reconciliation passes now.
	recEvery time.Duration
	// lastRead is when the current alarms of every level were last read to
	// their end: the transitions since wait for the next read.
	lastRead time.Time
}

// tracked is the poller's compact memory of one ongoing alarm.
// It is 16 bytes: at 100,000 alarms every byte of it is 100 kB.
type tracked struct {
	occ int64 // occurrence, epoch ms
	// dev numbers its device serial number (Poller.devNames).
	dev   uint32
	level int16
	// listed is the number (unit.snap) of the last current snapshot that
	// listed the alarm: what the vanish rule needs to know of a known
	// alarm, kept here rather than in a set of the originIds a snapshot
	// read, which at 100,000 alarms held up to 100,000 of them.
	listed uint16
}

// outsideAlarm is what the poller keeps of a known alarm older than the
// lookback window.
type outsideAlarm struct {
	// logged says the alarm was logged as older than the window.
	logged bool
	// checked is when the aged check last asked for it, epoch ms.
	checked int64
}

// vanish is what the poller knows of an alarm missing from a snapshot.
type vanish struct {
	at    time.Time // the snapshot it was first missing from
	after time.Time // the read before that one: it ended in between
	next  time.Time // earliest time for the next confirm query
	tries int
	// misses counts the complete snapshots covering the alarm's level that
	// lacked it; the first one counts if it was complete.
	misses int
	// looked is set once a confirm query was read to its end without
	// finding the alarm; an upstream that cannot be asked infers nothing.
	looked bool
	// narrow is set once a confirm query of every device could not be read
	// to its end without finding the alarm: it is looked up by its device.
	narrow bool
}

// cycle is one pass over the levels of a level-by-level snapshot.
type cycle struct {
	complete bool // every level read so far was complete
	total    int  // sum of the levels' totals
}

// New returns a Poller for cfg. It does not contact the upstream or read the
// store; Run does.
func New(cfg Config) (*Poller, error) {
	if cfg.Client == nil {
		return nil, errors.New("poller: Config.Client is required")
	}
	if cfg.Store == nil {
		return nil, errors.New("poller: Config.Store is required")
	}
	if cfg.RateLimit < 0 {
		return nil, fmt.Errorf("poller: rate limit %d: want a number of requests per minute, 1 or more", cfg.RateLimit)
	}
	if cfg.RateLimit == 0 {
		cfg.RateLimit = defaultRateLimit
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"lookback", &cfg.Lookback, defaultLookback},
		{"sweep overlap", &cfg.SweepOverlap, defaultSweepOverlap},
		{"confirm timeout", &cfg.ConfirmTimeout, defaultConfirmTimeout},
		{"max clock skew", &cfg.MaxClockSkew, defaultMaxClockSkew},
		{"late horizon", &cfg.LateHorizon, defaultLateHorizon},
	} {
		if *d.v < 0 {
			return nil, fmt.Errorf("poller: %s %s: want a positive duration", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	switch {
	case cfg.SweepEvery == 0:
		cfg.SweepEvery = defaultSweepEvery
	case cfg.SweepEvery < minSweepEvery:
		return nil, fmt.Errorf("poller: sweep every %d slots: want %d or more (at most one slot in %d)",
			cfg.SweepEvery, minSweepEvery, minSweepEvery)
	}
	switch {
	case cfg.ReconcileEvery == 0:
		cfg.ReconcileEvery = defaultReconcileEvery
	case cfg.ReconcileEvery < minReconcileEvery:
		return nil, fmt.Errorf("poller: reconcile every %d slots: want %d or more (at most one slot in %d)",
			cfg.ReconcileEvery, minReconcileEvery, minReconcileEvery)
	}
	cfg.LateHorizon = min(cfg.LateHorizon, cfg.Lookback)
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Poller{
		cfg:       cfg,
		client:    cfg.Client,
		store:     cfg.Store,
		clock:     cfg.Clock,
		log:       cfg.Logger,
		m:         cfg.Metrics,
		agedEvery: defaultAgedEvery,
		facts: learn.New(learn.Config{Store: cfg.Store, Clock: cfg.Clock, Logger: cfg.Logger,
			Metrics: cfg.Metrics.facts()}),
	}, nil
}

// Run polls until ctx is done and then returns nil. It first rebuilds the set
// of ongoing alarms from the store (vanish timers start afresh); a store that
// cannot be read is its only error. Run must not be called again before it
// has returned.
func (p *Poller) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("poller: Run is already running")
	}
	defer p.running.Store(false)
	if err := p.load(); err != nil {
		return err
	}
	next := p.clock.Now()
	for {
		if !p.sleep(ctx, next) {
			return nil
		}
		next = p.step(ctx)
	}
}

// LastSuccess returns when the upstream last answered an alarm query; zero
// before the first answer.
func (p *Poller) LastSuccess() time.Time {
	ns := p.lastAnswer.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// maxCredentialsWait bounds the wait after logins refused for their
// credentials.
const maxCredentialsWait = 5 * time.Minute

// UpstreamProblem returns nil when the upstream answered within the last
// three slots, and otherwise why it did not: its refusal of the credentials,
// or no answer.
func (p *Poller) UpstreamProblem() error {
	if p.Ready() {
		return nil
	}
	if p.client.CredentialsRefused() {
		next := time.Unix(0, p.refusedUntil.Load())
		return fmt.Errorf("%w (next try in %s)", opendata.ErrCredentials, max(next.Sub(p.clock.Now()), 0).Round(time.Second))
	}
	return errors.New("no answer from the upstream within the last three slots")
}

// Learned returns what was learned of the upstream so far. It may be called
// from any goroutine.
func (p *Poller) Learned() learn.Facts { return p.facts.Facts() }

// Ready reports whether the upstream answered within the last three slots,
// or, for a tenant that shares its budget with others, within the longest
// the budget lets a tenant wait between two reads (opendata.Budget's
// ReadBound).
func (p *Poller) Ready() bool {
	last := p.LastSuccess()
	return !last.IsZero() && p.clock.Now().Sub(last) <= max(readySlots*p.slot(), p.client.Budget().ReadBound())
}

// slot returns the length of a request slot: a minute divided by the rate
// limit, or by the client budget's effective limit while that is lower.
func (p *Poller) slot() time.Duration {
	limit := p.cfg.RateLimit
	if l := p.client.Budget().Limit(); l > 0 && l < limit {
		limit = l
	}
	return time.Minute / time.Duration(limit)
}

// sleep waits until t and reports whether ctx is still live.
func (p *Poller) sleep(ctx context.Context, t time.Time) bool {
	if d := t.Sub(p.clock.Now()); d > 0 {
		timer := p.clock.NewTimer(d)
		defer timer.Stop()
		select {
		case <-ctx.Done():
		case <-timer.C():
		}
	}
	return ctx.Err() == nil
}

// load rebuilds the poller's memory from the store.
func (p *Poller) load() error {
	ongoing, err := p.store.Ongoing()
	if err != nil {
		return fmt.Errorf("poller: %w", err)
	}
	mark, found, err := p.store.Mark(markSweep)
	if err != nil {
		return fmt.Errorf("poller: %w", err)
	}
	_, contacted, err := p.store.Mark(markContact)
	if err != nil {
		return fmt.Errorf("poller: %w", err)
	}
	floor, _, err := p.store.Mark(markContactFrom)
	if err != nil {
		return fmt.Errorf("poller: %w", err)
	}
	p.floor, p.legacy = floor, found && !contacted
	p.contacted = contacted || p.legacy
	_, listed, err := p.store.Mark(markListed)
	if err != nil {
		return fmt.Errorf("poller: %w", err)
	}
	// A store that swept before the marks existed listed long ago.
	p.listed = listed || p.legacy
	if err := p.facts.Restore(); err != nil {
		return fmt.Errorf("poller: %w", err)
	}
	p.firstRun = p.store.FirstRun()
	if !found {
		mark = p.firstRun
	}
	p.started = p.clock.Now()
	p.up = newUpstream(p.started)
	if n := p.facts.DeviceLimit(); n > 0 && n < p.up.devices {
		// The limit an earlier process learnt: no list is refused again
		// to learn it.
		p.up.devices = n
		p.m.setDeviceLimit(n)
	}
	p.stamps = stampOffsets{}
	p.known = newIDMap[tracked](len(ongoing))
	p.outside = newIDMap[outsideAlarm](0)
	p.devices = map[string]uint32{"": 0}
	p.devNames = []string{""}
	p.perLevel = make(map[int]int)
	p.vanished = make(map[string]*vanish)
	for l := 0; l <= maxLevel; l++ {
		p.m.setOngoing(l, 0)
	}
	for i := range ongoing {
		t := &ongoing[i]
		p.track(t.OriginID, t.DeviceSN, t.OccurredAt, t.Level)
	}
	p.m.setUnconfirmed(0)
	p.sweepMark, p.sweepSpan = mark, 0
	p.cur, p.confirm, p.sweep, p.aged, p.rec, p.contact, p.lag = nil, nil, nil, nil, nil, nil, nil
	p.recCursor, p.recSpan, p.recPass = time.Time{}, 0, time.Time{}
	p.levelMode, p.level, p.cycle = false, 0, cycle{complete: true}
	p.sinceSweep, p.sinceAged, p.sinceRec, p.sinceLag, p.aside = 0, 0, 0, 0, 0
	p.lastAged = p.clock.Now()
	p.paired, p.pairedAt, p.pairedSum, p.owed = [paceSteps]bool{}, 0, 0, false
	p.wideSpan, p.recEvery = p.cfg.Lookback, reconcilePass
	p.lastRead = time.Time{}
	p.tellDemand()
	p.log.Info("poller starting", "ongoing", p.known.len(), "first_contact_done", p.contacted, "sweep_from", mark,
		"slot", p.slot(), "lookback", p.cfg.Lookback, "confirm_timeout", p.cfg.ConfirmTimeout,
		"max_clock_skew", p.cfg.MaxClockSkew, "late_horizon", p.cfg.LateHorizon)
	return nil
}

// step spends one slot: it applies the inferred ends that are due, chooses a
// query and sends one request of it. It returns when the next slot starts.
func (p *Poller) step(ctx context.Context) time.Time {
	start := p.clock.Now()
	p.inferEnds(ctx, start)
	p.checkStall(start)
	u := p.choose(start)
	err := p.poll(ctx, u)
	p.publishStamps(p.clock.Now())
	var second *unit
	if err == nil {
		second = p.pair(u, p.clock.Now())
	}
	if second != nil {
		u = second
		err = p.poll(ctx, u)
		p.publishStamps(p.clock.Now())
		// Only an answer, or a refusal for the rate limit, tells whether
		// the limiter admitted the request.
		var oe *opendata.Error
		if limited := errors.As(err, &oe) && oe.Kind == opendata.KindRateLimited; limited || err == nil {
			p.facts.BurstAnswered(limited)
		}
	}
	p.pace(second != nil)
	next := start.Add(p.stride())
	shared := p.client.Budget().Tenants() > 1
	if shared {
		// A budget shared with other tenants paces the steps: the next
		// one asks it half a spacing after this one began, so that its
		// request can have the next slot the budget hands out
		// (docs/design.md §4, "Tenants of one budget"), and a step that
		// fails before it asks the budget does not spin.
		next = start.Add(p.client.Budget().Spacing() / 2)
		// A step that failed did not read the current alarms, so the
		// tenant stays overdue with the oldest read of all, or its
		// backlog keeps growing: asking again at every slot, it would
		// take every slot from the others while its requests fail. Back
		// off, twice as long after each failure, up to the floor: it is
		// still tried at least every floor.
		if err != nil {
			p.failedSteps++
			next = start.Add(min(p.client.Budget().Spacing()/2<<min(p.failedSteps, 16), max(p.client.Budget().Floor(), p.client.Budget().Spacing())))
		} else {
			p.failedSteps = 0
		}
	}
	if errors.Is(err, opendata.ErrCredentials) {
		// Retrying at every slot cannot help: wait twice as long after each
		// refusal, up to maxCredentialsWait, so that a fixed secret is
		// taken within minutes and a wrong one costs few requests.
		p.refusals++
		wait := min(p.slot()<<min(p.refusals, 16), maxCredentialsWait)
		next = start.Add(wait)
		p.refusedUntil.Store(next.UnixNano())
		p.m.poll(u.kind, "auth")
		p.log.Error("upstream login refused: check RELAY_APP_ID and RELAY_APP_SECRET",
			"refusals", p.refusals, "next_try_in", wait, "err", err)
	} else if err != nil {
		p.fail(ctx, u, err)
		var oe *opendata.Error
		if errors.As(err, &oe) && oe.Kind == opendata.KindRateLimited && oe.RetryAfter > 0 {
			if t := p.clock.Now().Add(oe.RetryAfter); t.After(next) {
				next = t
			}
		}
	}
	if free := p.client.Budget().NextFree(); free.After(next) && !shared {
		next = free
	}
	p.tellDemand()
	return next
}

// choose returns the query the slot starting at now is spent on first.
func (p *Poller) choose(now time.Time) *unit {
	u := p.pick(now)
	p.count(u)
	return u
}

// pairing reports whether a slot may send a second request right after its
// current read: unless the upstream refused such a request for its rate
// limit (learn.FactBurstsAdmitted).
func (p *Poller) pairing() bool { return p.facts.Bursts() != learn.Refuted }

// pair returns the query to send right after u, a current read just
// answered, in the same slot: the most urgent query other than the current
// one that is due, once u was read to its end (unless it found a storm,
// whose urgent level is read next), while pairing. It returns nil when
// there is none, or when the budget has no room now: the next slot then
// spends its request on it.
func (p *Poller) pair(u *unit, now time.Time) *unit {
	if !p.pairing() || u.kind != kindCurrent || p.cur != nil {
		return nil
	}
	if u.level < 0 && p.levelMode {
		// This read found a storm: its urgent level is read next.
		return nil
	}
	x := p.pickAside(now)
	if x == nil {
		return nil
	}
	if p.client.Budget().NextFree().After(now) {
		p.owed = true
		return nil
	}
	p.countPaired(x)
	return x
}

// countPaired resets the counter of the kind of x, a query sent right after
// a current read: the counters count slots, not requests.
func (p *Poller) countPaired(x *unit) {
	switch x.kind {
	case kindSweep:
		p.sinceSweep = 0
	case kindAged:
		p.sinceAged = 0
	case kindReconcile:
		p.sinceRec = 0
	case kindLag:
		p.sinceLag = 0
	}
}

// starving reports, while pairing, whether a sweep has waited a slot past
// its period behind confirm queries, or a lag sweep or reconciliation
// twice its period: it then goes before them.
func (p *Poller) starving(now time.Time) bool {
	if !p.pairing() || !p.contacted {
		return false
	}
	if p.sinceSweep >= p.cfg.SweepEvery {
		return true
	}
	if p.sinceLag >= 2*p.cfg.SweepEvery {
		if p.lag == nil {
			p.lag = p.newLagSweep(now)
		}
		if p.lag != nil {
			return true
		}
	}
	if p.sinceRec >= 2*p.cfg.ReconcileEvery {
		if p.rec == nil {
			p.rec = p.newReconcile(now)
		}
		return p.rec != nil
	}
	return false
}

// pace records whether the step just ended sent a second request.
func (p *Poller) pace(paired bool) {
	if p.paired[p.pairedAt] {
		p.pairedSum--
	}
	p.paired[p.pairedAt] = paired
	if paired {
		p.pairedSum++
	}
	p.pairedAt = (p.pairedAt + 1) % paceSteps
}

// stride returns the time from one step's start to the next: the budget's
// spacing (its window and margin divided by its limit), and while pairing
// that stretched by the mean number of requests a step sends, so that the
// current reads are evenly spaced and the requests paired with them keep to
// the budget (docs/design.md §4, "How a step is chosen").
func (p *Poller) stride() time.Duration {
	spacing := max(p.client.Budget().Spacing(), p.slot())
	if !p.pairing() {
		return spacing
	}
	// The steps not recorded yet count as unpaired: a stride too short at
	// first is held back by the budget (step), never a request refused.
	return spacing * time.Duration(paceSteps+p.pairedSum) / paceSteps
}

// count moves the counters of the slots since each kind of query for u,
// the query a request is sent for.
func (p *Poller) count(u *unit) {
	if u.kind == kindCurrent {
		p.aside = 0
	} else {
		p.aside++
	}
	if u.kind == kindSweep {
		p.sinceSweep = 0
	} else {
		p.sinceSweep++
	}
	if u.kind == kindAged {
		p.sinceAged = 0
	} else {
		p.sinceAged++
	}
	if u.kind == kindReconcile {
		p.sinceRec = 0
	} else {
		p.sinceRec++
	}
	if u.kind == kindLag {
		p.sinceLag = 0
	} else {
		p.sinceLag++
	}
}

func (p *Poller) pick(now time.Time) *unit {
	// A snapshot being paged is read to its end first: every slot between
	// its pages makes a shifting total, and so an incomplete snapshot, more
	// likely.
	if p.cur != nil && p.cur.read > 0 {
		return p.cur
	}
	// While pairing, every slot reads the current alarms first and the
	// other queries go right after (pair), unless one was owed.
	aside := p.aside < maxAside
	if p.pairing() {
		// The first contact goes alone, before anything is swept, with a
		// current read at least every third slot while it is paged.
		aside, p.owed = p.owed || !p.contacted && p.aside < maxAside, false
	}
	if aside {
		if u := p.pickAside(now); u != nil {
			return u
		}
	}
	if p.cur == nil {
		p.cur = p.newCurrent(now)
	}
	return p.cur
}

// pickAside returns the query other than the current one that the slot
// starting at now should go to, in order of urgency, or nil when none is due.
func (p *Poller) pickAside(now time.Time) *unit {
	if p.confirm == nil {
		p.confirm = p.newConfirm(now)
	}
	if p.confirm != nil && !p.starving(now) {
		return p.confirm
	}
	if !p.contacted {
		// Nothing may be swept before the first contact told history
		// from new alarms.
		if p.contact == nil {
			p.contact = p.newContact(now)
		}
		return p.contact
	}
	if p.sinceSweep >= p.cfg.SweepEvery-1 || p.sweepLate(now) {
		if p.sweep == nil {
			p.sweep = p.newSweep(now)
		}
		return p.sweep
	}
	// Devices whose stamps lag further than the sweep reaches get a sweep
	// of their own, as often as the sweep.
	if p.sinceLag >= p.cfg.SweepEvery-1 {
		if p.lag == nil {
			p.lag = p.newLagSweep(now)
		}
		if p.lag != nil {
			return p.lag
		}
	}
	if p.sinceRec >= p.cfg.ReconcileEvery-1 {
		if p.rec == nil {
			p.rec = p.newReconcile(now)
		}
		if p.rec != nil {
			return p.rec
		}
	}
	// An aged query starts at most hourly, and its pages take at most one
	// slot in SweepEvery, like the sweep's.
	if p.aged != nil && p.sinceAged >= p.cfg.SweepEvery-1 {
		return p.aged
	}
	if p.aged == nil && now.Sub(p.lastAged) >= p.agedEvery {
		p.lastAged = now
		if p.aged = p.newAged(now); p.aged != nil {
			return p.aged
		}
	}
	// A confirm query that waited for a starving query with nothing to
	// do goes now.
	return p.confirm
}

// poll sends the next request of u and applies its answer, in a span of
// its own when tracing is on.
func (p *Poller) poll(ctx context.Context, u *unit) error {
	if !p.cfg.Tracer.Enabled() {
		_, err := p.pollOnce(ctx, u)
		return err
	}
	ctx, span := p.cfg.Tracer.StartPoll(ctx, u.kind.String(), u.query.Page)
	records, err := p.pollOnce(ctx, u)
	tracing.EndPoll(span, records, err)
	return err
}

// pollOnce sends the next request of u and applies its answer; it returns
// how many records the answer held.
func (p *Poller) pollOnce(ctx context.Context, u *unit) (int, error) {
	pg, err := p.client.AlarmPage(opendata.WithPriority(ctx, u.kind.priority()), u.query)
	if ctx.Err() == nil {
		p.usage.sent(u.kind, p.clock.Now())
	}
	if err != nil {
		if p.refusedList(u, err) {
			p.retryNow(u)
			return 0, err
		}
		p.drop(u, p.clock.Now())
		return 0, err
	}
	at := p.clock.Now()
	p.lastAnswer.Store(at.UnixNano())
	p.refusals = 0
	p.m.poll(u.kind, "ok")
	p.learnClock(pg)
	p.stamps.seeListed(pg.Alarms, p.upAt(at))
	p.add(u, pg, at)
	p.observe(u, pg)
	p.paging(u, pg)
	if u.done && !u.shifted {
		p.facts.ReadEnded(u.rows, u.total)
	}
	switch u.kind {
	case kindCurrent:
		// A storm's first page holds at most 500 of more than 500 alarms
		// and so is never complete: a complete unit here is exactly a
		// snapshot that onCurrent let declare alarms vanished.
		if err = p.onCurrent(ctx, u, pg, at); err == nil && u.done && u.complete() {
			p.missed(u)
		}
	case kindSweep:
		err = p.onSweep(ctx, u, pg, at)
	case kindReconcile:
		err = p.onReconcile(ctx, u, pg, at)
	case kindContact:
		err = p.onContact(ctx, u, pg, at)
	case kindLag:
		err = p.onLagSweep(ctx, u, pg, at)
	default:
		err = p.onLookup(ctx, u, pg, at)
	}
	if err != nil {
		p.drop(u, at)
	}
	p.m.setUnconfirmed(len(p.vanished))
	return len(pg.Alarms), err
}

// drop abandons u after a failure; the next slot chooses again.
func (p *Poller) drop(u *unit, at time.Time) {
	switch u.kind {
	case kindCurrent:
		p.cur = nil
		p.cycle.complete = false
	case kindSweep:
		p.sweep = nil
	case kindConfirm:
		p.confirm = nil
		p.retryLater(u, at, false)
	case kindAged:
		p.aged = nil
	case kindReconcile:
		p.rec = nil
	case kindLag:
		p.lag = nil
	case kindContact:
		p.dropContact(u)
	}
}

// fail logs a failed slot and counts it.
func (p *Poller) fail(ctx context.Context, u *unit, err error) {
	if ctx.Err() != nil {
		p.m.poll(u.kind, "canceled")
		return
	}
	var se storeError
	if !errors.As(err, &se) {
		p.usage.failure(p.clock.Now(), u.kind.String()+" query: "+err.Error())
	}
	var oe *opendata.Error
	if errors.As(err, &oe) {
		p.m.poll(u.kind, oe.Kind.String())
		p.log.Warn("alarm query failed", "query", u.kind.String(), "page", u.query.Page,
			"kind", oe.Kind.String(), "code", oe.Code, "http_status", oe.HTTPStatus,
			"retry_after", oe.RetryAfter, "err", err)
		return
	}
	if errors.As(err, &se) {
		p.log.Error("alarm query answer not stored; it is read again", "query", u.kind.String(), "err", err)
		return
	}
	p.m.poll(u.kind, "error")
	p.log.Warn("alarm query failed", "query", u.kind.String(), "page", u.query.Page, "err", err)
}

// storeError is a failed Apply; the answer is read again later.
type storeError struct{ err error }

func (e storeError) Error() string { return "poller: " + e.err.Error() }
func (e storeError) Unwrap() error { return e.err }

// apply hands b to the store and reports what it produced.
func (p *Poller) apply(ctx context.Context, b store.Batch) (store.Result, error) {
	var route store.Router
	if p.cfg.Router != nil {
		route = p.cfg.Router()
	}
	if observe := p.cfg.Observe; observe != nil {
		next := route
		route = func(ev *event.Event) []string {
			observe(ev)
			if next == nil {
				return nil
			}
			return next(ev)
		}
	}
	if p.legacy {
		b.HistoryBefore = p.firstRun
	}
	res, err := p.store.Apply(ctx, b, route)
	if err != nil {
		return res, storeError{err}
	}
	for _, why := range res.Ignored {
		p.log.Warn("alarm record ignored by the store", "reason", why)
	}
	for i := range res.Events {
		d := &res.Events[i].Data
		p.log.Debug("alarm transition", "id", res.Events[i].ID, "level", d.Level,
			"device_sn", d.DeviceSN, "inferred", d.Inferred)
	}
	p.m.events(res.Events, p.firstRun, p.up.offset)
	p.firstSeen(res.Events)
	p.countTransitions(res.Events)
	if p.cfg.OnEvents != nil && len(res.Events) > 0 {
		p.cfg.OnEvents(res.Events)
	}
	return res, nil
}

// learn updates the known alarms from records the store has applied.
func (p *Poller) learn(recs []event.Alarm, res store.Result) {
	started := make(map[string]bool)
	for i := range res.Events {
		if d := &res.Events[i].Data; d.Transition == event.Start {
			started[d.OriginID] = true
		}
	}
	for i := range recs {
		a := &recs[i]
		if a.Status != event.StatusOngoing {
			p.untrack(a.OriginID)
			continue
		}
		if k, ok := p.known.get(a.OriginID); ok {
			if v, ok := p.vanished[a.OriginID]; ok {
				delete(p.vanished, a.OriginID)
				p.log.Info("vanished alarm seen again: still ongoing", "origin_id", a.OriginID, "vanished_at", v.at)
			}
			if a.Level >= 0 && a.Level <= maxLevel && a.Level != int(k.level) {
				p.relevel(a.OriginID, k, a.Level)
			}
			continue
		}
		if started[a.OriginID] || p.storeOngoing(a.OriginID) {
			p.track(a.OriginID, a.DeviceSN, a.OccurredAt, a.Level)
		}
	}
}

// storeOngoing reports whether the store has the alarm as ongoing: an
// ongoing record produces no start when the store recorded it silently (the
// record bootstrap) or already knows its end.
func (p *Poller) storeOngoing(id string) bool {
	t, ok, err := p.store.Alarm(id)
	if err != nil {
		p.log.Warn("alarm state not readable; the record is applied again on its next poll", "origin_id", id, "err", err)
		return false
	}
	return ok && t.Status == event.StatusOngoing
}

func (p *Poller) track(id, dev string, occ time.Time, level int) {
	if p.known.has(id) {
		return
	}
	n, ok := p.devices[dev]
	if !ok {
		n = uint32(len(p.devNames))
		p.devices[dev] = n
		p.devNames = append(p.devNames, dev)
	}
	p.known.set(id, tracked{dev: n, occ: occ.UnixMilli(), level: int16(level)})
	p.perLevel[level]++
	p.m.setOngoing(level, p.perLevel[level])
}

// occurred returns the occurrence of the known alarm id, epoch ms; 0 for
// an alarm it does not know.
func (p *Poller) occurred(id string) int64 {
	a, _ := p.known.get(id)
	return a.occ
}

// relevel moves the known alarm id, tracked as a, to level, so that it is
// expected in that level's snapshots from now on.
func (p *Poller) relevel(id string, a tracked, level int) {
	from := int(a.level)
	a.level = int16(level)
	p.known.set(id, a)
	p.perLevel[from]--
	p.m.setOngoing(from, p.perLevel[from])
	p.perLevel[level]++
	p.m.setOngoing(level, p.perLevel[level])
	p.log.Debug("ongoing alarm changed level", "origin_id", id, "from", from, "to", level)
}

// missed counts one more miss for every vanished alarm in the scope of u,
// a complete current snapshot: learn has already cleared the vanished alarms
// u holds, and vanish has just marked the ones u was the first to lack. An
// alarm outside u's window cannot be in it and is not counted.
func (p *Poller) missed(u *unit) {
	from, to := u.query.Start.UnixMilli(), u.query.End.UnixMilli()
	for id, v := range p.vanished {
		a, _ := p.known.get(id)
		if u.level >= 0 && int(a.level) != u.level || a.occ < from || a.occ > to {
			continue
		}
		v.misses++
	}
}

func (p *Poller) untrack(id string) {
	a, ok := p.known.get(id)
	if !ok {
		return
	}
	p.known.remove(id)
	p.outside.remove(id)
	delete(p.vanished, id)
	level := int(a.level)
	p.perLevel[level]--
	p.m.setOngoing(level, p.perLevel[level])
}

// inferEnds gives an inferred end to every vanished alarm whose recovered
// record was not found within the confirm timeout, by at least one confirm
// query read to its end, and that at least two complete snapshots covering
// its level missed.
func (p *Poller) inferEnds(ctx context.Context, now time.Time) {
	var inf []store.Inferred
	for id, v := range p.vanished {
		if v.looked && v.misses >= vanishMisses && now.Sub(v.at) >= p.cfg.ConfirmTimeout {
			inf = append(inf, store.Inferred{OriginID: id, At: p.upAt(v.at)})
		}
	}
	if len(inf) == 0 {
		return
	}
	sort.Slice(inf, func(i, j int) bool {
		if !inf[i].At.Equal(inf[j].At) {
			return inf[i].At.Before(inf[j].At)
		}
		return inf[i].OriginID < inf[j].OriginID
	})
	if _, err := p.apply(ctx, store.Batch{Inferred: inf, DetectedAt: now}); err != nil {
		if ctx.Err() == nil {
			p.log.Error("inferred ends not stored; they are tried again next slot", "alarms", len(inf), "err", err)
		}
		return
	}
	for _, i := range inf {
		p.untrack(i.OriginID)
		p.log.Info("alarm end inferred: no recovered record found within the confirm timeout",
			"origin_id", i.OriginID, "vanished_at", i.At)
	}
	p.m.setUnconfirmed(len(p.vanished))
}
