package manage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/testwait"
)

// t0 is when every scenario's fake clock starts: a Monday, 08:00 UTC.
var t0 = time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)

const slackToken = "xoxb-scenario-token"

// scenario is relay's delivery side on a fake clock: a real store, the
// rules, alarm management, and the sinks of the rules delivering to a fake
// Slack (channel C1) and an embedded NATS server (a subscription counts
// what the bus gets). Alarms are fed as poll results, as the poller does.
// restart stops everything and starts it again on the same file.
type scenario struct {
	t     *testing.T
	clk   *clock.Fake
	path  string
	rules *route.Rules
	slack *notifytest.Slack
	nats  *natstest.Server
	conn  *natsgo.Conn
	// silences are the relay's silences, opened on the store at each start.
	silences *silence.Silences
	// fence is alarm management's fence from the next start on (nil: none).
	fence notify.Fence
	// backend, when set, gives each start its store's backend (a
	// replica's JetStream state), opened on a file of its own as a replica
	// taking the tenant over does.
	backend func() store.Backend
	// metrics are alarm management's metrics from the next start on (nil:
	// none).
	metrics *manage.Metrics

	mu  sync.Mutex
	bus []string // event ids the bus subscription received, in order

	store *store.Store
	mgr   *manage.Manager
	stop  func()
	// quiet tells when no goroutine of the relay is running or runnable.
	quiet testwait.Quiet
	reps  chan deliver.Report
}

// rulesHead declares the sinks every scenario has; a scenario adds routes
// and the keys of alarm management.
const rulesHead = `
sinks:
  - name: people
    type: slack
    channel: C1
  - name: bus
    type: nats
    subject: "alarms.{{.Transition}}"
`

func newScenario(t *testing.T, rulesBody string) *scenario {
	t.Helper()
	return newScenarioRules(t, rulesHead+rulesBody)
}

// newScenarioRules is newScenario with a whole rules file, whose sinks must
// be those of rulesHead with options of their own, and may be more.
func newScenarioRules(t *testing.T, rulesFile string) *scenario {
	t.Helper()
	return newScenarioWith(t, clock.NewFake(t0), rulesFile, nil)
}

// newScenarioWith is newScenarioRules on clk, with the variables env that
// the rules read (the secrets of more sinks).
func newScenarioWith(t *testing.T, clk *clock.Fake, rulesFile string, env map[string]string) *scenario {
	t.Helper()
	return newScenarioOn(t, clk, rulesFile, env, nil)
}

