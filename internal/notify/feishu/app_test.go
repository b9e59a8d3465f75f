package feishu_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/feishu"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact/redacttest"
)

const (
	appID     = "cli_a1b2c3d4e5f60718"
	appSecret = "Zq8sW3eR5tY7uI9oP1aS3dF5gH7jK9lX"
	chat      = "oc_5ad11d72b830411d72b836c20"
	clicker   = "ou_7d8a6e6df7621556ce0d21922b676706"
)

var appEnv = map[string]string{"FEISHU_APP_ID": appID, "FEISHU_APP_SECRET": appSecret}

// appRig is an app sink against a fake open platform.
type appRig struct {
	api  *notifytest.FeishuApp
	clk  *clock.Fake
	sink notify.Sink
	logs *bytes.Buffer
	logM *sync.Mutex
}

type lockedBuffer struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func newAppRig(t *testing.T, env map[string]string) *appRig {
	t.Helper()
	r := &appRig{api: notifytest.NewFeishuApp(t, appID, appSecret, chat), clk: clock.NewFake(sinktest.Epoch),
		logs: &bytes.Buffer{}, logM: &sync.Mutex{}}
	opts := "app_id_env: FEISHU_APP_ID\napp_secret_env: FEISHU_APP_SECRET\nchat_id: " + chat + "\napi_url: " + r.api.URL() + "\n"
	logger := slog.New(slog.NewTextHandler(lockedBuffer{r.logM, r.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r.sink = sinktest.Build(t, feishu.Type, "ops", opts, env, sinktype.Deps{Clock: r.clk, Logger: logger})
	feishu.SetBackoff(r.sink, 5*time.Millisecond)
	return r
}

func (r *appRig) log() string {
	r.logM.Lock()
	defer r.logM.Unlock()
	return r.logs.String()
}

func (r *appRig) send(t *testing.T, ev event.Event, mem map[string]string) map[string]string {
	t.Helper()
	res, err := sinktest.SendEvent(t, r.clk, r.sink, ev, mem)
	if err != nil {
		t.Fatalf("send %s: %v", ev.ID, err)
	}
	if res.Memory == nil {
		return mem
	}
	return res.Memory
}

func ack(origin string, tr event.Transition, by string) event.Event {
	ev := sinktest.Event(origin, 1, event.Start)
	ev.Data.Transition, ev.Type, ev.ID = tr, tr.Type(), event.ID(origin, tr)
	ev.Data.Ack = &event.AckInfo{By: by, Via: "feishu", At: "2026-11-21T08:02:00.000Z"}
	return ev
}

func TestButtonsAreOnAppCardsOnly(t *testing.T) {
	// Webhook mode: a custom bot's card cannot call back, so it has none.
	hook := sinktest.Decode(t, feishu.Type, "url_env: FEISHU_URL\n", map[string]string{"FEISHU_URL": "https://open.feishu.cn/open-apis/bot/v2/hook/abc"})
	ev := sinktest.Event("a1", 1, event.Start)
	reqs, err := hook.Render(&ev)
	if err != nil || len(reqs) != 1 || strings.Contains(string(reqs[0].Body), "button") || strings.Contains(string(reqs[0].Body), "update_multi") {
		t.Fatalf("webhook rendering has buttons or is not shared-free: %v %s", err, reqs)
	}

	r := newAppRig(t, appEnv)
	mem := r.send(t, ev, nil)
	card := r.api.Card(mem[feishu.MemoryMessageID])
	if card == nil {
		t.Fatalf("no card sent as message %q", mem[feishu.MemoryMessageID])
	}
	got := notifytest.CardButtons(card)
	want := map[string]map[string]any{
		"Acknowledge":          {"relay": "ack", "alarm": "a1", "sink": "ops"},
		"Shelve 1h":            {"relay": "shelve", "alarm": "a1", "sink": "ops", "for": "1h"},
		"Shelve until cleared": {"relay": "shelve", "alarm": "a1", "sink": "ops"},
	}
	if len(got) != len(want) {
		t.Fatalf("buttons %v, want %v", got, want)
	}
	for name, v := range want {
		for k, x := range v {
			if got[name][k] != x {
				t.Errorf("button %q value %v, want %v", name, got[name], v)
			}
		}
	}
	if !strings.Contains(notifytest.CardText(card), "a1") {
		t.Errorf("card does not name the alarm:\n%s", notifytest.CardText(card))
	}
}

func TestAckAndUnackUpdateTheCardAndTheEndKeepsTheAck(t *testing.T) {
	r := newAppRig(t, appEnv)
	mem := r.send(t, sinktest.Event("a1", 1, event.Start), nil)
	id := mem[feishu.MemoryMessageID]

	mem = r.send(t, ack("a1", event.Ack, clicker), mem)
	card := r.api.Card(id)
	if b := notifytest.CardButtons(card); len(b) != 0 {
		t.Errorf("acknowledged card still has buttons %v", b)
	}
	if text := notifytest.CardText(card); !strings.Contains(text, "Acknowledged** by <at id="+clicker+"></at>") || !strings.Contains(text, "08:02") {
		t.Errorf("acknowledged card does not say who and when:\n%s", text)
	}

	mem = r.send(t, ack("a1", event.Unack, clicker), mem)
	card = r.api.Card(id)
	if b := notifytest.CardButtons(card); len(b) != 3 || strings.Contains(notifytest.CardText(card), "Acknowledged") {
		t.Errorf("after unack: buttons %v, text:\n%s", b, notifytest.CardText(card))
	}

	mem = r.send(t, ack("a1", event.Ack, clicker), mem)
	r.send(t, sinktest.Event("a1", 1, event.End), mem)
	card = r.api.Card(id)
	text := notifytest.CardText(card)
	if b := notifytest.CardButtons(card); len(b) != 0 || !strings.Contains(text, "Acknowledged") {
		t.Errorf("resolved card: buttons %v, text:\n%s", b, text)
	}
	if h, _ := card["header"].(map[string]any); h["template"] != "green" {
		t.Errorf("resolved card header %v, want green", h)
	}
	// Nothing else was sent: one card, updated in place.
	posts := 0
	for _, c := range r.api.Calls() {
		if c.Method == "POST" {
			posts++
		}
		if c.Code != 0 {
			t.Errorf("call %s %s answered %d", c.Method, c.Path, c.Code)
		}
	}
	if posts != 1 {
		t.Errorf("%d cards posted, want 1", posts)
	}
}

func TestAnAckWithoutTheStartsCardDoesNothing(t *testing.T) {
	r := newAppRig(t, appEnv)
	r.send(t, ack("a9", event.Ack, clicker), nil)
	if calls := r.api.Calls(); len(calls) != 0 {
		t.Errorf("an ack with no card made calls %v", calls)
	}
}

func TestAnExpiredTokenIsReplacedAndTheRequestRepeated(t *testing.T) {
	r := newAppRig(t, appEnv)
	r.send(t, sinktest.Event("a1", 1, event.Start), nil)
	r.api.ExpireTokens()
	r.send(t, sinktest.Event("a2", 1, event.Start), nil)
	calls := r.api.Calls()
	if len(calls) != 3 || calls[1].Code != notifytest.FeishuTokenInvalid || calls[2].Code != 0 {
		t.Errorf("calls %+v: want the second refused for its token and repeated", calls)
	}
	if n := len(r.api.Tokens()); n != 2 {
		t.Errorf("%d tokens issued, want 2", n)
	}
}

// acts records each action and answers as the core would.
type acts struct {
	mu      sync.Mutex
	got     []notify.Action
	refused string // an actor not allowed
}

func (a *acts) Act(_ context.Context, x notify.Action) (notify.ActionResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, x)
	if x.Actor.ID == a.refused {
		return notify.ActionResult{NotAllowed: true, Text: "you are not on this route's ack_by"}, nil
	}
	return notify.ActionResult{Applied: x.Alarms, Text: "Acknowledged " + x.Alarms[0]}, nil
}

func (a *acts) calls() []notify.Action {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]notify.Action{}, a.got...)
}

