package telegram_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/notify/telegram"
	"github.com/relay-energy/relay/internal/redact/redacttest"
)

// TestDefaultAPIURLIsTheBotAPI: without api_url a sink calls the Bot API in
// the form Telegram documents ("Making requests"): "All queries to the
// Telegram Bot API must be served over HTTPS and need to be presented in this
// form:
//
//	https://api.telegram.org/bot<token>/METHOD_NAME"
func TestDefaultAPIURLIsTheBotAPI(t *testing.T) {
	const documented = "https://api.telegram.org/bot<token>/METHOD_NAME"
	const tok = "123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11"
	rec, client := sinktest.NewRecorder(`{"ok":true,"result":{"message_id":42}}`)
	clk := clock.NewFake(sinktest.Epoch)
	s := sinktest.Build(t, telegram.Type, "oncall", "token_env: TG_TOKEN\nchat_id: '-1001234567890'\n",
		map[string]string{"TG_TOKEN": tok}, sinktype.Deps{Clock: clk, HTTP: client})
	if _, err := sinktest.SendEvent(t, clk, s, sinktest.Event("a1", 0, event.Start), nil); err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer("<token>", tok, "METHOD_NAME", "sendMessage").Replace(documented)
	if got := rec.First(t); got != want {
		t.Fatalf("the start went to %s, want %s", got, want)
	}
}

// botAPI is a transport that stands for api.telegram.org in
// TestTheListenerSpeaksTheBotAPIAsDocumented: it records each call and
// answers the first getUpdates with update, later ones not until they are
// cancelled, and answerCallbackQuery with true.
type botAPI struct {
	update string
	// polling is closed when the second poll waits.
	polling chan struct{}
	mu      sync.Mutex
	calls   []string
	polls   int
}

func (b *botAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(req.Body)
	req.Body.Close()
	b.mu.Lock()
	b.calls = append(b.calls, req.URL.String()+" "+string(body))
	answer := `{"ok":true,"result":true}`
	if strings.HasSuffix(req.URL.Path, "/getUpdates") {
		b.polls++
		answer = `{"ok":true,"result":[` + b.update + `]}`
		if b.polls > 1 {
			if b.polls == 2 {
				close(b.polling)
			}
			b.mu.Unlock()
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
	}
	b.mu.Unlock()
	return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(strings.NewReader(answer)), Request: req}, nil
}

