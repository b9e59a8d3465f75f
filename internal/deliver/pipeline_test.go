package deliver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
)

// pipeSink is a sink that takes runs of deliveries at once, remembers for
// each start which message it became, and fails some attempts at random.
type pipeSink struct {
	mu sync.Mutex
	// got lists the event ids delivered, in order.
	got []string
	// seen maps an event id to the memory its delivery carried.
	seen map[string]map[string]string
	// runs counts SendAll calls; inRun is set while one is running;
	// longest is the longest run, largest the most bytes of events in
	// one.
	runs    int
	inRun   bool
	longest int
	largest int
	fail    float64
	rnd     *rand.Rand
	err     error
}

func (s *pipeSink) Name() string { return "pipe" }

func (s *pipeSink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	o := s.SendAll(ctx, []notify.Delivery{d})[0]
	return o.Result, o.Err
}

func (s *pipeSink) SendAll(_ context.Context, ds []notify.Delivery) []notify.Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inRun {
		s.err = errors.New("two runs in flight at once")
	}
	s.runs++
	s.longest = max(s.longest, len(ds))
	size := 0
	for _, d := range ds {
		size += len(d.Body)
	}
	s.largest = max(s.largest, size)
	seen := map[string]bool{}
	out := make([]notify.Outcome, len(ds))
	for k, d := range ds {
		if seen[d.OriginID] {
			s.err = fmt.Errorf("run holds two entries of alarm %s", d.OriginID)
		}
		seen[d.OriginID] = true
		if s.rnd.Float64() < s.fail {
			out[k] = notify.Outcome{Result: notify.Result{Retry: true}, Err: errors.New("busy")}
			continue
		}
		if s.seen[d.EventID] == nil {
			s.got = append(s.got, d.EventID)
		}
		s.seen[d.EventID] = d.Memory
		if d.Event.Data.Transition == event.Start {
			out[k].Result.Memory = map[string]string{"message": "msg-" + d.EventID}
		}
	}
	return out
}

// TestPipelinedRunsKeepOrderAndMemory delivers starts and ends of many
// alarms, interleaved so that an end often follows its start within a run
// or two, in short runs whose recording goes on while the next run is sent,
// with some attempts failing: every end must be delivered after its start,
// carrying the memory the start's delivery left, and nothing is lost.
func TestPipelinedRunsKeepOrderAndMemory(t *testing.T) {
	for _, fail := range []float64{0, 0.2} {
		t.Run(fmt.Sprintf("failing %.0f%%", fail*100), func(t *testing.T) {
			f := delivertest.New(t, "pipe")
			sink := &pipeSink{seen: map[string]map[string]string{}, fail: fail, rnd: rand.New(rand.NewPCG(1, uint64(fail*100)))}
			const n = 60
			occurred := f.Clock.Now().Add(-time.Minute)
			for i := range n {
				f.Apply(delivertest.Alarm(fmt.Sprintf("a%02d", i), 1, event.StatusOngoing, occurred, time.Time{}))
				if i > 0 {
					f.Apply(delivertest.Alarm(fmt.Sprintf("a%02d", i-1), 1, event.StatusEnded, occurred, f.Clock.Now()))
				}
			}
			_, stop := f.RunDeliverer(deliver.Options{Batch: 4, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}, deliver.Target{Sink: sink})
			f.DriveUntil(1, f.Clock.Now().Add(time.Hour), func() bool { return len(f.Pending("pipe")) == 0 })
			stop()

			sink.mu.Lock()
			defer sink.mu.Unlock()
			if sink.err != nil {
				t.Fatal(sink.err)
			}
			if len(sink.got) != 2*n-1 {
				t.Fatalf("delivered %d events, want %d", len(sink.got), 2*n-1)
			}
			at := map[string]int{}
			for k, id := range sink.got {
				at[id] = k
			}
			for i := range n - 1 {
				start, end := fmt.Sprintf("a%02d:start", i), fmt.Sprintf("a%02d:end", i)
				if at[end] < at[start] {
					t.Errorf("%s delivered before %s", end, start)
				}
				if got := sink.seen[end]["message"]; got != "msg-"+start {
					t.Errorf("%s carried memory %q, want the start's msg-%s", end, got, start)
				}
			}
			if sink.runs >= 2*n-1 {
				t.Errorf("%d SendAll calls for %d events: the runs were not pipelined", sink.runs, 2*n-1)
			}
		})
	}
}

