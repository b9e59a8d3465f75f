package upgradegen

// This file writes internal/relaysim/testdata/upgrade/v4/: a state file in
// schema version 4 as main wrote it (each ongoing alarm's state under its
// originId in bucket ongoing, states of format 4), written by the relay of
// commit 70d7ffc as its service wires one tenant: store, silences, rules,
// alarm management and the delivery engine with the real Slack and webhook
// sinks, on a fake clock, delivering to the fakes of that commit. It holds
// what the version-3 file holds, but some of its alarms have ids the
// upstream sends as numbers (of 3 and of 19 digits), whose keys in bucket
// ongoing version 5 changes: the acknowledged one, ongoing ones, an ended
// one, one whose start is dead with its end parked beside it, and one whose
// start is pending.
//
// Its alarms are A901 and up, or numbers, so that the simulation's own
// (A001 and up) never meet them, and it is written in the 45 minutes before
// the simulation's t0, so that every alarm still ongoing is past the urgent
// route's 10-minute escalation when a seed starts from it
// (internal/relaysim/upgrade_test.go). manifest.json says what it holds.
//
// It only compiles in a checkout of commit 70d7ffc. From the repository's
// root, write relay.db.gz, relay.db.records.1.gz and manifest.json again with
//
//	git worktree add ../relay-v4 70d7ffc
//	mkdir ../relay-v4/internal/upgradegen
//	cp internal/relaysim/testdata/upgrade/v4/genv4_test.go ../relay-v4/internal/upgradegen/
//	(cd ../relay-v4 && RELAY_GEN_UPGRADE=$PWD/out go test -count=1 -run TestGenerateUpgradeState ./internal/upgradegen/)
//	cp ../relay-v4/out/* internal/relaysim/testdata/upgrade/v4/
//	git worktree remove --force ../relay-v4

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/service"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/store"
)

// schemaVersion is the version of the layout this commit writes.
const schemaVersion = 4

// t0 is when the simulation's clock starts; the state is written in the
// three quarters of an hour before it.
var t0 = time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)

const (
	slackToken = "xoxb-relaysim-token"
	hookSecret = "whsec_cmVsYXlzaW0tc2lnbmluZy1zZWNyZXQ="
)

// rulesYAML is the simulation's default rules as this version can say them:
// everything to audit, levels 0 and 1 to the Slack channel (acknowledged by
// U1, escalated to the hook after 10 minutes), 2 and 3 to the hook.
const rulesYAML = `sinks:
  - name: pager
    type: slack
    channel: C1
    max_age: 20m0s
    text: "{{.Transition}} {{.OriginID}}"
  - name: hook
    type: webhook
    url: %s
    secret_env: SIM_HOOK_SECRET
    max_age: 20m0s
  - name: audit
    type: webhook
    url: %s
    secret_env: SIM_HOOK_SECRET
    max_age: 20m0s
    concurrency: 1
routes:
  - name: everything
    to: [audit]
    continue: true
  - name: urgent
    match: { levels: [0, 1] }
    to: [pager]
    continue: true
    repeat: 10m
    ack_by: [slack:U1]
    escalate:
      - {after: 10m0s, to: [hook]}
  - name: rest
    match: { levels: [2, 3] }
    to: [hook]
`

// The manifest: what the state file holds, for the simulation's model.
type (
	manifest struct {
		Schema      int               `json:"schema"`
		Commit      string            `json:"commit"`
		WrittenAt   time.Time         `json:"writtenAt"`
		Alarms      []mAlarm          `json:"alarms"`
		Dests       map[string]*mDest `json:"destinations"`
		Acks        []mAck            `json:"acks"`
		Escalations []mEscalation     `json:"escalations"`
	}
	mAlarm struct {
		ID        string    `json:"id"`
		Station   string    `json:"station"`
		Device    string    `json:"device"`
		Code      string    `json:"code"`
		Level     int       `json:"level"`
		Occurred  time.Time `json:"occurred"`
		Status    int       `json:"status"`
		Recovered time.Time `json:"recovered,omitzero"`
	}
	mDest struct {
		Sink string `json:"sink"`
		// Enqueued is every event enqueued for the destination, with when.
		Enqueued  []mEvent `json:"enqueued"`
		Delivered []mEvent `json:"delivered"`
		Pending   []string `json:"pending"`
		Dead      []mDead  `json:"dead"`
	}
	mEvent struct {
		ID    string    `json:"id"`
		Level int       `json:"level"`
		At    time.Time `json:"at"`
		// TS is a Slack start's message ts.
		TS string `json:"ts,omitempty"`
	}
	mDead struct {
		ID     string `json:"id"`
		Reason string `json:"reason"`
	}
	mAck struct {
		ID string    `json:"id"`
		By string    `json:"by"`
		At time.Time `json:"at"`
	}
	mEscalation struct {
		ID   string    `json:"id"`
		Step string    `json:"step"`
		At   time.Time `json:"at"`
		To   []string  `json:"to"`
	}
)

