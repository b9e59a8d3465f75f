package feishu

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
)

// App mode: the sink sends its cards with a Feishu app's bot, through the
// open platform's API, instead of a group's custom bot. Only an app's cards
// can call back when a button is clicked: a custom bot's card "only
// supports static content, i.e. link redirection, and does not support
// submitting data to the developer's server via callback interactions"
// (Feishu, "Sending Feishu Cards with a Custom Bot"). The clicks reach
// relay through the app's long connection (Listen), so that relay needs no
// public endpoint.

// DefaultAPIURL is the open platform's base URL for Feishu; Lark's is
// https://open.larksuite.com (the SDK's FeishuBaseUrl and LarkBaseUrl).
const DefaultAPIURL = "https://open.feishu.cn"

// The open platform's paths the app mode calls (Feishu's server API
// reference, and the SDK's core/constants.go and ws/const.go).
const (
	// TokenPath issues a custom app's tenant_access_token, for 2 hours.
	TokenPath = "/open-apis/auth/v3/tenant_access_token/internal"
	// MessagesPath sends a message (POST, ?receive_id_type=chat_id) and,
	// followed by /<message_id>, updates a card (PATCH).
	MessagesPath = "/open-apis/im/v1/messages"
	// EndpointPath hands out the long connection's WebSocket URL.
	EndpointPath = "/callback/ws/endpoint"
)

// Open platform answers the app mode tells apart.
const (
	// codeTokenInvalid and codeAccessTokenInvalid: the token is expired or
	// revoked; the SDK fetches a new one and retries (core/constants.go:
	// errCodeTenantAccessTokenInvalid, errCodeAccessTokenInvalid).
	codeTokenInvalid       = 99991663
	codeAccessTokenInvalid = 99991671
	// tokenMargin is how long before its expiry a token is renewed (the
	// SDK's expiryDelta).
	tokenMargin = 3 * time.Minute
)

// Keys of an app sink's memory of an alarm.
const (
	// MemoryMessageID is the message_id of the start's card.
	MemoryMessageID = "message_id"
	// MemoryAckBy, MemoryAckName and MemoryAckAt are who acknowledged the
	// alarm (an open_id, or a name given to relay ack), their name, and
	// when (RFC 3339), so that the end still shows it.
	MemoryAckBy   = "ack_by"
	MemoryAckName = "ack_name"
	MemoryAckAt   = "ack_at"
	MemoryAckVia  = "ack_via"
)

// appOptions are the keys of app mode.
var appOptions = []sinktype.Option{
	{Key: "app_id_env", Doc: "app mode: variable holding the Feishu app's App ID (cli_…); the app's bot sends the cards, with Acknowledge and Shelve buttons whose clicks come back over the app's long connection (set app_id_env, app_secret_env and chat_id instead of url_env)"},
	{Key: "app_secret_env", Doc: "app mode: variable holding the app's App Secret (a secret)"},
	{Key: "chat_id", Doc: "app mode: the group the app's bot posts to (oc_…); the bot must be a member"},
	{Key: "api_url", Doc: "app mode: the open platform's base URL (default " + DefaultAPIURL + "; https://open.larksuite.com for Lark)"},
}

// Type is the feishu sink type: a custom bot's webhook (url_env), or an
// app's bot (app_id_env, app_secret_env, chat_id), whose cards carry
// buttons.
var Type = sinktype.Type{
	Name:    webhookType.Name,
	Doc:     webhookType.Doc + "; or, with app_id_env, app_secret_env and chat_id, sends them with a Feishu app's bot, with Acknowledge and Shelve buttons, and updates the card on acknowledgement and end",
	Options: append(append([]sinktype.Option{}, webhookType.Options...), appOptions...),
	Decode:  decode,
}

// decode reads a webhook sink, or an app sink when any key of app mode is
// set.
func decode(d *sinktype.Decoder) sinktype.Config {
	for _, o := range appOptions {
		if d.Has(o.Key) {
			return decodeApp(d)
		}
	}
	return webhookType.Decode(d)
}

// AppOptions are the options of an app sink, as decoded.
type AppOptions struct {
	AppIDEnv, AppID         string
	AppSecretEnv, AppSecret string
	ChatID                  string
	APIURL                  string
	Message                 *sinktype.Message
}

