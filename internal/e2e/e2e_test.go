package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/notify/console"
	natssink "github.com/relay-energy/relay/internal/notify/nats"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// e2eRules routes to all four sink types, as docs/design.md §7 shows:
// everything to the bus and the console, urgent and severe alarms to Slack
// and the webhook, and the starts of the others to the webhook.
const e2eRules = `sinks:
  - name: bus
    type: nats
    subject: "energy.alarms.{{.TenantID}}.{{.StationID}}.{{.Level}}.{{.Transition}}"
    jetstream: true
    create_stream: RELAY_E2E
  - name: oncall
    type: slack
    channel: C0E2E
  - name: ops
    type: webhook
    url: %s
    secret_env: E2E_OPS_WEBHOOK_SECRET
  - name: console
    type: console
routes:
  - name: everything-to-bus
    to: [bus, console]
    continue: true
  - name: urgent
    match: { levels: [0, 1] }
    to: [oncall, ops]
  - name: the-rest
    match: { levels: [2, 3], transitions: [start] }
    to: [ops]
`

// e2eRoutes is what e2eRules sends an event to, written out independently of
// the route package. The rules decide where a start goes; its end and
// invalid go wherever it went (the delivery ledger), so "the-rest"'s
// transitions: [start] keeps nothing from ops.
func e2eRoutes(level int, _ string) []string {
	sinks := []string{"bus", "console"}
	if level <= 1 {
		sinks = append(sinks, "oncall")
	}
	return append(sinks, "ops")
}

// fate is what happens to a scenario alarm after it started.
type fate int

const (
	staysOngoing fate = iota
	ends
	becomesInvalid
	// flashes starts and ends between two polls: it is never seen ongoing.
	flashes
)

