package deliver_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/tracing"
)

// windowGate withholds, as silenced, the entries (of alarm only, when set)
// it is asked about from from until until (zero: for ever), and sends
// everything else as it comes.
type windowGate struct {
	clk         interface{ Now() time.Time }
	from, until time.Time
	// only, when set, is the one alarm the silence applies to.
	only string
}

func (g windowGate) Manages(string) bool { return true }

func (g windowGate) Decide(_ context.Context, _ string, d *notify.Delivery) (deliver.Verdict, error) {
	now := g.clk.Now()
	if g.only != "" && d.OriginID != g.only {
		return deliver.Verdict{}, nil
	}
	if !now.Before(g.from) && (g.until.IsZero() || now.Before(g.until)) {
		return deliver.Verdict{Suppress: "silenced"}, nil
	}
	return deliver.Verdict{}, nil
}

func (g windowGate) Digest(context.Context, notify.Sink, []notify.Delivery) (deliver.DigestOutcome, notify.Result, error) {
	panic("no digests here")
}

// sendAheadSingle stores the starts of a and b (the first page, sent as a
// run whose a:start the destination answers 429, Retry-After 30 s), then
// c:start and a's end (the second page: c is alone, since a's end waits for
// a's start), and delivers them until the outbox is empty.
func sendAheadSingle(t *testing.T, gate deliver.Gate, f *delivertest.Fixture) *scriptSink {
	t.Helper()
	occurred := f.Clock.Now().Add(-time.Minute)
	for _, id := range []string{"a", "b", "c"} {
		f.Apply(delivertest.Alarm(id, 1, event.StatusOngoing, occurred, time.Time{}))
	}
	f.Finish("a", 1, event.StatusEnded, occurred)
	sink := &scriptSink{clk: f.Clock, script: map[string]int{"a:start": 429}, at: map[string][]time.Time{}}
	_, stop := f.RunDeliverer(deliver.Options{Batch: 2, Gate: gate}, deliver.Target{Sink: sink})
	f.DriveUntil(1, f.Clock.Now().Add(time.Hour), func() bool { return len(f.Pending("pipe")) == 0 })
	stop()
	return sink
}

// An entry sent on its own (not in a run) whose verdict was asked while
// the run before it was in the air is decided on again when that run had
// to be retried: a silence that began during the retry's 30 s wait
// withholds it. (The run path did so; the single, suppress and digest paths
// kept the verdict asked before the wait.)
func TestAnEntryDecidedWhileTheRunBeforeFailsIsDecidedAgainAfterTheRetry(t *testing.T) {
	f := delivertest.New(t, "pipe")
	gate := windowGate{clk: f.Clock, from: f.Clock.Now().Add(10 * time.Second)}
	sink := sendAheadSingle(t, gate, f)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	a := sink.at["a:start"]
	if len(a) != 2 || a[1].Sub(a[0]) < 30*time.Second {
		t.Fatalf("a:start attempted at %v: want a second attempt at least 30 s after the first", a)
	}
	if at := sink.at["c:start"]; len(at) != 0 {
		t.Errorf("c:start sent %s after a:start's first attempt, on a verdict made before the silence began at 10 s", at[0].Sub(a[0]))
	}
	withheld, err := f.Store.ListWithheld(store.DeadLetterFilter{Sink: "pipe"})
	if err != nil {
		t.Fatal(err)
	}
	if len(withheld) != 2 {
		t.Errorf("%d entries withheld, want 2 (c's start and a's end)", len(withheld))
	}
}

// And the other way round: an entry withheld on a verdict asked before the
// retry's wait, by a silence that ended during it, is sent.
func TestAnEntryWithheldWhileTheRunBeforeFailsIsDecidedAgainAfterTheRetry(t *testing.T) {
	f := delivertest.New(t, "pipe")
	// c is silenced for the first 10 s.
	gate := windowGate{clk: f.Clock, only: "c", until: f.Clock.Now().Add(10 * time.Second)}
	sink := sendAheadSingle(t, gate, f)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	a := sink.at["a:start"]
	if len(a) != 2 || a[1].Sub(a[0]) < 30*time.Second {
		t.Fatalf("a:start attempted at %v: want a second attempt at least 30 s after the first", a)
	}
	if len(sink.at["c:start"]) != 1 {
		t.Errorf("c:start attempted %d times, want once: its silence was over when a:start's retry was settled", len(sink.at["c:start"]))
	}
}

// stuckSink holds every run until its context ends, and closes in when
// the first run came in.
type stuckSink struct {
	once sync.Once
	in   chan struct{}
}

func (s *stuckSink) Name() string { return "pipe" }

func (s *stuckSink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	o := s.SendAll(ctx, []notify.Delivery{d})[0]
	return o.Result, o.Err
}

func (s *stuckSink) SendAll(ctx context.Context, ds []notify.Delivery) []notify.Outcome {
	s.once.Do(func() { close(s.in) })
	<-ctx.Done()
	out := make([]notify.Outcome, len(ds))
	for k := range out {
		out[k] = notify.Outcome{Result: notify.Result{Retry: true}, Err: errors.New("cut short: " + context.Cause(ctx).Error())}
	}
	return out
}