func decodeApp(d *sinktype.Decoder) sinktype.Config {
	var o AppOptions
	for _, k := range []string{"url_env", "secret_env"} {
		if d.Has(k) {
			d.Errorf(k, "%s is the custom bot's, and this sink sends with an app (app_id_env, app_secret_env, chat_id): set one or the other", k)
		}
	}
	if d.Missing("app_id_env", "app mode needs app_id_env, the variable holding the Feishu app's App ID") {
		o.AppIDEnv, o.AppID = d.Env("app_id_env")
		if o.AppID != "" && !d.Placeholder(o.AppID) && strings.ContainsAny(o.AppID, " \t\r\n/:?#") {
			d.Errorf("app_id_env", "environment variable %s does not hold an App ID (cli_… from the app's Credentials & Basic Info page)", o.AppIDEnv)
		}
	}
	if d.Missing("app_secret_env", "app mode needs app_secret_env, the variable holding the Feishu app's App Secret") {
		o.AppSecretEnv, o.AppSecret = d.Env("app_secret_env")
	}
	if d.Missing("chat_id", "app mode needs chat_id, the group the app's bot posts to (oc_…)") {
		o.ChatID = d.String("chat_id")
	}
	o.APIURL = DefaultAPIURL
	if d.Has("api_url") {
		o.APIURL = d.URL("api_url")
	}
	o.APIURL = strings.TrimRight(o.APIURL, "/")
	o.Message = d.MessageEscapes(sinktype.PlainLine, Escape)
	return &appConfig{o: o}
}

// appConfig is the sinktype.Config of an app sink.
type appConfig struct{ o AppOptions }

func (c *appConfig) Target() string {
	return sinktype.RedactURL(c.o.APIURL, false) + MessagesPath + " chat " + c.o.ChatID
}

func (c *appConfig) Host(sinktype.Env) string { return sinktype.RedactURL(c.o.APIURL, false) }

func (c *appConfig) Summary() []string {
	out := []string{"app_id_env: " + c.o.AppIDEnv, "app_secret_env: " + c.o.AppSecretEnv, "chat_id: " + c.o.ChatID, "buttons over the long connection"}
	if c.o.Message.Templated() {
		out = append(out, "templated")
	}
	return append(out, fmt.Sprintf("paced %d per %s", PerSecond, Second))
}

// AddSecrets adds the App Secret and, as every value read from a variable
// is kept out of errors and logs, the App ID.
func (c *appConfig) AddSecrets(set *redact.Set) { set.Add(c.o.AppSecret, c.o.AppID) }

// Destination is the app and the chat: a card remembered in one chat is no
// card in another. The app is named by a digest of its App ID.
func (c *appConfig) Destination() string {
	sum := sha256.Sum256([]byte(c.o.AppID))
	return "feishu-app:" + hex.EncodeToString(sum[:6]) + ":" + c.o.ChatID
}

// Build makes the app sink, pacing it with the limiter of the app's bot in
// its chat, which every sink of the app there shares.
func (c *appConfig) Build(_ context.Context, name string, deps sinktype.Deps) (notify.Sink, error) {
	deps = deps.Defaults()
	limiter := deps.Limits.Get("feishu-app:"+c.o.AppID+":"+c.o.ChatID, notify.Window{N: PerSecond, Per: Second})
	return NewApp(name, c.o, deps, limiter)
}

// Probe fetches a tenant_access_token, which checks the app's credentials
// without sending anything.
func (c *appConfig) Probe(ctx context.Context, deps sinktype.Deps) (string, error) {
	deps = deps.Defaults()
	s, err := NewApp("probe", c.o, deps, nil)
	if err != nil {
		return "", err
	}
	if _, _, err := s.token(ctx, false); err != nil {
		return "", err
	}
	return "the app's credentials are valid (a tenant_access_token was issued)", nil
}

// Render returns the request Send makes for ev: a start is posted to the
// chat with its buttons; an end (or an acknowledgement) updates the start's
// card, as if it had been delivered as message om_….
func (c *appConfig) Render(ev *event.Event) ([]sinktype.Request, error) {
	s := &AppSink{o: c.o}
	body, err := s.cardBody(ev, nil)
	if body == nil {
		return nil, err
	}
	if ev.Data.Transition == event.Start {
		return []sinktype.Request{{What: "POST " + c.o.APIURL + MessagesPath + "?receive_id_type=chat_id", Body: s.sendBody(body)}}, err
	}
	return []sinktype.Request{{What: "PATCH " + c.o.APIURL + MessagesPath + "/om_…", Body: patchBody(body)}}, err
}

