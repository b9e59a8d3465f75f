package deliver_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/notify/console"
	natssink "github.com/relay-energy/relay/internal/notify/nats"
	"github.com/relay-energy/relay/internal/notify/webhook"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/testwait"
)

func TestSinkDownTenMinutesGetsEverythingAfterwardsInOrderOnce(t *testing.T) {
	f := delivertest.New(t, "ops")
	rcv := notifytest.NewReceiver(t, "")
	rcv.Down(notifytest.Answer{Status: 503})
	// One request at a time: the receiver sees the outbox order itself.
	f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL(), Concurrency: 1})})

	a1 := f.Start("a1", 0)
	f.Start("a2", 1)
	f.Start("a3", 2)
	f.DriveTo(1, delivertest.T0.Add(3*time.Minute))
	occurred, _ := time.Parse(time.RFC3339, a1.Data.OccurredAt)
	f.Finish("a1", 0, event.StatusEnded, occurred)
	f.Start("a4", 3)
	f.DriveTo(1, delivertest.T0.Add(10*time.Minute))
	if n := len(rcv.Accepted()); n != 0 {
		t.Fatalf("%d events accepted while the sink was down", n)
	}
	failed := len(rcv.Requests())
	if failed < 8 {
		t.Fatalf("only %d attempts during ten minutes down; want backoff from 1s doubling", failed)
	}
	rcv.Up()
	// After ten minutes of failures the backoff is at most five minutes.
	f.DriveUntil(1, delivertest.T0.Add(16*time.Minute), func() bool { return len(f.Pending("ops")) == 0 })

	want := "a1:start a2:start a3:start a1:end a4:start"
	if got := delivertest.Join(delivertest.EventIDs(t, rcv.Accepted())); got != want {
		t.Fatalf("accepted %q, want %q: in outbox order, each once", got, want)
	}
	if dl := f.DeadLetters("ops"); len(dl) != 0 {
		t.Fatalf("dead letters %+v, want none", dl)
	}
}

func TestBackoffDoublesFromOneSecondToFiveMinutesWithJitter(t *testing.T) {
	f := delivertest.New(t, "ops")
	rcv := notifytest.NewReceiver(t, "")
	rcv.Down(notifytest.Answer{Status: 502})
	f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL()})})
	f.Start("a1", 0)
	testwait.For(t, 5*time.Second, "the first attempt", func() bool { return len(rcv.Requests()) == 1 })

	base := time.Second
	for i := range 12 {
		f.Settle(1)
		next, _ := f.Clock.NextDeadline()
		wait := next.Sub(f.Clock.Now())
		if lo := base * 8 / 10; wait < lo || wait > base {
			t.Fatalf("wait after failure %d = %s, want %s to %s", i+1, wait, lo, base)
		}
		f.Clock.Set(next)
		testwait.For(t, 5*time.Second, "the next attempt", func() bool { return len(rcv.Requests()) == i+2 })
		base = min(base*2, 5*time.Minute)
	}
}