func listen(t *testing.T, r *appRig, a notify.Actions) (stop func() error) {
	t.Helper()
	l, ok := r.sink.(notify.Listener)
	if !ok {
		t.Fatal("an app sink is no notify.Listener")
	}
	if l.ListenKey() != "feishu-app:"+appID {
		t.Errorf("ListenKey %q", l.ListenKey())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Listen(ctx, a) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("Listen did not return 10 s after its context ended")
			return nil
		}
	}
}

func TestAStormOfClicksWithADroppedConnectionReachesActAndIsAnsweredIn3s(t *testing.T) {
	r := newAppRig(t, appEnv)
	a := &acts{refused: "ou_intruder"}
	stop := listen(t, r, a)
	r.api.WaitConnected(1)
	r.api.WaitPings(1)

	var refs, frames []string
	click := func(i int, who string) {
		v := map[string]any{"relay": "ack", "alarm": "a" + string(rune('A'+i%26)), "sink": "ops"}
		if i%3 == 1 {
			v = map[string]any{"relay": "shelve", "alarm": "s1", "sink": "ops", "for": "1h"}
		}
		ev, frame := r.api.PushCardAction(notifytest.FeishuClick{OpenID: who, Value: v, Parts: 1 + i%2})
		refs, frames = append(refs, ev), append(frames, frame)
	}
	for i := 0; i < 15; i++ {
		click(i, clicker)
	}
	r.api.WaitResponses(15)
	r.api.Drop()
	r.api.WaitConnected(2)
	for i := 15; i < 30; i++ {
		click(i, clicker)
	}
	click(30, "ou_intruder")
	res := r.api.WaitResponses(31)
	if err := stop(); err != nil {
		t.Fatalf("Listen returned %v after its context ended", err)
	}

	got := map[string]notify.Action{}
	for _, x := range a.calls() {
		got[x.Ref] = x
	}
	for i, ref := range refs {
		x, ok := got[ref]
		switch {
		case !ok:
			t.Errorf("click %d (%s) never reached Act", i, ref)
		case x.Actor.Via != "feishu" || x.Sink != "ops" || len(x.Alarms) != 1:
			t.Errorf("click %d: action %+v", i, x)
		case i%3 == 1 && (x.Kind != notify.Shelve || x.ShelveFor != time.Hour || x.Alarms[0] != "s1"):
			t.Errorf("click %d: shelve %+v", i, x)
		case i%3 != 1 && x.Kind != notify.Acknowledge:
			t.Errorf("click %d: %+v, want an ack", i, x)
		}
	}
	if got[refs[0]].Actor.ID != clicker {
		t.Errorf("actor %+v, want %s", got[refs[0]].Actor, clicker)
	}
	answers := map[string]notifytest.FeishuWSResponse{}
	for _, x := range res {
		answers[x.MessageID] = x
		if x.Code != 200 || x.Latency > 3*time.Second || x.Method != 1 || x.Service != notifytest.FeishuServiceID || x.BizRt == "" {
			t.Errorf("answer %+v: want code 200 within 3 s, the frame's method, service and biz_rt", x)
		}
	}
	last := answers[frames[30]]
	if last.ToastType != "error" || !strings.Contains(last.Toast, "ack_by") {
		t.Errorf("a refused click's toast %q %q, want an error saying why", last.ToastType, last.Toast)
	}
	if first := answers[frames[0]]; first.ToastType != "success" || first.Toast != "Acknowledged aA" {
		t.Errorf("a click's toast %q %q, want the result's text", first.ToastType, first.Toast)
	}
	if len(answers) != len(frames) {
		t.Errorf("%d frames answered of %d pushed", len(answers), len(frames))
	}
	redacttest.AssertNoSecret(t, append(append(r.api.Tokens(), appSecret), r.api.ConnectionKeys()...), map[string]string{"log": r.log()})
}

