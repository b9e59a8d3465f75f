// Package deliver drains the store's outboxes into sinks (docs/design.md
// §8): one loop per sink, in outbox order, so that for one alarm an end
// never overtakes its start; retries with backoff and Retry-After, dead
// letters and max_age; runs of distinct alarms handed to pipelining sinks at
// once and recorded in one transaction; the alarm-management gate asked
// before each alarm's next entry; and the fence asked before anything
// leaves. Sinks see none of it: they get a notify.Delivery and make one
// attempt (package notify).
package deliver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/redact"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/tracing"
)

// Target is one sink a Deliverer drains, with its max_age and
// max_retry_after.
type Target struct {
	// Sink receives the entries of the outbox named Sink.Name().
	Sink notify.Sink
	// MaxAge dead-letters an entry not delivered this long after it was
	// enqueued (default notify.DefaultMaxAge), once it was attempted at least once.
	MaxAge time.Duration
	// MaxRetryAfter caps the wait a receiver's Retry-After asks for
	// (default notify.DefaultMaxRetryAfter): a Retry-After of a day must not stall
	// the sink for a day.
	MaxRetryAfter time.Duration
	// Type and Target are the sink's type and its target as relay shows
	// it (no credential), for the spans of its attempts; empty leaves
	// them out.
	Type, Target string
}

// Options tune a Deliverer. Zero values take the defaults.
type Options struct {
	// Clock tells the time and sleeps (default the real clock).
	Clock clock.Clock
	// Logger receives one line per retry and per dead letter (default
	// slog.Default()).
	Logger *slog.Logger
	// Metrics records deliveries; nil records nothing.
	Metrics *Metrics
	// MinBackoff is the wait after the first failed attempt (default 1s);
	// it doubles with every further failure of the same entry.
	MinBackoff time.Duration
	// MaxBackoff caps the wait between attempts (default 5m).
	MaxBackoff time.Duration
	// Jitter is the largest fraction of a backoff cut off at random, so that
	// sinks recovering together are not hit together (default 0.2).
	Jitter float64
	// Poll is how often an idle loop looks at its outbox without being
	// woken by the store (default 30s).
	Poll time.Duration
	// Batch is how many entries a loop reads from its outbox at once
	// (default 500), but for a managed Pipeliner sink's loop (RunBatch).
	Batch int
	// RunBatch is how many entries the loop of a Pipeliner sink that the
	// Gate manages reads at once, and the longest run it hands the sink
	// (default 2000, or Batch when only Batch is set); the other loops,
	// the bus's among them, read Batch. Alarm management writes the chattering
	// histories of a run's starts in one commit, which rewrites the pages
	// they fall on: 2000 of them spread over a large bucket rewrite fewer
	// than twice the pages 500 do. And the sink's requests drain once a
	// run.
	RunBatch int
	// PageBytes bounds the events' bytes of a page the loop reads (and so
	// of the runs it hands a sink), whatever Batch and RunBatch allow: a
	// page takes its first entry whatever its size, and stops before the
	// entry that would take it past PageBytes (default 4 MiB). Under a
	// backlog a loop holds up to three pages; with large events, the bound
	// is what keeps them small.
	PageBytes int
	// AttemptTimeout bounds one Send in real time (default 1m), a safety net
	// under the sinks' own timeouts.
	AttemptTimeout time.Duration
	// Secrets cleans the errors of sinks before they are logged or stored
	// as dead-letter reasons; nil leaves them to the sinks.
	Secrets *redact.Set
	// OnReport, when set, is told what became of every entry: delivered
	// (once the store has recorded it), failed with a retry to come, or
	// dead-lettered. It is called on the sinks' loops, so it must return
	// quickly.
	OnReport func(Report)
	// Gate, when set, is alarm management: it decides, before each alarm's
	// next entry is sent, whether it goes out, waits, is withheld or joins
	// a digest. Nil sends everything as it comes.
	Gate Gate
	// Status, when set, keeps when each sink last took an entry and when
	// and why an attempt last failed (the console's System page).
	Status *Statuses
	// Fence, when set, is asked immediately before every Send, SendAll and
	// Gate.Digest, and again before an entry whose attempt failed is
	// counted as failed or dead-lettered. When it refuses, the loop gives
	// the entry back (it stays in the outbox as it was: no attempt counted,
	// no dead letter, no report) and stops; Run returns once every loop
	// has. The fence's owner is expected to end Run's context as well.
	Fence notify.Fence
	// Tracer, when on, makes a span of every attempt at an event that
	// carries trace context, in the event's trace, and hands the sink the
	// attempt's traceparent (notify.Delivery.TraceParent); nil makes none.
	Tracer *tracing.Tracer
}

// DefaultPageBytes is Options.PageBytes when unset: a page of 2,000 events
// of 1.8 KB (a run of a managed webhook) fits in it.
const DefaultPageBytes = 4 << 20

// Fate is what became of an outbox entry after an attempt.
type Fate string

// The fates a Report tells.
const (
	// Delivered: the sink has the event and it left the outbox.
	Delivered Fate = "delivered"
	// Retrying: an attempt failed; the entry stays and is tried again.
	Retrying Fate = "retrying"
	// DeadLettered: the entry was given up on and kept as a dead letter.
	DeadLettered Fate = "dead-lettered"
	// Suppressed: alarm management withheld the entry from the sink; it
	// left the outbox into the sink's suppressed log (Report.Reason says why).
	Suppressed Fate = "suppressed"
	// Digested: the entry went out as part of its sink's storm digest.
	Digested Fate = "digested"
)

// Report tells Options.OnReport what became of one outbox entry.
type Report struct {
	// Sink names the sink whose outbox held the entry.
	Sink string
	// Entry is the outbox entry: its event id, alarm and transition.
	Entry store.Entry
	// Fate is what became of it.
	Fate Fate
	// Attempts counts the attempts made at the entry so far; 0 for an entry
	// dead-lettered without one (its body is not an event).
	Attempts int
	// Reason says why an attempt failed or why the entry was dead-lettered,
	// as the log says it; empty when delivered.
	Reason string
}

// Deliverer drains the outbox of every Target: one goroutine per sink, each
// delivering its entries in outbox order, so that for one alarm an end never
// overtakes its start. An entry that fails is retried with exponential
// backoff and jitter (honouring the sink's Retry-After) until it is
// delivered, rejected by the sink, or older than the sink's max_age; the
// next entry waits for it. A Pipeliner sink gets runs of entries of distinct
// alarms at once, recorded in one transaction. A Deliverer runs once.
type Deliverer struct {
	store   *store.Store
	targets []Target
	opts    Options
	clk     clock.Clock
	log     *slog.Logger
	m       *Metrics

	draining  chan struct{} // closed by Drain
	drainOnce sync.Once
	done      chan struct{} // closed when Run's loops have returned

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc // cancels the context of Run's loops
}

