package feishu

import (
	"context"
	"fmt"
	"strings"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
)

// Type is the feishu sink type.
var Type = sinktype.Type{
	Name: "feishu",
	Doc:  "posts each event as an interactive card coloured by level to a Feishu or Lark group's custom bot, signed when its secret is set, at most 5 a second and 100 a minute",
	Options: []sinktype.Option{
		{Key: "url_env", Doc: "variable holding the bot's webhook URL, https://open.feishu.cn/open-apis/bot/v2/hook/<token>, or for Lark the same path on https://open.larksuite.com (required; a secret)"},
		{Key: "secret_env", Doc: "variable holding the bot's signature verification secret (Security Settings: Set signature verification); unsigned when absent"},
		{Key: "title", Doc: "Go template of the card's header, plain text, over the fields of subjects (default: a level mark, the level, the alarm and the place)"},
		{Key: "text", Doc: "Go template of the card's text, in Feishu's lark_md (default: the alarm's description, level, since when, station, device, originId, and for an end when and after how long)"},
	},
	Decode: decode,
}

type options struct {
	urlEnv, url       string
	secretEnv, secret string
	message           *sinktype.Message
}

func decode(d *sinktype.Decoder) sinktype.Config {
	o := &options{}
	if d.Missing("url_env", "a feishu sink needs url_env, the variable holding the bot's webhook URL") {
		o.urlEnv, o.url = d.URLEnv("url_env")
		if o.url != "" && !d.Placeholder(o.url) {
			if _, err := Token(o.url); err != nil {
				d.Errorf("url_env", "environment variable %s: %v", o.urlEnv, err)
				o.url = ""
			}
		}
	}
	o.secretEnv, o.secret = d.Env("secret_env")
	if o.secret != "" && !d.Placeholder(o.secret) && strings.ContainsAny(o.secret, " \t\r\n/:") {
		d.Errorf("secret_env", "environment variable %s does not hold a bot's signing secret (no spaces, slashes or colons): copy it from the bot's Security Settings, Set signature verification", o.secretEnv)
	}
	// The header's title is plain text; only the text is lark_md.
	o.message = d.MessageEscapes(plainLine, Escape)
	return o
}

// Target is the bot's host and path, without its token.
func (o *options) Target() string { return sinktype.RedactURL(o.url, false) + HookPath + "…" }

func (o *options) Host(sinktype.Env) string { return sinktype.RedactURL(o.url, false) }

func (o *options) Summary() []string {
	out := []string{"url_env: " + o.urlEnv}
	if o.secretEnv != "" {
		out = append(out, "secret_env: "+o.secretEnv+" (signed)")
	} else {
		out = append(out, "unsigned")
	}
	if o.message.Templated() {
		out = append(out, "templated")
	}
	return append(out, fmt.Sprintf("paced %d per %s and %d per %s", PerSecond, Second, PerMinute, Minute))
}

func (o *options) AddSecrets(set *redact.Set) {
	set.Add(o.secret)
	set.AddURL(o.url, true)
	if token, err := Token(o.url); err == nil {
		set.Add(token)
	}
}

func (o *options) Destination() string { return "" }

// limiter returns the limiter of the bot, shared by every sink posting to
// it: keyed by its token, which never leaves deps.Limits.
func (o *options) limiter(limits *notify.Limits) *notify.Limiter {
	token, _ := Token(o.url)
	return limits.Get("feishu:"+token, Windows()...)
}

func (o *options) Build(_ context.Context, name string, deps sinktype.Deps) (notify.Sink, error) {
	deps = deps.Defaults()
	return New(Config{Name: name, URL: o.url, Secret: o.secret, Message: o.message,
		HTTPClient: deps.HTTP, Clock: deps.Clock, Limiter: o.limiter(deps.Limits), TemplateFailed: deps.TemplateFailed})
}

// Probe dials the bot's host: Feishu has no call that checks a custom bot
// without posting to its group.
func (o *options) Probe(ctx context.Context, _ sinktype.Deps) (string, error) {
	return sinktype.ProbeHost(ctx, o.url)
}

// Render returns the one request Send makes for ev, without the timestamp
// and sign that each attempt adds to the body. When a template fails on ev,
// the request holds the default in its place, as Send would post it, and
// the error says which template failed.
func (o *options) Render(ev *event.Event) ([]sinktype.Request, error) {
	body, err := Body(ev, o.message)
	if body == nil {
		return nil, err
	}
	return []sinktype.Request{{What: "POST " + o.Target(), Body: body}}, err
}