// dests maps the rules' sink names to the simulation's destinations.
var dests = map[string]string{"pager": "pager", "hook": "hook", "audit": "audit"}

type gen struct {
	t     *testing.T
	ctx   context.Context
	clk   *clock.Fake
	st    *store.Store
	rules *service.Rules
	mgr   *manage.Manager
	slack *notifytest.Slack
	hook  *notifytest.Receiver
	audit *notifytest.Receiver

	alarms map[string]*mAlarm
	order  []string
	// delivering is set while the delivery loop runs.
	delivering bool

	mu        sync.Mutex
	enqueued  map[string][]mEvent
	delivered map[string][]mEvent
}

func TestGenerateUpgradeState(t *testing.T) {
	out := os.Getenv("RELAY_GEN_UPGRADE")
	if out == "" {
		t.Skip("RELAY_GEN_UPGRADE is not set")
	}
	dir := t.TempDir()
	g := &gen{t: t, ctx: t.Context(), clk: clock.NewFake(t0.Add(-45 * time.Minute)),
		alarms: map[string]*mAlarm{}, enqueued: map[string][]mEvent{}, delivered: map[string][]mEvent{}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	g.slack = notifytest.NewSlack(t, slackToken)
	g.hook = notifytest.NewReceiver(t, hookSecret)
	g.audit = notifytest.NewReceiver(t, hookSecret)
	rulesPath := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rulesPath, []byte(fmt.Sprintf(rulesYAML, g.hook.URL(), g.audit.URL())), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "relay.db")
	var err error
	if g.st, err = store.Open(path, store.Options{Clock: g.clk, LockTimeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	sil, err := silence.Open(g.st, g.clk)
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(k string) (string, bool) {
		if k == "SIM_HOOK_SECRET" {
			return hookSecret, true
		}
		return "", false
	}
	if g.rules, err = service.LoadRules(rulesPath, lookup, log); err != nil {
		t.Fatal(err)
	}
	if g.mgr, err = manage.New(manage.Options{Store: g.st, Rules: g.rules.Current, Silences: sil, Clock: g.clk, Logger: log}); err != nil {
		t.Fatal(err)
	}
	deps := sinktype.Deps{Env: sinktype.Env{SlackToken: slackToken, SlackAPIURL: g.slack.APIURL()}, Clock: g.clk, Logger: log,
		HTTP: &http.Client{}, Limits: notify.NewLimits(g.clk), TemplateFailed: func(string, *event.Event, error) {}}
	var targets []deliver.Target
	var sinks []notify.Sink
	for _, s := range g.rules.Current().Sinks {
		sink, err := s.Config.Build(g.ctx, s.Name, deps)
		if err != nil {
			t.Fatal(err)
		}
		sinks = append(sinks, sink)
		targets = append(targets, deliver.Target{Sink: sink, MaxAge: s.MaxAge, MaxRetryAfter: s.MaxRetryAfter})
	}
	g.mgr.SetSinks(sinks)
	d, err := deliver.NewDeliverer(g.st, targets, deliver.Options{Clock: g.clk, Logger: log, Gate: g.mgr, OnReport: g.onReport})
	if err != nil {
		t.Fatal(err)
	}
	dctx, stop := context.WithCancel(g.ctx)
	done := make(chan struct{})
	go func() { _ = d.Run(dctx); close(done) }()
	g.delivering = true

	// An alarm acknowledged from the Slack channel by the person ack_by
	// names, and one not acknowledged, whose escalation step is taken.
	g.start(0, "912", 0, "BMS-02", "E20")
	g.start(0, "A913", 1, "BMS-01", "E20")
	g.at(5)
	res, err := g.mgr.Act(g.ctx, notify.Action{Kind: notify.Acknowledge, Sink: "pager", Alarms: []string{notify.AlarmRef("912")},
		Actor: notify.Actor{Via: "slack", ID: "U1"}, Ref: "gen-ack-1"})
	if err != nil || len(res.Applied) != 1 {
		t.Fatalf("acknowledging 912: %+v, %v", res, err)
	}
	g.settle()
	g.clk.Set(t0.Add(-45*time.Minute + 10*time.Minute + 30*time.Second))
	if err := g.mgr.Escalate(g.ctx); err != nil {
		t.Fatal(err)
	}
	g.settle()

	// Ongoing alarms at every level, their starts delivered; alarms that
	// ended, their ends delivered; one start a dead letter at the Slack
	// channel and one at the hook. The Slack channel refuses one message
	// (channel_not_found), the hook one request (400): both are permanent.
	g.start(11, "1185685023527438901", 0, "INV-01", "E10")
	g.start(12, "A902", 1, "INV-02", "E10")
	g.start(13, "A903", 2, "BMS-01", "E10")
	g.start(14, "904", 3, "BMS-02", "E10")
	g.start(15, "905", 0, "INV-01", "E20")
	g.start(16, "A906", 2, "BMS-01", "E20")
	g.end(17, "905", event.StatusEnded)
	g.end(18, "A906", event.StatusInvalid)
	g.start(19, "A911", 1, "INV-02", "E20")
	g.slack.Fail(notifytest.MethodPostMessage, notifytest.SlackFailure{Error: "channel_not_found"})
	g.start(20, "907", 1, "BMS-02", "E20")
	g.hook.Queue(notifytest.Answer{Status: http.StatusBadRequest})
	g.start(21, "A908", 2, "INV-01", "E10")
	// The end of the alarm whose start is dead at the Slack channel is
	// parked beside it there.
	g.end(23, "907", event.StatusEnded)
	// The relay stops; what the poller applied last is still in the
	// outboxes: two starts, and the end of an alarm whose start went out.
	stop()
	<-done
	g.delivering = false
	g.start(25, "1185685023527438909", 0, "BMS-01", "E10")
	g.start(26, "A910", 3, "BMS-02", "E10")
	g.end(27, "A911", event.StatusEnded)

	m := g.manifest()
	if err := g.st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(path + "*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, ".lock") {
			continue
		}
		gz(t, f, filepath.Join(out, filepath.Base(f)+".gz"))
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "manifest.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// at sets the clock to minute min of the state's three quarters of an hour,
// unless it is already past it.
func (g *gen) at(min int) {
	if want := t0.Add(time.Duration(min-45) * time.Minute); g.clk.Now().Before(want) {
		g.clk.Set(want)
	}
}

// apply applies a as one poll result, routed by the rules with alarm
// management observing, as the service's poller does, and delivers it.
func (g *gen) apply(a *mAlarm) {
	g.t.Helper()
	raw, _ := json.Marshal(map[string]any{"originId": a.ID, "status": a.Status, "level": a.Level})
	rec := event.Alarm{
		OriginID: a.ID, Status: a.Status, Level: a.Level, EventCode: a.Code, EventDesc: "Fault " + a.Code,
		TenantID: "T1", StationID: a.Station, StationName: "Station " + a.Station, SystemID: "SYS-" + a.Station,
		DeviceSN: a.Device, DeviceName: "Device " + a.Device, OccurredAt: a.Occurred, RecoveredAt: a.Recovered, Raw: raw,
	}
	now := g.clk.Now()
	res, err := g.st.Apply(g.ctx, store.Batch{Observed: []event.Alarm{rec}, DetectedAt: now}, func(ev *event.Event) []string {
		g.mgr.Observe(ev)
		sinks := g.rules.Route(ev)
		g.mu.Lock()
		for _, s := range sinks {
			g.enqueued[dests[s]] = append(g.enqueued[dests[s]], mEvent{ID: ev.ID, Level: ev.Data.Level, At: now})
		}
		g.mu.Unlock()
		return sinks
	})
	if err != nil {
		g.t.Fatal(err)
	}
	if len(res.Events) == 0 {
		g.t.Fatalf("%s: no event", a.ID)
	}
	g.settle()
}

func (g *gen) start(min int, id string, level int, device, code string) {
	g.at(min)
	a := &mAlarm{ID: id, Station: map[string]string{"INV-01": "S1", "INV-02": "S1", "BMS-01": "S2", "BMS-02": "S2"}[device],
		Device: device, Code: code, Level: level, Occurred: g.clk.Now().Add(-20 * time.Second), Status: event.StatusOngoing}
	g.alarms[id] = a
	g.order = append(g.order, id)
	g.apply(a)
}

func (g *gen) end(min int, id string, status int) {
	g.at(min)
	a := g.alarms[id]
	a.Status, a.Recovered = status, g.clk.Now().Add(-20*time.Second)
	g.apply(a)
}

// settle lets the delivery loop work, moving the clock a little at a time,
// until every outbox is empty (or, once the loop has stopped, at once).
func (g *gen) settle() {
	g.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for g.delivering {
		time.Sleep(20 * time.Millisecond)
		depth, err := g.st.Depth()
		if err != nil {
			g.t.Fatal(err)
		}
		busy := false
		for _, n := range depth {
			busy = busy || n > 0
		}
		if !busy {
			// The loops report a delivery just after the store recorded
			// it: let the last reports come in.
			time.Sleep(100 * time.Millisecond)
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("the outboxes were not emptied: %v", depth)
		}
		g.clk.Advance(100 * time.Millisecond)
	}
}

func (g *gen) onReport(r deliver.Report) {
	if r.Fate != deliver.Delivered {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	dest := dests[r.Sink]
	g.delivered[dest] = append(g.delivered[dest], mEvent{ID: r.Entry.EventID, Level: r.Entry.Level, At: g.clk.Now()})
}

// manifest reads back what the state holds.
func (g *gen) manifest() manifest {
	g.t.Helper()
	m := manifest{Schema: schemaVersion, Commit: "70d7ffc", WrittenAt: g.clk.Now(), Dests: map[string]*mDest{},
		Acks: []mAck{}, Escalations: []mEscalation{}}
	for _, id := range g.order {
		m.Alarms = append(m.Alarms, *g.alarms[id])
	}
	names := make([]string, 0, len(dests))
	for n := range dests {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, sink := range names {
		dest := dests[sink]
		d := &mDest{Sink: sink, Enqueued: g.enqueued[dest], Delivered: g.delivered[dest], Pending: []string{}, Dead: []mDead{}}
		for i, e := range d.Delivered {
			if !strings.HasSuffix(e.ID, ":start") || sink != "pager" {
				continue
			}
			mem, err := g.st.Memory(sink, strings.TrimSuffix(e.ID, ":start"))
			if err != nil {
				g.t.Fatal(err)
			}
			if mem["ts"] == "" || mem["channel"] != "C1" {
				g.t.Fatalf("%s at %s: memory %v", e.ID, sink, mem)
			}
			d.Delivered[i].TS = mem["ts"]
		}
		pend, err := g.st.Pending(sink, 1000)
		if err != nil {
			g.t.Fatal(err)
		}
		for _, e := range pend {
			d.Pending = append(d.Pending, e.EventID)
		}
		dead, err := g.st.DeadLetters(sink)
		if err != nil {
			g.t.Fatal(err)
		}
		for _, e := range dead {
			d.Dead = append(d.Dead, mDead{ID: e.EventID, Reason: e.Reason})
		}
		for _, e := range d.Enqueued {
			if !slices.ContainsFunc(d.Delivered, func(x mEvent) bool { return x.ID == e.ID }) &&
				!slices.Contains(d.Pending, e.ID) && !slices.ContainsFunc(d.Dead, func(x mDead) bool { return x.ID == e.ID }) {
				g.t.Fatalf("%s at %s: enqueued, but neither delivered, pending nor dead", e.ID, sink)
			}
		}
		m.Dests[dest] = d
	}
	for _, id := range g.order {
		ack, err := g.mgr.Acknowledgement(id)
		if err != nil {
			g.t.Fatal(err)
		}
		if ack.Acknowledged {
			m.Acks = append(m.Acks, mAck{ID: id, By: ack.Via + ":" + ack.By, At: *ack.At})
		}
		raw, err := g.st.Get("escalate", id)
		if err != nil {
			g.t.Fatal(err)
		}
		if raw == nil {
			continue
		}
		var es struct {
			Done map[string]time.Time `json:"done"`
		}
		if err := json.Unmarshal(raw, &es); err != nil {
			g.t.Fatal(err)
		}
		for step, at := range es.Done {
			e := mEscalation{ID: id, Step: step, At: at}
			// Where the step enqueued the start: the destinations that
			// have it though the rules did not route it there.
			for _, sink := range names {
				d := m.Dests[dests[sink]]
				start := id + ":start"
				routed := slices.ContainsFunc(d.Enqueued, func(x mEvent) bool { return x.ID == start })
				has := slices.ContainsFunc(d.Delivered, func(x mEvent) bool { return x.ID == start }) ||
					slices.Contains(d.Pending, start) || slices.ContainsFunc(d.Dead, func(x mDead) bool { return x.ID == start })
				if has && !routed {
					e.To = append(e.To, sink)
					d.Enqueued = append(d.Enqueued, mEvent{ID: start, Level: g.alarms[id].Level, At: at})
				}
			}
			m.Escalations = append(m.Escalations, e)
		}
	}
	return m
}

func gz(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	w, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
