package deliver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/webhook"
	"github.com/relay-energy/relay/internal/testwait"
)

// The tests of this file were written for mutants that survived the
// package's other tests (docs/development.md, "Mutation testing"): each
// checks what an operator would notice if the mutated line were wrong.

// reports collects what OnReport was told.
type reports struct {
	mu  sync.Mutex
	all []deliver.Report
}

func (r *reports) add(rep deliver.Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, rep)
}

func (r *reports) of(fate deliver.Fate) []deliver.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []deliver.Report
	for _, rep := range r.all {
		if rep.Fate == fate {
			out = append(out, rep)
		}
	}
	return out
}

// Retries of a sink that is down do not all come at the doubled backoff:
// up to a fifth of each is cut off at random, so that the relays of a
// fleet do not retry in step. An entry that outlives max_age becomes a dead
// letter whose reason, and report, count the attempts made; the outbox
// depth gauge counts the entries waiting meanwhile.
func TestRetriesSpreadAndAnExpiredEntryCountsItsAttempts(t *testing.T) {
	f := delivertest.New(t, "ops")
	rcv := notifytest.NewReceiver(t, "")
	rcv.Down(notifytest.Answer{Status: 502})
	reg := prometheus.NewPedanticRegistry()
	var reps reports
	f.Start("a1", 0)
	f.Start("a2", 0)
	f.RunDeliverer(deliver.Options{Metrics: deliver.NewMetrics(reg), OnReport: reps.add},
		deliver.Target{Sink: delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL(), Concurrency: 1}), MaxAge: 10 * time.Minute})
	testwait.For(t, 5*time.Second, "the first attempt", func() bool { return len(rcv.Requests()) == 1 })
	f.Settle(1)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP relay_outbox_depth Entries waiting in a sink's outbox.