// NewDeliverer returns a Deliverer of store's outboxes to targets.
func NewDeliverer(st *store.Store, targets []Target, opts Options) (*Deliverer, error) {
	if st == nil {
		return nil, errors.New("deliver: deliverer needs a store")
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MinBackoff == 0 {
		opts.MinBackoff = time.Second
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = 5 * time.Minute
	}
	if opts.Jitter == 0 {
		opts.Jitter = 0.2
	}
	if opts.Poll == 0 {
		opts.Poll = 30 * time.Second
	}
	if opts.RunBatch == 0 {
		opts.RunBatch = 2000
		if opts.Batch != 0 {
			opts.RunBatch = opts.Batch
		}
	}
	if opts.Batch == 0 {
		opts.Batch = 500
	}
	if opts.PageBytes == 0 {
		opts.PageBytes = DefaultPageBytes
	}
	if opts.AttemptTimeout == 0 {
		opts.AttemptTimeout = time.Minute
	}
	switch {
	case opts.MinBackoff < 0 || opts.MaxBackoff < opts.MinBackoff:
		return nil, fmt.Errorf("deliver: backoff from %s to %s: want 0 < min <= max", opts.MinBackoff, opts.MaxBackoff)
	case opts.Jitter < 0 || opts.Jitter >= 1:
		return nil, fmt.Errorf("deliver: jitter %g: want a fraction from 0 to below 1", opts.Jitter)
	case opts.Poll < 0 || opts.Batch < 0 || opts.RunBatch < 0 || opts.PageBytes < 0 || opts.AttemptTimeout < 0:
		return nil, errors.New("deliver: poll interval, batch sizes, page bytes and attempt timeout must not be negative")
	}
	seen := map[string]bool{}
	ts := make([]Target, 0, len(targets))
	for i, t := range targets {
		if t.Sink == nil {
			return nil, fmt.Errorf("deliver: target %d has no sink", i)
		}
		name := t.Sink.Name()
		if name == "" {
			return nil, fmt.Errorf("deliver: target %d: sink has no name", i)
		}
		if seen[name] {
			return nil, fmt.Errorf("deliver: sink %q is given twice", name)
		}
		seen[name] = true
		if t.MaxAge < 0 {
			return nil, fmt.Errorf("deliver: sink %q: max_age %s is negative", name, t.MaxAge)
		}
		if t.MaxAge == 0 {
			t.MaxAge = notify.DefaultMaxAge
		}
		if t.MaxRetryAfter < 0 {
			return nil, fmt.Errorf("deliver: sink %q: max_retry_after %s is negative", name, t.MaxRetryAfter)
		}
		if t.MaxRetryAfter == 0 {
			t.MaxRetryAfter = notify.DefaultMaxRetryAfter
		}
		opts.Metrics.initSink(name)
		ts = append(ts, t)
	}
	return &Deliverer{
		store:    st,
		targets:  ts,
		opts:     opts,
		clk:      opts.Clock,
		log:      opts.Logger,
		m:        opts.Metrics,
		draining: make(chan struct{}),
		done:     make(chan struct{}),
	}, nil
}

// Run delivers until ctx is done or Drain has emptied the outboxes, and
// returns when every sink's loop has stopped. An attempt in flight when ctx
// ends is cancelled; its entry stays in the outbox for the next run.
func (d *Deliverer) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.started {
		d.mu.Unlock()
		return errors.New("deliver: Deliverer.Run called twice")
	}
	d.started = true
	ctx, cancel := context.WithCancel(ctx)
	d.cancel = cancel
	d.mu.Unlock()
	defer cancel()

	var wg sync.WaitGroup
	for _, t := range d.targets {
		wg.Go(func() { d.loop(ctx, t) })
	}
	wg.Wait()
	close(d.done)
	return nil
}

// Drain stops Run gracefully, as on SIGTERM: every loop finishes its attempt
// in flight and goes on delivering what is pending, then stops when its
// outbox is empty. When ctx is done first (the shutdown grace), attempts in
// flight are cancelled and Drain returns an error saying how many entries
// were left; they stay in the outbox for the next run. Drain waits for Run to
// return; called before Run, it makes Run deliver what is pending and return.
func (d *Deliverer) Drain(ctx context.Context) error {
	d.drainOnce.Do(func() { close(d.draining) })
	d.mu.Lock()
	started, cancel := d.started, d.cancel
	d.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
	}
	cancel()
	<-d.done
	left := 0
	if depth, err := d.store.Depth(); err == nil {
		for _, t := range d.targets {
			left += depth[t.Sink.Name()]
		}
	}
	return fmt.Errorf("deliver: drain stopped with %d entries left in the outboxes: %w", left, context.Cause(ctx))
}

func (d *Deliverer) isDraining() bool {
	select {
	case <-d.draining:
		return true
	default:
		return false
	}
}

// loop drains one sink's outbox until ctx is done, or until the outbox is
// empty while draining. It reads the outbox a page at a time; when the gate
// leaves an alarm's entries waiting (a hold-down), the pass goes on past
// them, and starts again from the head once it reaches the end: at once when
// it settled something, else when the earliest wait is over, the store wakes
// it or the poll interval passes.
func (d *Deliverer) loop(ctx context.Context, t Target) {
	l := &sinkLoop{d: d, t: t, name: t.Sink.Name()}
	l.log = d.log.With("sink", l.name)
	defer func() {
		l.quiesce(ctx)
		if l.spans != nil {
			// The spans of a run settled as the loop stopped.
			l.abandon()
		}
	}()
	wake := d.store.Wake(l.name)
	storeFailures := 0
	for ctx.Err() == nil {
		after := l.pass.after
		if l.flight != nil {
			// Page on past the run being recorded.
			after = max(after, l.flight.last)
		}
		if l.sending != nil {
			// And past the run being sent.
			after = max(after, l.sending.last)
		}
		entries, err := d.store.PendingPage(l.name, after, l.page(), d.opts.PageBytes)
		if err != nil {
			storeFailures++
			wait := d.backoff(storeFailures)
			l.log.Error("reading the outbox failed", "retry_in", wait, "error", err)
			d.sleep(ctx, wait)
			continue
		}
		storeFailures = 0
		if len(entries) == 0 && (l.flight != nil || l.sending != nil) {
			if !l.quiesce(ctx) {
				return
			}
			continue
		}
		if len(entries) == 0 {
			d.recordDepth(l.name)
			waiting, moved, due := l.pass.after != 0, l.pass.moved, l.pass.due
			l.pass = pass{}
			switch {
			case waiting && moved:
			case d.isDraining():
				// What is left waits for its hold, and for the next start.
				return
			default:
				d.idle(ctx, wake, due)
			}
			continue
		}
		d.recordDepth(l.name)
		ok := l.deliverAll(ctx, entries)
		if !ok {
			l.quiesce(ctx)
		}
		if l.spans != nil && l.sending == nil {
			// The spans of a run being sent end when it is settled.
			l.abandon()
		}
		if !ok {
			return
		}
		if len(l.pass.blocked) > 0 {
			l.pass.after = entries[len(entries)-1].Seq
		} else {
			l.pass = pass{}
		}
	}
}

