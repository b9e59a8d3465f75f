package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/sethvargo/go-envconfig"
	slackapi "github.com/slack-go/slack"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/slack"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/testwait"
)

const (
	ackSlackToken = "xoxb-ack-service-token"
	ackAppToken   = "xapp-1-ack-service-token"
	ackAdminToken = "admin-ack-0123456789abcdef"
)

// ackRules post every alarm to the Slack channel C0PAGER, with buttons,
// and to the bus; U1 and U2 may acknowledge. An urgent alarm escalates to
// C0BOSS after an hour, a severe one after 10 s.
const ackRules = `sinks:
  - name: oncall
    type: slack
    channel: C0PAGER
  - name: boss
    type: slack
    channel: C0BOSS
  - name: bus
    type: nats
    subject: "alarms.{{.Transition}}"
routes:
  - name: urgent
    match: { levels: [0] }
    to: [oncall, bus]
    ack_by: [slack:U1, slack:U2]
    escalate:
      - {after: 1h, to: [boss]}
  - name: severe
    match: { levels: [1] }
    to: [oncall, bus]
    ack_by: [slack:U1, slack:U2]
    escalate:
      - {after: 10s, to: [boss]}
`

// ackService is the relay run with Slack buttons (Socket Mode) and a bus.
type ackService struct {
	t     *testing.T
	up    *sim.Server
	slack *notifytest.Slack
	sock  *notifytest.SlackSocket
	ops   string
	// stop stops the relay and returns what Run returned.
	stop func() error

	mu  sync.Mutex
	bus []string
}

// startAckService runs the relay with ackRules against the simulator, on
// a clock ten times faster than the wall clock (a 10 s escalation step
// takes a second), with the Slack fake's Socket Mode and an in-process
// NATS server.
func startAckService(t *testing.T) *ackService {
	t.Helper()
	clk := clock.NewScaled(time.Now().UTC().Truncate(time.Second), 10)
	s := &ackService{t: t, up: sim.StartTest(t, sim.Options{Clock: clk, RateLimit: 60})}
	s.slack = notifytest.NewSlack(t, ackSlackToken)
	s.sock = s.slack.SocketMode(t, ackAppToken)
	ns := natstest.StartServer(t, natstest.Config{})
	nc, err := natsgo.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sub, err := nc.Subscribe("alarms.>", func(m *natsgo.Msg) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.bus = append(s.bus, m.Header.Get("Nats-Msg-Id"))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "rules.yaml")
	writeFile(t, rulesPath, ackRules)
	appID, secret := s.up.Credentials()
	cfg, err := config.Load(context.Background(), envconfig.MapLookuper(map[string]string{
		"RELAY_BASE_URL": s.up.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": secret,
		"RELAY_RATE_LIMIT": "60", "RELAY_STATE_PATH": filepath.Join(dir, "relay.db"), "RELAY_RULES": rulesPath,
		"RELAY_SLACK_TOKEN": ackSlackToken, "RELAY_SLACK_APP_TOKEN": ackAppToken, "RELAY_SLACK_API_URL": s.slack.APIURL(),
		"RELAY_NATS_URL": ns.URL(), "RELAY_ADMIN_TOKEN": ackAdminToken,
		"RELAY_LISTEN": "127.0.0.1:0", "RELAY_SHUTDOWN_GRACE": "1s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the relay's log:\n%s", logs.String())
		}
	})
	s.ops, s.stop = startRun(t, Options{Config: cfg, Clock: clk, Console: io.Discard, Logger: NewLogger(&logs, "debug", "text", nil)})
	return s
}

// busIDs returns the ids of the events the bus received, in order.
func (s *ackService) busIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bus)
}

// started waits for the start of alarm id in channel, and returns its
// message's ts.
func (s *ackService) started(channel, id string) notifytest.SlackCall {
	s.t.Helper()
	var start notifytest.SlackCall
	testwait.For(s.t, 20*time.Second, "the start of "+id+" in "+channel, func() bool {
		for _, c := range s.slack.Calls() {
			if c.Method == notifytest.MethodPostMessage && c.Channel == channel && c.ThreadTS == "" && c.Error == "" &&
				strings.Contains(c.Text+attachmentsText(c), id) {
				start = c
				return true
			}
		}
		return false
	})
	return start
}

