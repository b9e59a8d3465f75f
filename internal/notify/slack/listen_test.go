package slack_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/slack"
	"github.com/relay-energy/relay/internal/redact/redacttest"
	"github.com/relay-energy/relay/internal/testwait"
)

// actions answers as relay's alarm management does, in the small: the
// first actor of an alarm is recorded and later ones are told who was
// first (idempotent, so a retried envelope changes nothing twice); actors
// not in allowed (when set) may not act. It records every call, the Ref of
// each call that changed an alarm, and how many calls it held at once.
type actions struct {
	allowed map[string]bool
	// hold, when set, is waited for before each answer.
	hold chan struct{}
	// slow, when set, is how long each answer takes.
	slow time.Duration

	mu      sync.Mutex
	calls   []notify.Action
	first   map[string]string
	applied map[string][]string
	busy    int
	maxBusy int
}

func (a *actions) Act(ctx context.Context, act notify.Action) (notify.ActionResult, error) {
	a.mu.Lock()
	a.busy++
	a.maxBusy = max(a.maxBusy, a.busy)
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.busy--
		a.mu.Unlock()
	}()
	if a.hold != nil {
		select {
		case <-a.hold:
		case <-ctx.Done():
			return notify.ActionResult{}, ctx.Err()
		}
	}
	if a.slow > 0 {
		select {
		case <-time.After(a.slow):
		case <-ctx.Done():
			return notify.ActionResult{}, ctx.Err()
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, act)
	if a.allowed != nil && !a.allowed[act.Actor.ID] {
		return notify.ActionResult{NotAllowed: true, Text: "You may not acknowledge these alarms (ack_by)."}, nil
	}
	if a.first == nil {
		a.first = map[string]string{}
	}
	res := notify.ActionResult{Unchanged: map[string]string{}}
	for _, alarm := range act.Alarms {
		key := string(act.Kind) + " " + alarm
		if who, ok := a.first[key]; ok {
			res.Unchanged[alarm] = "already acknowledged by <@" + who + ">"
			continue
		}
		a.first[key] = act.Actor.ID
		if a.applied == nil {
			a.applied = map[string][]string{}
		}
		a.applied[alarm] = append(a.applied[alarm], act.Ref)
		res.Applied = append(res.Applied, alarm)
	}
	res.Text = fmt.Sprintf("%d acknowledged", len(res.Applied))
	if len(res.Applied) == 0 {
		res.Text = "Already acknowledged."
	}
	return res, nil
}

func (a *actions) Calls() []notify.Action {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls)
}

// Applied returns the Refs of the calls that changed alarm.
func (a *actions) Applied(alarm string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.applied[alarm])
}

// MostAtOnce is the most calls Act held at once.
func (a *actions) MostAtOnce() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.maxBusy
}

// app is a fake Slack with Socket Mode and a listening sink.
type app struct {
	api  *notifytest.Slack
	sock *notifytest.SlackSocket
	sink *slack.Sink
	log  *sinktest.LogBuffer
	// done receives what Listen returned.
	done chan error
}