// item is one outbox entry on its way to a sink's digest: the delivery
// the digest gets, the entry it came from, and the gate's verdict on it.
type item struct {
	notify.Delivery
	entry   store.Entry
	verdict Verdict
}

// DeliveryOf returns the attempt-th delivery of e, whose event is ev, with
// the sink's memory of its alarm, as the Deliverer hands it to a sink.
func DeliveryOf(e store.Entry, ev *event.Event, memory map[string]string, attempt int) notify.Delivery {
	return notify.Delivery{EventID: e.EventID, OriginID: e.OriginID, Level: e.Level, Body: e.Body,
		EnqueuedAt: e.EnqueuedAt, Event: ev, Memory: memory, Attempt: attempt}
}

// deliveries returns the deliveries of items.
func deliveries(items []item) []notify.Delivery {
	ds := make([]notify.Delivery, len(items))
	for k := range items {
		ds[k] = items[k].Delivery
	}
	return ds
}

// sinkLoop is one sink's delivery loop.
type sinkLoop struct {
	d    *Deliverer
	t    Target
	name string
	log  *slog.Logger
	pass pass
	// flight is the recording of the last run of a Pipeliner sink, which
	// goes on while the next run is sent.
	flight *flight
	// sending is the run of a Pipeliner sink being sent, while the loop
	// reads and decides on the next run.
	sending *sending
	// spans are the open spans of attempts not yet decided on, by outbox
	// sequence number; nil while tracing is off (trace.go).
	spans map[uint64]trace.Span
	// reach is how many entries, at most, candidates prepares for the gate
	// (zero: the page); adapt sets it.
	reach int
}

// flight is the recording of a run's deliveries in the store, in the
// background.
type flight struct {
	ds []store.Delivery
	// origins are the alarms of ds: their memories may still change.
	origins map[string]bool
	// last is the sequence number of the run's last entry.
	last uint64
	done chan struct{}
	// ok, set before done is closed, says the deliveries were recorded.
	ok bool
}

// launch records ds, the deliveries of a run that ended with sequence
// number last, in the background: the next run goes out meanwhile. One
// flight at most is in the air.
func (l *sinkLoop) launch(ctx context.Context, ds []store.Delivery, last uint64) {
	f := &flight{ds: ds, origins: make(map[string]bool, len(ds)), last: last, done: make(chan struct{})}
	for _, del := range ds {
		f.origins[del.Entry.OriginID] = true
	}
	l.flight = f
	go func() {
		defer close(f.done)
		f.ok = l.record(ctx, ds, nil)
	}()
}

// land waits for the flight in the air, if any, and reports its deliveries.
// It reports false when they could not be recorded (ctx ended first): the
// loop must stop, and the next run sends them again.
func (l *sinkLoop) land() bool {
	f := l.flight
	if f == nil {
		return true
	}
	l.flight = nil
	<-f.done
	if !f.ok {
		return false
	}
	for _, del := range f.ds {
		l.report(del.Entry, Delivered, 1, "")
	}
	return true
}

// landFor lands the flight in the air when it records a delivery of
// origin's alarm, whose memory the next decision reads.
func (l *sinkLoop) landFor(origin string) bool {
	if l.flight == nil || !l.flight.origins[origin] {
		return true
	}
	return l.land()
}

// sending is a run of deliveries a Pipeliner sink sends in the background,
// while the loop reads its outbox on and asks the gate about the next run.
// The next run holds none of its alarms, and goes out only once this one
// was settled (settle): a failure of it is retried, or dead-lettered,
// before anything after it is sent, as if the next run had not been read.
type sending struct {
	run []notify.Delivery
	vs  []Verdict
	es  []store.Entry
	// origins are the alarms of the run.
	origins map[string]bool
	// last is the sequence number of the run's last entry.
	last     uint64
	done     chan struct{}
	outcomes []notify.Outcome
}

// send starts sending run, the deliveries of entries es with the gate's
// verdicts vs, in the background; settle waits for it. One run at most is
// in the air.
func (l *sinkLoop) send(ctx context.Context, p notify.Pipeliner, run []notify.Delivery, vs []Verdict, es []store.Entry) {
	s := &sending{run: run, vs: vs, es: es, origins: make(map[string]bool, len(es)), last: es[len(es)-1].Seq, done: make(chan struct{})}
	for _, e := range es {
		s.origins[e.OriginID] = true
	}
	l.sending = s
	go func() {
		defer close(s.done)
		s.outcomes = l.sendAll(ctx, p, run)
	}()
}

// quiesce settles the run being sent, if any, and lands the flight in the
// air. It reports false when ctx ended first: the loop must stop.
func (l *sinkLoop) quiesce(ctx context.Context) bool {
	if l.sending != nil {
		if _, ok := l.settle(ctx); !ok {
			return false
		}
	}
	return l.land()
}

// verdictFor is how long a verdict asked while the run before was sent
// stands once that run was settled: a verdict is not kept for later, but
// deciding on the next run while a fast one is sent is what keeps the
// destination busy.
const verdictFor = time.Second

// quiet settles the run being sent, if any, and lands the flight in the
// air, before an entry whose verdict was asked at asked, meanwhile, goes
// out (or is withheld, or digested). fresh is false when the verdict went
// stale (see settleBefore): the entry must be decided on again. ok is false
// when ctx ended first: the loop must stop.
func (l *sinkLoop) quiet(ctx context.Context, asked time.Time) (fresh, ok bool) {
	if fresh, ok = l.settleBefore(ctx, asked); !ok {
		return false, false
	}
	return fresh, l.land()
}

