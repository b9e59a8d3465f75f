package deliver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/testwait"
)

// callSink records the calls of its Send (and SendAll, when it is
// pipelined) and answers each with answer, delivered when nil.
type callSink struct {
	name   string
	answer func(d notify.Delivery) (notify.Result, error)

	mu       sync.Mutex
	sends    int
	sendAlls int
	attempts []int
}

func (s *callSink) Name() string { return s.name }

func (s *callSink) Send(_ context.Context, d notify.Delivery) (notify.Result, error) {
	s.mu.Lock()
	s.sends++
	s.attempts = append(s.attempts, d.Attempt)
	s.mu.Unlock()
	if s.answer != nil {
		return s.answer(d)
	}
	return notify.Result{}, nil
}

func (s *callSink) calls() (sends, sendAlls int, attempts []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sends, s.sendAlls, append([]int(nil), s.attempts...)
}

// pipedSink is a callSink that takes runs of deliveries.
type pipedSink struct{ *callSink }

func (s pipedSink) SendAll(_ context.Context, ds []notify.Delivery) []notify.Outcome {
	s.mu.Lock()
	s.sendAlls++
	for _, d := range ds {
		s.attempts = append(s.attempts, d.Attempt)
	}
	s.mu.Unlock()
	return make([]notify.Outcome, len(ds))
}

// digestGate hands every entry of the sink it manages to the storm digest
// and counts the digests it is asked to send.
type digestGate struct {
	sink    string
	digests atomic.Int32
}

func (g *digestGate) Manages(sink string) bool { return sink == g.sink }

func (g *digestGate) Decide(context.Context, string, *notify.Delivery) (deliver.Verdict, error) {
	return deliver.Verdict{Digest: true}, nil
}

func (g *digestGate) Digest(_ context.Context, _ notify.Sink, ds []notify.Delivery) (deliver.DigestOutcome, notify.Result, error) {
	g.digests.Add(1)
	return deliver.DigestOutcome{Memory: make([]map[string]string, len(ds))}, notify.Result{}, nil
}

// startDeliverer runs a Deliverer of targets on f, until the test ends, and
// returns what Run returns.
func startDeliverer(t *testing.T, f *delivertest.Fixture, opts deliver.Options, targets ...deliver.Target) <-chan error {
	t.Helper()
	opts.Clock = f.Clock
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	d, err := deliver.NewDeliverer(f.Store, targets, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, ended := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(ended)
		done <- d.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-ended
	})
	return done
}

// waitStopped waits for Run to return by itself, as it does once every
// loop stopped, and fails the test when it does not within five seconds.
func waitStopped(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the delivery loops went on after the fence refused: Run did not return")
	}
}

// A replica that resumes after its lease ran out sends nothing: Send,
// SendAll and the storm digest are never called, and every entry stays in
// its outbox as it was, also those older than their sink's max_age: no
// attempt is counted, nothing is dead-lettered or reported, and the next
// holder attempts each for the first time.
func TestAFencedDelivererSendsNothingAndLeavesEveryEntryInItsOutbox(t *testing.T) {
	f := delivertest.New(t, "chat", "bus", "storm")
	fence := &notifytest.SwitchFence{}
	fence.Closed.Store(true)
	chat := &callSink{name: "chat"}
	bus := pipedSink{&callSink{name: "bus"}}
	storm := &callSink{name: "storm"}
	gate := &digestGate{sink: "storm"}
	for _, origin := range []string{"a1", "a2", "a3"} {
		f.Start(origin, 0)
	}
	f.Clock.Advance(2 * time.Hour)
	targets := func() []deliver.Target {
		// The bus's entries are young enough to go out as one run.
		return []deliver.Target{{Sink: chat, MaxAge: time.Hour}, {Sink: bus}, {Sink: storm, MaxAge: time.Hour}}
	}
	reg := prometheus.NewPedanticRegistry()
	var reports atomic.Int32
	logger, logs := delivertest.NewLogger()
	waitStopped(t, startDeliverer(t, f, deliver.Options{
		Fence: fence.Check, Gate: gate, Metrics: deliver.NewMetrics(reg), Logger: logger,
		OnReport: func(deliver.Report) { reports.Add(1) },
	}, targets()...))

	for _, s := range []*callSink{chat, bus.callSink, storm} {
		if sends, sendAlls, _ := s.calls(); sends+sendAlls > 0 {
			t.Errorf("sink %s: %d Send and %d SendAll calls after the fence refused, want none", s.name, sends, sendAlls)
		}
		if got := delivertest.Join(f.Pending(s.name)); got != "a1:start a2:start a3:start" {
			t.Errorf("sink %s: outbox holds %q, want every entry given back", s.name, got)
		}
		if dl := f.DeadLetters(s.name); len(dl) != 0 {
			t.Errorf("sink %s: dead letters %s, want none", s.name, describe(dl))
		}
	}
	if n := gate.digests.Load(); n != 0 {
		t.Errorf("%d storm digests sent after the fence refused, want none", n)
	}
	if n := reports.Load(); n != 0 {
		t.Errorf("%d reports, want none: nothing became of the entries", n)
	}
	for _, name := range []string{"relay_deliveries_total", "relay_delivery_retries_total", "relay_dead_letters_total"} {
		if v := sumOf(t, reg, name); v != 0 {
			t.Errorf("%s sums to %v, want 0: a refused send is no attempt", name, v)
		}
	}
	if !strings.Contains(logs.String(), notifytest.ErrLeaseGone.Error()) {
		t.Errorf("the log does not say why the loops stopped sending:\n%s", logs)
	}

	// The next holder, unfenced, attempts each entry for the first time.
	f.RunDeliverer(deliver.Options{}, targets()...)
	f.DriveUntil(3, delivertest.T0.Add(3*time.Hour), func() bool {
		return len(f.Pending("chat"))+len(f.Pending("bus"))+len(f.Pending("storm")) == 0
	})
	for _, s := range []*callSink{chat, bus.callSink, storm} {
		_, _, attempts := s.calls()
		if len(attempts) != 3 || attempts[0] != 1 || attempts[1] != 1 || attempts[2] != 1 {
			t.Errorf("sink %s: the next holder's attempts were numbered %v, want 1 for each of the three entries", s.name, attempts)
		}
		if dl := f.DeadLetters(s.name); len(dl) != 0 {
			t.Errorf("sink %s: dead letters %s after the next holder delivered, want none", s.name, describe(dl))
		}
	}
}

