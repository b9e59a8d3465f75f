package feishu_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/feishu"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/redact"
	"github.com/relay-energy/relay/internal/redact/redacttest"
)

// failingActs fails every action with an error that quotes secrets, as a
// failure far downstream might.
type failingActs struct{ quote string }

func (a failingActs) Act(context.Context, notify.Action) (notify.ActionResult, error) {
	return notify.ActionResult{}, errors.New("store refused: " + a.quote)
}

// TestWhatTheAppSinkSendsIsNeverRedacted is the redaction boundary of app
// mode: redaction applies to what the sink logs and returns as errors,
// never to what it sends. Feishu hands out the token it issued before
// while it has 30 minutes left ("剩余有效期小于 30 分钟时，调用本接口会返回一个
// 新的 tenant_access_token": a new one only under 30 minutes), and now and
// then answers 99991663 to a valid token, after which the SDK fetches the
// token again and repeats the request. The token is a secret, and it is
// also what the repeated request must carry, as it was received; the long
// connection's URL is dialed as the endpoint answered it, on every
// connection; the App Secret goes in the bodies as it is (the fake checks
// each). Meanwhile a log line that quotes the App Secret and the token
// shows neither.
func TestWhatTheAppSinkSendsIsNeverRedacted(t *testing.T) {
	r := newAppRig(t, appEnv)
	r.send(t, sinktest.Event("a1", 1, event.Start), nil)
	tokens := r.api.Tokens()
	if len(tokens) != 1 || !slices.Contains(feishu.Redacted(r.sink), tokens[0]) {
		t.Fatalf("tokens %q, redacted %q: want one token, kept out of logs", tokens, feishu.Redacted(r.sink))
	}
	r.api.RefuseTokenOnce()
	if _, err := sinktest.SendEvent(t, r.clk, r.sink, sinktest.Event("a2", 1, event.Start), nil); err != nil {
		t.Fatalf("the token Feishu handed out again was not sent as it was: %v", err)
	}
	calls := r.api.Calls()
	if len(calls) != 3 || calls[1].Code != notifytest.FeishuTokenInvalid || calls[2].Code != 0 || len(r.api.Tokens()) != 1 {
		t.Errorf("calls %+v, tokens %q: want the second refused, then repeated with the same token", calls, r.api.Tokens())
	}

	stop := listen(t, r, failingActs{quote: "app_secret=" + appSecret + " token=" + tokens[0]})
	for n := 1; n <= 2; n++ {
		r.api.WaitConnected(n)
		r.api.PushCardAction(notifytest.FeishuClick{OpenID: clicker, Value: map[string]any{"relay": "ack", "alarm": "a1", "sink": "ops"}})
		if res := r.api.WaitResponses(n)[n-1]; res.ToastType != "error" {
			t.Errorf("a click whose action failed was answered %+v, want an error toast", res)
		}
		r.api.Drop()
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, d := range r.api.Dials() {
		if !d.Accepted {
			t.Errorf("the long connection dialed ?%s, want ?%s", d.Query, d.Want)
		}
	}
	log := r.log()
	if !strings.Contains(log, "store refused: app_secret="+redact.Mark+" token="+redact.Mark) {
		t.Errorf("the log does not show the failed action, cleaned:\n%s", log)
	}
	redacttest.AssertNoSecret(t, append(r.api.Tokens(), appSecret), map[string]string{"log": log})
}
