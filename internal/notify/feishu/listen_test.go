package feishu_test

import (
	"net/url"
	"slices"
	"testing"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/feishu"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
)

// TestEveryLongConnectionDialsTheURLTheEndpointAnswered is item 8 of issue
// 36: Feishu's endpoint answers every call with the same fpid, aid and
// service_id (and a device_id, access_key and ticket of the connection),
// and the SDK dials the URL as answered (ws/client.go: connUrl, err :=
// c.getConnURL(ctx); ... ws.DefaultDialer.Dial(connUrl, nil)). relay's
// second connection dialed aid=[redacted]&…&service_id=[redacted]: the
// first one's values had joined the redaction set, and the next answer was
// scrubbed with it. The fake refuses a URL it did not hand out; each
// connection must open, ping and answer a click.
func TestEveryLongConnectionDialsTheURLTheEndpointAnswered(t *testing.T) {
	r := newAppRig(t, appEnv)
	stop := listen(t, r, &acts{})
	for n := 1; n <= 3; n++ {
		d := r.api.WaitDials(n)[n-1]
		if !d.Accepted {
			t.Fatalf("long connection %d dialed\n?%s\nwant the URL the endpoint answered:\n?%s", n, d.Query, d.Want)
		}
		r.api.WaitPings(n)
		_, frame := r.api.PushCardAction(notifytest.FeishuClick{OpenID: clicker, Value: map[string]any{"relay": "ack", "alarm": "a1", "sink": "ops"}})
		if res := r.api.WaitResponses(n)[n-1]; res.MessageID != frame || res.Conn != n || res.ToastType != "success" {
			t.Fatalf("the click on connection %d was answered %+v", n, res)
		}
		r.api.Drop()
	}
	if err := stop(); err != nil {
		t.Fatalf("Listen returned %v after its context ended", err)
	}
}

// TestOnlyTheAppsCredentialsAndTokensAreKeptOutOfLogs: what the sink keeps
// out of its logs and errors are secrets (the App Secret, the App ID read
// from a variable, the tenant_access_tokens it is issued), not the values
// of the addresses Feishu hands out, which are the endpoint's to give and
// the client's to send back as they are.
func TestOnlyTheAppsCredentialsAndTokensAreKeptOutOfLogs(t *testing.T) {
	r := newAppRig(t, appEnv)
	r.send(t, sinktest.Event("a1", 1, event.Start), nil)
	stop := listen(t, r, &acts{})
	r.api.WaitConnected(1)
	r.api.Drop()
	r.api.WaitConnected(2)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	secrets := append([]string{appSecret, appID}, r.api.Tokens()...)
	for _, v := range feishu.Redacted(r.sink) {
		if !slices.ContainsFunc(secrets, func(s string) bool { return v == s || v == url.QueryEscape(s) || v == url.PathEscape(s) }) {
			t.Errorf("the sink redacts %q, which is none of the app's credentials and tokens", v)
		}
	}
}
