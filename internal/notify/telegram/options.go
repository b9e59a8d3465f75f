package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
)

// Type is the telegram sink type.
var Type = sinktype.Type{
	Name: "telegram",
	Doc:  "a Telegram bot posts each alarm to a chat in HTML; its end edits the start's message and replies to it; at most 1 a second and 20 a minute per chat",
	Options: append([]sinktype.Option{
		{Key: "token_env", Doc: "variable holding the bot's token from BotFather, 123456789:AA... (required; a secret)"},
		{Key: "chat_id", Doc: "the chat: its numeric id (a supergroup's or channel's -100...) or @name of a public one (required)"},
		{Key: "message_thread_id", Doc: "the forum topic to post in (optional)"},
		{Key: "disable_notification", Doc: "true sends without sound (default false)"},
		{Key: "api_url", Doc: "the Bot API's base URL (default " + DefaultAPIURL + ", or a local Bot API server)"},
		{Key: "buttons", Doc: "true puts Acknowledge and Shelve buttons on each alarm (Acknowledge all on digests), shows acknowledgements on the alarm's message, and reads the clicks by long polling getUpdates for the bot (default false). Telegram lets one consumer read a bot's updates: the bot must have no webhook (deleteWebhook) and no other program polling it, and sinks of one bot share one poller"},
	}, sinktype.MessageOptions("title (the bold first line; Telegram HTML)", "text (Telegram HTML: b, i, u, s, a, code, pre, blockquote)")...),
	Decode: decode,
}

var (
	tokenRE    = regexp.MustCompile(`^[0-9]+:[A-Za-z0-9_-]+$`)
	numericRE  = regexp.MustCompile(`^-?[0-9]+$`)
	usernameRE = regexp.MustCompile(`^@[A-Za-z][A-Za-z0-9_]{3,31}$`)
)

type options struct {
	apiURL          string
	tokenEnv, token string
	chat            Chat
	message         *sinktype.Message
	buttons         bool
}

func decode(d *sinktype.Decoder) sinktype.Config {
	o := &options{apiURL: DefaultAPIURL}
	if d.Has("api_url") {
		o.apiURL = d.URL("api_url")
	}
	if d.Missing("token_env", "a telegram sink needs token_env, the variable holding the bot's token") {
		o.tokenEnv, o.token = d.Env("token_env")
		if o.token != "" && !d.Placeholder(o.token) && !tokenRE.MatchString(o.token) {
			d.Errorf("token_env", "environment variable %s does not hold a bot token (digits, a colon and letters, as BotFather gives it)", o.tokenEnv)
			o.token = ""
		}
	}
	if d.Missing("chat_id", "a telegram sink needs chat_id, the chat's numeric id or @name") {
		o.chat.ID = d.String("chat_id")
		if id := o.chat.ID; id != "" && !numericRE.MatchString(id) && !usernameRE.MatchString(id) {
			d.Errorf("chat_id", "%q is not a chat: want its numeric id (such as -1001234567890; forward a message of the chat to @getidsbot to learn it) or @name of a public channel or group", id)
			o.chat.ID = ""
		}
	}
	if d.Has("message_thread_id") {
		s := d.String("message_thread_id")
		n, err := strconv.Atoi(s)
		if s != "" && (err != nil || n <= 0) {
			d.Errorf("message_thread_id", "want the positive number of a forum topic, got %s", d.Describe("message_thread_id"))
		}
		o.chat.ThreadID = max(n, 0)
	}
	o.chat.Silent = d.Bool("disable_notification")
	o.buttons = d.Bool("buttons")
	o.message = d.Message(Escape)
	if !o.buttons {
		// Without buttons, a start says how to acknowledge it.
		o.message.EndWithAckLine("\n\n")
	}
	return o
}

func (o *options) Target() string {
	t := "chat " + o.chat.ID
	if o.chat.ThreadID != 0 {
		t += fmt.Sprintf(" topic %d", o.chat.ThreadID)
	}
	if o.apiURL != DefaultAPIURL {
		t += " via " + sinktype.RedactURL(o.apiURL, true)
	}
	return t
}

func (o *options) Host(sinktype.Env) string { return sinktype.RedactURL(o.apiURL, false) }

func (o *options) Summary() []string {
	out := []string{"token_env: " + o.tokenEnv}
	if o.chat.Silent {
		out = append(out, "silent")
	}
	if o.message.Templated() {
		out = append(out, "templated")
	}
	if o.buttons {
		out = append(out, "buttons (polls getUpdates)")
	}
	return append(out, fmt.Sprintf("paced 1 per 1s and %d per %s", PerGroup, Window))
}