// TestEndToEnd runs the relay binary against the simulator, NATS with
// JetStream, a fake Slack and a signed-webhook receiver, drives alarms of
// every level through start, end and invalid, and checks every delivery of
// every sink, the ops endpoints, and a clean SIGTERM stop.
func TestEndToEnd(t *testing.T) {
	skipShort(t)
	const rate = 600 // requests per minute: one slot is 100ms
	s := startSim(t, sim.Options{Seed: 6, RateLimit: rate, AppID: "e2e-app", AppSecret: newSecret(t, "app-")})
	ns := natstest.StartServer(t, natstest.Config{})
	slackToken := newSecret(t, "xoxb-")
	slack := notifytest.NewSlack(t, slackToken)
	hookSecret := newSecret(t, "whsec_")
	hook := notifytest.NewReceiver(t, hookSecret)
	hook.CheckTimestamps(time.Now)

	dir := t.TempDir()
	env := relayEnv(s, rate, dir, writeRules(t, dir, fmt.Sprintf(e2eRules, hook.URL())))
	env["RELAY_NATS_URL"] = ns.URL()
	env["RELAY_SLACK_TOKEN"] = slackToken
	env["RELAY_SLACK_API_URL"] = slack.APIURL()
	env["E2E_OPS_WEBHOOK_SECRET"] = hookSecret

	scenario := []struct {
		name string
		// before starts the alarm before the relay's first run: the
		// bootstrap (RELAY_BOOTSTRAP=notify) sends its start.
		before bool
		level  int
		fate   fate
	}{
		{name: "severe, ongoing at the first run, ends", before: true, level: 1, fate: ends},
		{name: "urgent ends", level: 0, fate: ends},
		{name: "severe becomes invalid", level: 1, fate: becomesInvalid},
		{name: "major ends", level: 2, fate: ends},
		{name: "minor stays ongoing", level: 3, fate: staysOngoing},
		{name: "minor ends", level: 3, fate: ends},
		{name: "urgent starts and ends between two polls", level: 0, fate: flashes},
	}
	ids := make([]string, len(scenario))
	for i, sc := range scenario {
		if sc.before {
			id, err := s.StartAlarm(sim.AlarmSpec{Level: sc.level})
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = id
		}
	}

	p := startRelay(t, "relay", env)
	ops := p.opsAddr(15 * time.Second)
	waitReady(t, p, ops, 15*time.Second)
	// /readyz answered 200 above; /healthz says the process is alive.
	if code, body, err := httpGet("http://" + ops + "/healthz"); err != nil || code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Fatalf("GET /healthz: HTTP %d %q, %v; want 200 ok", code, body, err)
	}

	// Alarms start; once the relay has published every start, the relay has
	// seen them ongoing, and their ends and the flash follow.
	for i, sc := range scenario {
		if sc.before || sc.fate == flashes {
			continue
		}
		id, err := s.StartAlarm(sim.AlarmSpec{Level: sc.level})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	bus := newStreamReader(t, ns.URL(), "RELAY_E2E")
	waitFor(t, p, 20*time.Second, "every start in JetStream", func() error {
		msgs, err := bus.all()
		if err != nil {
			return err
		}
		var want []string
		for i, sc := range scenario {
			if sc.fate != flashes {
				want = append(want, ids[i]+":start")
			}
		}
		return diffIDs(idsOf(msgs), want)
	})
	for i, sc := range scenario {
		var err error
		switch sc.fate {
		case ends:
			err = s.EndAlarm(ids[i], time.Time{})
		case becomesInvalid:
			err = s.InvalidateAlarm(ids[i], time.Time{})
		case flashes:
			// Visible from StartAt and ended at StartAt: no answer ever
			// shows it ongoing; only the sweep finds it.
			at := time.Now().Add(200 * time.Millisecond)
			ids[i], err = s.Schedule(sim.Scheduled{
				Alarm:   sim.AlarmSpec{Level: sc.level, OccurredAt: at.Add(-3 * time.Second)},
				StartAt: at, EndAt: at,
			})
		}
		if err != nil {
			t.Fatalf("%s: %v", sc.name, err)
		}
	}

	// Wait for every sink to have everything, then check it in detail.
	wantEvents := 0
	for _, sc := range scenario {
		wantEvents++
		if sc.fate != staysOngoing {
			wantEvents++
		}
	}
	var alarms map[string]sim.Alarm
	var want []string
	waitFor(t, p, 20*time.Second, "the flash alarm to start and end in the simulator", func() error {
		alarms, want = expectedEvents(s, ids)
		if len(want) != wantEvents {
			return fmt.Errorf("simulator implies %d events, want %d", len(want), wantEvents)
		}
		return nil
	})
	wantBy := map[string][]string{}
	for _, id := range want {
		originID, tr := eventOf(id)
		for _, sink := range e2eRoutes(alarms[originID].Level, tr) {
			wantBy[sink] = append(wantBy[sink], id)
		}
	}
	waitFor(t, p, 30*time.Second, "every sink to receive its events", func() error {
		msgs, err := bus.all()
		if err != nil {
			return err
		}
		if err := diffIDs(idsOf(msgs), wantBy["bus"]); err != nil {
			return fmt.Errorf("bus: %w", err)
		}
		if err := diffIDs(acceptedIDs(hook), wantBy["ops"]); err != nil {
			return fmt.Errorf("ops webhook: %w", err)
		}
		if err := diffIDs(slackEventIDs(slack.Calls(), alarms), wantBy["oncall"]); err != nil {
			return fmt.Errorf("oncall slack: %w", err)
		}
		if n, want := len(p.stdout.lines()), len(wantBy["console"]); n < want {
			return fmt.Errorf("console: %d lines, want %d", n, want)
		}
		return nil
	})

	msgs, err := bus.all()
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string][]byte{}
	for _, m := range msgs {
		bodies[m.msgID()] = m.Data
	}

	t.Run("jetstream", func(t *testing.T) {
		checkStream(t, msgs, alarms, wantBy["bus"])
		for _, m := range msgs {
			originID, tr := eventOf(m.msgID())
			a := alarms[originID]
			subject := fmt.Sprintf("energy.alarms.%s.%s.%d.%s", a.TenantID, a.StationID, a.Level, tr)
			if m.Subject != subject {
				t.Errorf("%s published on %s, want %s", m.msgID(), m.Subject, subject)
			}
			if got := m.Header.Get(natssink.HeaderType); got != "energy.alarm."+tr {
				t.Errorf("%s: header %s = %q, want energy.alarm.%s", m.msgID(), natssink.HeaderType, got, tr)
			}
			if got := m.Header.Get(natssink.HeaderLevel); got != fmt.Sprint(a.Level) {
				t.Errorf("%s: header %s = %q, want %d", m.msgID(), natssink.HeaderLevel, got, a.Level)
			}
		}
	})
	t.Run("webhook", func(t *testing.T) {
		checkWebhook(t, hook, bodies, wantBy["ops"], true)
	})
	t.Run("slack", func(t *testing.T) {
		checkSlack(t, slack, slackToken, "C0E2E", ids, alarms, wantBy["oncall"])
	})
	t.Run("console", func(t *testing.T) {
		var lines []string
		for _, id := range wantBy["console"] {
			ev, err := event.Unmarshal(bodies[id])
			if err != nil {
				t.Fatal(err)
			}
			if ev.Data.Transition == event.Start {
				// Alarm management offers the command that acknowledges
				// it, on a line of its own.
				ev.Data.AckCommand = manage.AckCommand(ev.Data.OriginID)
			}
			lines = append(lines, strings.Split(strings.TrimSuffix(console.Text(&ev), "\n"), "\n")...)
		}
		got := p.stdout.lines()
		slices.Sort(got)
		slices.Sort(lines)
		if !slices.Equal(got, lines) {
			t.Errorf("stdout lines:\n%s\nwant exactly the console lines:\n%s", strings.Join(got, "\n"), strings.Join(lines, "\n"))
		}
		for _, id := range ids {
			checkLineOrder(t, p.stdout.lines(), id)
		}
	})
	t.Run("metrics", func(t *testing.T) {
		checkE2EMetrics(t, p, ops, want, wantBy, ids, alarms)
	})

	code, took := p.terminate(20 * time.Second)
	if code != 0 {
		t.Errorf("relay exited with code %d after SIGTERM, want 0", code)
	}
	if took > 10*time.Second {
		t.Errorf("relay took %s to exit after SIGTERM, more than RELAY_SHUTDOWN_GRACE=10s", took)
	}
	t.Logf("relay exited %d, %s after SIGTERM", code, took.Round(time.Millisecond))
	checkStopped(t, p)
	checkStore(t, env["RELAY_STATE_PATH"], []string{"bus", "oncall", "ops", "console"})
	checkNoSecrets(t, "relay stderr", p.stderr.String(), env["RELAY_APP_SECRET"], slackToken, hookSecret)
	checkNoSecrets(t, "relay stdout", p.stdout.String(), env["RELAY_APP_SECRET"], slackToken, hookSecret)
}