# TYPE relay_outbox_depth gauge
relay_outbox_depth{sink="ops"} 2
`), "relay_outbox_depth"); err != nil {
		t.Fatalf("while the sink is down: %v", err)
	}
	base, cut := time.Second, false
	for i := range 8 {
		f.Settle(1)
		next, _ := f.Clock.NextDeadline()
		if wait := next.Sub(f.Clock.Now()); wait < base*97/100 {
			cut = true
		}
		f.Clock.Set(next)
		testwait.For(t, 5*time.Second, "the next attempt", func() bool { return len(rcv.Requests()) == i+2 })
		base *= 2
	}
	if !cut {
		t.Error("8 retries each came at the doubled backoff or within 3% of it: no jitter")
	}
	f.DriveUntil(1, delivertest.T0.Add(time.Hour), func() bool { return len(f.DeadLetters("ops")) > 0 })
	attempts := 0
	for _, r := range rcv.Requests() {
		if strings.Contains(string(r.Body), "a1") {
			attempts++
		}
	}
	dl := f.DeadLetters("ops")
	if want := fmt.Sprintf(", %d attempts", attempts); !strings.HasSuffix(dl[0].Reason, want) {
		t.Errorf("dead letter's reason %q; want it to end %q: the requests the receiver saw", dl[0].Reason, want)
	}
	if dl[0].EventID != "a1:start" {
		t.Fatalf("dead letters %+v; want a1's start first", dl)
	}
	dead := reps.of(deliver.DeadLettered)
	if len(dead) == 0 || dead[0].Entry.EventID != "a1:start" || dead[0].Attempts != attempts {
		got := []string{}
		for _, r := range dead {
			got = append(got, fmt.Sprintf("%s after %d attempts", r.Entry.EventID, r.Attempts))
		}
		t.Errorf("dead-letter reports %v; want a1's first, of %d attempts", got, attempts)
	}
}

// failingGate cannot decide while fail is above 0 (its store is away), then
// sends everything as it comes.
type failingGate struct {
	mu    sync.Mutex
	fail  int
	asked []time.Time
	clock func() time.Time
}

func (g *failingGate) Decide(context.Context, string, *notify.Delivery) (deliver.Verdict, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, g.clock())
	if g.fail > 0 {
		g.fail--
		return deliver.Verdict{}, errors.New("alarm management's store is away")
	}
	return deliver.Verdict{}, nil
}

func (g *failingGate) Manages(string) bool { return true }

func (g *failingGate) Digest(context.Context, notify.Sink, []notify.Delivery) (deliver.DigestOutcome, notify.Result, error) {
	panic("no digests here")
}

// A gate that cannot decide is asked again after a backoff that grows with
// each failure, and the entry goes out once it can: a failing alarm
// management neither loses an entry nor sends it undecided.
func TestAGateThatCannotDecideIsAskedAgainLater(t *testing.T) {
	f := delivertest.New(t, "ops")
	rcv := notifytest.NewReceiver(t, "")
	gate := &failingGate{fail: 4, clock: f.Clock.Now}
	f.RunDeliverer(deliver.Options{Gate: gate},
		deliver.Target{Sink: delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL(), Concurrency: 1})})
	f.Start("a1", 0)
	f.DriveUntil(1, delivertest.T0.Add(time.Hour), func() bool { return len(rcv.Accepted()) == 1 })
	gate.mu.Lock()
	defer gate.mu.Unlock()
	if len(gate.asked) < 5 {
		t.Fatalf("asked %d times; want 4 failures, then a verdict", len(gate.asked))
	}
	for i := 2; i < 5; i++ {
		if prev, gap := gate.asked[i-1].Sub(gate.asked[i-2]), gate.asked[i].Sub(gate.asked[i-1]); gap <= prev {
			t.Errorf("asked again %s after failure %d, %s after the one before: the backoff does not grow", gap, i, prev)
		}
	}
}

// noteGate sends everything as it comes, each start with a note and each
// other entry with the command that acknowledges its alarm.
type noteGate struct{}

func (noteGate) Decide(_ context.Context, _ string, d *notify.Delivery) (deliver.Verdict, error) {
	if d.Event.Data.Transition == event.Start {
		return deliver.Verdict{Note: "Escalated: unacknowledged for 10m"}, nil
	}
	return deliver.Verdict{AckCommand: "relay ack " + d.OriginID}, nil
}

func (noteGate) Manages(string) bool { return true }

func (noteGate) Digest(context.Context, notify.Sink, []notify.Delivery) (deliver.DigestOutcome, notify.Result, error) {
	panic("no digests here")
}

// runSink takes runs of deliveries at once and records, per event, the
// note and acknowledge command it was handed.
type runSink struct {
	mu           sync.Mutex
	sends, runs  int
	notes, bycmd map[string]string
}

func (s *runSink) Name() string { return "pipe" }

func (s *runSink) Send(_ context.Context, d notify.Delivery) (notify.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sends++
	s.record(d)
	return notify.Result{}, nil
}

func (s *runSink) SendAll(_ context.Context, ds []notify.Delivery) []notify.Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs++
	for _, d := range ds {
		s.record(d)
	}
	return make([]notify.Outcome, len(ds))
}

func (s *runSink) record(d notify.Delivery) {
	s.notes[d.EventID], s.bycmd[d.EventID] = d.Event.Data.Note, d.Event.Data.AckCommand
}

// Under alarm management, the entries of distinct alarms still go out in
// runs (batch 3: five alarms, a run of three and one of two), each asked of
// the gate, and each carrying the note or the acknowledge command the gate
// gave it: an escalated start says so in a chat, an end tells a sink
// without buttons how to acknowledge.
func TestRunsUnderAGateCarryEachVerdictsNote(t *testing.T) {
	f := delivertest.New(t, "pipe")
	occurred := f.Clock.Now().Add(-time.Minute)
	for i := range 5 {
		f.Apply(delivertest.Alarm(fmt.Sprintf("a%d", i), 1, event.StatusOngoing, occurred, time.Time{}))
	}
	sink := &runSink{notes: map[string]string{}, bycmd: map[string]string{}}
	f.RunDeliverer(deliver.Options{Gate: noteGate{}, Batch: 3}, deliver.Target{Sink: sink})
	f.DriveUntil(1, f.Clock.Now().Add(time.Hour), func() bool { return len(f.Pending("pipe")) == 0 })
	var ends []event.Alarm
	for i := range 5 {
		ends = append(ends, delivertest.Alarm(fmt.Sprintf("a%d", i), 1, event.StatusEnded, occurred, f.Clock.Now()))
	}
	f.Apply(ends...)
	f.DriveUntil(1, f.Clock.Now().Add(time.Hour), func() bool { return len(f.Pending("pipe")) == 0 })
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.sends != 0 || sink.runs != 4 {
		t.Errorf("%d runs and %d single sends; want the 10 entries in 4 runs (3, 2, 3, 2)", sink.runs, sink.sends)
	}
	for i := range 5 {
		start, end := fmt.Sprintf("a%d:start", i), fmt.Sprintf("a%d:end", i)
		if got := sink.notes[start]; got != "Escalated: unacknowledged for 10m" {
			t.Errorf("%s carried the note %q", start, got)
		}
		if got, want := sink.bycmd[end], fmt.Sprintf("relay ack a%d", i); got != want {
			t.Errorf("%s carried the acknowledge command %q, want %q", end, got, want)
		}
	}
}

// stormGate hands the starts of alarms named d* to the digest, withholds
// those named q* as silenced, and sends the others as they come; it
// records each digest's event ids.
type stormGate struct {
	mu      sync.Mutex
	digests [][]string
}

func (g *stormGate) Manages(string) bool { return true }

func (g *stormGate) Decide(_ context.Context, _ string, d *notify.Delivery) (deliver.Verdict, error) {
	switch d.OriginID[0] {
	case 'd':
		return deliver.Verdict{Digest: true}, nil
	case 'q':
		return deliver.Verdict{Suppress: "silence"}, nil
	}
	return deliver.Verdict{}, nil
}

func (g *stormGate) Digest(_ context.Context, _ notify.Sink, ds []notify.Delivery) (deliver.DigestOutcome, notify.Result, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.EventID)
	}
	g.digests = append(g.digests, ids)
	mem := make([]map[string]string, len(ds))
	for k := range mem {
		mem[k] = map[string]string{"digest": fmt.Sprint("D", len(g.digests))}
	}
	return deliver.DigestOutcome{Memory: mem}, notify.Result{}, nil
}

// A digest gathers the consecutive entries the gate hands to it, and no
// entry the gate withholds or sends as it is: each entry is digested,
// withheld or sent once, in its place in the outbox, and the memory the
// digest left is kept for each of its alarms.
func TestADigestTakesOnlyWhatTheGateHandsIt(t *testing.T) {
	f := delivertest.New(t, "ops")
	occurred := f.Clock.Now().Add(-time.Minute)
	var alarms []event.Alarm
	for _, id := range []string{"d0", "d1", "q0", "d2", "p0", "d3"} {
		alarms = append(alarms, delivertest.Alarm(id, 1, event.StatusOngoing, occurred, time.Time{}))
	}
	f.Apply(alarms...)
	rcv := notifytest.NewReceiver(t, "")
	gate := &stormGate{}
	f.RunDeliverer(deliver.Options{Gate: gate}, deliver.Target{Sink: delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL(), Concurrency: 1})})
	f.DriveUntil(1, f.Clock.Now().Add(time.Hour), func() bool { return len(f.Pending("ops")) == 0 })
	gate.mu.Lock()
	defer gate.mu.Unlock()
	if got := fmt.Sprint(gate.digests); got != "[[d0:start d1:start] [d2:start] [d3:start]]" {
		t.Errorf("digests %s; want d0 and d1, then d2, then d3", got)
	}
	// Each digested alarm's memory at the sink is what its digest left.
	for origin, want := range map[string]string{"d0": "D1", "d1": "D1", "d2": "D2", "d3": "D3"} {
		if m, err := f.Store.Memory("ops", origin); err != nil || m["digest"] != want {
			t.Errorf("the sink's memory of %s: %v, %v; want digest %s", origin, m, err, want)
		}
	}
	if got := delivertest.Join(delivertest.EventIDs(t, rcv.Accepted())); got != "p0:start" {
		t.Errorf("sent %q; want p0's start alone", got)
	}
	sup, err := f.Store.Suppressed("ops")
	if err != nil || len(sup) != 1 || sup[0].EventID != "q0:start" {
		t.Errorf("suppressed log %+v, %v; want q0's start", sup, err)
	}
}

// quietGate withholds the alarms named q* as silenced and sends the others
// as they come.
type quietGate struct{ noteGate }

func (quietGate) Decide(_ context.Context, _ string, d *notify.Delivery) (deliver.Verdict, error) {
	if d.OriginID[0] == 'q' {
		return deliver.Verdict{Suppress: "silence"}, nil
	}
	return deliver.Verdict{}, nil
}

// An entry the gate withholds is never part of a run sent at once, even
// between entries that go out.
func TestAWithheldEntryStaysOutOfARun(t *testing.T) {
	f := delivertest.New(t, "pipe")
	occurred := f.Clock.Now().Add(-time.Minute)
	var alarms []event.Alarm
	for _, id := range []string{"a0", "q0", "a1", "a2"} {
		alarms = append(alarms, delivertest.Alarm(id, 1, event.StatusOngoing, occurred, time.Time{}))
	}
	f.Apply(alarms...)
	sink := &runSink{notes: map[string]string{}, bycmd: map[string]string{}}
	f.RunDeliverer(deliver.Options{Gate: quietGate{}}, deliver.Target{Sink: sink})
	f.DriveUntil(1, f.Clock.Now().Add(time.Hour), func() bool { return len(f.Pending("pipe")) == 0 })
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if _, sent := sink.notes["q0:start"]; sent || len(sink.notes) != 3 {
		t.Errorf("sent %v; want a0, a1 and a2, and not the withheld q0", sink.notes)
	}
	sup, err := f.Store.Suppressed("pipe")
	if err != nil || len(sup) != 1 || sup[0].EventID != "q0:start" {
		t.Errorf("suppressed log %+v, %v; want q0's start", sup, err)
	}
}

// A start that becomes a dead letter takes its alarm's later entries of
// the same page with it: the sink never gets the end of a start it
// refused.
func TestTheEndOfARefusedStartIsNotSentFromThePageInHand(t *testing.T) {
	f := delivertest.New(t, "ops")
	occurred := f.Clock.Now().Add(-time.Minute)
	f.Apply(delivertest.Alarm("a1", 1, event.StatusOngoing, occurred, time.Time{}))
	f.Apply(delivertest.Alarm("a1", 1, event.StatusEnded, occurred, f.Clock.Now()))
	rcv := notifytest.NewReceiver(t, "")
	rcv.Queue(notifytest.Answer{Status: 400})
	f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL(), Concurrency: 1})})
	f.DriveUntil(1, f.Clock.Now().Add(time.Hour), func() bool { return len(f.Pending("ops")) == 0 })
	if n := len(rcv.Requests()); n != 1 {
		t.Errorf("%d requests; want the refused start alone", n)
	}
	if dl := f.DeadLetters("ops"); len(dl) != 2 {
		t.Errorf("dead letters %+v; want the start and its end parked beside it", dl)
	}
}