// TestAPipelinedSinkGetsRunsOfRunBatch: 2,500 starts of distinct alarms
// reach a Pipeliner sink that alarm management decides on in runs of up to
// 2,000 by default (RunBatch), not of the 500 other sinks' loops read at
// once (Batch); an unmanaged one (the bus) in runs of 500; and runs of
// Batch when only Batch is set.
func TestAPipelinedSinkGetsRunsOfRunBatch(t *testing.T) {
	for _, c := range []struct {
		opts    deliver.Options
		managed bool
		longest int
	}{
		{deliver.Options{}, true, 2000},
		{deliver.Options{}, false, 500},
		{deliver.Options{Batch: 300}, true, 300},
		{deliver.Options{Batch: 300, RunBatch: 700}, true, 700},
	} {
		f := delivertest.New(t, "pipe")
		occurred := f.Clock.Now().Add(-time.Minute)
		var recs []event.Alarm
		for i := range 2500 {
			recs = append(recs, delivertest.Alarm(fmt.Sprintf("a%04d", i), 1, event.StatusOngoing, occurred, time.Time{}))
		}
		f.Apply(recs...)
		sink := &pipeSink{seen: map[string]map[string]string{}, rnd: rand.New(rand.NewPCG(1, 2))}
		if c.managed {
			c.opts.Gate = &verdictGate{verdict: func(int) deliver.Verdict { return deliver.Verdict{} }, heads: map[string]bool{}}
		}
		_, stop := f.RunDeliverer(c.opts, deliver.Target{Sink: sink})
		f.DriveUntil(1, f.Clock.Now().Add(time.Hour), func() bool { return len(f.Pending("pipe")) == 0 })
		stop()
		sink.mu.Lock()
		if sink.err != nil || len(sink.got) != 2500 || sink.longest != c.longest {
			t.Errorf("Batch %d, RunBatch %d, managed %v: %d of 2500 delivered in %d runs, the longest %d, want %d (error %v)",
				c.opts.Batch, c.opts.RunBatch, c.managed, len(sink.got), sink.runs, sink.longest, c.longest, sink.err)
		}
		sink.mu.Unlock()
	}
}

// Under a backlog of large events, the pages a loop reads, and so the runs
// it hands a pipelining sink, stop at PageBytes of events, managed or not:
// 300 events of about 20 KB (6 MB in all) go out in runs of at most 1 MiB.
func TestAPipelinedSinksRunsStopAtPageBytes(t *testing.T) {
	const pageBytes = 1 << 20
	pad := strings.Repeat("x", 20<<10)
	for _, managed := range []bool{true, false} {
		f := delivertest.New(t, "pipe")
		occurred := f.Clock.Now().Add(-time.Minute)
		var recs []event.Alarm
		for i := range 300 {
			a := delivertest.Alarm(fmt.Sprintf("a%04d", i), 1, event.StatusOngoing, occurred, time.Time{})
			a.Raw = json.RawMessage(`{"originId":"` + a.OriginID + `","pad":"` + pad + `"}`)
			recs = append(recs, a)
		}
		f.Apply(recs...)
		sink := &pipeSink{seen: map[string]map[string]string{}, rnd: rand.New(rand.NewPCG(1, 2))}
		opts := deliver.Options{PageBytes: pageBytes}
		if managed {
			opts.Gate = &verdictGate{verdict: func(int) deliver.Verdict { return deliver.Verdict{} }, heads: map[string]bool{}}
		}
		_, stop := f.RunDeliverer(opts, deliver.Target{Sink: sink})
		f.DriveUntil(1, f.Clock.Now().Add(time.Hour), func() bool { return len(f.Pending("pipe")) == 0 })
		stop()
		sink.mu.Lock()
		if sink.err != nil || len(sink.got) != 300 || sink.largest > pageBytes || sink.longest < 2 {
			t.Errorf("managed %v: %d of 300 delivered in %d runs, the longest %d, the largest %d bytes, want at most %d (error %v)",
				managed, len(sink.got), sink.runs, sink.longest, sink.largest, pageBytes, sink.err)
		}
		sink.mu.Unlock()
	}
}

// scriptSink answers the first attempt at each event as script says (a
// status: 0 delivers, 400 refuses for good, 503 fails without a
// Retry-After, 429 asks to wait 30 s) and delivers every later attempt,
// recording when each attempt came.
type scriptSink struct {
	clk    interface{ Now() time.Time }
	script map[string]int
	mu     sync.Mutex
	at     map[string][]time.Time
}

func (s *scriptSink) Name() string { return "pipe" }

func (s *scriptSink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	o := s.SendAll(ctx, []notify.Delivery{d})[0]
	return o.Result, o.Err
}