// click presses the button action of the message start as user.
func (s *ackService) click(start notifytest.SlackCall, user, action string) string {
	s.t.Helper()
	blockID, value, label := slackButton(start, action)
	if value == "" {
		s.t.Fatalf("the message %s has no button %s: %+v", start.TS, action, start.Attachments)
	}
	return s.sock.Click(notifytest.SlackClick{UserID: user, UserName: "name-" + user, Channel: start.Channel,
		MessageTS: start.TS, ActionID: action, BlockID: blockID, Value: value, Label: label})
}

// get sends GET path to the ops listener with the admin token and returns
// the status and the body.
func (s *ackService) get(path string) (int, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+s.ops+path, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+ackAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// getJSON decodes the answer of GET path into v, failing the test unless
// it is a 200 that decodes.
func (s *ackService) getJSON(path string, v any) {
	s.t.Helper()
	code, b := s.get(path)
	if code != http.StatusOK {
		s.t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		s.t.Fatalf("GET %s answered %s (%v)", path, b, err)
	}
}

// alarm reads GET /alarms/{id} on the ops listener, with the admin token.
func (s *ackService) alarm(id string) ackShown {
	s.t.Helper()
	var ans struct {
		Alarm *ackShown `json:"alarm"`
	}
	s.getJSON("/alarms/"+id, &ans)
	if ans.Alarm == nil {
		s.t.Fatalf("GET /alarms/%s shows no alarm", id)
	}
	return *ans.Alarm
}

// status returns the status of GET path on the ops listener, with the
// admin token.
func (s *ackService) status(path string) int {
	s.t.Helper()
	code, _ := s.get(path)
	return code
}

// ackShown is what GET /alarms/{id} shows of an alarm.
type ackShown struct {
	Acknowledged bool   `json:"acknowledged"`
	By           string `json:"by"`
	Via          string `json:"via"`
	History      []struct {
		Kind   string `json:"kind"`
		Actor  struct{ ID string }
		Result string `json:"result"`
	} `json:"history"`
}

// results lists the history as "actor result" lines.
func (a ackShown) results() []string {
	var out []string
	for _, h := range a.History {
		out = append(out, h.Actor.ID+" "+h.Kind+" "+h.Result)
	}
	return out
}

// updates counts the chat.update calls of message ts that show an
// acknowledgement, and returns the last one's text.
func (s *ackService) updates(channel, ts string) (n int, last string) {
	for _, c := range s.slack.Calls() {
		if c.Method == notifytest.MethodUpdate && c.Channel == channel && c.TS == ts && c.Error == "" {
			if text := blocksText(c); strings.Contains(text, "Acknowledged by") {
				n, last = n+1, text
			}
		}
	}
	return n, last
}

// ephemerals returns the texts of the ephemeral messages shown to user.
func (s *ackService) ephemerals(user string) []string {
	var out []string
	for _, c := range s.slack.Calls() {
		if c.Method == notifytest.MethodPostEphemeral && c.User == user && c.Error == "" {
			out = append(out, c.Text)
		}
	}
	return out
}

// TestSlackClicksThroughTheRunningService: the relay runs with a Slack
// channel with buttons and a bus, an urgent alarm of the simulator posted
// to the channel. A click of Acknowledge by a person ack_by names
// acknowledges it (the ops API shows who), the Slack message is edited to
// say so and the bus gets its ack event. The same envelope delivered again
// and a second person's click change nothing and keep the first actor;
// two people clicking another alarm at once, with the connection dropped
// in the middle of it, acknowledge it once. After Slack rotates the
// connection with a disconnect frame, a person ack_by does not name is
// told they may not, changes nothing, and the escalation step of a severe
// alarm fires when due. Every envelope is acknowledged within 3 s of its
// sending.
func TestSlackClicksThroughTheRunningService(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for a few seconds")
	}
	s := startAckService(t)
	a, err := s.up.StartAlarm(sim.AlarmSpec{Level: 0})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.up.StartAlarm(sim.AlarmSpec{Level: 0})
	if err != nil {
		t.Fatal(err)
	}
	startA, startB := s.started("C0PAGER", a), s.started("C0PAGER", b)
	testwait.For(t, 10*time.Second, "the Socket Mode connection", func() bool { n, open := s.sock.Connections(); return n == 1 && open })

	// An allowed person acknowledges A.
	first := s.click(startA, "U1", slack.ActionAck)
	testwait.For(t, 10*time.Second, "A acknowledged", func() bool { return s.alarm(a).Acknowledged })
	if got := s.alarm(a); got.By != "U1" || got.Via != "slack" {
		t.Fatalf("A: %+v, want acknowledged by U1 via slack", got)
	}
	if code := s.status("/alarms/no-such-alarm"); code != http.StatusNotFound {
		t.Fatalf("GET /alarms/no-such-alarm: %d, want 404", code)
	}
	testwait.For(t, 10*time.Second, "A's message edited and the ack on the bus", func() bool {
		n, _ := s.updates("C0PAGER", startA.TS)
		return n == 1 && slices.Contains(s.busIDs(), a+":ack")
	})
	if _, text := s.updates("C0PAGER", startA.TS); !strings.Contains(text, "Acknowledged by <@U1>") {
		t.Fatalf("A's message reads %q, want who acknowledged it", text)
	}

	// A storm: the first click's envelope delivered again, U2 on A, U1 and
	// U2 on B at once, the connection dropped in the middle of it.
	s.sock.Resend(first, "timeout")
	s.click(startA, "U2", slack.ActionAck)
	s.click(startB, "U2", slack.ActionAck)
	s.sock.Drop()
	s.click(startB, "U1", slack.ActionAck)
	s.click(startA, "U2", slack.ActionAck)
	testwait.For(t, 10*time.Second, "a second connection", func() bool { n, open := s.sock.Connections(); return n == 2 && open })
	// Slack sends again what was not acknowledged before the drop.
	s.sock.RetryUnacked("timeout")
	testwait.For(t, 10*time.Second, "every envelope acknowledged", func() bool {
		for _, e := range s.sock.Envelopes() {
			if len(e.Acks) == 0 {
				return false
			}
		}
		return true
	})
	testwait.For(t, 10*time.Second, "B acknowledged", func() bool { return s.alarm(b).Acknowledged })
	testwait.For(t, 10*time.Second, "the ephemeral answers of the clicks that changed nothing", func() bool {
		return len(s.ephemerals("U1"))+len(s.ephemerals("U2")) >= 4
	})
	if got := s.alarm(a); got.By != "U1" || !slices.Equal(got.results(), []string{"U1 ack applied"}) {
		t.Fatalf("A after the storm: %+v, want acknowledged once, by U1", got)
	}
	gotB := s.alarm(b)
	other := map[string]string{"U1": "U2", "U2": "U1"}[gotB.By]
	if other == "" || !slices.Equal(gotB.results(), []string{gotB.By + " ack applied"}) {
		t.Fatalf("B after two clicks at once: %+v, want acknowledged once, by U1 or U2", gotB)
	}
	for user, want := range map[string]string{"U1": "already acknowledged by name-U1", "U2": "already acknowledged by name-U1"} {
		if !slices.ContainsFunc(s.ephemerals(user), func(e string) bool { return strings.Contains(e, want) }) {
			t.Errorf("%s was not told %q: %q", user, want, s.ephemerals(user))
		}
	}
	if !slices.ContainsFunc(s.ephemerals(other), func(e string) bool { return strings.Contains(e, "already acknowledged by name-"+gotB.By) }) {
		t.Errorf("%s, second on B, was not told who was first: %q", other, s.ephemerals(other))
	}
	testwait.For(t, 10*time.Second, "B's ack on the bus", func() bool { return slices.Contains(s.busIDs(), b+":ack") })

	// Slack rotates the connection; a person ack_by does not name clicks on
	// a severe alarm, which escalates after 10 s.
	s.sock.Disconnect("refresh_requested")
	c, err := s.up.StartAlarm(sim.AlarmSpec{Level: 1})
	if err != nil {
		t.Fatal(err)
	}
	startC := s.started("C0PAGER", c)
	s.click(startC, "U3", slack.ActionAck)
	testwait.For(t, 10*time.Second, "a third connection", func() bool { n, open := s.sock.Connections(); return n == 3 && open })
	testwait.For(t, 10*time.Second, "U3 told not allowed", func() bool {
		return slices.ContainsFunc(s.ephemerals("U3"), func(e string) bool { return strings.Contains(e, "not allowed") })
	})
	if got := s.alarm(c); got.Acknowledged || !slices.Equal(got.results(), []string{"U3 ack not allowed"}) {
		t.Fatalf("C after U3's click: %+v, want unacknowledged, the refusal recorded", got)
	}
	escalated := s.started("C0BOSS", c)
	if !strings.Contains(escalated.Text+attachmentsText(escalated), "Escalated: unacknowledged for 10s") {
		t.Errorf("the escalated start says %q %q, want how long it waited", escalated.Text, attachmentsText(escalated))
	}
	if n, _ := s.updates("C0PAGER", startC.TS); n != 0 {
		t.Errorf("C's message was edited to show an acknowledgement nobody made")
	}

	// Once each: the acks on the bus, the edits of the messages.
	ids := s.busIDs()
	for _, id := range []string{a, b} {
		if n := countOf(ids, id+":ack"); n != 1 || slices.ContainsFunc(ids, func(e string) bool { return strings.HasPrefix(e, id+":ack.") }) {
			t.Errorf("the bus got %v: want one ack of %s", ids, id)
		}
	}
	if slices.ContainsFunc(ids, func(e string) bool { return strings.HasPrefix(e, c+":ack") }) {
		t.Errorf("the bus got an ack of C, which nobody allowed acknowledged: %v", ids)
	}
	for _, st := range []notifytest.SlackCall{startA, startB} {
		if n, _ := s.updates("C0PAGER", st.TS); n != 1 {
			t.Errorf("message %s edited %d times to show the acknowledgement, want once", st.TS, n)
		}
	}
	if opens := s.sock.Opens(); opens != 3 {
		t.Errorf("%d apps.connections.open, want 3: one per connection, each with a fresh URL", opens)
	}
	if _, reused := s.sock.Refused(); reused != 0 {
		t.Errorf("%d WebSocket requests reused a URL", reused)
	}
	ackedWithin(t, s.sock.Envelopes(), 3*time.Second)

	// The figures: A and B acknowledged, C not and escalated once.
	resp, err := http.Get("http://" + s.ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`relay_unacknowledged_alarms{level="urgent"} 0`,
		`relay_unacknowledged_alarms{level="severe"} 1`,
		`relay_unacknowledged_alarms{level="minor"} 0`,
		`relay_unacknowledged_oldest_seconds{level="urgent"} 0`,
		`relay_time_to_acknowledge_seconds_count{route="urgent"} 2`,
		`relay_escalations_total 1`,
	} {
		if !strings.Contains(string(body), "\n"+want+"\n") {
			t.Errorf("/metrics has no line %s", want)
		}
	}
	// C waits unacknowledged since it was first seen: its age, in seconds.
	if !regexp.MustCompile(`\nrelay_unacknowledged_oldest_seconds\{level="severe"\} [1-9][0-9.e+]*\n`).Match(body) {
		t.Errorf("/metrics does not say how long severe alarm C has waited:\n%s", body)
	}
}