// AppSink sends alarms as cards of a Feishu app's bot to one group. A start
// is a card with the buttons Acknowledge, Shelve 1h and Shelve until
// cleared, remembered by its message_id. An acknowledgement updates it to
// say who and when, without buttons; taking it back restores them. The end
// (or cancellation) updates it to resolved, keeping the acknowledgement;
// without a remembered card, the end is a card of its own.
//
// Every request carries a tenant_access_token, fetched with the app's
// credentials and kept until 3 minutes before it expires; an answer saying
// it is no longer valid fetches another and repeats the request once.
type AppSink struct {
	name, prefix   string
	o              AppOptions
	clock          clock.Clock
	http           *http.Client
	limiter        *notify.Limiter
	secrets        *redact.Set
	logger         *slog.Logger
	templateFailed func(sink string, ev *event.Event, err error)

	mu      sync.Mutex
	tok     string
	expires time.Time

	// minBackoff is the first wait before reconnecting the long
	// connection; tests shorten it.
	minBackoff time.Duration
	// actTimeout bounds Actions.Act, so that a click is answered within
	// Feishu's 3 seconds.
	actTimeout time.Duration
}

// NewApp returns the app sink called name of o; limiter (nil: none) paces
// its messages.
func NewApp(name string, o AppOptions, deps sinktype.Deps, limiter *notify.Limiter) (*AppSink, error) {
	if name == "" {
		return nil, errors.New("feishu sink: no name")
	}
	if o.AppID == "" || o.AppSecret == "" || o.ChatID == "" {
		return nil, fmt.Errorf("feishu sink %q: app mode needs an App ID, an App Secret and a chat_id", name)
	}
	deps = deps.Defaults()
	secrets := redact.New(o.AppSecret, o.AppID)
	if o.APIURL == "" {
		o.APIURL = DefaultAPIURL
	}
	return &AppSink{
		name: name, prefix: fmt.Sprintf("feishu sink %q", name), o: o,
		clock: deps.Clock, http: notify.NoRedirects(deps.HTTP), limiter: limiter, secrets: secrets,
		logger:         slog.New(secrets.Handler(deps.Logger.Handler())),
		templateFailed: deps.TemplateFailed,
		minBackoff:     time.Second, actTimeout: 2500 * time.Millisecond,
	}, nil
}

// Name returns the sink's name.
func (s *AppSink) Name() string { return s.name }

// CarriesAcks reports that the sink takes ack and unack deliveries: they
// update the start's card.
func (s *AppSink) CarriesAcks() bool { return true }

// Send makes one delivery: it posts a start's card, or updates the start's
// card for an acknowledgement, its withdrawal, or the end.
func (s *AppSink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	what := s.prefix + ": " + d.EventID
	ev, err := d.Decoded()
	if err != nil {
		return notify.Result{}, fmt.Errorf("%s: %w", s.prefix, err)
	}
	msgID := d.Memory[MemoryMessageID]
	mem := ackMemory(ev, d.Memory)
	body, tmplErr := s.cardBody(ev, mem)
	if body == nil {
		return notify.Result{}, fmt.Errorf("%s: %w", what, tmplErr)
	}
	if tmplErr != nil {
		s.templateFailed(s.name, ev, tmplErr)
	}
	switch ev.Data.Transition {
	case event.Start:
		data, res, err := s.call(ctx, what, http.MethodPost, MessagesPath+"?receive_id_type=chat_id", s.sendBody(body))
		if err != nil {
			return res, err
		}
		var sent struct {
			MessageID string `json:"message_id"`
		}
		if json.Unmarshal(data, &sent) != nil || sent.MessageID == "" {
			return notify.Result{}, fmt.Errorf("%s: Feishu took the card but named no message_id, so it cannot be updated", what)
		}
		return notify.Result{Memory: map[string]string{MemoryMessageID: sent.MessageID}}, nil
	case event.Ack, event.Unack:
		if msgID == "" {
			return notify.Result{}, nil // no card to update
		}
		if _, res, err := s.call(ctx, what, http.MethodPatch, MessagesPath+"/"+url.PathEscape(msgID), patchBody(body)); err != nil {
			return res, err
		}
		mem[MemoryMessageID] = msgID
		return notify.Result{Memory: mem}, nil
	}
	if msgID == "" {
		_, res, err := s.call(ctx, what, http.MethodPost, MessagesPath+"?receive_id_type=chat_id", s.sendBody(body))
		return res, err
	}
	_, res, err := s.call(ctx, what, http.MethodPatch, MessagesPath+"/"+url.PathEscape(msgID), patchBody(body))
	return res, err
}