func (s *scriptSink) SendAll(_ context.Context, ds []notify.Delivery) []notify.Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]notify.Outcome, len(ds))
	for k, d := range ds {
		id := d.EventID
		s.at[id] = append(s.at[id], s.clk.Now())
		if len(s.at[id]) > 1 {
			continue
		}
		switch s.script[id] {
		case 400:
			out[k] = notify.Outcome{Err: errors.New("400 bad request")}
		case 503:
			out[k] = notify.Outcome{Result: notify.Result{Retry: true}, Err: errors.New("503 unavailable")}
		case 429:
			out[k] = notify.Outcome{Result: notify.Result{Retry: true, RetryAfter: 30 * time.Second}, Err: errors.New("429 slow down")}
		}
	}
	return out
}

// runScript delivers the starts of alarms a, b, c and d, in one run,
// through a scriptSink answering as script says, until the outbox is empty.
func runScript(t *testing.T, script map[string]int) (*delivertest.Fixture, *scriptSink) {
	t.Helper()
	f := delivertest.New(t, "pipe")
	occurred := f.Clock.Now().Add(-time.Minute)
	for _, id := range []string{"a", "b", "c", "d"} {
		f.Apply(delivertest.Alarm(id, 1, event.StatusOngoing, occurred, time.Time{}))
	}
	sink := &scriptSink{clk: f.Clock, script: script, at: map[string][]time.Time{}}
	began := f.Clock.Now()
	_, stop := f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: sink})
	f.DriveUntil(1, began.Add(time.Hour), func() bool { return len(f.Pending("pipe")) == 0 })
	stop()
	return f, sink
}

// TestRetryAfterOfARunIsHonouredBehindARefusal checks that when a run's
// first failure is final (dead-lettered at once) and a later one asks to
// wait, the wait is honoured: the later outcome is not stale.
func TestRetryAfterOfARunIsHonouredBehindARefusal(t *testing.T) {
	f, sink := runScript(t, map[string]int{"b:start": 400, "c:start": 429})
	if got := len(sink.at["b:start"]); got != 1 {
		t.Errorf("b:start (refused for good) attempted %d times, want 1", got)
	}
	c := sink.at["c:start"]
	if len(c) != 2 || c[1].Sub(c[0]) < 30*time.Second {
		t.Fatalf("c:start attempted at %v: want a second attempt at least 30 s (its Retry-After) after the first", c)
	}
	if n := len(f.DeadLetters("pipe")); n != 1 {
		t.Errorf("%d dead letters, want 1 (b:start)", n)
	}
}

// The destination answered one request of a run with a 503 (no
// Retry-After) and a later one with a 429 asking to wait 30 s: nothing may
// go to it again before those 30 s. The Deliverer retries the 503 after its
// backoff (1 s), then, once that went through, marks every later failure of
// the run stale and attempts it afresh at once: the 429's Retry-After is
// dropped and the destination is hit 1 s after it asked for 30.
func TestReviewRetryAfterBehindARetryableFailureWithoutOne(t *testing.T) {
	_, sink := runScript(t, map[string]int{"b:start": 503, "c:start": 429})
	c := sink.at["c:start"]
	if len(c) != 2 {
		t.Fatalf("c:start attempted at %v, want twice", c)
	}
	for id, ts := range sink.at {
		for _, at := range ts[1:] {
			if at.Sub(c[0]) < 30*time.Second {
				t.Errorf("%s attempted again %s after the destination asked to wait 30 s", id, at.Sub(c[0]))
			}
		}
	}
}

// A run in the air holds the start of alarm b, which the destination
// refuses for good, and the page read meanwhile holds b's end at its head:
// settling the run dead-letters the start and the store parks the end
// beside it, so the end must not go out from the page in hand (an end
// delivered for an alarm the destination never saw start; the whole-relay
// simulation found it, seed 262).
func TestAnEndWhoseStartARunInTheAirDeadLettersIsNotSent(t *testing.T) {
	f := delivertest.New(t, "pipe")
	occurred := f.Clock.Now().Add(-time.Minute)
	f.Apply(delivertest.Alarm("a", 1, event.StatusOngoing, occurred, time.Time{}),
		delivertest.Alarm("b", 1, event.StatusOngoing, occurred, time.Time{}))
	f.Finish("b", 1, event.StatusEnded, occurred)
	sink := &scriptSink{clk: f.Clock, script: map[string]int{"b:start": 400}, at: map[string][]time.Time{}}
	_, stop := f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: sink})
	f.DriveUntil(1, f.Clock.Now().Add(time.Hour), func() bool { return len(f.Pending("pipe")) == 0 })
	stop()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if n := len(sink.at["b:end"]); n != 0 {
		t.Errorf("b:end sent %d times after its start was dead-lettered, want 0 (parked beside it)", n)
	}
	if n := len(sink.at["a:start"]); n != 1 {
		t.Errorf("a:start sent %d times, want 1", n)
	}
}