// ackedWithin fails t unless each sending of each envelope on a connection
// that stayed open was acknowledged within limit.
func ackedWithin(t *testing.T, envs []notifytest.SocketEnvelope, limit time.Duration) {
	t.Helper()
	for _, e := range envs {
		for _, send := range e.Sends {
			if !send.ConnEnded.IsZero() && send.ConnEnded.Before(send.At.Add(limit)) {
				continue
			}
			if !slices.ContainsFunc(e.Acks, func(a notifytest.SocketAck) bool {
				return !a.At.Before(send.At) && a.At.Sub(send.At) <= limit
			}) {
				t.Errorf("envelope %s sent at %s on connection %d was not acknowledged within %v: acks %+v",
					e.ID, send.At.Format("15:04:05.000"), send.Conn, limit, e.Acks)
			}
		}
	}
}

func countOf(ids []string, id string) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// slackButton finds the button action among the blocks of a message's
// attachments, and returns its block's id, its value and its label.
func slackButton(c notifytest.SlackCall, action string) (blockID, value, label string) {
	for _, att := range c.Attachments {
		for _, bl := range att.Blocks.BlockSet {
			ab, ok := bl.(*slackapi.ActionBlock)
			if !ok || ab.Elements == nil {
				continue
			}
			for _, el := range ab.Elements.ElementSet {
				if btn, ok := el.(*slackapi.ButtonBlockElement); ok && btn.ActionID == action {
					label := ""
					if btn.Text != nil {
						label = btn.Text.Text
					}
					return ab.BlockID, btn.Value, label
				}
			}
		}
	}
	return "", "", ""
}