// checkStream checks a stream's messages: each expected event id exactly
// once, nothing else, each body a correct event of its alarm, and for one
// alarm the start stored before its end.
func checkStream(t *testing.T, msgs []streamMsg, alarms map[string]sim.Alarm, want []string) {
	t.Helper()
	counts := idsOf(msgs)
	if err := diffIDs(counts, want); err != nil {
		t.Errorf("stream: %v", err)
	}
	dups := 0
	for id, n := range counts {
		if n > 1 {
			dups++
			if dups <= 5 {
				t.Errorf("stream holds %s %d times, want once", id, n)
			}
		}
	}
	if dups > 0 {
		t.Errorf("stream holds %d event ids more than once", dups)
	}
	startSeq := map[string]uint64{}
	bad := 0
	for _, m := range msgs {
		originID, tr := eventOf(m.msgID())
		a, ok := alarms[originID]
		if !ok {
			continue
		}
		if err := checkEvent(m.Data, a, tr); err != nil {
			bad++
			if bad <= 5 {
				t.Errorf("stream message %d (%s): %v\n%s", m.Seq, m.msgID(), err, m.Data)
			}
		}
		if tr == "start" {
			startSeq[originID] = m.Seq
		} else if s, ok := startSeq[originID]; !ok || s > m.Seq {
			t.Errorf("stream: %s stored at sequence %d before its start", m.msgID(), m.Seq)
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d stream messages are not correct events", bad, len(msgs))
	}
}

// acceptedIDs counts the event ids a receiver accepted (answered 2xx).
func acceptedIDs(r *notifytest.Receiver) map[string]int {
	ids := map[string]int{}
	for _, q := range r.Requests() {
		if q.Status >= 200 && q.Status < 300 {
			ids[q.Header.Get("Webhook-Id")]++
		}
	}
	return ids
}

// checkWebhook checks what a receiver got: every request signed and
// verified, the routed events accepted (exactly once when once is set) with
// the stream's exact bytes, and for one alarm no attempt at its end before
// its start was accepted.
// checkStreamAndWebhook reads the whole stream, checks it holds each of want
// exactly once as the simulator's alarms imply, and checks that the webhook
// received wantHook with the same bodies (each exactly once when once is set,
// at least once otherwise). It returns the stream's bodies by event id.
func checkStreamAndWebhook(t *testing.T, bus *streamReader, alarms map[string]sim.Alarm, want []string,
	hook *notifytest.Receiver, wantHook []string, once bool) map[string][]byte {
	t.Helper()
	msgs, err := bus.all()
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, msgs, alarms, want)
	bodies := map[string][]byte{}
	for _, m := range msgs {
		bodies[m.msgID()] = m.Data
	}
	checkWebhook(t, hook, bodies, wantHook, once)
	return bodies
}