// The spans of a run in the air when the loop stops end (status: stopped,
// the entries stay in the outbox), as those of an attempt in flight did
// before runs were sent ahead.
func TestTheSpansOfARunInTheAirWhenTheLoopStopsEnd(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tracer, err := tracing.New(context.Background(), tracing.Config{Exporter: exp, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	f := delivertest.New(t, "pipe")
	f.Trace(tracer)
	occurred := f.Clock.Now().Add(-time.Minute)
	for _, id := range []string{"a", "b"} {
		f.Apply(delivertest.Alarm(id, 1, event.StatusOngoing, occurred, time.Time{}))
	}
	sink := &stuckSink{in: make(chan struct{})}
	_, stop := f.RunDeliverer(deliver.Options{Tracer: tracer}, deliver.Target{Sink: sink})
	select {
	case <-sink.in:
	case <-time.After(10 * time.Second):
		t.Fatal("the run was not sent")
	}
	time.Sleep(20 * time.Millisecond) // the loop reads on, and waits for the run
	stop()
	if got := len(f.Pending("pipe")); got != 2 {
		t.Errorf("%d entries left in the outbox, want 2", got)
	}
	sends := 0
	for _, s := range exp.GetSpans() {
		if s.Name == "send pipe" {
			sends++
		}
	}
	if sends != 2 {
		t.Errorf("%d send spans ended, want 2: the spans of the run in the air leak", sends)
	}
}

// timedGate withholds, as silenced, every entry it is asked about from from
// on (never when from is zero), and sends the others as they come; it
// closes asked once it was asked about the event named want, if any.
type timedGate struct {
	clk   interface{ Now() time.Time }
	from  time.Time
	want  string
	once  sync.Once
	asked chan struct{}
}

func (g *timedGate) Manages(string) bool { return true }

func (g *timedGate) Decide(_ context.Context, _ string, d *notify.Delivery) (deliver.Verdict, error) {
	v := deliver.Verdict{}
	if !g.from.IsZero() && !g.clk.Now().Before(g.from) {
		v.Suppress = "silenced"
	}
	if g.want != "" && d.EventID == g.want {
		g.once.Do(func() { close(g.asked) })
	}
	return v, nil
}

func (g *timedGate) Digest(context.Context, notify.Sink, []notify.Delivery) (deliver.DigestOutcome, notify.Result, error) {
	panic("no digests here")
}

// slowSink takes advance (on the fake clock) over its first run, which it
// answers once the gate was asked about the event it waits for, or after 10
// s; overlapped says the gate was. It records when each event was sent.
type slowSink struct {
	clk     interface{ Advance(time.Duration) }
	now     func() time.Time
	gate    *timedGate
	advance time.Duration
	mu      sync.Mutex
	runs    int
	at      map[string]time.Time
	// overlapped says the gate was asked while the first run was sent.
	overlapped bool
}

func (s *slowSink) Name() string { return "pipe" }

func (s *slowSink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	o := s.SendAll(ctx, []notify.Delivery{d})[0]
	return o.Result, o.Err
}

func (s *slowSink) SendAll(_ context.Context, ds []notify.Delivery) []notify.Outcome {
	s.mu.Lock()
	s.runs++
	first := s.runs == 1
	for _, d := range ds {
		s.at[d.EventID] = s.now()
	}
	s.mu.Unlock()
	if first {
		select {
		case <-s.gate.asked:
			s.mu.Lock()
			s.overlapped = true
			s.mu.Unlock()
		case <-time.After(10 * time.Second): // the next run is decided after this one
		}
		s.clk.Advance(s.advance)
	}
	return make([]notify.Outcome, len(ds))
}

// A run decided on while a slow run before it was sent (20 s, all of it
// delivered) is decided on again when it is due: a silence that began
// meanwhile, at 10 s, withholds it. Its verdicts, asked at 0, are not kept
// for 20 s.
func TestARunDecidedWhileASlowRunIsSentIsDecidedAgain(t *testing.T) {
	f := delivertest.New(t, "pipe")
	occurred := f.Clock.Now().Add(-time.Minute)
	for _, id := range []string{"a", "b", "c", "d"} {
		f.Apply(delivertest.Alarm(id, 1, event.StatusOngoing, occurred, time.Time{}))
	}
	began := f.Clock.Now()
	gate := &timedGate{clk: f.Clock, from: began.Add(10 * time.Second), want: "d:start", asked: make(chan struct{})}
	sink := &slowSink{clk: f.Clock, now: f.Clock.Now, gate: gate, advance: 20 * time.Second, at: map[string]time.Time{}}
	_, stop := f.RunDeliverer(deliver.Options{Batch: 2, Gate: gate}, deliver.Target{Sink: sink})
	f.DriveUntil(1, began.Add(time.Hour), func() bool { return len(f.Pending("pipe")) == 0 })
	stop()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, id := range []string{"c:start", "d:start"} {
		if at, ok := sink.at[id]; ok {
			t.Errorf("%s sent at %s, on a verdict asked at 0, before the silence began at 10 s", id, at.Sub(began))
		}
	}
	if _, ok := sink.at["a:start"]; !ok {
		t.Error("a:start was not sent")
	}
}