// listen starts Listen on a sink of the app whose app-level token is
// listenWith (the fake takes appToken), and stops it when the test ends.
func listen(t *testing.T, acts notify.Actions, listenWith string, prepare func(*notifytest.Slack, *notifytest.SlackSocket)) *app {
	t.Helper()
	a := &app{api: notifytest.NewSlack(t, token), log: &sinktest.LogBuffer{}, done: make(chan error, 1)}
	a.sock = a.api.SocketMode(t, appToken)
	if prepare != nil {
		prepare(a.api, a.sock)
	}
	s, err := slack.New(slack.Config{Name: "oncall", Channel: "C0ALERTS", Token: token, AppToken: listenWith,
		APIURL: a.api.APIURL(), Clock: clock.NewFake(sinktest.Epoch),
		Logger: slog.New(slog.NewTextHandler(a.log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	a.sink = s
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the listener's log:\n%s", a.log.String())
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { a.done <- s.Listen(ctx, acts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-a.done:
			if err != nil {
				t.Errorf("Listen returned %v when its context ended, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Listen did not return within 10s of its context's end")
		}
	})
	return a
}

// connected waits for the n-th connection to be open.
func (a *app) connected(t *testing.T, n int) {
	t.Helper()
	testwait.For(t, 10*time.Second, fmt.Sprintf("connection %d", n), func() bool {
		got, open := a.sock.Connections()
		return got >= n && open
	})
}

// click presses button action of alarm's start message, as user.
func (a *app) click(user, action, alarm string) string {
	return a.sock.Click(notifytest.SlackClick{UserID: user, UserName: "name-" + user, Channel: "C0ALERTS",
		MessageTS: "1700000000.000001", ActionID: action, BlockID: "relay/oncall", Value: notify.AlarmRef(alarm), Label: "Acknowledge"})
}

// TestEnvelopeIsAcknowledgedBeforeActionsAnswers: Slack's Socket Mode
// guide: "Your app must respond to each envelope with an acknowledgement
// ... within 3 seconds" (LIBRARIES.md, slack-go's Client.Ack: "This tells
// Slack that we have received the request denoted by the envelope ID");
// an interactive envelope not acknowledged in time shows the person an
// error. So the acknowledgement cannot wait for alarm management: here
// Act is held until the fake has the acknowledgement.
func TestEnvelopeIsAcknowledgedBeforeActionsAnswers(t *testing.T) {
	acts := &actions{hold: make(chan struct{})}
	a := listen(t, acts, appToken, nil)
	a.connected(t, 1)
	id := a.click("U1", slack.ActionAck, "a1")
	testwait.For(t, 5*time.Second, "the acknowledgement of "+id+" while Act is held", func() bool {
		envs := a.sock.Envelopes()
		return len(envs) == 1 && len(envs[0].Acks) == 1
	})
	close(acts.hold)
	testwait.For(t, 5*time.Second, "the click to reach Act", func() bool { return len(acts.Calls()) == 1 })
	got := acts.Calls()[0]
	want := notify.Action{Kind: notify.Acknowledge, Sink: "oncall", Alarms: []string{"a1"}, Ref: id,
		Actor: notify.Actor{Via: "slack", ID: "U1", Name: "name-U1"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Act got %+v\nwant %+v", got, want)
	}
	for _, c := range a.api.Calls() {
		if c.Method == notifytest.MethodPostEphemeral {
			t.Fatalf("an applied ack was answered with an ephemeral %q; the start's edit shows it", c.Text)
		}
	}
}

func TestButtonsMapToActions(t *testing.T) {
	acts := &actions{}
	a := listen(t, acts, appToken, nil)
	a.connected(t, 1)
	a.click("U1", slack.ActionShelve1h, "a1")
	a.click("U1", slack.ActionShelveCleared, "a2")
	a.click("U1", slack.ActionUnack, "a3")
	a.sock.Click(notifytest.SlackClick{UserID: "U1", Channel: "C0ALERTS", ActionID: slack.ActionAckDigest, BlockID: "relay/storm", Value: "dg-7"})
	a.sock.Click(notifytest.SlackClick{UserID: "U1", Channel: "C0ALERTS", ActionID: "someone.elses", BlockID: "theirs", Value: "x"})
	testwait.For(t, 5*time.Second, "the four clicks of relay's buttons", func() bool { return len(acts.Calls()) == 4 })
	testwait.For(t, 5*time.Second, "every envelope acknowledged, relay's or not", func() bool {
		for _, e := range a.sock.Envelopes() {
			if len(e.Acks) == 0 {
				return false
			}
		}
		return true
	})
	got := map[string]notify.Action{}
	for _, c := range acts.Calls() {
		got[c.Ref] = c
	}
	for id, want := range map[string]notify.Action{
		"env-0001": {Kind: notify.Shelve, ShelveFor: time.Hour, Alarms: []string{"a1"}, Sink: "oncall"},
		"env-0002": {Kind: notify.Shelve, Alarms: []string{"a2"}, Sink: "oncall"},
		"env-0003": {Kind: notify.Unacknowledge, Alarms: []string{"a3"}, Sink: "oncall"},
		"env-0004": {Kind: notify.Acknowledge, Digest: "dg-7", Sink: "storm"},
	} {
		g := got[id]
		if g.Kind != want.Kind || g.ShelveFor != want.ShelveFor || fmt.Sprint(g.Alarms) != fmt.Sprint(want.Alarms) || g.Digest != want.Digest || g.Sink != want.Sink {
			t.Errorf("%s: Act got %+v, want %+v", id, g, want)
		}
	}
	// A shelve edits no message: the person is told what it did; so is one
	// whose click changed nothing (the digest's, which this Actions does
	// not know).
	testwait.For(t, 5*time.Second, "the answers to the two shelves and the digest", func() bool { return len(ephemerals(a.api)) == 3 })
	for _, e := range ephemerals(a.api) {
		if e.User != "U1" || e.Channel != "C0ALERTS" {
			t.Fatalf("ephemeral %+v, want it to U1 in the channel", e)
		}
	}
}

func ephemerals(api *notifytest.Slack) []notifytest.SlackCall {
	var out []notifytest.SlackCall
	for _, c := range api.Calls() {
		if c.Method == notifytest.MethodPostEphemeral {
			out = append(out, c)
		}
	}
	return out
}

func TestNotAllowedIsAnsweredToThatPersonAlone(t *testing.T) {
	acts := &actions{allowed: map[string]bool{"U1": true}}
	a := listen(t, acts, appToken, func(api *notifytest.Slack, _ *notifytest.SlackSocket) {
		api.SetUserGroups(slackapi.UserGroup{ID: "S1", Handle: "oncall", Users: []string{"U2", "U9"}},
			slackapi.UserGroup{ID: "S2", Handle: "ops", Users: []string{"U2"}})
	})
	a.connected(t, 1)
	a.click("U1", slack.ActionAck, "a1")
	a.click("U2", slack.ActionAck, "a2")
	a.click("U1", slack.ActionAck, "a1") // a second person's click on an acknowledged alarm: told so
	testwait.For(t, 5*time.Second, "two answers", func() bool { return len(ephemerals(a.api)) >= 2 })
	testwait.For(t, 5*time.Second, "three calls", func() bool { return len(acts.Calls()) == 3 })
	eph := ephemerals(a.api)
	slices.SortFunc(eph, func(x, y notifytest.SlackCall) int { return strings.Compare(x.User, y.User) })
	if len(eph) != 2 || eph[0].User != "U1" || eph[1].User != "U2" || eph[1].Channel != "C0ALERTS" {
		t.Fatalf("ephemerals %+v, want one to U1 (already acknowledged) and one to U2 (not allowed), in the channel", eph)
	}
	if eph[1].Text != "You may not acknowledge these alarms (ack_by)." || eph[0].Text != "Already acknowledged." {
		t.Fatalf("ephemeral texts %q, %q; want Actions' texts", eph[1].Text, eph[0].Text)
	}
	for _, c := range a.api.Calls() {
		if c.Method == notifytest.MethodPostMessage || c.Method == notifytest.MethodUpdate {
			t.Fatalf("the listener posted %s %q to the channel, want replies to each person alone", c.Method, c.Text)
		}
	}
	for _, c := range acts.Calls() {
		if c.Actor.ID == "U2" && fmt.Sprint(c.Actor.Groups) != "[S1 S2]" {
			t.Fatalf("U2's groups %v, want S1 and S2 from usergroups.list", c.Actor.Groups)
		}
	}
	var lists int
	for _, c := range a.api.Calls() {
		if c.Method == notifytest.MethodUserGroups {
			lists++
		}
	}
	if lists != 1 {
		t.Fatalf("usergroups.list read %d times for three clicks, want once (cached)", lists)
	}
}

func TestUserGroupsUnreadableLeaveGroupsEmptyAndAreLoggedOnce(t *testing.T) {
	acts := &actions{}
	a := listen(t, acts, appToken, func(api *notifytest.Slack, _ *notifytest.SlackSocket) {
		api.Fail(notifytest.MethodUserGroups, notifytest.SlackFailure{Error: "missing_scope"})
	})
	a.connected(t, 1)
	a.click("U1", slack.ActionAck, "a1")
	testwait.For(t, 5*time.Second, "the click", func() bool { return len(acts.Calls()) == 1 })
	if g := acts.Calls()[0].Actor.Groups; len(g) != 0 {
		t.Fatalf("groups %v, want none", g)
	}
	if n := strings.Count(a.log.String(), "usergroups:read"); n != 1 {
		t.Fatalf("the missing scope is logged %d times, want once:\n%s", n, a.log.String())
	}
}

// TestClickStormSurvivesADropAndARotation is the storm: 200 clicks while
// the connection is dropped (a network failure: no close frame) and later
// rotated by Slack. Slack's Socket Mode guide: "Connections refresh
// regularly. You should be ready to receive and connect to new WebSocket
// URLs as quickly as possible to maintain service"; before a refresh Slack
// sends {"type": "disconnect", "reason": "refresh_requested"} (the
// reasons slack-go's socketmode.Request names: "warning" and others; all
// are handled alike, as @slack/socket-mode does since node-slack-sdk PR
// 1762). Every URL of apps.connections.open opens one connection, so each
// reconnection must ask for a new one. Every envelope sent on a connection
// that lived on must be acknowledged within 3 seconds of being sent; the
// envelopes lost with the dropped connection are sent again, and every
// click reaches Actions, a resent one possibly twice, with the same Ref.
func TestClickStormSurvivesADropAndARotation(t *testing.T) {
	acts := &actions{}
	a := listen(t, acts, appToken, nil)
	a.connected(t, 1)
	ids := make([]string, 200)
	for i := range ids {
		switch i {
		case 70:
			a.sock.Drop()
		case 140:
			a.connected(t, 2)
			a.sock.Disconnect("refresh_requested")
		}
		ids[i] = a.click(fmt.Sprintf("U%d", i%7), slack.ActionAck, fmt.Sprintf("alarm-%03d", i))
	}
	a.connected(t, 3)
	// Slack resends what it had no acknowledgement of; a few acknowledged
	// ones are sent again too, as when an acknowledgement came late.
	for _, i := range []int{3, 99, 180} {
		a.sock.Resend(ids[i], "timeout")
	}
	for round := 0; ; round++ {
		testwait.For(t, 10*time.Second, "every envelope acknowledged or lost with its connection", func() bool {
			for _, e := range a.sock.Envelopes() {
				last := e.Sends[len(e.Sends)-1]
				if !acked(e, last) && last.ConnEnded.IsZero() {
					return false
				}
			}
			return a.sock.Pending() == 0
		})
		if a.sock.RetryUnacked("timeout") == 0 {
			break
		}
		if round == 5 {
			t.Fatal("envelopes still unacknowledged after 5 resends")
		}
	}

	opens := a.sock.Opens()
	conns, _ := a.sock.Connections()
	if _, reused := a.sock.Refused(); reused != 0 || conns < 3 || opens != conns {
		t.Fatalf("%d apps.connections.open, %d connections, %d reused URLs; want a fresh URL for each of at least 3 connections", opens, conns, reused)
	}
	var resent int
	for _, e := range a.sock.Envelopes() {
		resent += len(e.Sends) - 1
		for _, s := range e.Sends {
			if !s.ConnEnded.IsZero() && s.ConnEnded.Sub(s.At) < 3*time.Second {
				continue // lost with its connection: resent
			}
			if !acked(e, s) {
				t.Errorf("envelope %s sent at %s on connection %d (retry %d) was not acknowledged within 3s: acks %+v",
					e.ID, s.At.Format(time.StampMilli), s.Conn, s.RetryAttempt, e.Acks)
			}
		}
	}
	t.Logf("%d connections, each from its own apps.connections.open; %d envelopes sent again", conns, resent)
	testwait.For(t, 10*time.Second, "every click at Act", func() bool {
		seen := map[string]bool{}
		for _, c := range acts.Calls() {
			seen[c.Alarms[0]] = true
		}
		return len(seen) == len(ids)
	})
	refs := map[string]map[string]bool{}
	calls := acts.Calls()
	for _, c := range calls {
		if refs[c.Alarms[0]] == nil {
			refs[c.Alarms[0]] = map[string]bool{}
		}
		refs[c.Alarms[0]][c.Ref] = true
	}
	for i, id := range ids {
		alarm := fmt.Sprintf("alarm-%03d", i)
		if len(refs[alarm]) != 1 || !refs[alarm][id] {
			t.Errorf("%s reached Act with refs %v, want only its envelope %s", alarm, refs[alarm], id)
		}
	}
	if len(calls) < len(ids)+3 {
		t.Errorf("%d calls of Act, want the 200 clicks and the 3 resent acknowledged envelopes again", len(calls))
	}
}

// acked reports whether e was acknowledged within 3 s after s.
func acked(e notifytest.SocketEnvelope, s notifytest.SocketSend) bool {
	for _, ack := range e.Acks {
		if !ack.At.Before(s.At) && ack.At.Sub(s.At) <= 3*time.Second {
			return true
		}
	}
	return false
}

// TestRefusedAppTokenStopsListenNamingTheVariable: apps.connections.open
// answers invalid_auth for a token it does not know (Slack's reference of
// the method); socketmode stops reconnecting on it, and Listen says which
// variable and which scope to fix, without the token.
func TestRefusedAppTokenStopsListenNamingTheVariable(t *testing.T) {
	a := &app{api: notifytest.NewSlack(t, token), log: &sinktest.LogBuffer{}}
	a.sock = a.api.SocketMode(t, appToken)
	wrong := "xapp-1-A0FAKE-9999999999-wrongwrongwrong"
	s, err := slack.New(slack.Config{Name: "oncall", Channel: "C0ALERTS", Token: token, AppToken: wrong, APIURL: a.api.APIURL(),
		Logger: slog.New(slog.NewTextHandler(a.log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = s.Listen(ctx, &actions{})
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Listen with a refused token returned %v after %v, want an error at once", err, ctx.Err())
	}
	for _, want := range []string{"RELAY_SLACK_APP_TOKEN", "connections:write", "invalid_auth"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
	redacttest.AssertNoSecret(t, []string{wrong, token}, map[string]string{"error": err.Error(), "log": a.log.String()})
}

// TestNoSecretInListenersErrorsOrLogs: Slack answers that echo the tokens
// (a refused apps.connections.open, a failed usergroups.list and
// chat.postEphemeral) leave neither token in the log.
func TestNoSecretInListenersErrorsOrLogs(t *testing.T) {
	echo := "bad token " + token + " / " + appToken
	acts := &actions{allowed: map[string]bool{}}
	a := listen(t, acts, appToken, func(api *notifytest.Slack, _ *notifytest.SlackSocket) {
		api.Fail(notifytest.MethodConnectionsOpen, notifytest.SlackFailure{Error: echo})
		api.Fail(notifytest.MethodUserGroups, notifytest.SlackFailure{Error: echo})
		api.Fail(notifytest.MethodPostEphemeral, notifytest.SlackFailure{Error: echo})
	})
	a.connected(t, 1)
	a.click("U1", slack.ActionAck, "a1")
	testwait.For(t, 5*time.Second, "the failed answer logged", func() bool {
		return strings.Contains(a.log.String(), "could not answer a click")
	})
	log := a.log.String()
	for _, want := range []string{"could not connect", "usergroups:read"} {
		if !strings.Contains(log, want) {
			t.Fatalf("log does not note %q:\n%s", want, log)
		}
	}
	redacttest.AssertNoSecret(t, []string{token, appToken}, map[string]string{"log": log})
}