func TestRefusedCredentialsEndListenNamingTheVariables(t *testing.T) {
	r := newAppRig(t, map[string]string{"FEISHU_APP_ID": appID, "FEISHU_APP_SECRET": "wrongWrongWrongSecret0001"})
	l := r.sink.(notify.Listener)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := l.Listen(ctx, &acts{})
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Listen returned %v (context %v), want the refusal", err, ctx.Err())
	}
	for _, w := range []string{"FEISHU_APP_ID", "FEISHU_APP_SECRET", "refused"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	_, sendErr := sinktest.SendEvent(t, r.clk, r.sink, sinktest.Event("a1", 1, event.Start), nil)
	if sendErr == nil || !strings.Contains(sendErr.Error(), "FEISHU_APP_SECRET") {
		t.Errorf("send with a refused secret: %v", sendErr)
	}
	redacttest.AssertNoSecret(t, []string{"wrongWrongWrongSecret0001", appSecret}, map[string]string{
		"listen error": err.Error(), "send error": sendErr.Error(), "log": r.log()})
}

func TestAppModeRefusesWebhookKeysAndRelayVariables(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"app_id_env: FEISHU_APP_ID\napp_secret_env: FEISHU_APP_SECRET\nchat_id: oc_1\nurl_env: FEISHU_APP_ID\n", "url_env"},
		{"app_id_env: FEISHU_APP_ID\nchat_id: oc_1\n", "app_secret_env"},
		{"app_id_env: FEISHU_APP_ID\napp_secret_env: RELAY_ADMIN_TOKEN\nchat_id: oc_1\n", "RELAY_"},
	} {
		env := map[string]string{"FEISHU_APP_ID": appID, "FEISHU_APP_SECRET": appSecret, "RELAY_ADMIN_TOKEN": "x-admin-token-0000"}
		_, err := sinktest.DecodeErr(feishu.Type, c.yaml, env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("options\n%s: error %v, want one naming %s", c.yaml, err, c.want)
		}
	}
}

