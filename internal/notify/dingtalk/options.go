package dingtalk

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
)

// Type is the dingtalk sink type.
var Type = sinktype.Type{
	Name: "dingtalk",
	Doc:  "posts each event as a Markdown message to a DingTalk group's custom robot, signed when its secret is set, at most 20 a minute",
	Options: append([]sinktype.Option{
		{Key: "url_env", Doc: "variable holding the robot's webhook URL, https://oapi.dingtalk.com/robot/send?access_token=... (required; a secret)"},
		{Key: "secret_env", Doc: "variable holding the robot's signing secret, SEC... (Security Settings: Additional Signature); unsigned when absent"},
		{Key: "at_mobiles", Doc: "mobile numbers of group members to mention in every message"},
		{Key: "at_user_ids", Doc: "DingTalk user ids of group members to mention in every message"},
		{Key: "at_all", Doc: "true mentions everyone in the group (default false)"},
	}, sinktype.MessageOptions("title (the line shown in the conversation list and notifications)", "Markdown text")...),
	Decode: decode,
}

type options struct {
	urlEnv, url       string
	secretEnv, secret string
	at                At
	message           *sinktype.Message
}

func decode(d *sinktype.Decoder) sinktype.Config {
	o := &options{}
	if d.Missing("url_env", "a dingtalk sink needs url_env, the variable holding the robot's webhook URL") {
		o.urlEnv, o.url = d.URLEnv("url_env")
		if o.url != "" && !d.Placeholder(o.url) {
			o.checkURL(d)
		}
	}
	o.secretEnv, o.secret = d.Env("secret_env")
	if o.secret != "" && !d.Placeholder(o.secret) && !strings.HasPrefix(o.secret, "SEC") {
		d.Errorf("secret_env", "environment variable %s does not hold a DingTalk signing secret (they start with SEC): copy it from the robot's Security Settings, Additional Signature", o.secretEnv)
	}
	o.at.Mobiles = d.Strings("at_mobiles")
	for _, m := range o.at.Mobiles {
		if strings.Trim(m, "0123456789+-") != "" {
			d.Errorf("at_mobiles", "%q is not a mobile number (digits, + and - only)", m)
		}
	}
	o.at.UserIDs = d.Strings("at_user_ids")
	for _, id := range o.at.UserIDs {
		if strings.ContainsAny(id, " \t\r\n@") {
			d.Errorf("at_user_ids", "%q is not a DingTalk user id (no spaces or @)", id)
		}
	}
	o.at.All = d.Bool("at_all")
	// The title is the line of the conversation list and notifications,
	// plain text: only the text is Markdown.
	o.message = d.MessageEscapes(plainLine, Escape)
	return o
}

// checkURL refuses a webhook URL that cannot be a robot's, without echoing
// it (it carries the robot's token).
func (o *options) checkURL(d *sinktype.Decoder) {
	if _, err := AccessToken(o.url); err != nil {
		d.Errorf("url_env", "environment variable %s: %v", o.urlEnv, err)
		o.url = ""
		return
	}
	u, _ := url.Parse(o.url)
	if q := u.Query(); q.Has("timestamp") || q.Has("sign") {
		d.Errorf("url_env", "environment variable %s holds a URL with timestamp or sign: give the webhook URL alone and the secret in secret_env, and relay signs each message", o.urlEnv)
		o.url = ""
	}
}

func (o *options) Target() string { return sinktype.RedactURL(o.url, true) }

func (o *options) Host(sinktype.Env) string { return sinktype.RedactURL(o.url, false) }

func (o *options) Summary() []string {
	out := []string{"url_env: " + o.urlEnv}
	if o.secretEnv != "" {
		out = append(out, "secret_env: "+o.secretEnv+" (signed)")
	} else {
		out = append(out, "unsigned")
	}
	var at []string
	if n := len(o.at.Mobiles); n > 0 {
		at = append(at, fmt.Sprintf("%d mobile(s)", n))
	}
	if n := len(o.at.UserIDs); n > 0 {
		at = append(at, fmt.Sprintf("%d user id(s)", n))
	}
	if o.at.All {
		at = append(at, "all")
	}
	if len(at) > 0 {
		out = append(out, "at "+strings.Join(at, ", "))
	}
	if o.message.Templated() {
		out = append(out, "templated")
	}
	return append(out, fmt.Sprintf("paced %d per %s", PerWindow, Window))
}

func (o *options) AddSecrets(set *redact.Set) {
	set.Add(o.secret)
	set.AddURL(o.url, false)
}

func (o *options) Destination() string { return "" }

// limiter returns the limiter of the robot, shared by every sink posting to
// it: keyed by its access token, which never leaves deps.Limits.
func (o *options) limiter(limits *notify.Limits) *notify.Limiter {
	token, _ := AccessToken(o.url)
	return limits.Get("dingtalk:"+token, notify.Window{N: PerWindow, Per: Window})
}

func (o *options) Build(_ context.Context, name string, deps sinktype.Deps) (notify.Sink, error) {
	deps = deps.Defaults()
	return New(Config{Name: name, URL: o.url, Secret: o.secret, Message: o.message, At: o.at,
		HTTPClient: deps.HTTP, Clock: deps.Clock, Limiter: o.limiter(deps.Limits), TemplateFailed: deps.TemplateFailed})
}

// Probe dials the robot's host: DingTalk has no call that checks a robot
// without posting to its group.
func (o *options) Probe(ctx context.Context, _ sinktype.Deps) (string, error) {
	return sinktype.ProbeHost(ctx, o.url)
}

// Render returns the one request Send makes for ev, without the timestamp
// and sign that each attempt adds to the URL. When a template fails on ev,
// the request holds the default in its place, as Send would post it, and
// the error says which template failed.
func (o *options) Render(ev *event.Event) ([]sinktype.Request, error) {
	body, err := Body(ev, o.message, o.at)
	if body == nil {
		return nil, err
	}
	return []sinktype.Request{{What: "POST " + o.Target(), Body: body}}, err
}

// plainLine keeps a value substituted into the title on one line.
func plainLine(s string) string { return strings.Join(strings.Fields(s), " ") }