// TestTheListenerSpeaksTheBotAPIAsDocumented checks the listener's requests
// and its reading of an update against the Bot API's documentation, not
// against our fake:
//
//   - getUpdates(offset, limit, timeout, allowed_updates): "offset ...
//     Must be greater by one than the highest among the identifiers of
//     previously received updates", "timeout: Timeout in seconds for long
//     polling", "allowed_updates: A JSON-serialized list of the update types
//     you want your bot to receive. For example, specify ["message",
//     "edited_channel_post", "callback_query"]";
//   - Update.update_id and Update.callback_query; CallbackQuery: id, from
//     (User: id, is_bot, first_name, username), message, chat_instance,
//     data ("Data associated with the callback button");
//   - answerCallbackQuery(callback_query_id, text, show_alert).
func TestTheListenerSpeaksTheBotAPIAsDocumented(t *testing.T) {
	const tok = "123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11"
	// An update as the documentation's objects describe it.
	api := &botAPI{polling: make(chan struct{}), update: `{"update_id":873654001,"callback_query":{"id":"4382bfdwdsb323b2d9","from":{"id":1111111,"is_bot":false,` +
		`"first_name":"Ana","username":"ana_ops"},"message":{"message_id":42,"date":1764000000,"chat":{"id":-1001234567890,"type":"supergroup"},` +
		`"text":"alarm"},"chat_instance":"-5214925433111234567","data":"s1h:1862223400000000001"}}`}
	s := sinktest.Build(t, telegram.Type, "oncall", "token_env: TG_TOKEN\nchat_id: '-1001234567890'\nbuttons: true\n",
		map[string]string{"TG_TOKEN": tok}, sinktype.Deps{HTTP: &http.Client{Transport: api}})
	acted := make(chan notify.Action, 1)
	acts := actsFunc(func(_ context.Context, a notify.Action) (notify.ActionResult, error) {
		acted <- a
		return notify.ActionResult{Text: "Shelved for 1h", NotAllowed: true}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.(notify.Listener).Listen(ctx, acts) }()
	a := <-acted
	want := notify.Action{Kind: notify.Shelve, Sink: "oncall", Alarms: []string{"1862223400000000001"}, ShelveFor: time.Hour,
		Actor: notify.Actor{Via: "telegram", ID: "1111111", Name: "ana_ops"}, Ref: "4382bfdwdsb323b2d9"}
	if fmt.Sprint(a) != fmt.Sprint(want) {
		t.Errorf("the click reached the core as\n%+v, want\n%+v", a, want)
	}
	<-api.polling
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	base := "https://api.telegram.org/bot" + tok + "/"
	wantCalls := []string{
		base + `getUpdates {"timeout":30,"allowed_updates":["callback_query"]}`,
		base + `answerCallbackQuery {"callback_query_id":"4382bfdwdsb323b2d9","text":"Shelved for 1h","show_alert":true}`,
		base + `getUpdates {"offset":873654002,"timeout":30,"allowed_updates":["callback_query"]}`,
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if strings.Join(api.calls, "\n") != strings.Join(wantCalls, "\n") {
		t.Errorf("the listener called\n%s\nwant\n%s", strings.Join(api.calls, "\n"), strings.Join(wantCalls, "\n"))
	}
}

// actsFunc is a notify.Actions of a function.
type actsFunc func(ctx context.Context, a notify.Action) (notify.ActionResult, error)

func (f actsFunc) Act(ctx context.Context, a notify.Action) (notify.ActionResult, error) {
	return f(ctx, a)
}

// conflicts is a transport that stands for api.telegram.org answering
// getUpdates with the 409s in turn, then with polls that wait until they
// are cancelled; answered is closed once every 409 went out.
type conflicts struct {
	answers  []string
	answered chan struct{}
	mu       sync.Mutex
	polls    int
}

func (c *conflicts) RoundTrip(req *http.Request) (*http.Response, error) {
	req.Body.Close()
	c.mu.Lock()
	c.polls++
	n := c.polls
	c.mu.Unlock()
	if n > len(c.answers) {
		if n == len(c.answers)+1 {
			close(c.answered)
		}
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return &http.Response{StatusCode: http.StatusConflict, Status: "409 Conflict", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(strings.NewReader(c.answers[n-1])), Request: req}, nil
}

// TestTheListenerTellsTelegramsTwoConflictsApart: Telegram answers
// getUpdates 409 in two words, as Bot API clients match them (aiogram's
// ConflictError and CantGetUpdates, and the issues of every client): "Conflict:
// terminated by other getUpdates request; make sure that only one bot
// instance is running" when another program polls the bot, and "Conflict:
// can't use getUpdates method while webhook is active; use deleteWebhook to
// delete the webhook first" when the bot has a webhook. The listener logs
// what to do about each, and polls again.
func TestTheListenerTellsTelegramsTwoConflictsApart(t *testing.T) {
	const tok = "123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11"
	api := &conflicts{answered: make(chan struct{}), answers: []string{
		`{"ok":false,"error_code":409,"description":"Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}`,
		`{"ok":false,"error_code":409,"description":"Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"}`,
	}}
	clk := clock.NewFake(sinktest.Epoch)
	logs := &sinktest.LogBuffer{}
	s := sinktest.Build(t, telegram.Type, "oncall", "token_env: TG_TOKEN\nchat_id: '-1001234567890'\nbuttons: true\n",
		map[string]string{"TG_TOKEN": tok}, sinktype.Deps{Clock: clk, HTTP: &http.Client{Transport: api}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	stop := listen(t, clk, s.(notify.Listener), actsFunc(func(context.Context, notify.Action) (notify.ActionResult, error) {
		return notify.ActionResult{}, nil
	}))
	select {
	case <-api.answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not poll again after the two conflicts")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(l, "level=ERROR") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 || !strings.Contains(lines[0], "another program polls this bot's updates") || strings.Contains(lines[0], "deleteWebhook") ||
		!strings.Contains(lines[1], "the bot has a webhook") || !strings.Contains(lines[1], "deleteWebhook") {
		t.Errorf("the conflicts were logged as\n%s\nwant another poller, then the webhook", strings.Join(lines, "\n"))
	}
	redacttest.AssertNoSecret(t, []string{tok}, map[string]string{"log": logs.String()})
}