func (o *options) AddSecrets(set *redact.Set) {
	set.Add(o.token)
	set.AddURL(o.apiURL, false)
}

// Destination is the chat: the memory of an alarm is a message in it.
func (o *options) Destination() string { return "telegram:" + o.chat.ID }

// limiter returns the limiter of the bot in the chat, shared by every sink
// of the same bot and chat: keyed by the token, which never leaves
// deps.Limits.
func (o *options) limiter(limits *notify.Limits) *notify.Limiter {
	return limits.Get("telegram:"+o.token+":"+o.chat.ID, Windows()...)
}

func (o *options) Build(_ context.Context, name string, deps sinktype.Deps) (notify.Sink, error) {
	deps = deps.Defaults()
	return New(Config{Name: name, APIURL: o.apiURL, Token: o.token, TokenEnv: o.tokenEnv, Chat: o.chat, Message: o.message,
		HTTPClient: deps.HTTP, Clock: deps.Clock, Limiter: o.limiter(deps.Limits), Logger: deps.Logger, TemplateFailed: deps.TemplateFailed,
		Buttons: o.buttons})
}

// Probe asks the Bot API who the bot is (getMe) and whether it sees the
// chat (getChat): both check the token and the chat without sending
// anything.
func (o *options) Probe(ctx context.Context, deps sinktype.Deps) (string, error) {
	deps = deps.Defaults()
	secrets := redact.New(o.token)
	secrets.AddURL(o.apiURL, false)
	p := notify.NewPoster(deps.HTTP, nil, deps.Clock, 0, secrets)
	base := strings.TrimRight(o.apiURL, "/") + "/bot" + o.token + "/"
	var me struct {
		Result struct {
			Username string `json:"username"`
		} `json:"result"`
	}
	if err := probeCall(ctx, p, base+"getMe", `{}`, &me); err != nil {
		return "", fmt.Errorf("getMe: %w: check %s", err, o.tokenEnv)
	}
	var chat struct {
		Result struct {
			Type  string `json:"type"`
			Title string `json:"title"`
		} `json:"result"`
	}
	body, _ := json.Marshal(map[string]any{"chat_id": chatID(o.chat.ID)})
	if err := probeCall(ctx, p, base+"getChat", string(body), &chat); err != nil {
		return "", fmt.Errorf("getChat %s: %w: check chat_id and that @%s is a member", o.chat.ID, err, me.Result.Username)
	}
	return fmt.Sprintf("bot @%s sees %s %q (%s); nothing was sent", me.Result.Username, chat.Result.Type, chat.Result.Title, o.chat.ID), nil
}

// probeCall makes one call of a probe and decodes its result into out.
func probeCall(ctx context.Context, p *notify.Poster, url, body string, out any) error {
	got, _, err := p.PostJSON(ctx, "telegram probe", url, []byte(body), nil)
	if err != nil {
		var se *notify.StatusError
		var ans answer
		if errors.As(err, &se) && json.Unmarshal(se.Answer, &ans) == nil && ans.Description != "" {
			return p.Clean(fmt.Errorf("answered %d (%s)", se.Status, ans.Description))
		}
		return err
	}
	if json.Unmarshal(got, out) != nil {
		return errors.New("the answer is not the Bot API's")
	}
	return nil
}

// Render returns the requests Send makes for ev, with the token replaced by
// the name of its variable; for an end, as if its start had been sent and
// remembered (its message_id shown as a placeholder). When a template fails
// on ev, the requests hold the default in its place, as Send would send
// them, and the error says which failed.
func (o *options) Render(ev *event.Event) ([]sinktype.Request, error) {
	var start *Start
	if ev.Data.Transition != event.Start {
		start = &Start{ChatID: o.chat.ID, MessageID: "(message_id of the start)"}
	}
	reqs, err := Requests(ev, o.message, o.chat, start, o.buttons)
	if reqs == nil {
		return nil, err
	}
	base := sinktype.RedactURL(o.apiURL, true)
	out := make([]sinktype.Request, len(reqs))
	for i, r := range reqs {
		out[i] = sinktype.Request{What: "POST " + strings.TrimRight(base, "/") + "/bot$" + o.tokenEnv + "/" + r.Method, Body: r.Body}
	}
	return out, err
}
