package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/dedupe"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/redact"
)

// DefaultMaxAge is how long an entry may wait in an outbox before it is
// dead-lettered, when a Target does not say.
const DefaultMaxAge = 24 * time.Hour

// DefaultMaxRetryAfter caps the wait a receiver's Retry-After asks for, when
// a Target does not say.
const DefaultMaxRetryAfter = 15 * time.Minute

// Target is one sink a Deliverer drains, with its max_age and
// max_retry_after.
type Target struct {
	// Sink receives the entries of the outbox named Sink.Name().
	Sink Sink
	// MaxAge dead-letters an entry not delivered this long after it was
	// enqueued (default DefaultMaxAge), once it was attempted at least once.
	MaxAge time.Duration
	// MaxRetryAfter caps the wait a receiver's Retry-After asks for
	// (default DefaultMaxRetryAfter): a Retry-After of a day must not stall
	// the sink for a day.
	MaxRetryAfter time.Duration
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
	// Batch is how many entries a loop reads from its outbox at once, and
	// the longest run a Pipeliner sink is handed (default 100).
	Batch int
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
}

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
)

// Report tells Options.OnReport what became of one outbox entry.
type Report struct {
	// Sink names the sink whose outbox held the entry.
	Sink string
	// Entry is the outbox entry: its event id, alarm and transition.
	Entry dedupe.Entry
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
	store   *dedupe.Store
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
func NewDeliverer(store *dedupe.Store, targets []Target, opts Options) (*Deliverer, error) {
	if store == nil {
		return nil, errors.New("notify: deliverer needs a store")
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
	if opts.Batch == 0 {
		opts.Batch = 100
	}
	if opts.AttemptTimeout == 0 {
		opts.AttemptTimeout = time.Minute
	}
	switch {
	case opts.MinBackoff < 0 || opts.MaxBackoff < opts.MinBackoff:
		return nil, fmt.Errorf("notify: backoff from %s to %s: want 0 < min <= max", opts.MinBackoff, opts.MaxBackoff)
	case opts.Jitter < 0 || opts.Jitter >= 1:
		return nil, fmt.Errorf("notify: jitter %g: want a fraction from 0 to below 1", opts.Jitter)
	case opts.Poll < 0 || opts.Batch < 0 || opts.AttemptTimeout < 0:
		return nil, errors.New("notify: poll interval, batch size and attempt timeout must not be negative")
	}
	seen := map[string]bool{}
	ts := make([]Target, 0, len(targets))
	for i, t := range targets {
		if t.Sink == nil {
			return nil, fmt.Errorf("notify: target %d has no sink", i)
		}
		name := t.Sink.Name()
		if name == "" {
			return nil, fmt.Errorf("notify: target %d: sink has no name", i)
		}
		if seen[name] {
			return nil, fmt.Errorf("notify: sink %q is given twice", name)
		}
		seen[name] = true
		if t.MaxAge < 0 {
			return nil, fmt.Errorf("notify: sink %q: max_age %s is negative", name, t.MaxAge)
		}
		if t.MaxAge == 0 {
			t.MaxAge = DefaultMaxAge
		}
		if t.MaxRetryAfter < 0 {
			return nil, fmt.Errorf("notify: sink %q: max_retry_after %s is negative", name, t.MaxRetryAfter)
		}
		if t.MaxRetryAfter == 0 {
			t.MaxRetryAfter = DefaultMaxRetryAfter
		}
		opts.Metrics.initSink(name)
		ts = append(ts, t)
	}
	return &Deliverer{
		store:    store,
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
		return errors.New("notify: Deliverer.Run called twice")
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
	return fmt.Errorf("notify: drain stopped with %d entries left in the outboxes: %w", left, context.Cause(ctx))
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
// empty while draining.
func (d *Deliverer) loop(ctx context.Context, t Target) {
	l := &sinkLoop{d: d, t: t, name: t.Sink.Name()}
	l.log = d.log.With("sink", l.name)
	wake := d.store.Wake(l.name)
	storeFailures := 0
	for ctx.Err() == nil {
		entries, err := d.store.Pending(l.name, d.opts.Batch)
		if err != nil {
			storeFailures++
			wait := d.backoff(storeFailures)
			l.log.Error("reading the outbox failed", "retry_in", wait, "error", err)
			d.sleep(ctx, wait)
			continue
		}
		storeFailures = 0
		d.recordDepth(l.name)
		if len(entries) == 0 {
			if d.isDraining() {
				return
			}
			d.idle(ctx, wake)
			continue
		}
		if !l.deliverAll(ctx, entries) {
			return
		}
	}
}

// sinkLoop is one sink's delivery loop.
type sinkLoop struct {
	d    *Deliverer
	t    Target
	name string
	log  *slog.Logger
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
func (l *sinkLoop) report(e dedupe.Entry, fate Fate, attempts int, reason string) {
	if l.d.opts.OnReport != nil {
		l.d.opts.OnReport(Report{Sink: l.name, Entry: e, Fate: fate, Attempts: attempts, Reason: reason})
	}
}

// idle waits for the store's wake signal, the poll timer, Drain or the end
// of ctx.
func (d *Deliverer) idle(ctx context.Context, wake <-chan struct{}) {
	timer := d.clk.NewTimer(d.opts.Poll)
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
// alarms to a Pipeliner sink at once. It reports false when ctx ended first.
func (l *sinkLoop) deliverAll(ctx context.Context, entries []dedupe.Entry) bool {
	p, pipelined := l.t.Sink.(Pipeliner)
	for i := 0; i < len(entries); {
		var run []Delivery
		if pipelined {
			run = l.run(entries[i:])
		}
		if len(run) < 2 {
			if !l.deliver(ctx, entries[i], nil) {
				return false
			}
			i++
			continue
		}
		i += len(run)
		outcomes := l.sendAll(ctx, p, run)
		// The run's deliveries are recorded in one transaction (a group
		// commit), before any failure of it is retried.
		var done []dedupe.Delivery
		for k, o := range outcomes {
			if o.Err == nil {
				e := run[k].Entry
				l.d.m.delivered(l.name, l.d.clk.Now().Sub(e.EnqueuedAt))
				done = append(done, dedupe.Delivery{Entry: e, Memory: o.Result.Memory})
			}
		}
		if !l.record(ctx, done) {
			return false
		}
		for _, del := range done {
			l.report(del.Entry, Delivered, 1, "")
		}
		failed := false
		for k, o := range outcomes {
			if o.Err == nil {
				continue
			}
			if ctx.Err() != nil {
				return false
			}
			first := &o
			if failed {
				// Later failures are stale by now: attempt them afresh.
				first = nil
			}
			failed = true
			if !l.deliver(ctx, run[k].Entry, first) {
				return false
			}
		}
	}
	return true
}

// run returns the deliveries of the longest run at the head of entries that
// concern distinct alarms and are neither expired nor undecodable.
func (l *sinkLoop) run(entries []dedupe.Entry) []Delivery {
	now := l.d.clk.Now()
	seen := map[string]bool{}
	var run []Delivery
	for _, e := range entries {
		if seen[e.OriginID] || !now.Before(e.EnqueuedAt.Add(l.t.MaxAge)) {
			break
		}
		ev, err := event.Unmarshal(e.Body)
		if err != nil {
			break
		}
		memory, err := l.d.store.Memory(l.name, e.OriginID)
		if err != nil {
			break
		}
		seen[e.OriginID] = true
		run = append(run, Delivery{Entry: e, Event: &ev, Memory: memory, Attempt: 1})
	}
	return run
}

// sendAll calls SendAll once, bounded by the attempt timeout, and checks
// that it answered for every delivery.
func (l *sinkLoop) sendAll(ctx context.Context, p Pipeliner, run []Delivery) []Outcome {
	ctx, cancel := context.WithTimeout(ctx, l.d.opts.AttemptTimeout)
	defer cancel()
	outcomes := p.SendAll(ctx, run)
	if len(outcomes) != len(run) {
		err := fmt.Errorf("sink %q answered %d outcomes for %d deliveries", l.name, len(outcomes), len(run))
		outcomes = make([]Outcome, len(run))
		for k := range outcomes {
			outcomes[k] = Outcome{Result: Result{Retry: true}, Err: err}
		}
	}
	for k := range outcomes {
		outcomes[k].Err = l.d.opts.Secrets.Error(outcomes[k].Err)
	}
	return outcomes
}

// deliver makes attempts at e until it is delivered or dead-lettered, and
// reports false when ctx ended first (e then stays in the outbox). A non-nil
// first is the outcome of an attempt already made.
func (l *sinkLoop) deliver(ctx context.Context, e dedupe.Entry, first *Outcome) bool {
	d := l.d
	log := l.log.With("event_id", e.EventID, "seq", e.Seq)
	ev, err := event.Unmarshal(e.Body)
	if err != nil {
		return l.deadLetter(ctx, log, e, 0, ReasonUndecodable, fmt.Sprintf("the outbox entry is not an event: %v", err))
	}
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
	expires := e.EnqueuedAt.Add(l.t.MaxAge)
	for attempt := 1; ; attempt++ {
		// An entry is attempted at least once, however long it waited
		// behind others: only a failed attempt can make it a dead letter.
		if now := d.clk.Now(); attempt > 1 && !now.Before(expires) {
			reason := fmt.Sprintf("not delivered within max_age %s: enqueued %s ago, %d attempts",
				l.t.MaxAge, now.Sub(e.EnqueuedAt).Round(time.Second), attempt-1)
			return l.deadLetter(ctx, log, e, attempt-1, ReasonExpired, reason)
		}
		var res Result
		if attempt == 1 && first != nil {
			res, err = first.Result, first.Err
		} else {
			res, err = d.attempt(ctx, l.t.Sink, Delivery{Entry: e, Event: &ev, Memory: memory, Attempt: attempt})
		}
		if err == nil {
			d.m.delivered(l.name, d.clk.Now().Sub(e.EnqueuedAt))
			log.Debug("delivered", "transition", e.Transition, "attempt", attempt)
			if !l.record(ctx, []dedupe.Delivery{{Entry: e, Memory: res.Memory}}) {
				return false
			}
			l.report(e, Delivered, attempt, "")
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		d.m.failed(l.name)
		if !res.Retry {
			return l.deadLetter(ctx, log, e, attempt, ReasonRejected, err.Error())
		}
		// Wait at least what the sink asked, up to max_retry_after, and not
		// past max_age: a Retry-After of a year must not block the outbox.
		wait := min(max(d.backoff(attempt), min(res.RetryAfter, l.t.MaxRetryAfter)), max(expires.Sub(d.clk.Now()), 0))
		d.m.retry(l.name)
		log.Warn("delivery failed, will retry", "transition", e.Transition, "attempt", attempt, "retry_in", wait, "error", err)
		l.report(e, Retrying, attempt, err.Error())
		if !d.sleep(ctx, wait) {
			return false
		}
	}
}

// attempt calls Send once, bounded by the attempt timeout.
func (d *Deliverer) attempt(ctx context.Context, s Sink, del Delivery) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, d.opts.AttemptTimeout)
	defer cancel()
	res, err := s.Send(ctx, del)
	return res, d.opts.Secrets.Error(err)
}

// record removes delivered entries from the outbox, each with the sink's new
// memory of its alarm, in one transaction. The sink has the events, so the
// store is tried even when ctx has ended, and retried while ctx lasts. It
// reports false when the deliveries could not be recorded: the next run then
// sends them again (at least once).
func (l *sinkLoop) record(ctx context.Context, ds []dedupe.Delivery) bool {
	if len(ds) == 0 {
		return true
	}
	for failures := 1; ; failures++ {
		err := l.d.store.DeliveredBatch(ds)
		if errors.Is(err, dedupe.ErrNotPending) {
			// Something else took one of them: record the others one by one.
			err = nil
			for _, del := range ds {
				if e := l.d.store.Delivered(del.Entry, del.Memory); e != nil && !errors.Is(e, dedupe.ErrNotPending) {
					err = e
					break
				}
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

// deadLetter moves e, after attempts, to the sink's dead letters, retrying
// a failing store until ctx ends. It reports false when ctx ended first.
func (l *sinkLoop) deadLetter(ctx context.Context, log *slog.Logger, e dedupe.Entry, attempts int, kind, reason string) bool {
	reason = l.d.opts.Secrets.String(reason)
	for failures := 1; ; failures++ {
		err := l.d.store.DeadLetter(e, reason)
		if err == nil {
			l.d.m.deadLetter(l.name, kind)
			l.d.recordDepth(l.name)
			log.Error("dead-lettered", "transition", e.Transition, "kind", kind, "reason", reason)
			l.report(e, DeadLettered, attempts, reason)
			return true
		}
		if errors.Is(err, dedupe.ErrNotPending) {
			return true
		}
		wait := l.d.backoff(failures)
		log.Error("recording a dead letter failed", "retry_in", wait, "error", err)
		if !l.d.sleep(ctx, wait) {
			return false
		}
	}
}
