package notify_test

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
)

// t0 is when every test's fake clock starts.
var t0 = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

// fixture is a real store on a fake clock whose outbox entries are routed to
// a fixed set of sinks.
type fixture struct {
	t     *testing.T
	clk   *clock.Fake
	path  string
	store *store.Store
	sinks []string
}

func newFixture(t *testing.T, sinks ...string) *fixture {
	t.Helper()
	f := &fixture{t: t, clk: clock.NewFake(t0), path: filepath.Join(t.TempDir(), "relay.db"), sinks: sinks}
	f.open()
	t.Cleanup(func() {
		if f.store != nil {
			_ = f.store.Close()
		}
	})
	return f
}

func (f *fixture) open() {
	f.t.Helper()
	st, err := store.Open(f.path, store.Options{Clock: f.clk, LockTimeout: time.Second})
	if err != nil {
		f.t.Fatalf("open store: %v", err)
	}
	f.store = st
}

// reopen closes the store and opens it again, as a restarted relay does.
func (f *fixture) reopen() {
	f.t.Helper()
	if err := f.store.Close(); err != nil {
		f.t.Fatalf("close store: %v", err)
	}
	f.open()
}

// alarm returns an upstream record of alarm origin at level with status.
func alarm(origin string, level, status int, occurred, recovered time.Time) event.Alarm {
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

// apply stores records as one poll result and returns the events produced.
func (f *fixture) apply(records ...event.Alarm) []event.Event {
	f.t.Helper()
	res, err := f.store.Apply(context.Background(), store.Batch{Observed: records, DetectedAt: f.clk.Now()},
		func(*event.Event) []string { return f.sinks })
	if err != nil {
		f.t.Fatalf("apply: %v", err)
	}
	return res.Events
}

// start records alarm origin as ongoing since a minute ago.
func (f *fixture) start(origin string, level int) event.Event {
	f.t.Helper()
	evs := f.apply(alarm(origin, level, event.StatusOngoing, f.clk.Now().Add(-time.Minute), time.Time{}))
	if len(evs) != 1 {
		f.t.Fatalf("start of %s produced %d events, want 1", origin, len(evs))
	}
	return evs[0]
}

// finish records alarm origin, started at occurred, as ended (or invalid)
// now.
func (f *fixture) finish(origin string, level, status int, occurred time.Time) event.Event {
	f.t.Helper()
	evs := f.apply(alarm(origin, level, status, occurred, f.clk.Now()))
	if len(evs) == 0 {
		f.t.Fatalf("status %d of %s produced no event", status, origin)
	}
	return evs[len(evs)-1]
}

// pending returns the event ids waiting in sink's outbox.
func (f *fixture) pending(sink string) []string {
	f.t.Helper()
	es, err := f.store.Pending(sink, 1000)
	if err != nil {
		f.t.Fatalf("pending: %v", err)
	}
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.EventID
	}
	return ids
}

// deadLetters returns sink's dead letters.
func (f *fixture) deadLetters(sink string) []store.DeadLetter {
	f.t.Helper()
	dl, err := f.store.DeadLetters(sink)
	if err != nil {
		f.t.Fatalf("dead letters: %v", err)
	}
	return dl
}

// runDeliverer runs a Deliverer of targets on the fixture's store and clock
// until the returned stop is called (or the test ends).
func (f *fixture) runDeliverer(opts deliver.Options, targets ...deliver.Target) (d *deliver.Deliverer, stop func()) {
	f.t.Helper()
	opts.Clock = f.clk
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	d, err := deliver.NewDeliverer(f.store, targets, opts)
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

// settle waits until n timers of the fake clock are pending and stay so for
// a moment: every delivery loop is asleep.
func (f *fixture) settle(n int) {
	f.t.Helper()
	for range 100 {
		if !f.clk.BlockUntil(n, 5*time.Second) {
			f.t.Fatalf("the delivery loops did not go to sleep (%d timers pending, want %d)", f.clk.Waiters(), n)
		}
		next, _ := f.clk.NextDeadline()
		time.Sleep(5 * time.Millisecond)
		if again, _ := f.clk.NextDeadline(); f.clk.Waiters() >= n && again.Equal(next) {
			return
		}
	}
	f.t.Fatalf("the delivery loops never settled")
}

// driveUntil moves the fake clock from deadline to deadline, each time the
// n delivery loops are asleep, until done reports true or the clock passes
// limit.
func (f *fixture) driveUntil(n int, limit time.Time, done func() bool) {
	f.t.Helper()
	for {
		f.settle(n)
		if done() {
			return
		}
		next, ok := f.clk.NextDeadline()
		if !ok || next.After(limit) {
			f.t.Fatalf("not done by %s (clock at %s)", limit.Format(time.RFC3339), f.clk.Now().Format(time.RFC3339))
		}
		f.clk.Set(next)
	}
}

// driveTo moves the fake clock to at, from deadline to deadline, each time
// the n delivery loops are asleep, and leaves them asleep.
func (f *fixture) driveTo(n int, at time.Time) {
	f.t.Helper()
	for {
		f.settle(n)
		next, ok := f.clk.NextDeadline()
		if !ok || next.After(at) {
			f.clk.Set(at)
			f.settle(n)
			return
		}
		f.clk.Set(next)
	}
}

// logBuffer collects log lines of every level for inspection.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// eventIDs returns the ids of events in JSON bodies.
func eventIDs(t *testing.T, bodies [][]byte) []string {
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

func join(ss []string) string { return strings.Join(ss, " ") }

// delivery builds the Delivery of the first entry of sink's outbox, as the
// Deliverer would, for tests that call Send themselves.
func delivery(t *testing.T, f *fixture, sink string) notify.Delivery {
	t.Helper()
	es, err := f.store.Pending(sink, 1)
	if err != nil || len(es) == 0 {
		t.Fatalf("pending of %s: %v, %d entries", sink, err, len(es))
	}
	ev, err := event.Unmarshal(es[0].Body)
	if err != nil {
		t.Fatalf("entry body: %v", err)
	}
	mem, err := f.store.Memory(sink, es[0].OriginID)
	if err != nil {
		t.Fatalf("memory: %v", err)
	}
	return notify.Delivery{EventID: es[0].EventID, OriginID: es[0].OriginID, Level: es[0].Level, Body: es[0].Body,
		EnqueuedAt: es[0].EnqueuedAt, Event: &ev, Memory: mem, Attempt: 1}
}