// settleBefore settles the run being sent, if any, before entries whose
// verdicts were asked at asked, while it was in the air, go out. fresh
// reports whether those verdicts stand: not when any of the run had to be
// retried, nor when settling it took past verdictFor after they were asked
// (a silence or a hold may have begun meanwhile). ok is false when ctx
// ended first.
func (l *sinkLoop) settleBefore(ctx context.Context, asked time.Time) (fresh, ok bool) {
	if l.sending == nil {
		return true, true
	}
	clean, ok := l.settle(ctx)
	if !ok {
		return false, false
	}
	return clean && l.d.clk.Now().Sub(asked) <= verdictFor, true
}

// settleFor settles the run being sent, and lands the flight in the air,
// when either holds an entry of origin's alarm, whose memory the next
// decision reads.
func (l *sinkLoop) settleFor(ctx context.Context, origin string) bool {
	if l.sending != nil && l.sending.origins[origin] {
		if _, ok := l.settle(ctx); !ok {
			return false
		}
	}
	return l.landFor(origin)
}

// settle waits for the run being sent and settles its outcomes: the
// deliveries are recorded in one transaction (a group commit), in the
// background when all went out and alarm management has nothing to write
// with them (launch), and each failure is then retried, or dead-lettered,
// one by one (deliver). It reports whether every delivery of the run went
// out at its first attempt, and false for ok when ctx ended first.
func (l *sinkLoop) settle(ctx context.Context) (clean, ok bool) {
	s := l.sending
	l.sending = nil
	<-s.done
	outcomes, es, vs := s.outcomes, s.es, s.vs
	var done []store.Delivery
	var kvs []store.KV
	for k, o := range outcomes {
		if o.Err != nil && l.spans != nil {
			l.failed(es[k], o.Err)
		}
		if o.Err == nil {
			l.delivered(es[k : k+1])
			l.d.m.delivered(l.name, l.d.clk.Now().Sub(es[k].EnqueuedAt))
			l.d.opts.Status.delivered(l.name, l.d.clk.Now())
			done = append(done, store.Delivery{Entry: es[k], Memory: memoryOr(o.Result.Memory, vs[k].Memory)})
			kvs = append(kvs, vs[k].KV...)
		}
	}
	if !l.land() {
		return false, false
	}
	if len(done) == len(s.run) && len(kvs) == 0 {
		l.launch(ctx, done, s.last)
		return true, true
	}
	if !l.record(ctx, done, kvs) {
		return false, false
	}
	for _, del := range done {
		l.report(del.Entry, Delivered, 1, "")
	}
	// The first failure retried waits for the longest Retry-After of
	// the run: the destination asked it of every request.
	var asked time.Duration
	for _, o := range outcomes {
		if o.Err != nil && o.Result.Retry {
			asked = max(asked, o.Result.RetryAfter)
		}
	}
	waited := false
	for k, o := range outcomes {
		if o.Err == nil {
			continue
		}
		if o.Result.Retry && !waited {
			o.Result.RetryAfter = asked
		}
		if ctx.Err() != nil {
			return false, false
		}
		first := &o
		if waited {
			// Time passed while an earlier failure was retried: this
			// outcome is stale, attempt it afresh.
			first = nil
		}
		// A retryable failure is waited for and retried (a final one is
		// dead-lettered at once, and the next outcome stays fresh, its
		// Retry-After included).
		waited = waited || o.Result.Retry
		if !l.deliver(ctx, es[k], first, vs[k]) {
			return false, false
		}
	}
	return len(done) == len(s.run), true
}

// pass is one read of an outbox from its head to its end.
type pass struct {
	// after is the sequence number of the last entry read.
	after uint64
	// blocked holds the alarms whose entries wait in this pass.
	blocked map[string]bool
	// due is the earliest time one of them may go.
	due time.Time
	// moved says an entry was settled in this pass.
	moved bool
}

// wait leaves e, and the later entries of its alarm, waiting until until.
func (l *sinkLoop) wait(e store.Entry, until time.Time) {
	if l.pass.blocked == nil {
		l.pass.blocked = map[string]bool{}
	}
	l.pass.blocked[e.OriginID] = true
	if l.pass.due.IsZero() || until.Before(l.pass.due) {
		l.pass.due = until
	}
}

// skip leaves the later entries of origin's alarm alone for the rest of the
// pass: the page read before may hold entries that left the outbox since.
func (l *sinkLoop) skip(origin string) {
	if l.pass.blocked == nil {
		l.pass.blocked = map[string]bool{}
	}
	l.pass.blocked[origin] = true
}

// recordDepth sets the depth gauge of sink from the store's count.
func (d *Deliverer) recordDepth(sink string) {
	if d.m == nil {
		return
	}
	if depth, err := d.store.Depth(); err == nil {
		d.m.setDepth(sink, depth[sink])
	}
}

// report tells OnReport, when set, what became of e.
func (l *sinkLoop) report(e store.Entry, fate Fate, attempts int, reason string) {
	if fate != Retrying {
		l.pass.moved = true
	}
	if l.d.opts.OnReport != nil {
		l.d.opts.OnReport(Report{Sink: l.name, Entry: e, Fate: fate, Attempts: attempts, Reason: reason})
	}
}

// idle waits for the store's wake signal, the poll timer, due (when not
// zero), Drain or the end of ctx.
func (d *Deliverer) idle(ctx context.Context, wake <-chan struct{}, due time.Time) {
	wait := d.opts.Poll
	if !due.IsZero() {
		wait = min(wait, max(due.Sub(d.clk.Now()), time.Millisecond))
	}
	timer := d.clk.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-wake:
	case <-timer.C():
	case <-d.draining:
	}
}

// sleep waits for wait on the clock; it returns false when ctx ends first.
func (d *Deliverer) sleep(ctx context.Context, wait time.Duration) bool {
	timer := d.clk.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C():
		return true
	}
}

// backoff returns the wait after the n-th consecutive failure: MinBackoff
// doubled n-1 times, capped at MaxBackoff, less up to Jitter of it at random.
func (d *Deliverer) backoff(n int) time.Duration {
	wait := d.opts.MaxBackoff
	if shift := n - 1; shift < 32 {
		if w := d.opts.MinBackoff << shift; w > 0 && w < wait {
			wait = w
		}
	}
	return wait - time.Duration(rand.Float64()*d.opts.Jitter*float64(wait))
}