// The docs promise a feishu sink reminds with the start's card again: in
// app mode too, with the buttons while nobody acknowledged the alarm, and
// with who did (and no buttons) when the route reminds until cleared.
func TestAnAppReminderIsTheStartsCardAgainWithItsButtonsUntilAcknowledged(t *testing.T) {
	r := newAppRig(t, appEnv)
	start := sinktest.Event("a1", 1, event.Start)
	mem := r.send(t, start, nil)
	rem, ok := r.sink.(notify.Reminder)
	if !ok {
		t.Fatal("the app sink is no notify.Reminder: a route's repeat sends it nothing")
	}
	if _, err := sinktest.Remind(t, r.clk, rem, start, mem); err != nil {
		t.Fatal(err)
	}
	calls := r.api.Calls()
	if len(calls) != 2 || calls[1].Method != "POST" || calls[1].Code != 0 || calls[1].MessageID == mem[feishu.MemoryMessageID] {
		t.Fatalf("calls %+v, want the start and the reminder, a card of its own", calls)
	}
	if text := notifytest.CardText(calls[1].Card); !strings.Contains(text, sinktest.ReminderNote) || !strings.Contains(text, "a1") {
		t.Errorf("the reminder reads %q, want its note and the alarm", text)
	}
	if b := notifytest.CardButtons(calls[1].Card); b["Acknowledge"]["alarm"] != "a1" {
		t.Errorf("the reminder's buttons are %v, want Acknowledge of a1", b)
	}

	acked := r.send(t, ack("a1", event.Ack, clicker), mem)
	if _, err := sinktest.Remind(t, r.clk, rem, start, acked); err != nil {
		t.Fatal(err)
	}
	calls = r.api.Calls()
	last := calls[len(calls)-1].Card
	if !strings.Contains(notifytest.CardText(last), "Acknowledged") || len(notifytest.CardButtons(last)) != 0 {
		t.Errorf("a reminder after the ack reads %q with buttons %v, want who acknowledged and no buttons",
			notifytest.CardText(last), notifytest.CardButtons(last))
	}
}