// Remind posts the start's card again, the reminder's note (such as
// "Reminder, ongoing for 4h") leading its title, with the buttons while
// nobody acknowledged the alarm (reminders after an acknowledgement, under
// repeat_until: cleared, show who did). Like a reply in Slack, it goes only
// to a chat that got the start: without the start's card in memory it
// sends nothing. Like Send, it makes one attempt.
func (s *AppSink) Remind(ctx context.Context, ev *event.Event, memory map[string]string) (notify.Result, error) {
	if memory[MemoryMessageID] == "" {
		return notify.Result{}, nil
	}
	what := s.prefix + ": reminder of " + ev.Data.OriginID
	body, tmplErr := s.cardBody(ev, ackMemory(ev, memory))
	if body == nil {
		return notify.Result{}, fmt.Errorf("%s: %w", what, tmplErr)
	}
	if tmplErr != nil {
		s.templateFailed(s.name, ev, tmplErr)
	}
	_, res, err := s.call(ctx, what, http.MethodPost, MessagesPath+"?receive_id_type=chat_id", s.sendBody(body))
	return res, err
}

// ackMemory returns the acknowledgement the card of ev shows: ev's own for
// an ack, none for an unack, the remembered one otherwise.
func ackMemory(ev *event.Event, memory map[string]string) map[string]string {
	mem := map[string]string{}
	switch {
	case ev.Data.Transition == event.Ack && ev.Data.Ack != nil:
		a := ev.Data.Ack
		mem[MemoryAckBy], mem[MemoryAckName], mem[MemoryAckAt], mem[MemoryAckVia] = a.By, a.Name, a.At, a.Via
	case ev.Data.Transition == event.Unack:
	default:
		for _, k := range []string{MemoryAckBy, MemoryAckName, MemoryAckAt, MemoryAckVia} {
			if v := memory[k]; v != "" {
				mem[k] = v
			}
		}
	}
	return mem
}

// cardBody returns the card's JSON for ev: the webhook mode's card, shared
// (update_multi), with the acknowledgement of mem when there is one, and
// the buttons on a start's card that nobody acknowledged.
func (s *AppSink) cardBody(ev *event.Event, mem map[string]string) ([]byte, error) {
	shown := ev
	if ev.Data.Transition == event.Ack || ev.Data.Transition == event.Unack {
		start := *ev
		start.Data.Transition = event.Start
		shown = &start
	}
	msg, tmplErr := build(shown, s.o.Message)
	c := msg.Card
	c.Config.UpdateMulti = true
	acked := mem[MemoryAckBy] != ""
	if acked {
		c.Elements = append(c.Elements, element{Tag: "div", Text: &cardText{Tag: "lark_md", Content: ackLine(mem)}})
	}
	if shown.Data.Transition == event.Start && !acked {
		c.Elements = append(c.Elements, element{Tag: "action", Actions: buttons(ev.Data.OriginID, s.name)})
	}
	body, err := sinktype.JSON(c)
	if err != nil {
		return nil, err
	}
	return body, tmplErr
}

// ackLine says who acknowledged the alarm and when, in lark_md: a Feishu
// user is mentioned by open_id (<at id=…></at> shows their name).
func ackLine(mem map[string]string) string {
	who := Escape(sinktype.FirstNonEmpty(mem[MemoryAckName], mem[MemoryAckBy]))
	if mem[MemoryAckVia] == "feishu" && validOpenID(mem[MemoryAckBy]) {
		who = "<at id=" + mem[MemoryAckBy] + "></at>"
	}
	line := "**Acknowledged** by " + who
	if at := sinktype.ReadableTime(mem[MemoryAckAt]); at != "" {
		line += " at " + Escape(at)
	}
	return line
}