// blocksText is the text of the context blocks of a message's attachments:
// where the Slack sink writes who acknowledged.
func blocksText(c notifytest.SlackCall) string {
	var b strings.Builder
	for _, att := range c.Attachments {
		for _, bl := range att.Blocks.BlockSet {
			if cb, ok := bl.(*slackapi.ContextBlock); ok {
				for _, el := range cb.ContextElements.Elements {
					if tx, ok := el.(*slackapi.TextBlockObject); ok {
						fmt.Fprintln(&b, tx.Text)
					}
				}
			}
		}
	}
	return b.String()
}

const ackTelegramToken = "123456789:AAack-service-telegram-token-0123456"

// TestTelegramClickThroughTheRunningService: the relay runs with a Telegram
// chat with buttons, read by long polling getUpdates; a person ack_by does
// not name clicks Acknowledge on an urgent alarm and is answered, as an
// alert, that they may not, and nothing changes; a person it names clicks
// it: the alarm is acknowledged by them (the ops API shows it), the click
// is answered, and the message is edited to show who, with the button that
// takes it back.
func TestTelegramClickThroughTheRunningService(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for a few seconds")
	}
	const chat = -1001234567890
	up := sim.StartTest(t, sim.Options{RateLimit: 600})
	tg := notifytest.NewTelegram(t, ackTelegramToken, time.Now)
	tg.AddChat(notifytest.TelegramChat{ID: chat, Type: "supergroup", Title: "on call"})
	s := startTelegramService(t, up, fmt.Sprintf(`sinks:
  - name: oncall
    type: telegram
    token_env: TELEGRAM_TOKEN
    chat_id: "%d"
    api_url: %s
    buttons: true
routes:
  - name: all
    to: [oncall]
    ack_by: [telegram:42]
`, chat, tg.URL()))

	id, err := up.StartAlarm(sim.AlarmSpec{Level: 0})
	if err != nil {
		t.Fatal(err)
	}
	var start notifytest.TelegramMessage
	testwait.For(t, 20*time.Second, "the start of "+id+" in the chat", func() bool {
		for _, m := range tg.Messages(chat) {
			if m.ReplyTo == 0 && strings.Contains(m.Text, id) {
				start = m
				return true
			}
		}
		return false
	})
	ackData := ""
	for _, row := range start.Keyboard {
		for _, b := range row {
			if b.Text == "Acknowledge" {
				ackData = b.CallbackData
			}
		}
	}
	if ackData == "" {
		t.Fatalf("the start has no Acknowledge button: %+v", start.Keyboard)
	}
	tg.WaitPolling(t, 1)

	answered := func(qid string) (notifytest.TelegramAnswer, bool) {
		for _, a := range tg.Answers() {
			if a.CallbackQueryID == qid {
				return a, true
			}
		}
		return notifytest.TelegramAnswer{}, false
	}
	_, refused := tg.PushCallback(notifytest.TelegramUser{ID: 7, Username: "mallory", FirstName: "Mallory"}, chat, start.ID, ackData)
	testwait.For(t, 10*time.Second, "the answer to the click of 7", func() bool { _, ok := answered(refused); return ok })
	if a, _ := answered(refused); !strings.Contains(a.Text, "not allowed") || !a.ShowAlert {
		t.Fatalf("7 was answered %+v, want an alert saying not allowed", a)
	}
	if got := s.alarm(id); got.Acknowledged || !slices.Equal(got.results(), []string{"7 ack not allowed"}) {
		t.Fatalf("after 7's click: %+v, want unacknowledged, the refusal recorded", got)
	}

	_, qid := tg.PushCallback(notifytest.TelegramUser{ID: 42, Username: "alice", FirstName: "Alice"}, chat, start.ID, ackData)
	testwait.For(t, 10*time.Second, "the answer to the click of 42", func() bool { _, ok := answered(qid); return ok })
	if got := s.alarm(id); !got.Acknowledged || got.By != "42" || got.Via != "telegram" {
		t.Fatalf("after 42's click: %+v, want acknowledged by 42 via telegram", got)
	}
	testwait.For(t, 10*time.Second, "the start's message edited to show the acknowledgement", func() bool {
		for _, m := range tg.Messages(chat) {
			if m.ID == start.ID {
				return strings.Contains(m.Text, "Acknowledged by") && len(m.Keyboard) == 1 && m.Keyboard[0][0].Text == "Unacknowledge"
			}
		}
		return false
	})
}