// deliverAll delivers entries in order, handing runs of entries of distinct
// alarms to a Pipeliner sink at once, and what the gate decides to its
// digest. Entries of alarms the gate leaves waiting are skipped, with every
// later entry of the same alarms. It reports false when ctx ended first.
func (l *sinkLoop) deliverAll(ctx context.Context, entries []store.Entry) bool {
	p, pipelined := l.t.Sink.(notify.Pipeliner)
	for i := 0; i < len(entries); {
		e := entries[i]
		if !l.settleFor(ctx, e.OriginID) {
			return false
		}
		// After settleFor: settling the run in the air may have
		// dead-lettered the alarm's start, and the store parked this
		// entry beside it (skip).
		if l.pass.blocked[e.OriginID] {
			i++
			continue
		}
		asked := l.d.clk.Now()
		var (
			v   Verdict
			run []notify.Delivery
			vs  []Verdict
		)
		// A run gate decides on the head of the outbox and the run behind it
		// at once: one commit of what it writes, not two.
		decided := false
		if pipelined {
			v, run, vs, decided = l.decideHead(ctx, entries[i:])
		}
		if !decided {
			var ok bool
			if v, ok = l.verdict(ctx, e); !ok {
				return false
			}
		}
		switch {
		case v.Until.After(l.d.clk.Now()):
			l.wait(e, v.Until)
			i++
			continue
		case v.Suppress != "":
			fresh, ok := l.quiet(ctx, asked)
			if !ok {
				return false
			}
			if !fresh {
				// Decided on too long before the run in the air was settled.
				continue
			}
			if !l.suppress(ctx, e, v) {
				return false
			}
			i++
			continue
		case v.Digest:
			fresh, ok := l.quiet(ctx, asked)
			if !ok {
				return false
			}
			if !fresh {
				continue
			}
			n, ok := l.digest(ctx, entries[i:], v)
			if !ok {
				return false
			}
			i += n
			continue
		}
		if pipelined && !decided {
			run, vs = l.run(ctx, entries[i:], v)
		}
		if len(run) < 2 {
			fresh, ok := l.quiet(ctx, asked)
			if !ok {
				return false
			}
			if !fresh {
				continue
			}
			if !l.deliver(ctx, e, nil, v) {
				return false
			}
			i++
			continue
		}
		if l.sending != nil {
			// The run before goes first. Had any of it to be retried, or
			// did it take long, this run was decided on too long before:
			// decide on it again.
			fresh, ok := l.settleBefore(ctx, asked)
			if !ok {
				return false
			}
			if !fresh {
				continue
			}
		}
		if l.fenced() {
			return false
		}
		es := entries[i : i+len(run)]
		i += len(run)
		for k := range run {
			run[k].TraceParent = l.startSend(es[k], run[k].Event, 1, false)
		}
		// The run goes out while the loop reads on and decides on the
		// next (settle).
		l.send(ctx, p, run, vs, es)
	}
	return true
}

// verdict returns the gate's verdict on e, asked for now: a verdict is
// never kept for later, since time passes and other entries go out in
// between. Without a gate, and for an entry that is not an event (deliver
// dead-letters it), it is the zero Verdict. It reports false when ctx ended
// while the store failed.
func (l *sinkLoop) verdict(ctx context.Context, e store.Entry) (Verdict, bool) {
	if !l.managed() {
		return Verdict{}, true
	}
	for failures := 1; ; failures++ {
		memory, err := l.d.store.Memory(l.name, e.OriginID)
		var v Verdict
		if err == nil {
			v, err = l.decide(ctx, e, memory)
		}
		if err == nil || errors.Is(err, errUndecodable) {
			return v, true
		}
		wait := l.d.backoff(failures)
		l.log.Error("alarm management could not decide on an entry", "event_id", e.EventID, "retry_in", wait, "error", err)
		if !l.d.sleep(ctx, wait) {
			return Verdict{}, false
		}
	}
}

// page is how many entries the loop reads from its outbox at once: RunBatch
// for a sink that pipelines and that alarm management decides on (whose
// runs commit chattering histories), Batch for the others, the bus among
// them, whose runs commit nothing before they go out.
func (l *sinkLoop) page() int {
	if _, ok := l.t.Sink.(notify.Pipeliner); ok && l.managed() {
		return l.d.opts.RunBatch
	}
	return l.d.opts.Batch
}

// managed reports whether the gate decides on the sink's entries.
func (l *sinkLoop) managed() bool {
	return l.d.opts.Gate != nil && l.d.opts.Gate.Manages(l.name)
}

// errUndecodable says an entry's body is not an event: the gate has nothing
// to decide on, and deliver dead-letters it.
var errUndecodable = errors.New("the outbox entry is not an event")

// decide asks the gate about e, with the sink's memory of its alarm.
func (l *sinkLoop) decide(ctx context.Context, e store.Entry, memory map[string]string) (Verdict, error) {
	ev, err := l.d.store.Event(e)
	if err != nil {
		return Verdict{}, errUndecodable
	}
	d := DeliveryOf(e, ev, memory, 1)
	return l.d.opts.Gate.Decide(ctx, l.name, &d)
}

// suppress withholds e from the sink as v says, retrying a failing store
// until ctx ends. It reports false when ctx ended first.
func (l *sinkLoop) suppress(ctx context.Context, e store.Entry, v Verdict) bool {
	for failures := 1; ; failures++ {
		err := l.d.store.Settle([]store.Delivery{{Entry: e, Memory: v.Memory, Suppressed: v.Suppress}}, v.KV)
		if err == nil || errors.Is(err, store.ErrNotPending) {
			if err == nil {
				l.d.m.suppressed(l.name, v.Suppress)
				l.log.Debug("suppressed", "event_id", e.EventID, "reason", v.Suppress)
			}
			l.report(e, Suppressed, 0, v.Suppress)
			return true
		}
		wait := l.d.backoff(failures)
		l.log.Error("recording a suppressed entry failed", "event_id", e.EventID, "retry_in", wait, "error", err)
		if !l.d.sleep(ctx, wait) {
			return false
		}
	}
}

