package wecom

import (
	"context"
	"fmt"
	"strings"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
)

// Type is the wecom sink type.
var Type = sinktype.Type{
	Name: "wecom",
	Doc:  "posts each event as a Markdown message to a WeCom (企业微信) group robot, at most 20 a minute",
	Options: append([]sinktype.Option{
		{Key: "url_env", Doc: "variable holding the robot's webhook URL, https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=... (required; a secret)"},
		{Key: "mention_user_ids", Doc: "WeCom user ids of group members to mention in every message, as <@userid> (markdown messages cannot mention by mobile number or @all)"},
	}, sinktype.MessageOptions("heading (the first line, shown in notifications)", "Markdown text")...),
	Decode: decode,
}

type options struct {
	urlEnv, url string
	mentions    []string
	message     *sinktype.Message
}

func decode(d *sinktype.Decoder) sinktype.Config {
	o := &options{}
	if d.Missing("url_env", "a wecom sink needs url_env, the variable holding the robot's webhook URL") {
		o.urlEnv, o.url = d.URLEnv("url_env")
		if o.url != "" && !d.Placeholder(o.url) {
			if _, err := Key(o.url); err != nil {
				d.Errorf("url_env", "environment variable %s: %v", o.urlEnv, err)
				o.url = ""
			}
		}
	}
	o.mentions = d.Strings("mention_user_ids")
	size := 0
	for _, id := range o.mentions {
		size += len(id) + 3
		switch {
		case id == "@all" || id == "all":
			d.Errorf("mention_user_ids", "WeCom's markdown messages cannot mention everyone: name the user ids")
		case strings.ContainsAny(id, " \t\r\n<>@"):
			d.Errorf("mention_user_ids", "%q is not a WeCom user id (no spaces, <, > or @)", id)
		}
	}
	if size > maxMentions {
		d.Errorf("mention_user_ids", "the mentions take %d bytes of the message, over %d: name fewer user ids", size, maxMentions)
	}
	o.message = d.Message(Escape)
	return o
}

func (o *options) Target() string { return sinktype.RedactURL(o.url, true) }

func (o *options) Host(sinktype.Env) string { return sinktype.RedactURL(o.url, false) }

func (o *options) Summary() []string {
	out := []string{"url_env: " + o.urlEnv}
	if n := len(o.mentions); n > 0 {
		out = append(out, fmt.Sprintf("mentions %d user id(s)", n))
	}
	if o.message.Templated() {
		out = append(out, "templated")
	}
	return append(out, fmt.Sprintf("paced %d per %s", PerWindow, Window))
}

func (o *options) AddSecrets(set *redact.Set) { set.AddURL(o.url, false) }

func (o *options) Destination() string { return "" }

// limiter returns the limiter of the robot, shared by every sink posting to
// it: keyed by its webhook key, which never leaves deps.Limits.
func (o *options) limiter(limits *notify.Limits) *notify.Limiter {
	key, _ := Key(o.url)
	return limits.Get("wecom:"+key, notify.Window{N: PerWindow, Per: Window})
}

func (o *options) Build(_ context.Context, name string, deps sinktype.Deps) (notify.Sink, error) {
	deps = deps.Defaults()
	return New(Config{Name: name, URL: o.url, Message: o.message, Mentions: o.mentions,
		HTTPClient: deps.HTTP, Clock: deps.Clock, Limiter: o.limiter(deps.Limits), TemplateFailed: deps.TemplateFailed})
}

// Probe dials the robot's host: WeCom has no call that checks a robot's key
// without posting to its group.
func (o *options) Probe(ctx context.Context, _ sinktype.Deps) (string, error) {
	return sinktype.ProbeHost(ctx, o.url)
}

// Render returns the one request Send makes for ev. When a template fails
// on ev, the request holds the default in its place, as Send would post it,
// and the error says which template failed.
func (o *options) Render(ev *event.Event) ([]sinktype.Request, error) {
	body, err := Body(ev, o.message, o.mentions)
	if body == nil {
		return nil, err
	}
	return []sinktype.Request{{What: "POST " + o.Target(), Body: body}}, err
}
