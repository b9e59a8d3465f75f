package teams

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

// Type is the teams sink type.
var Type = sinktype.Type{
	Name: "teams",
	Doc:  "posts each event as an Adaptive Card coloured by level to a Microsoft Teams channel or chat through a Workflows webhook, at most 4 a second and 80 a minute",
	Options: []sinktype.Option{
		{Key: "url_env", Doc: "variable holding the workflow's HTTP POST URL, made with the Workflows app in Teams (\"Post to a channel when a webhook request is received\"), query included (required; a secret: its sig authorises posting)"},
		{Key: "title", Doc: "Go template of the card's heading, in Teams' Markdown subset, over the fields of subjects (default: a level mark, the level, the alarm and the place)"},
		{Key: "text", Doc: "Go template of a text under the card's facts, in Teams' Markdown subset (default: none; the facts are level, since when, station, device, originId, and for an end when and after how long)"},
	},
	Decode: decode,
}

type options struct {
	urlEnv, url string
	message     *sinktype.Message
}

func decode(d *sinktype.Decoder) sinktype.Config {
	o := &options{}
	if d.Missing("url_env", "a teams sink needs url_env, the variable holding the workflow's webhook URL") {
		o.urlEnv, o.url = d.URLEnv("url_env")
		if o.url != "" && !d.Placeholder(o.url) {
			if err := CheckURL(o.url); err != nil {
				d.Errorf("url_env", "environment variable %s: %v", o.urlEnv, err)
				o.url = ""
			}
		}
	}
	o.message = d.Message(Escape)
	return o
}

// Target is the workflow's host and path, without the query that holds its
// sig.
func (o *options) Target() string { return sinktype.RedactURL(o.url, true) }

func (o *options) Host(sinktype.Env) string { return sinktype.RedactURL(o.url, false) }

func (o *options) Summary() []string {
	out := []string{"url_env: " + o.urlEnv}
	if o.message.Templated() {
		out = append(out, "templated")
	}
	return append(out, fmt.Sprintf("paced %d per %s and %d per %s", PerSecond, Second, PerMinute, Minute))
}

func (o *options) AddSecrets(set *redact.Set) { set.AddURL(o.url, false) }

func (o *options) Destination() string { return "" }

// limiter returns the limiter of the workflow, shared by every sink posting
// to it: keyed by its host and path, which name the workflow whatever sig
// the URL carries.
func (o *options) limiter(limits *notify.Limits) *notify.Limiter {
	key := o.url
	if u, err := url.Parse(o.url); err == nil {
		// The host ignores case and the default port: one workflow, one key.
		host := strings.ToLower(u.Hostname())
		if p := u.Port(); p != "" && p != "443" && !(p == "80" && u.Scheme == "http") {
			host += ":" + p
		}
		key = host + u.Path
	}
	return limits.Get("teams:"+key, Windows()...)
}

func (o *options) Build(_ context.Context, name string, deps sinktype.Deps) (notify.Sink, error) {
	deps = deps.Defaults()
	return New(Config{Name: name, URL: o.url, Message: o.message,
		HTTPClient: deps.HTTP, Clock: deps.Clock, Limiter: o.limiter(deps.Limits), TemplateFailed: deps.TemplateFailed})
}

// Probe dials the workflow's host: a Workflows trigger has no call that
// checks it without running the flow.
func (o *options) Probe(ctx context.Context, _ sinktype.Deps) (string, error) {
	return sinktype.ProbeHost(ctx, o.url)
}

// Render returns the one request Send makes for ev. When a template fails on
// ev, the request holds the default in its place, as Send would post it,
// and the error says which template failed.
func (o *options) Render(ev *event.Event) ([]sinktype.Request, error) {
	body, err := Body(ev, o.message)
	if body == nil {
		return nil, err
	}
	return []sinktype.Request{{What: "POST " + o.Target(), Body: body}}, err
}