// newScenarioOn is newScenarioWith whose store keeps its state in the
// backend that backend returns at each start (nil: the local file alone).
func newScenarioOn(t *testing.T, clk *clock.Fake, rulesFile string, env map[string]string, backend func() store.Backend) *scenario {
	t.Helper()
	s := &scenario{t: t, clk: clk, path: filepath.Join(t.TempDir(), "relay.db"), backend: backend}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	rules, err := route.Parse("rules.yaml", []byte(rulesFile), lookup)
	if err != nil {
		t.Fatalf("rules: %v", err)
	}
	s.rules = rules
	s.slack = notifytest.NewSlack(t, slackToken)
	s.slack.Stamp(s.clk.Now)
	s.nats = natstest.StartServer(t, natstest.Config{})
	conn, err := natsgo.Connect(s.nats.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	s.conn = conn
	sub, err := conn.Subscribe("alarms.>", func(m *natsgo.Msg) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.bus = append(s.bus, m.Header.Get("Nats-Msg-Id"))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	s.start()
	t.Cleanup(s.halt)
	return s
}

// start opens the store and runs alarm management and the deliveries.
func (s *scenario) start() {
	t := s.t
	t.Helper()
	path, opts := s.path, store.Options{Clock: s.clk, LockTimeout: time.Second}
	if s.backend != nil {
		path, opts.Backend = filepath.Join(t.TempDir(), "relay.db"), s.backend()
	}
	st, err := store.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.store = st
	if s.silences, err = silence.Open(st, s.clk); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	s.mgr, err = manage.New(manage.Options{Store: st, Rules: func() *route.Rules { return s.rules }, Silences: s.silences,
		Clock: s.clk, Logger: log, Fence: s.fence, Shelf: s.silences, Metrics: s.metrics})
	if err != nil {
		t.Fatal(err)
	}
	deps := sinktype.Deps{
		Env:   sinktype.Env{SlackToken: slackToken, SlackAPIURL: s.slack.APIURL()},
		Clock: s.clk, Logger: log, Limits: notify.NewLimits(s.clk),
		NATS: func(context.Context) (*natsgo.Conn, error) { return natsgo.Connect(s.nats.URL()) },
	}
	var targets []deliver.Target
	var sinks []notify.Sink
	for _, rs := range s.rules.Sinks {
		sink, err := rs.Config.Build(context.Background(), rs.Name, deps)
		if err != nil {
			t.Fatalf("sink %s: %v", rs.Name, err)
		}
		targets = append(targets, deliver.Target{Sink: sink, MaxAge: rs.MaxAge, MaxRetryAfter: rs.MaxRetryAfter})
		sinks = append(sinks, sink)
	}
	s.mgr.SetSinks(sinks)
	s.reps = make(chan deliver.Report, 100000)
	d, err := deliver.NewDeliverer(st, targets, deliver.Options{Clock: s.clk, Logger: log, Gate: s.mgr, Poll: time.Hour,
		OnReport: func(r deliver.Report) { s.reps <- r }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	s.stop = func() { cancel(); <-done }
}

// halt stops the deliveries and closes the store.
func (s *scenario) halt() {
	if s.stop == nil {
		return
	}
	s.stop()
	s.stop = nil
	_ = s.store.Close()
}

// restart is a relay restarting: everything in memory is gone.
func (s *scenario) restart() {
	s.t.Helper()
	s.halt()
	s.start()
}

// record is an upstream record of alarm id at level on device at station,
// ongoing since occurred (status 1), or over at recovered.
type record struct {
	id, station, device, code string
	level                     int
	occurred, recovered       time.Time
	status                    int
}

func (r record) alarm() event.Alarm {
	raw, _ := json.Marshal(map[string]any{"originId": r.id, "status": r.status})
	return event.Alarm{
		OriginID: r.id, Status: r.status, Level: r.level, EventCode: r.code, EventDesc: "Fault " + r.code,
		TenantID: "T1", StationID: r.station, StationName: "Station " + r.station, SystemID: "SYS-" + r.station,
		DeviceSN: r.device, DeviceName: "Device " + r.device, OccurredAt: r.occurred, RecoveredAt: r.recovered, Raw: raw,
	}
}

// starts is an ongoing record, since now.
func (s *scenario) starts(id, station, device, code string, level int) record {
	return record{id: id, station: station, device: device, code: code, level: level, occurred: s.clk.Now(), status: event.StatusOngoing}
}

// ends is r over now.
func (s *scenario) ends(r record) record {
	r.status, r.recovered = event.StatusEnded, s.clk.Now()
	return r
}

// apply feeds records as one poll result, routed by the rules with alarm
// management observing, as the service's router does.
func (s *scenario) apply(recs ...record) {
	s.t.Helper()
	alarms := make([]event.Alarm, len(recs))
	for i, r := range recs {
		alarms[i] = r.alarm()
	}
	_, err := s.store.Apply(context.Background(), store.Batch{Observed: alarms, DetectedAt: s.clk.Now()},
		func(ev *event.Event) []string {
			s.mgr.Observe(ev)
			return s.rules.SinksFor(ev)
		})
	if err != nil {
		s.t.Fatal(err)
	}
}

// tick runs alarm management's clock work, as the service does every
// minute, and lets the loops settle.
func (s *scenario) tick() {
	s.t.Helper()
	if err := s.tickErr(); err != nil {
		s.t.Fatalf("tick: %v", err)
	}
}

// tickErr is tick returning Tick's error.
// Tick paces its messages on the fake clock, so the clock is moved (timer by
// timer, at most a minute) while it runs.
func (s *scenario) tickErr() error {
	s.t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.mgr.Tick(context.Background()) }()
	limit := s.clk.Now().Add(time.Minute)
	for {
		select {
		case err := <-done:
			s.settle()
			return err
		case <-time.After(20 * time.Millisecond):
		}
		if next, ok := s.clk.NextDeadline(); ok && !next.After(limit) && s.clk.Waiters() > len(s.rules.Sinks) {
			s.clk.Set(next)
		}
	}
}

// settle waits until the delivery loops have nothing left to do now: every
// outbox is empty or waiting, and they are asleep on the fake clock. A
// loop woken (by the store, after an apply) but not yet run still counts a
// timer of the clock: so no goroutine may be running or runnable either,
// as well as the loops' timers being pending and the earliest unchanged
// for a moment.
func (s *scenario) settle() {
	s.t.Helper()
	n := len(s.rules.Sinks)
	want := func() int { return n }
	for range 200 {
		// A storm of 700 under the race detector on a loaded machine can
		// keep a loop busy for more than 10 s.
		if err := s.quiet.Settle(s.clk, want, 30*time.Second); err != nil {
			s.t.Fatalf("the delivery loops did not go to sleep: %v", err)
		}
		before, _ := s.clk.NextDeadline()
		time.Sleep(10 * time.Millisecond)
		if after, _ := s.clk.NextDeadline(); s.quiet.Busy() == 0 && s.clk.Waiters() >= n && after.Equal(before) {
			return
		}
	}
	s.t.Fatal("the delivery loops never settled")
}

// advance moves the fake clock forward by d, timer by timer, letting the
// loops work at each step.
func (s *scenario) advance(d time.Duration) {
	s.t.Helper()
	end := s.clk.Now().Add(d)
	for {
		s.settle()
		next, ok := s.clk.NextDeadline()
		if !ok || next.After(end) {
			s.clk.Set(end)
			s.settle()
			return
		}
		s.clk.Set(next)
	}
}

// slackLines returns what the fake Slack received, one line per call:
// "post <text>", "reply <text>" or "update <text>", with each message's
// text (the attachment's title when the text is empty).
func (s *scenario) slackLines() []string {
	var out []string
	for _, c := range s.slack.Calls() {
		if c.Error != "" || c.Status >= 300 {
			continue
		}
		text := c.Text
		switch {
		case c.Method == notifytest.MethodUpdate:
			out = append(out, "update "+text)
		case c.ThreadTS != "":
			out = append(out, "reply "+text)
		default:
			out = append(out, "post "+text)
		}
	}
	return out
}

// topLevel counts the top-level messages Slack received.
func (s *scenario) topLevel() int {
	n := 0
	for _, l := range s.slackLines() {
		if strings.HasPrefix(l, "post ") {
			n++
		}
	}
	return n
}

// busIDs returns the event ids the bus received.
func (s *scenario) busIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bus...)
}

// suppressed returns "event id: reason" for each entry withheld from sink.
func (s *scenario) suppressed(sink string) []string {
	s.t.Helper()
	ds, err := s.store.Suppressed(sink)
	if err != nil {
		s.t.Fatal(err)
	}
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%s: %s", d.EventID, d.Reason))
	}
	return out
}

// mentions reports whether some line of lines holds every word.
func mentions(lines []string, words ...string) bool {
	for _, l := range lines {
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			return true
		}
	}
	return false
}

// dump is lines for a failure message.
func dump(lines []string) string { return "\n\t" + strings.Join(lines, "\n\t") }