func TestEntryOlderThanMaxAgeIsDeadLettered(t *testing.T) {
	f := delivertest.New(t, "ops")
	rcv := notifytest.NewReceiver(t, "")
	// A Retry-After of a day must not hold the outbox past max_age.
	rcv.Queue(notifytest.Answer{Status: 429, RetryAfter: "86400"})
	reg := prometheus.NewPedanticRegistry()
	sink := delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL()})
	f.RunDeliverer(deliver.Options{Metrics: deliver.NewMetrics(reg)}, deliver.Target{Sink: sink, MaxAge: 30 * time.Minute, MaxRetryAfter: time.Hour})
	f.Start("a1", 0)
	testwait.For(t, 5*time.Second, "the first attempt", func() bool { return len(rcv.Requests()) == 1 })
	f.Settle(1)
	if next, _ := f.Clock.NextDeadline(); !next.Equal(delivertest.T0.Add(30 * time.Minute)) {
		t.Fatalf("next attempt at %s, want at max_age, %s", next, delivertest.T0.Add(30*time.Minute))
	}
	f.Clock.Advance(20 * time.Minute)
	f.Start("a2", 0)
	f.DriveUntil(1, delivertest.T0.Add(time.Hour), func() bool { return len(f.Pending("ops")) == 0 })

	dl := f.DeadLetters("ops")
	if len(dl) != 1 || dl[0].EventID != "a1:start" || !strings.Contains(dl[0].Reason, "max_age 30m0s") {
		t.Fatalf("dead letters = %+v, want a1:start expired after max_age 30m0s", dl)
	}
	if n := len(rcv.Requests()); n != 2 {
		t.Fatalf("%d requests, want 2: the expired entry is not tried again", n)
	}
	if got := delivertest.Join(delivertest.EventIDs(t, rcv.Accepted())); got != "a2:start" {
		t.Fatalf("accepted %q, want a2:start", got)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP relay_dead_letters_total Outbox entries given up on, by sink and reason (rejected, expired, undecodable).
# TYPE relay_dead_letters_total counter
relay_dead_letters_total{reason="expired",sink="ops"} 1
relay_dead_letters_total{reason="rejected",sink="ops"} 0
relay_dead_letters_total{reason="undecodable",sink="ops"} 0
# HELP relay_outbox_depth Entries waiting in a sink's outbox.
# TYPE relay_outbox_depth gauge
relay_outbox_depth{sink="ops"} 0
`), "relay_dead_letters_total", "relay_outbox_depth"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "relay_delivery_latency_seconds"); n != 1 {
		t.Fatalf("latency histogram has %d series, want 1", n)
	}
}

func TestNewEntriesAreDeliveredAtOnceWithoutWaitingForThePoll(t *testing.T) {
	f := delivertest.New(t, "ops")
	rcv := notifytest.NewReceiver(t, "")
	f.RunDeliverer(deliver.Options{Poll: time.Hour}, deliver.Target{Sink: delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL()})})
	f.Settle(1)
	for i, origin := range []string{"a1", "a2", "a3"} {
		f.Start(origin, 0)
		testwait.For(t, 5*time.Second, origin+" to be delivered", func() bool { return len(rcv.Accepted()) == i+1 })
	}
	if !f.Clock.Now().Equal(delivertest.T0) {
		t.Fatalf("the clock moved to %s; deliveries should not wait for it", f.Clock.Now())
	}
}

func TestEachSinkHasItsOwnOrderedLoop(t *testing.T) {
	f := delivertest.New(t, "down", "up")
	down := notifytest.NewReceiver(t, "")
	down.Down(notifytest.Answer{Status: 500})
	up := notifytest.NewReceiver(t, "")
	f.RunDeliverer(deliver.Options{},
		deliver.Target{Sink: delivertest.NewWebhook(t, f, webhook.Config{Name: "down", URL: down.URL()})},
		deliver.Target{Sink: delivertest.NewWebhook(t, f, webhook.Config{Name: "up", URL: up.URL()})})
	f.Start("a1", 0)
	f.Start("a2", 0)
	testwait.For(t, 5*time.Second, "the healthy sink's deliveries", func() bool { return len(up.Accepted()) == 2 })
	if got := f.Pending("down"); delivertest.Join(got) != "a1:start a2:start" {
		t.Fatalf("outbox of the failing sink = %v, want both entries still waiting", got)
	}
}

func TestDrainDeliversWhatIsPendingThenStops(t *testing.T) {
	f := delivertest.New(t, "ops")
	rcv := notifytest.NewReceiver(t, "")
	for _, o := range []string{"a1", "a2", "a3"} {
		f.Start(o, 0)
	}
	d, err := deliver.NewDeliverer(f.Store, []deliver.Target{{Sink: delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL(), Concurrency: 1})}},
		deliver.Options{Clock: f.Clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- d.Run(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("run: %v", err)
	}
	if got := delivertest.Join(delivertest.EventIDs(t, rcv.Accepted())); got != "a1:start a2:start a3:start" {
		t.Fatalf("accepted %q, want all three", got)
	}
}

func TestDrainGivesUpAtTheGraceDeadlineAndKeepsTheOutbox(t *testing.T) {
	f := delivertest.New(t, "ops")
	rcv := notifytest.NewReceiver(t, "")
	rcv.Down(notifytest.Answer{Status: 503})
	for _, o := range []string{"a1", "a2"} {
		f.Start(o, 0)
	}
	d, err := deliver.NewDeliverer(f.Store, []deliver.Target{{Sink: delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL(), Concurrency: 1})}},
		deliver.Options{Clock: f.Clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- d.Run(context.Background()) }()
	testwait.For(t, 5*time.Second, "the first attempt", func() bool { return len(rcv.Requests()) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = d.Drain(ctx)
	if err == nil || !strings.Contains(err.Error(), "2 entries left") {
		t.Fatalf("drain error = %v, want one saying 2 entries are left", err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("run: %v", err)
	}
	if got := f.Pending("ops"); delivertest.Join(got) != "a1:start a2:start" {
		t.Fatalf("outbox after the drain = %v, want both entries kept for the next run", got)
	}
	if err := d.Run(context.Background()); err == nil {
		t.Fatal("a second Run succeeded; want an error")
	}
}

func TestNewDelivererRejectsBadTargets(t *testing.T) {
	f := delivertest.New(t, "ops")
	console := func(name string) notify.Sink {
		s, err := console.New(name, &strings.Builder{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		targets []deliver.Target
		opts    deliver.Options
		want    string
	}{
		{"duplicate sink", []deliver.Target{{Sink: console("ops")}, {Sink: console("ops")}}, deliver.Options{}, `sink "ops" is given twice`},
		{"nil sink", []deliver.Target{{}}, deliver.Options{}, "target 0 has no sink"},
		{"negative max age", []deliver.Target{{Sink: console("ops"), MaxAge: -time.Second}}, deliver.Options{}, "max_age -1s is negative"},
		{"backoff upside down", nil, deliver.Options{MinBackoff: time.Minute, MaxBackoff: time.Second}, "want 0 < min <= max"},
		{"jitter of one", nil, deliver.Options{Jitter: 1}, "jitter 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := deliver.NewDeliverer(f.Store, tc.targets, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestRetryAfterIsCapped: a receiver answering 429 with a Retry-After of a
// day is tried again after max_retry_after (15 minutes by default), not a day
// later.
func TestRetryAfterIsCapped(t *testing.T) {
	for _, tc := range []struct {
		name string
		cap  time.Duration
		want time.Duration
	}{
		{"default", 0, 15 * time.Minute},
		{"max_retry_after 2m", 2 * time.Minute, 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := delivertest.New(t, "ops")
			rcv := notifytest.NewReceiver(t, "")
			rcv.Queue(notifytest.Answer{Status: 429, RetryAfter: "86400"})
			sink := delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL()})
			f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: sink, MaxRetryAfter: tc.cap})
			f.Start("a1", 0)
			testwait.For(t, 5*time.Second, "the first attempt", func() bool { return len(rcv.Requests()) == 1 })
			f.Settle(1)
			if next, _ := f.Clock.NextDeadline(); !next.Equal(delivertest.T0.Add(tc.want)) {
				t.Fatalf("next attempt at %s, want %s after a Retry-After of a day", next, delivertest.T0.Add(tc.want))
			}
			f.DriveUntil(1, delivertest.T0.Add(time.Hour), func() bool { return len(f.Pending("ops")) == 0 })
			if got := delivertest.Join(delivertest.EventIDs(t, rcv.Accepted())); got != "a1:start" {
				t.Fatalf("accepted %q, want a1:start", got)
			}
		})
	}
}

// TestEntryIsAttemptedOnceBeforeItCanExpire: an event that waited past its
// max_age behind others (a sink stalled by its receiver) is attempted, and
// delivered, instead of being dead-lettered unattempted.
func TestEntryIsAttemptedOnceBeforeItCanExpire(t *testing.T) {
	f := delivertest.New(t, "ops")
	rcv := notifytest.NewReceiver(t, "")
	rcv.Queue(notifytest.Answer{Status: 503, RetryAfter: "3600"})
	sink := delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL()})
	f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: sink, MaxAge: 30 * time.Minute, MaxRetryAfter: time.Hour})
	f.Start("a1", 0)
	f.Start("a2", 0)
	f.DriveUntil(1, delivertest.T0.Add(2*time.Hour), func() bool { return len(f.Pending("ops")) == 0 })
	if got := delivertest.Join(delivertest.EventIDs(t, rcv.Accepted())); got != "a2:start" {
		t.Fatalf("accepted %q, want a2:start: attempted once although it waited past max_age", got)
	}
	if dl := f.DeadLetters("ops"); len(dl) != 1 || dl[0].EventID != "a1:start" {
		t.Fatalf("dead letters = %+v, want only a1:start, which was attempted", dl)
	}
}

// OnReport hears what became of every entry: a retried failure, a delivery
// after it, a dead letter, and both deliveries of a JetStream run.
func TestOnReportTellsWhatBecameOfEveryEntry(t *testing.T) {
	f := delivertest.New(t, "ops", "bus")
	rcv := notifytest.NewReceiver(t, "")
	rcv.Queue(notifytest.Answer{Status: 503}, notifytest.Answer{Status: 204}, notifytest.Answer{Status: 400})
	nc := delivertest.ConnectNATS(t, natstest.StartServer(t, natstest.Config{}))
	// Both starts wait in the outboxes, so the bus gets them as one run.
	f.Start("a1", 0)
	f.Start("a2", 1)
	var mu sync.Mutex
	var got []string
	f.RunDeliverer(deliver.Options{OnReport: func(r deliver.Report) {
		mu.Lock()
		defer mu.Unlock()
		line := fmt.Sprintf("%s %s %s %d", r.Sink, r.Entry.EventID, r.Fate, r.Attempts)
		if r.Reason != "" {
			line += " (" + r.Reason + ")"
		}
		got = append(got, line)
	}},
		deliver.Target{Sink: delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL(), Concurrency: 1})},
		deliver.Target{Sink: delivertest.NewNATS(t, nc, natssink.Config{JetStream: true, CreateStream: "ALARMS"})},
	)
	f.DriveUntil(2, delivertest.T0.Add(time.Minute), func() bool { return len(f.Pending("ops"))+len(f.Pending("bus")) == 0 })

	mu.Lock()
	defer mu.Unlock()
	var ops, bus []string
	for _, line := range got {
		if strings.HasPrefix(line, "ops ") {
			ops = append(ops, line)
		} else {
			bus = append(bus, line)
		}
	}
	wantOps := []string{"ops a1:start retrying 1", "ops a1:start delivered 2", "ops a2:start dead-lettered 1"}
	if len(ops) != len(wantOps) {
		t.Fatalf("reports of ops:\n%s\nwant\n%s", strings.Join(ops, "\n"), strings.Join(wantOps, "\n"))
	}
	for i, want := range wantOps {
		if !strings.HasPrefix(ops[i], want) {
			t.Errorf("report %d of ops = %q, want %q…", i, ops[i], want)
		}
	}
	if !strings.Contains(ops[0], "503") || !strings.Contains(ops[2], "400") || strings.Contains(ops[1], "(") {
		t.Errorf("reasons: a failure and a dead letter say what the receiver answered, a delivery says nothing:\n%s", strings.Join(ops, "\n"))
	}
	if want := "bus a1:start delivered 1\nbus a2:start delivered 1"; strings.Join(bus, "\n") != want {
		t.Errorf("reports of bus:\n%s\nwant\n%s", strings.Join(bus, "\n"), want)
	}
}