// sumOf returns the sum of the samples of the counter name in reg.
func sumOf(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, fam := range fams {
		if fam.GetName() != name {
			continue
		}
		for _, m := range fam.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// A replica whose lease ends while an entry waits for its retry leaves the
// entry for the next holder, although its max_age passed meanwhile: the
// failed attempt made before is the only one counted, and nothing is
// dead-lettered.
func TestALeaseLostDuringABackoffLeavesTheEntryToTheNextHolder(t *testing.T) {
	f := delivertest.New(t, "chat")
	fence := &notifytest.SwitchFence{}
	chat := &callSink{name: "chat", answer: func(notify.Delivery) (notify.Result, error) {
		return notify.Result{Retry: true}, errors.New("HTTP 503")
	}}
	var reports []deliver.Report
	var mu sync.Mutex
	done := startDeliverer(t, f, deliver.Options{Fence: fence.Check, OnReport: func(r deliver.Report) {
		mu.Lock()
		reports = append(reports, r)
		mu.Unlock()
	}}, deliver.Target{Sink: chat, MaxAge: time.Minute})
	f.Start("a1", 0)
	testwait.For(t, 5*time.Second, "the first attempt", func() bool { sends, _, _ := chat.calls(); return sends == 1 })
	f.Settle(1)
	fence.Closed.Store(true)
	f.Clock.Advance(2 * time.Minute)
	waitStopped(t, done)

	if sends, _, _ := chat.calls(); sends != 1 {
		t.Errorf("%d attempts, want the one before the lease ended", sends)
	}
	if got := delivertest.Join(f.Pending("chat")); got != "a1:start" {
		t.Errorf("outbox holds %q, want a1:start given back", got)
	}
	if dl := f.DeadLetters("chat"); len(dl) != 0 {
		t.Errorf("dead letters %s, want none: max_age passed while this process could not send", describe(dl))
	}
	mu.Lock()
	defer mu.Unlock()
	var fates []string
	for _, r := range reports {
		fates = append(fates, r.Entry.EventID+" "+string(r.Fate))
	}
	if len(reports) != 1 || reports[0].Fate != deliver.Retrying {
		t.Errorf("reports %q, want the one retry before the lease ended", fates)
	}
}

// A send cut short by the end of the lease (the sink's own transport refused
// its request after the sink waited for its pace) is the fence's failure,
// not the sink's: even an answer that would dead-letter the entry leaves it
// in the outbox.
func TestASendRefusedByTheFenceInsideTheSinkIsNoFailure(t *testing.T) {
	f := delivertest.New(t, "chat")
	fence := &notifytest.SwitchFence{}
	chat := &callSink{name: "chat", answer: func(notify.Delivery) (notify.Result, error) {
		fence.Closed.Store(true)
		return notify.Result{Retry: false}, notifytest.ErrLeaseGone
	}}
	f.Start("a1", 0)
	waitStopped(t, startDeliverer(t, f, deliver.Options{Fence: fence.Check}, deliver.Target{Sink: chat}))
	if got := delivertest.Join(f.Pending("chat")); got != "a1:start" {
		t.Errorf("outbox holds %q, want a1:start", got)
	}
	if dl := f.DeadLetters("chat"); len(dl) != 0 {
		t.Errorf("dead letters %s, want none", describe(dl))
	}
}

// describe lists dead letters by event id and reason.
func describe(dl []store.DeadLetter) string {
	out := make([]string, len(dl))
	for i, d := range dl {
		out[i] = fmt.Sprintf("%s (%s)", d.EventID, d.Reason)
	}
	return strings.Join(out, ", ")
}