// run returns the deliveries of the longest run at the head of entries, the
// first of which has verdict first, that concern distinct alarms, are sent
// as they are, and are neither expired nor undecodable, with the gate's
// verdict on each: the k-th of them is that of entries[k].
func (l *sinkLoop) run(ctx context.Context, entries []store.Entry, first Verdict) ([]notify.Delivery, []Verdict) {
	now := l.d.clk.Now()
	run := l.candidates(entries, now)
	if len(run) < 2 {
		return nil, nil
	}
	vs := make([]Verdict, len(run))
	vs[0] = first
	if l.managed() {
		n := 1 + l.decideRun(ctx, run[1:], vs[1:], now)
		l.adapt(len(run), n)
		run, vs = run[:n], vs[:n]
	}
	for k := range run {
		run[k].Event = withNote(run[k].Event, vs[k])
	}
	return run, vs
}

// decideHead asks a run gate (RunGate) at once about the entry at the head
// of entries and the run behind it (candidates). It returns the verdict on
// the head and, when the head goes out as it is, the run it heads (nil for
// none), as run does. It reports false when it decided nothing: no run
// gate, fewer than two candidates, or a gate that failed on the head (the
// loop then asks about the head alone, verdict).
func (l *sinkLoop) decideHead(ctx context.Context, entries []store.Entry) (Verdict, []notify.Delivery, []Verdict, bool) {
	rg, ok := l.d.opts.Gate.(RunGate)
	if !ok || !l.managed() {
		return Verdict{}, nil, nil, false
	}
	now := l.d.clk.Now()
	run := l.candidates(entries, now)
	if len(run) < 2 {
		return Verdict{}, nil, nil, false
	}
	ptrs := make([]*notify.Delivery, len(run))
	for k := range run {
		ptrs[k] = &run[k]
	}
	got, _ := rg.DecideRun(ctx, l.name, ptrs)
	if len(got) == 0 {
		return Verdict{}, nil, nil, false
	}
	if !got[0].plain(now) {
		l.adapt(len(run), 0)
		return got[0], nil, nil, true
	}
	n := 1
	for n < len(got) && got[n].plain(now) {
		n++
	}
	l.adapt(len(run), n)
	run, vs := run[:n], got[:n:n]
	for k := range run {
		run[k].Event = withNote(run[k].Event, vs[k])
	}
	if n < 2 {
		run, vs = nil, nil
	}
	return got[0], run, vs, true
}

// candidates returns the deliveries of the longest run at the head of
// entries, of at most reach entries, that concern distinct alarms, none of
// them in the air, none expired at now or undecodable, with the sink's
// memory of each alarm: the run the gate is asked about. It returns nil for
// fewer than two.
func (l *sinkLoop) candidates(entries []store.Entry, now time.Time) []notify.Delivery {
	reach := l.reachNow()
	seen := make(map[string]bool, min(len(entries), reach))
	ids := make([]string, 0, len(seen))
	for _, e := range entries {
		if len(ids) == reach || seen[e.OriginID] || l.pass.blocked[e.OriginID] || !now.Before(e.EnqueuedAt.Add(l.t.MaxAge)) {
			break
		}
		if len(ids) > 0 && l.flight != nil && l.flight.origins[e.OriginID] {
			// Its memory may change when the flight lands.
			break
		}
		if l.sending != nil && l.sending.origins[e.OriginID] {
			// Its entry in the run being sent goes first.
			break
		}
		seen[e.OriginID] = true
		ids = append(ids, e.OriginID)
	}
	if len(ids) < 2 {
		return nil
	}
	// The memories of the whole run in one read.
	mems, err := l.d.store.Memories(l.name, ids)
	if err != nil {
		return nil
	}
	run := make([]notify.Delivery, 0, len(ids))
	for k, e := range entries[:len(ids)] {
		ev, err := l.d.store.Event(e)
		if err != nil {
			break
		}
		run = append(run, DeliveryOf(e, ev, mems[k], 1))
	}
	if len(run) < 2 {
		return nil
	}
	return run
}

// reachNow is how many entries candidates prepares: reach, or the page
// before adapt set it.
func (l *sinkLoop) reachNow() int {
	if l.reach == 0 {
		return l.page()
	}
	return l.reach
}

// adapt sets how many entries candidates prepares next, from how many it
// prepared and how many of them, from the first, the gate let go out as
// they are: half as many when the head did not (it was withheld, held or
// digested), twice those when the gate stopped within the run, twice as many
// when it did not, from 2 to the page. Each entry prepared is an event
// decoded (once the store's cache no longer holds it) and a memory read,
// and the gate stops at the first entry it does not send as it is: when
// every head is withheld or held (a silence or a hold-down over a storm) or
// sent alone (every other start withheld), preparing the rest of the page
// for each made a page of n of them cost about n²/2 entries prepared (2
// million for a page of 2,000), and a held page so again at every pass.
// Runs grow back to the page in a few runs once the gate lets them go.
func (l *sinkLoop) adapt(prepared, plain int) {
	reach := l.reachNow()
	switch {
	case plain == 0:
		reach /= 2
	case plain < prepared:
		reach = 2 * plain
	default:
		reach *= 2
	}
	l.reach = min(max(reach, 2), l.page())
}

// decideRun sets vs to the gate's verdicts on ds, in order, and returns how
// many of them, from the first, are sent as they are.
func (l *sinkLoop) decideRun(ctx context.Context, ds []notify.Delivery, vs []Verdict, now time.Time) int {
	if rg, ok := l.d.opts.Gate.(RunGate); ok {
		ptrs := make([]*notify.Delivery, len(ds))
		for k := range ds {
			ptrs[k] = &ds[k]
		}
		got, _ := rg.DecideRun(ctx, l.name, ptrs)
		for k, v := range got {
			if !v.plain(now) {
				return k
			}
			vs[k] = v
		}
		return len(got)
	}
	for k := range ds {
		v, err := l.d.opts.Gate.Decide(ctx, l.name, &ds[k])
		if err != nil || !v.plain(now) {
			return k
		}
		vs[k] = v
	}
	return len(ds)
}

// withNote returns ev, or a copy of it with v's note and acknowledge
// command when v has either: the events the store hands out are shared.
func withNote(ev *event.Event, v Verdict) *event.Event {
	if v.Note == "" && v.AckCommand == "" {
		return ev
	}
	c := *ev
	c.Data.Note, c.Data.AckCommand = v.Note, v.AckCommand
	return &c
}

// prepare returns the first attempt at e with verdict v: its event decoded,
// with v's note, and the sink's memory of its alarm. It reports false when
// the entry does not decode or the memory cannot be read.
func (l *sinkLoop) prepare(e store.Entry, v Verdict) (item, bool) {
	ev, err := l.d.store.Event(e)
	if err != nil {
		return item{}, false
	}
	memory, err := l.d.store.Memory(l.name, e.OriginID)
	if err != nil {
		return item{}, false
	}
	return item{Delivery: DeliveryOf(e, withNote(ev, v), memory, 1), entry: e, verdict: v}, true
}

