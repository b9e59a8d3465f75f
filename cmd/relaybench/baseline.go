package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// baselineKind names a baseline's schedule.
type baselineKind string

const (
	// naive reads both lists, current and recovered, every 60 s.
	naive baselineKind = "naive"
	// eager alternates a current and a recovered query, one per slot, at
	// the rate limit.
	eager baselineKind = "eager"
)

// naiveEvery is how often the naive baseline reads both lists.
const naiveEvery = time.Minute

// baseline is the straightforward alarm relay docs/design.md §12 (P7)
// compares the relay with: the same opendata client, its state in memory,
// and one simple rule set:
//
//   - current list (every page, window = lookback): an alarm not known yet
//     gets its start; the first read is the bootstrap and starts every
//     ongoing alarm, as the relay's default does.
//   - recovered list (first page of 500, newest first, window = lookback): a
//     known ongoing alarm gets its end (or invalid) with the real recovery
//     time; an alarm never seen gets its start and its end; on the very first
//     read, alarms never seen are history and produce nothing.
//   - a known alarm missing from a complete current list and not found in the
//     next recovered read gets an end inferred at that read.
//
// Events are "delivered" the moment they are produced (an in-memory sink),
// which flatters the baselines next to the relay, whose events travel
// through its bbolt outbox to JetStream.
type baseline struct {
	kind     baselineKind
	client   *opendata.Client
	clk      clock.Clock
	log      *slog.Logger
	rec      *recorder
	slot     time.Duration
	lookback time.Duration

	// The state below belongs to the goroutine running run.

	ongoing map[string]struct{}
	// done holds the alarms that ended, and on the first recovered read
	// the history that produces nothing.
	done map[string]struct{}
	// vanished holds the known alarms missing from the latest complete
	// current list, for the next recovered read to resolve.
	vanished      map[string]struct{}
	readRecovered bool
	// currentCalls are the real durations of the current-list reads, from
	// request to decoded answer.
	currentCalls []time.Duration

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startBaseline starts a baseline of kind k polling s at rate requests a
// minute: the eager baseline makes one request a slot of 60 s ÷ rate, the
// naive one reads both lists every 60 s whatever the rate.
func startBaseline(ctx context.Context, k baselineKind, s *sim.Server, rate int, clk clock.Clock, log *slog.Logger) (*baseline, error) {
	client, err := newClient(s, rate, clk, log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	b := &baseline{
		kind:     k,
		client:   client,
		clk:      clk,
		log:      log.With("system", string(k)),
		rec:      newRecorder(),
		slot:     time.Minute / time.Duration(rate),
		lookback: relayLookback,
		ongoing:  make(map[string]struct{}),
		done:     make(map[string]struct{}),
		vanished: make(map[string]struct{}),
		cancel:   cancel,
	}
	b.wg.Go(func() { b.run(ctx) })
	return b, nil
}

// stop stops the baseline and waits for it. A baseline has nothing to
// flush; its error is always nil.
func (b *baseline) stop() error {
	b.cancel()
	b.wg.Wait()
	return nil
}

// run polls until ctx is done.
func (b *baseline) run(ctx context.Context) {
	next := b.clk.Now()
	current := true
	for {
		if d := next.Sub(b.clk.Now()); d > 0 {
			t := b.clk.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
		}
		if ctx.Err() != nil {
			return
		}
		start := b.clk.Now()
		switch b.kind {
		case naive:
			b.pollCurrent(ctx)
			b.pollRecovered(ctx)
			next = start.Add(naiveEvery)
		case eager:
			if current {
				b.pollCurrent(ctx)
			} else {
				b.pollRecovered(ctx)
			}
			current = !current
			next = start.Add(b.slot)
		}
	}
}

// emit records a transition detected at at.
func (b *baseline) emit(id string, tr event.Transition, at time.Time) {
	b.rec.detect(id, tr, at)
	b.rec.deliver(event.ID(id, tr), at)
}

// pollCurrent reads the whole current list.
func (b *baseline) pollCurrent(ctx context.Context) {
	now := b.clk.Now()
	began := time.Now()
	pg, err := b.client.Alarms(opendata.WithPriority(ctx, opendata.PriorityAlarm),
		opendata.AlarmQuery{Size: 500, Start: now.Add(-b.lookback), End: now})
	if err != nil {
		b.fail(ctx, "current", err)
		return
	}
	if pg.Pages == 1 {
		b.currentCalls = append(b.currentCalls, time.Since(began))
	}
	at := b.clk.Now()
	seen := make(map[string]struct{}, len(pg.Alarms))
	for i := range pg.Alarms {
		a := &pg.Alarms[i]
		if a.Status != event.StatusOngoing {
			continue
		}
		seen[a.OriginID] = struct{}{}
		delete(b.vanished, a.OriginID)
		if _, ok := b.ongoing[a.OriginID]; ok {
			continue
		}
		if _, ok := b.done[a.OriginID]; ok {
			continue
		}
		b.ongoing[a.OriginID] = struct{}{}
		b.emit(a.OriginID, event.Start, at)
	}
	if !pg.Complete {
		return
	}
	for id := range b.ongoing {
		if _, ok := seen[id]; !ok {
			b.vanished[id] = struct{}{}
		}
	}
}

// pollRecovered reads the first page of the recovered list and resolves the
// vanished alarms.
func (b *baseline) pollRecovered(ctx context.Context) {
	now := b.clk.Now()
	pg, err := b.client.AlarmPage(opendata.WithPriority(ctx, opendata.PrioritySweep),
		opendata.AlarmQuery{Page: 1, Size: 500, Start: now.Add(-b.lookback), End: now, Recovered: true})
	if err != nil {
		b.fail(ctx, "recovered", err)
		return
	}
	at := b.clk.Now()
	first := !b.readRecovered
	b.readRecovered = true
	for i := range pg.Alarms {
		a := &pg.Alarms[i]
		tr, ok := event.ForStatus(a.Status)
		if !ok || tr == event.Start {
			continue
		}
		if _, ok := b.done[a.OriginID]; ok {
			continue
		}
		_, known := b.ongoing[a.OriginID]
		switch {
		case known:
		case first:
			b.done[a.OriginID] = struct{}{}
			continue
		default:
			b.emit(a.OriginID, event.Start, at)
		}
		b.emit(a.OriginID, tr, at)
		b.finish(a.OriginID)
	}
	for id := range b.vanished {
		b.emit(id, event.End, at)
		b.finish(id)
	}
}

// finish forgets an ended alarm, which then produces nothing more.
func (b *baseline) finish(id string) {
	delete(b.ongoing, id)
	delete(b.vanished, id)
	b.done[id] = struct{}{}
}

// fail logs a failed read; the next one is the retry.
func (b *baseline) fail(ctx context.Context, query string, err error) {
	if ctx.Err() != nil {
		return
	}
	b.log.Warn("alarm query failed", "query", query, "err", err)
}