// validOpenID reports whether id can stand in an <at> tag: an open_id
// (ou_…) of letters, digits and underscores.
func validOpenID(id string) bool {
	if !strings.HasPrefix(id, "ou_") {
		return false
	}
	for _, r := range id {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// Button values: what a click of each button hands back, with the alarm's
// AlarmRef and the sink's name.
const (
	valueRelay = "relay" // "ack" or "shelve"
	valueAlarm = "alarm"
	valueSink  = "sink"
	valueFor   = "for" // a shelve's duration, absent until cleared
)

// buttons are the start card's buttons, each a callback behaviour whose
// value names the action, the alarm (notify.AlarmRef) and the sink.
func buttons(originID, sink string) []button {
	ref := notify.AlarmRef(originID)
	b := func(text, typ string, value map[string]string) button {
		value[valueAlarm], value[valueSink] = ref, sink
		return button{Tag: "button", Text: cardText{Tag: "plain_text", Content: text}, Type: typ,
			Behaviors: []behavior{{Type: "callback", Value: value}}}
	}
	return []button{
		b("Acknowledge", "primary", map[string]string{valueRelay: string(notify.Acknowledge)}),
		b("Shelve 1h", "default", map[string]string{valueRelay: string(notify.Shelve), valueFor: "1h"}),
		b("Shelve until cleared", "default", map[string]string{valueRelay: string(notify.Shelve)}),
	}
}

// button is a card button (JSON 1.0, in an action module) whose behaviour
// calls back.
type button struct {
	Tag       string     `json:"tag"`
	Text      cardText   `json:"text"`
	Type      string     `json:"type"`
	Behaviors []behavior `json:"behaviors"`
}

type behavior struct {
	Type  string            `json:"type"`
	Value map[string]string `json:"value"`
}

// sendBody is the body of POST /open-apis/im/v1/messages: the card as a
// JSON string in content.
func (s *AppSink) sendBody(cardJSON []byte) []byte {
	b, _ := sinktype.JSON(struct {
		ReceiveID string `json:"receive_id"`
		MsgType   string `json:"msg_type"`
		Content   string `json:"content"`
	}{s.o.ChatID, "interactive", string(cardJSON)})
	return b
}

// patchBody is the body of PATCH /open-apis/im/v1/messages/:message_id.
func patchBody(cardJSON []byte) []byte {
	b, _ := sinktype.JSON(struct {
		Content string `json:"content"`
	}{string(cardJSON)})
	return b
}

// apiAnswer is the open platform's answer: code, msg and data.
type apiAnswer struct {
	Code *int            `json:"code"`
	Msg  string          `json:"msg"`
	Data json.RawMessage `json:"data"`
}

// call makes one request of the open platform with the app's token, after
// the bot's pace for a new message, and returns data. A token the platform
// no longer takes is replaced and the request repeated once.
func (s *AppSink) call(ctx context.Context, what, method, path string, body []byte) (json.RawMessage, notify.Result, error) {
	if s.limiter != nil && method == http.MethodPost {
		if err := s.limiter.Wait(ctx); err != nil {
			return nil, notify.WaitResult(err), fmt.Errorf("%s: waiting for the bot's pace: %w", what, err)
		}
	}
	for try := 0; ; try++ {
		tok, res, err := s.token(ctx, try > 0)
		if err != nil {
			return nil, res, err
		}
		ans, res, err := s.do(ctx, what, method, path, body, tok)
		if ans.Code == nil {
			return nil, res, s.secrets.Error(err)
		}
		switch code := *ans.Code; {
		case code == codeOK:
			return ans.Data, notify.Result{}, nil
		case (code == codeTokenInvalid || code == codeAccessTokenInvalid) && try == 0:
			continue
		case code == codeTooFast || code == codeAppTooFast:
			return nil, notify.Result{Retry: true, RetryAfter: Block}, s.answerErr(what, code, ans.Msg, "Feishu limits the app's messages (5 a second to a group); every message of this sink waits")
		case res.Retry:
			return nil, res, s.answerErr(what, code, ans.Msg, "Feishu failed inside")
		case code == codeInternal:
			return nil, notify.Result{Retry: true}, s.answerErr(what, code, ans.Msg, "Feishu failed inside")
		default:
			return nil, notify.Result{}, s.answerErr(what, code, ans.Msg, fmt.Sprintf(
				"check that chat_id %s is a group the app's bot is in, and that the app has the permission im:message:send_as_bot and is published; a card can only be updated for 14 days", s.o.ChatID))
		}
	}
}

func (s *AppSink) answerErr(what string, code int, msg, hint string) error {
	return s.secrets.Error(fmt.Errorf("%s: Feishu answered code %d (%s): %s", what, code, s.quote(msg), hint))
}

// quote returns words of an answer for an error: cleaned of the sink's
// secrets, then cut, so that no piece of a secret survives the cut.
func (s *AppSink) quote(msg string) string { return sinktype.Truncate(s.secrets.String(msg), 200) }

// do makes one request; the answer's code is nil when its body is none of
// the platform's (the error then says what went wrong).
func (s *AppSink) do(ctx context.Context, what, method, path string, body []byte, tok string) (apiAnswer, notify.Result, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, s.o.APIURL+path, bytes.NewReader(body))
	if err != nil {
		return apiAnswer{}, notify.Result{}, fmt.Errorf("%s: cannot build the request: check api_url", what)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	answer, res, err := notify.Post(s.http, req, s.clock.Now, what, s.secrets)
	if se, ok := errors.AsType[*notify.StatusError](err); ok {
		answer = se.Answer
	}
	var ans apiAnswer
	if len(answer) > 0 && json.Unmarshal(answer, &ans) == nil && ans.Code != nil {
		return ans, res, nil
	}
	if err == nil {
		err = fmt.Errorf("%s: the answer is not the open platform's JSON (code, msg): check api_url", what)
	}
	return apiAnswer{}, res, err
}

// token returns the tenant_access_token, fetching a new one when there is
// none, it is within tokenMargin of expiring, or renew is set.
func (s *AppSink) token(ctx context.Context, renew bool) (string, notify.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !renew && s.tok != "" && s.clock.Now().Before(s.expires) {
		return s.tok, notify.Result{}, nil
	}
	what := s.prefix + ": tenant_access_token"
	body, _ := json.Marshal(map[string]string{"app_id": s.o.AppID, "app_secret": s.o.AppSecret})
	ans, res, err := s.doToken(ctx, what, body)
	if err != nil {
		return "", res, err
	}
	s.tok, s.expires = ans.Token, s.clock.Now().Add(time.Duration(ans.Expire)*time.Second-tokenMargin)
	s.secrets.Add(ans.Token)
	return s.tok, notify.Result{}, nil
}

type tokenAnswer struct {
	Code   *int   `json:"code"`
	Msg    string `json:"msg"`
	Token  string `json:"tenant_access_token"`
	Expire int    `json:"expire"`
}

func (s *AppSink) doToken(ctx context.Context, what string, body []byte) (tokenAnswer, notify.Result, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.o.APIURL+TokenPath, bytes.NewReader(body))
	if err != nil {
		return tokenAnswer{}, notify.Result{}, fmt.Errorf("%s: cannot build the request: check api_url", what)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	answer, res, err := notify.Post(s.http, req, s.clock.Now, what, s.secrets)
	if se, ok := errors.AsType[*notify.StatusError](err); ok {
		answer = se.Answer
	}
	var ans tokenAnswer
	if len(answer) == 0 || json.Unmarshal(answer, &ans) != nil || ans.Code == nil {
		if err == nil {
			err = fmt.Errorf("%s: the answer is not the open platform's JSON: check api_url", what)
		}
		return tokenAnswer{}, res, s.secrets.Error(err)
	}
	switch {
	case *ans.Code == codeOK && ans.Token != "":
		return ans, notify.Result{}, nil
	case res.Retry:
		return tokenAnswer{}, res, s.answerErr(what, *ans.Code, ans.Msg, "Feishu failed inside")
	case *ans.Code == codeInternal:
		return tokenAnswer{}, notify.Result{Retry: true}, s.answerErr(what, *ans.Code, ans.Msg, "Feishu failed inside")
	}
	return tokenAnswer{}, notify.Result{}, s.answerErr(what, *ans.Code, ans.Msg, fmt.Sprintf(
		"Feishu refused the app's credentials: check that %s and %s hold the App ID and App Secret of a custom app (Credentials & Basic Info)", s.o.AppIDEnv, s.o.AppSecretEnv))
}