func checkWebhook(t *testing.T, r *notifytest.Receiver, bodies map[string][]byte, want []string, once bool) {
	t.Helper()
	counts := acceptedIDs(r)
	if err := diffIDs(counts, want); err != nil {
		t.Errorf("webhook: %v", err)
	}
	startAccepted := map[string]bool{}
	for i, q := range r.Requests() {
		id := q.Header.Get("Webhook-Id")
		if !q.Verified {
			t.Errorf("webhook request %d (%s): signature not verified: %s", i, id, q.Reject)
			continue
		}
		if ct := q.Header.Get("Content-Type"); ct != "application/cloudevents+json" {
			t.Errorf("webhook request %d (%s): Content-Type %q, want application/cloudevents+json", i, id, ct)
		}
		if b, ok := bodies[id]; !ok || string(b) != string(q.Body) {
			t.Errorf("webhook request %d (%s): body differs from the JetStream message:\n%s\n%s", i, id, q.Body, b)
		}
		originID, tr := eventOf(id)
		switch {
		case tr == "start" && q.Status >= 200 && q.Status < 300:
			startAccepted[originID] = true
		case tr != "start" && !startAccepted[originID]:
			t.Errorf("webhook request %d: %s attempted before its start was accepted", i, id)
		}
	}
	if once {
		for id, n := range counts {
			if n > 1 {
				t.Errorf("webhook accepted %s %d times, want once", id, n)
			}
		}
	}
}

// slackMentions reports whether a Slack call names the alarm id, in its text
// or in its attachments (the start message's footer names it).
func slackMentions(c notifytest.SlackCall, id string) bool {
	if strings.Contains(c.Text, id) {
		return true
	}
	for _, a := range c.Attachments {
		if strings.Contains(a.Footer, id) || strings.Contains(a.Title, id) || strings.Contains(a.Fallback, id) {
			return true
		}
	}
	return false
}

