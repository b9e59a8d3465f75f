// Package delivertest runs the delivery engine in tests as the relay does: a
// real store on a fake clock whose outbox entries are routed to a fixed set
// of sinks, and a Deliverer on it whose loops the test moves from deadline to
// deadline. The engine's own tests use it, and so do the sinks' tests that
// check what a sink does under the engine (retries, dead letters, order,
// memory across a restart).
package delivertest

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/tracing"
)

// T0 is when every fixture's fake clock starts.
var T0 = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

// Fixture is a real store on a fake clock whose outbox entries are routed to
// a fixed set of sinks.
type Fixture struct {
	// Clock is the fake clock of the store, the Deliverer and the sinks a
	// test builds on it.
	Clock *clock.Fake
	// Store is the open store; Reopen replaces it.
	Store *store.Store

	t      testing.TB
	path   string
	sinks  []string
	tracer *tracing.Tracer
}

// New returns a fixture for t whose entries go to sinks; its store is
// closed when the test ends.
func New(t testing.TB, sinks ...string) *Fixture {
	t.Helper()
	f := &Fixture{t: t, Clock: clock.NewFake(T0), path: filepath.Join(t.TempDir(), "relay.db"), sinks: sinks}
	f.open()
	t.Cleanup(func() {
		if f.Store != nil {
			_ = f.Store.Close()
		}
	})
	return f
}

func (f *Fixture) open() {
	f.t.Helper()
	st, err := store.Open(f.path, store.Options{Clock: f.Clock, LockTimeout: time.Second, Tracer: f.tracer})
	if err != nil {
		f.t.Fatalf("open store: %v", err)
	}
	f.Store = st
}

// Reopen closes the store and opens it again, as a restarted relay does.
func (f *Fixture) Reopen() {
	f.t.Helper()
	if err := f.Store.Close(); err != nil {
		f.t.Fatalf("close store: %v", err)
	}
	f.open()
}

// Trace reopens the store with tracer, which then starts the trace of every
// transition applied.
func (f *Fixture) Trace(tracer *tracing.Tracer) {
	f.t.Helper()
	f.tracer = tracer
	f.Reopen()
}

// Alarm returns an upstream record of alarm origin at level with status.
func Alarm(origin string, level, status int, occurred, recovered time.Time) event.Alarm {
	raw, _ := json.Marshal(map[string]any{"originId": origin, "status": status, "eventLevel": level})
	return event.Alarm{
		OriginID:    origin,
		Status:      status,
		Level:       level,
		EventCode:   "E1023",
		EventDesc:   "Grid overvoltage",
		TenantID:    "T1",
		StationID:   "ST-1",
		StationName: "Solar Park North",
		SystemID:    "SYS-1",
		DeviceSN:    "INV-0042",
		DeviceName:  "Inverter 42",
		OccurredAt:  occurred,
		RecoveredAt: recovered,
		Raw:         raw,
	}
}

// Apply stores records as one poll result and returns the events produced.
func (f *Fixture) Apply(records ...event.Alarm) []event.Event {
	f.t.Helper()
	res, err := f.Store.Apply(context.Background(), store.Batch{Observed: records, DetectedAt: f.Clock.Now()},
		func(*event.Event) []string { return f.sinks })
	if err != nil {
		f.t.Fatalf("apply: %v", err)
	}
	return res.Events
}

// Start records alarm origin as ongoing since a minute ago.
func (f *Fixture) Start(origin string, level int) event.Event {
	f.t.Helper()
	evs := f.Apply(Alarm(origin, level, event.StatusOngoing, f.Clock.Now().Add(-time.Minute), time.Time{}))
	if len(evs) != 1 {
		f.t.Fatalf("start of %s produced %d events, want 1", origin, len(evs))
	}
	return evs[0]
}

// Finish records alarm origin, started at occurred, as ended (or invalid)
// now.
func (f *Fixture) Finish(origin string, level, status int, occurred time.Time) event.Event {
	f.t.Helper()
	evs := f.Apply(Alarm(origin, level, status, occurred, f.Clock.Now()))
	if len(evs) == 0 {
		f.t.Fatalf("status %d of %s produced no event", status, origin)
	}
	return evs[len(evs)-1]
}

// Pending returns the event ids waiting in sink's outbox.
func (f *Fixture) Pending(sink string) []string {
	f.t.Helper()
	es, err := f.Store.Pending(sink, 1000)
	if err != nil {
		f.t.Fatalf("pending: %v", err)
	}
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.EventID
	}
	return ids
}