// sendAll calls SendAll once, bounded by the attempt timeout of each of the
// requests it makes one after another (see Concurrent), and checks that it
// answered for every delivery.
func (l *sinkLoop) sendAll(ctx context.Context, p notify.Pipeliner, run []notify.Delivery) []notify.Outcome {
	timeout := l.d.opts.AttemptTimeout
	if c, ok := p.(notify.Concurrent); ok && c.Concurrency() > 0 {
		timeout *= time.Duration((len(run) + c.Concurrency() - 1) / c.Concurrency())
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	outcomes := p.SendAll(ctx, run)
	if len(outcomes) != len(run) {
		err := fmt.Errorf("sink %q answered %d outcomes for %d deliveries", l.name, len(outcomes), len(run))
		outcomes = make([]notify.Outcome, len(run))
		for k := range outcomes {
			outcomes[k] = notify.Outcome{Result: notify.Result{Retry: true}, Err: err}
		}
	}
	for k := range outcomes {
		outcomes[k].Err = l.d.opts.Secrets.Error(outcomes[k].Err)
	}
	return outcomes
}

// deliver makes attempts at e until it is delivered or dead-lettered, and
// reports false when ctx ended first (e then stays in the outbox). A non-nil
// first is the outcome of an attempt already made; v is the gate's verdict.
func (l *sinkLoop) deliver(ctx context.Context, e store.Entry, first *notify.Outcome, v Verdict) bool {
	d := l.d
	log := l.log.With("event_id", e.EventID, "seq", e.Seq)
	ev, err := l.d.store.Event(e)
	if err != nil {
		return l.deadLetter(ctx, log, []store.Entry{e}, 0, ReasonUndecodable, fmt.Sprintf("the outbox entry is not an event: %v", err))
	}
	ev = withNote(ev, v)
	var memory map[string]string
	for failures := 1; ; failures++ {
		memory, err = d.store.Memory(l.name, e.OriginID)
		if err == nil {
			break
		}
		wait := d.backoff(failures)
		log.Error("reading the sink's memory of the alarm failed", "retry_in", wait, "error", err)
		if !d.sleep(ctx, wait) {
			return false
		}
	}
	return l.attempts(ctx, log, []store.Entry{e}, first, Delivered, func(attempt int) (notify.Result, []store.Delivery, []store.KV, error) {
		del := DeliveryOf(e, ev, memory, attempt)
		del.TraceParent = l.startSend(e, ev, attempt, false)
		res, err := d.attempt(ctx, l.t.Sink, del)
		return res, []store.Delivery{{Entry: e, Memory: memoryOr(res.Memory, v.Memory)}}, v.KV, err
	})
}

// digest gathers, from the head of entries, the first of which has verdict
// first, the entries of distinct alarms that the gate hands to the digest,
// and sends them through it until they are delivered or dead-lettered. It
// returns how many entries it went through, and false when ctx ended first.
func (l *sinkLoop) digest(ctx context.Context, entries []store.Entry, first Verdict) (int, bool) {
	now := l.d.clk.Now()
	seen := map[string]bool{}
	var ds []item
	var es []store.Entry
	n := 0
	for k, e := range entries {
		if l.pass.blocked[e.OriginID] {
			n = k + 1
			continue
		}
		if seen[e.OriginID] || len(ds) == l.d.opts.Batch {
			break
		}
		v := first
		if k > 0 {
			var ok bool
			if v, ok = l.verdict(ctx, e); !ok || !v.Digest || v.Until.After(now) || v.Suppress != "" {
				break
			}
		}
		del, ok := l.prepare(e, v)
		if !ok {
			break
		}
		seen[e.OriginID] = true
		ds = append(ds, del)
		es = append(es, e)
		n = k + 1
	}
	if len(ds) == 0 {
		if _, err := l.d.store.Event(entries[0]); err != nil {
			// The first entry does not decode: deliver dead-letters it.
			return 1, l.deliver(ctx, entries[0], nil, Verdict{})
		}
		// The store failed to give the alarm's memory: ask again later.
		wait := l.d.backoff(1)
		l.log.Error("reading the sink's memory of an alarm for its digest failed", "event_id", entries[0].EventID, "retry_in", wait)
		return 0, l.d.sleep(ctx, wait)
	}
	log := l.log.With("digest_entries", len(ds), "first_event_id", ds[0].EventID)
	ok := l.attempts(ctx, log, es, nil, Digested, func(attempt int) (notify.Result, []store.Delivery, []store.KV, error) {
		for k := range ds {
			ds[k].Attempt = attempt
		}
		if err := l.d.opts.Fence.Check(); err != nil {
			return notify.Result{Retry: true}, nil, nil, fmt.Errorf("not sent: %w", err)
		}
		for k := range ds {
			ds[k].TraceParent = l.startSend(ds[k].entry, ds[k].Event, attempt, true)
		}
		actx, cancel := context.WithTimeout(ctx, l.d.opts.AttemptTimeout)
		out, res, err := l.d.opts.Gate.Digest(actx, l.t.Sink, deliveries(ds))
		cancel()
		if err != nil {
			return res, nil, nil, l.d.opts.Secrets.Error(err)
		}
		done := make([]store.Delivery, len(ds))
		kvs := out.KV
		for k := range ds {
			var mem map[string]string
			if k < len(out.Memory) {
				mem = out.Memory[k]
			}
			done[k] = store.Delivery{Entry: ds[k].entry, Memory: memoryOr(mem, ds[k].verdict.Memory)}
			kvs = append(kvs, ds[k].verdict.KV...)
		}
		return res, done, kvs, nil
	})
	return n, ok
}

// attempts makes attempts with send at the entries es until they are
// delivered (send returns what to record), fail for good, or fail past the
// max_age of the first of them (both dead-letter them), and reports false
// when ctx ended first (they then stay in the outbox). A non-nil first is
// the outcome of an attempt already made at a single entry.
func (l *sinkLoop) attempts(ctx context.Context, log *slog.Logger, es []store.Entry, first *notify.Outcome, fate Fate,
	send func(attempt int) (notify.Result, []store.Delivery, []store.KV, error)) bool {
	d := l.d
	expires := es[0].EnqueuedAt.Add(l.t.MaxAge)
	for attempt := 1; ; attempt++ {
		if attempt > 1 && l.fenced() {
			return false
		}
		// An entry is attempted at least once, however long it waited
		// behind others: only a failed attempt can make it a dead letter.
		if now := d.clk.Now(); attempt > 1 && !now.Before(expires) {
			reason := fmt.Sprintf("not delivered within max_age %s: enqueued %s ago, %d attempts",
				l.t.MaxAge, now.Sub(es[0].EnqueuedAt).Round(time.Second), attempt-1)
			return l.deadLetter(ctx, log, es, attempt-1, ReasonExpired, reason)
		}
		var (
			res  notify.Result
			done []store.Delivery
			kvs  []store.KV
			err  error
		)
		if attempt == 1 && first != nil {
			res, err = first.Result, first.Err
			if err == nil {
				done = []store.Delivery{{Entry: es[0], Memory: res.Memory}}
			}
		} else {
			res, done, kvs, err = send(attempt)
		}
		if err == nil {
			l.delivered(es)
			for _, e := range es {
				d.m.delivered(l.name, d.clk.Now().Sub(e.EnqueuedAt))
			}
			d.opts.Status.delivered(l.name, d.clk.Now())
			log.Debug("delivered", "transition", es[0].Transition, "attempt", attempt, "entries", len(es))
			if !l.record(ctx, done, kvs) {
				return false
			}
			for _, e := range es {
				l.report(e, fate, attempt, "")
			}
			return true
		}
		// A failure of a process that may no longer send (its attempt
		// refused, or cut short by the end of its lease) is not the sink's:
		// the entry stays for the next holder, uncounted.
		if ctx.Err() != nil || l.fenced() {
			return false
		}
		d.m.failed(l.name)
		d.opts.Status.failed(l.name, d.clk.Now(), err.Error())
		if !res.Retry {
			return l.deadLetter(ctx, log, es, attempt, ReasonRejected, err.Error())
		}
		// Wait at least what the sink asked, up to max_retry_after, and not
		// past max_age: a Retry-After of a year must not block the outbox.
		wait := min(max(d.backoff(attempt), min(res.RetryAfter, l.t.MaxRetryAfter)), max(expires.Sub(d.clk.Now()), 0))
		d.m.retry(l.name)
		l.retrying(es, err, wait)
		log.Warn("delivery failed, will retry", "transition", es[0].Transition, "attempt", attempt, "retry_in", wait, "error", err)
		for _, e := range es {
			l.report(e, Retrying, attempt, err.Error())
		}
		if !d.sleep(ctx, wait) {
			return false
		}
	}
}

// fenced reports whether the fence refuses to let anything out now, and
// logs why: the loop then gives its entry back and stops.
func (l *sinkLoop) fenced() bool {
	err := l.d.opts.Fence.Check()
	if err == nil {
		return false
	}
	l.log.Info("stopped sending: this process may no longer send for the tenant; the entries stay in the outbox", "reason", err)
	return true
}

// memoryOr returns m, or def when m is nil.
func memoryOr(m, def map[string]string) map[string]string {
	if m == nil {
		return def
	}
	return m
}

// attempt calls Send once, bounded by the attempt timeout, when the fence
// allows.
func (d *Deliverer) attempt(ctx context.Context, s notify.Sink, del notify.Delivery) (notify.Result, error) {
	if err := d.opts.Fence.Check(); err != nil {
		return notify.Result{Retry: true}, fmt.Errorf("not sent: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, d.opts.AttemptTimeout)
	defer cancel()
	res, err := s.Send(ctx, del)
	return res, d.opts.Secrets.Error(err)
}

// record removes delivered entries from the outbox, each with the sink's new
// memory of its alarm, and writes kvs, in one transaction. The sink has the
// events, so the store is tried even when ctx has ended, and retried while
// ctx lasts. It reports false when the deliveries could not be recorded: the
// next run then sends them again (at least once).
func (l *sinkLoop) record(ctx context.Context, ds []store.Delivery, kvs []store.KV) bool {
	if len(ds) == 0 && len(kvs) == 0 {
		return true
	}
	for failures := 1; ; failures++ {
		err := l.d.store.Settle(ds, kvs)
		if errors.Is(err, store.ErrNotPending) {
			// Something else took one of them: record the others one by one,
			// then the values.
			err = nil
			for _, del := range ds {
				if e := l.d.store.Settle([]store.Delivery{del}, nil); e != nil && !errors.Is(e, store.ErrNotPending) {
					err = e
					break
				}
			}
			if err == nil && len(kvs) > 0 {
				err = l.d.store.Put(kvs...)
			}
		}
		if err == nil {
			l.d.recordDepth(l.name)
			return true
		}
		wait := l.d.backoff(failures)
		l.log.Error("recording deliveries failed", "deliveries", len(ds), "retry_in", wait, "error", err)
		if ctx.Err() != nil || !l.d.sleep(ctx, wait) {
			return false
		}
	}
}

// deadLetter moves es, after attempts, to the sink's dead letters, retrying
// a failing store until ctx ends. It reports false when ctx ended first.
func (l *sinkLoop) deadLetter(ctx context.Context, log *slog.Logger, es []store.Entry, attempts int, kind, reason string) bool {
	reason = l.d.opts.Secrets.String(reason)
	for len(es) > 0 {
		if !l.deadLetterOne(ctx, log, es[0], attempts, kind, reason) {
			return false
		}
		es = es[1:]
	}
	return true
}

// deadLetterOne moves e to the sink's dead letters.
func (l *sinkLoop) deadLetterOne(ctx context.Context, log *slog.Logger, e store.Entry, attempts int, kind, reason string) bool {
	for failures := 1; ; failures++ {
		err := l.d.store.DeadLetter(e, reason)
		if err == nil {
			if e.Transition == event.Start {
				// The store parked the alarm's later entries beside it: the
				// page in hand may still hold them.
				l.skip(e.OriginID)
			}
			l.d.m.deadLetter(l.name, kind)
			l.d.opts.Status.failed(l.name, l.d.clk.Now(), reason)
			l.d.recordDepth(l.name)
			log.Error("dead-lettered", "event_id", e.EventID, "transition", e.Transition, "kind", kind, "reason", reason)
			l.deadLettered(e, attempts, kind, reason)
			l.report(e, DeadLettered, attempts, reason)
			return true
		}
		if errors.Is(err, store.ErrNotPending) {
			return true
		}
		wait := l.d.backoff(failures)
		log.Error("recording a dead letter failed", "retry_in", wait, "error", err)
		if !l.d.sleep(ctx, wait) {
			return false
		}
	}
}