// slackEventIDs returns the events the fake Slack shows as posted: a start
// for a top-level post naming an alarm, and the end or invalid (by the
// alarm's final status in the simulator) for a reply in its start's thread.
func slackEventIDs(calls []notifytest.SlackCall, alarms map[string]sim.Alarm) map[string]int {
	out := map[string]int{}
	startTS := map[string]string{} // ts -> alarm
	for _, c := range calls {
		if c.Method != notifytest.MethodPostMessage || c.Error != "" || c.ThreadTS != "" {
			continue
		}
		for id := range alarms {
			if slackMentions(c, id) {
				out[id+":start"]++
				startTS[c.TS] = id
			}
		}
	}
	for _, c := range calls {
		if c.Method != notifytest.MethodPostMessage || c.Error != "" || c.ThreadTS == "" {
			continue
		}
		id, ok := startTS[c.ThreadTS]
		if !ok {
			continue
		}
		switch alarms[id].Status {
		case sim.StatusEnded:
			out[id+":end"]++
		case sim.StatusInvalid:
			out[id+":invalid"]++
		default:
			out[id+":reply-to-an-ongoing-alarm"]++
		}
	}
	return out
}

// checkSlack checks the fake Slack: for every routed alarm one start message,
// and for an ended one a reply in the start's thread and the start message
// updated in place; nothing for alarms not routed; every call with the token
// and answered ok.
func checkSlack(t *testing.T, s *notifytest.Slack, token, channel string, ids []string, alarms map[string]sim.Alarm, want []string) {
	t.Helper()
	calls := s.Calls()
	for i, c := range calls {
		if c.Token != token || c.Error != "" || c.Channel != channel {
			t.Errorf("slack call %d %s: channel %q, error %q, right token %v; want %s, ok, the bot token",
				i, c.Method, c.Channel, c.Error, c.Token == token, channel)
		}
	}
	routed := map[string]bool{}
	for _, id := range want {
		originID, _ := eventOf(id)
		routed[originID] = true
	}
	for _, id := range ids {
		var starts, replies, updates []notifytest.SlackCall
		for _, c := range calls {
			if c.Method == notifytest.MethodPostMessage && c.ThreadTS == "" && slackMentions(c, id) {
				starts = append(starts, c)
			}
		}
		if !routed[id] {
			if len(starts) > 0 {
				t.Errorf("alarm %s (level %d) is not routed to Slack but was posted", id, alarms[id].Level)
			}
			continue
		}
		if len(starts) != 1 {
			t.Errorf("alarm %s: %d start messages, want 1", id, len(starts))
			continue
		}
		ts := starts[0].TS
		for _, c := range calls {
			switch {
			case c.Method == notifytest.MethodPostMessage && c.ThreadTS == ts:
				replies = append(replies, c)
			case c.Method == notifytest.MethodUpdate && c.TS == ts:
				updates = append(updates, c)
			}
		}
		if alarms[id].Status == sim.StatusOngoing {
			if len(replies) != 0 || len(updates) != 0 {
				t.Errorf("ongoing alarm %s: %d replies and %d updates, want none", id, len(replies), len(updates))
			}
			continue
		}
		if len(replies) != 1 {
			t.Errorf("ended alarm %s: %d replies in the start's thread (thread_ts %s), want 1", id, len(replies), ts)
		}
		if len(updates) == 0 {
			t.Errorf("ended alarm %s: start message %s never updated", id, ts)
			continue
		}
		msg, ok := s.Message(channel, ts)
		if !ok {
			t.Errorf("ended alarm %s: start message %s gone", id, ts)
			continue
		}
		if last := updates[len(updates)-1]; msg.Text != last.Text || msg.Text == starts[0].Text {
			t.Errorf("ended alarm %s: start message reads %q, want the update %q (it was %q)", id, msg.Text, last.Text, starts[0].Text)
		}
	}
}