// DeadLetters returns sink's dead letters.
func (f *Fixture) DeadLetters(sink string) []store.DeadLetter {
	f.t.Helper()
	dl, err := f.Store.DeadLetters(sink)
	if err != nil {
		f.t.Fatalf("dead letters: %v", err)
	}
	return dl
}

// RunDeliverer runs a Deliverer of targets on the fixture's store and clock
// until the returned stop is called (or the test ends).
func (f *Fixture) RunDeliverer(opts deliver.Options, targets ...deliver.Target) (d *deliver.Deliverer, stop func()) {
	f.t.Helper()
	opts.Clock = f.Clock
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	d, err := deliver.NewDeliverer(f.Store, targets, opts)
	if err != nil {
		f.t.Fatalf("new deliverer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				f.t.Errorf("run: %v", err)
			}
		})
	}
	f.t.Cleanup(stop)
	return d, stop
}

// Settle waits until n timers of the fake clock are pending and stay so for
// a moment: every delivery loop is asleep.
func (f *Fixture) Settle(n int) {
	f.t.Helper()
	for range 100 {
		if !f.Clock.BlockUntil(n, 5*time.Second) {
			f.t.Fatalf("the delivery loops did not go to sleep (%d timers pending, want %d)", f.Clock.Waiters(), n)
		}
		next, _ := f.Clock.NextDeadline()
		time.Sleep(5 * time.Millisecond)
		if again, _ := f.Clock.NextDeadline(); f.Clock.Waiters() >= n && again.Equal(next) {
			return
		}
	}
	f.t.Fatalf("the delivery loops never settled")
}

// DriveUntil moves the fake clock from deadline to deadline, each time the
// n delivery loops are asleep, until done reports true or the clock passes
// limit.
func (f *Fixture) DriveUntil(n int, limit time.Time, done func() bool) {
	f.t.Helper()
	for {
		f.Settle(n)
		if done() {
			return
		}
		next, ok := f.Clock.NextDeadline()
		if !ok || next.After(limit) {
			f.t.Fatalf("not done by %s (clock at %s)", limit.Format(time.RFC3339), f.Clock.Now().Format(time.RFC3339))
		}
		f.Clock.Set(next)
	}
}

// DriveTo moves the fake clock to at, from deadline to deadline, each time
// the n delivery loops are asleep, and leaves them asleep.
func (f *Fixture) DriveTo(n int, at time.Time) {
	f.t.Helper()
	for {
		f.Settle(n)
		next, ok := f.Clock.NextDeadline()
		if !ok || next.After(at) {
			f.Clock.Set(at)
			f.Settle(n)
			return
		}
		f.Clock.Set(next)
	}
}

// Delivery builds the Delivery of the first entry of sink's outbox, as the
// Deliverer would, for tests that call Send themselves.
func (f *Fixture) Delivery(sink string) notify.Delivery {
	f.t.Helper()
	es, err := f.Store.Pending(sink, 1)
	if err != nil || len(es) == 0 {
		f.t.Fatalf("pending of %s: %v, %d entries", sink, err, len(es))
	}
	ev, err := event.Unmarshal(es[0].Body)
	if err != nil {
		f.t.Fatalf("entry body: %v", err)
	}
	mem, err := f.Store.Memory(sink, es[0].OriginID)
	if err != nil {
		f.t.Fatalf("memory: %v", err)
	}
	return deliver.DeliveryOf(es[0], &ev, mem, 1)
}

// Occurred returns when the alarm of a start event occurred.
func Occurred(t testing.TB, ev event.Event) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, ev.Data.OccurredAt)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// EventIDs returns the ids of events in JSON bodies.
func EventIDs(t testing.TB, bodies [][]byte) []string {
	t.Helper()
	ids := make([]string, len(bodies))
	for i, b := range bodies {
		ev, err := event.Unmarshal(b)
		if err != nil {
			t.Fatalf("body %d: %v", i, err)
		}
		ids[i] = ev.ID
	}
	return ids
}

// Join joins event ids with spaces, the form tests compare outboxes in.
func Join(ss []string) string { return strings.Join(ss, " ") }

// LogBuffer collects log lines of every level for inspection.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns every line written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// NewLogger returns a logger of every level that writes text lines to the
// returned buffer.
func NewLogger() (*slog.Logger, *LogBuffer) {
	b := &LogBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}