// checkLineOrder checks that an alarm's start line comes before its end or
// invalid line on the console.
func checkLineOrder(t *testing.T, lines []string, originID string) {
	t.Helper()
	tag := "(alarm " + originID + ")"
	sawStart := false
	for _, l := range lines {
		if !strings.HasSuffix(l, tag) {
			continue
		}
		if strings.Contains(l, " START ") {
			sawStart = true
		} else if !sawStart {
			t.Errorf("console: line %q before the alarm's start", l)
		}
	}
}

// checkE2EMetrics checks that /metrics has the families of docs/design.md §11
// and that their values tell the scenario's story.
func checkE2EMetrics(t *testing.T, p *relayProc, ops string, events []string, wantBy map[string][]string, ids []string, alarms map[string]sim.Alarm) {
	transitions := map[string]float64{}
	for _, id := range events {
		_, tr := eventOf(id)
		transitions[tr]++
	}
	ongoing := map[int]float64{}
	for _, id := range ids {
		if alarms[id].Status == sim.StatusOngoing {
			ongoing[alarms[id].Level]++
		}
	}
	type want struct {
		name   string
		labels map[string]string
		check  func(v float64) bool
		// what says what check wants, for the failure message.
		what string
	}
	exactly := func(n float64) func(float64) bool { return func(v float64) bool { return v == n } }
	positive := func(v float64) bool { return v > 0 }
	wants := []want{
		{"relay_upstream_requests_total", map[string]string{"endpoint": "getAlarmList", "outcome": "ok"}, positive, "> 0"},
		{"relay_upstream_budget_in_use", nil, positive, "> 0"},
		{"relay_upstream_rate_limit_signals_total", nil, exactly(0), "0"},
		{"relay_alarm_detection_latency_seconds", map[string]string{"transition": "start"}, positive, "> 0 samples"},
		{"relay_alarm_detection_latency_seconds", map[string]string{"transition": "end"}, positive, "> 0 samples"},
	}
	for _, tr := range []string{"start", "end", "invalid"} {
		wants = append(wants, want{"relay_alarm_transitions_total", map[string]string{"transition": tr, "inferred": "false"},
			exactly(transitions[tr]), fmt.Sprint(transitions[tr])})
	}
	for level := range 4 {
		wants = append(wants, want{"relay_alarms_ongoing", map[string]string{"level": fmt.Sprint(level)},
			exactly(ongoing[level]), fmt.Sprint(ongoing[level])})
	}
	for _, sink := range []string{"bus", "oncall", "ops", "console"} {
		n := float64(len(wantBy[sink]))
		sl := map[string]string{"sink": sink}
		wants = append(wants,
			want{"relay_deliveries_total", map[string]string{"sink": sink, "outcome": "delivered"}, exactly(n), fmt.Sprint(n)},
			want{"relay_deliveries_total", map[string]string{"sink": sink, "outcome": "failed"}, exactly(0), "0"},
			want{"relay_delivery_latency_seconds", sl, exactly(n), fmt.Sprint(n, " samples")},
			want{"relay_outbox_depth", sl, exactly(0), "0"},
			want{"relay_dead_letters_total", sl, exactly(0), "0"},
		)
	}
	// Gauges follow the next poll and the next delivery: wait for them.
	for _, w := range wants {
		t.Run(w.name+labelText(w.labels), func(t *testing.T) {
			waitFor(t, p, 10*time.Second, w.name+" "+w.what, func() error {
				fams, err := scrape(ops)
				if err != nil {
					return err
				}
				v, ok := metricValue(fams, w.name, w.labels)
				if !ok {
					return fmt.Errorf("no series %s%s", w.name, labelText(w.labels))
				}
				if w.check != nil && !w.check(v) {
					return fmt.Errorf("%s%s = %v, want %s", w.name, labelText(w.labels), v, w.what)
				}
				return nil
			})
		})
	}
}

func labelText(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	var parts []string
	for k, v := range labels {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}
