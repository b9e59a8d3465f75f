package pagerduty

import (
	"context"
	"fmt"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
)

// Type is the pagerduty sink type.
var Type = sinktype.Type{
	Name: "pagerduty",
	Doc:  "sends a PagerDuty Events API v2 trigger when an alarm starts and a resolve when it ends, keyed by its originId, at most 120 a minute per routing key",
	Options: []sinktype.Option{
		{Key: "routing_key_env", Doc: "variable holding the 32-character Integration Key of the service's Events API v2 integration (required; a secret)"},
		{Key: "url", Doc: "the Events API v2 endpoint (default " + DefaultURL + ")"},
		{Key: "title", Doc: "Go template of the alert's summary over the fields of subjects, as plain text cut to 1024 characters (default: the level, the alarm and the place); " +
			"there is no text template: custom_details carries the event's data"},
	},
	Decode: decode,
}

type options struct {
	url           string
	routingKeyEnv string
	routingKey    string
	message       *sinktype.Message
}

func decode(d *sinktype.Decoder) sinktype.Config {
	o := &options{url: DefaultURL}
	if d.Has("url") {
		o.url = d.URL("url")
	}
	if d.Missing("routing_key_env", "a pagerduty sink needs routing_key_env, the variable holding the Integration Key of an Events API v2 integration") {
		o.routingKeyEnv, o.routingKey = d.Env("routing_key_env")
		if o.routingKey != "" && !d.Placeholder(o.routingKey) && len(o.routingKey) != RoutingKeyLen {
			d.Errorf("routing_key_env", "environment variable %s holds %d characters, not the %d of an Integration Key: copy it from the service's Integrations tab, Events API v2",
				o.routingKeyEnv, len(o.routingKey), RoutingKeyLen)
			o.routingKey = ""
		}
	}
	// The summary is plain text: nothing to escape.
	o.message = d.Message(nil)
	return o
}

func (o *options) Target() string { return sinktype.RedactURL(o.url, true) }

func (o *options) Host(sinktype.Env) string { return sinktype.RedactURL(o.url, false) }

func (o *options) Summary() []string {
	out := []string{"routing_key_env: " + o.routingKeyEnv}
	if o.message.Templated() {
		out = append(out, "templated")
	}
	return append(out, fmt.Sprintf("paced %d per %s", PerWindow, Window))
}

func (o *options) AddSecrets(set *redact.Set) {
	set.Add(o.routingKey)
	set.AddURL(o.url, false)
}

func (o *options) Destination() string { return "" }

// limiter returns the limiter of the routing key, shared by every sink
// sending with it: keyed by the key, which never leaves deps.Limits.
func (o *options) limiter(limits *notify.Limits) *notify.Limiter {
	return limits.Get("pagerduty:"+o.routingKey, notify.Window{N: PerWindow, Per: Window})
}

func (o *options) Build(_ context.Context, name string, deps sinktype.Deps) (notify.Sink, error) {
	deps = deps.Defaults()
	return New(Config{Name: name, URL: o.url, RoutingKey: o.routingKey, Message: o.message,
		HTTPClient: deps.HTTP, Clock: deps.Clock, Limiter: o.limiter(deps.Limits), TemplateFailed: deps.TemplateFailed})
}

// Probe dials PagerDuty's host: the Events API has no call that checks a
// routing key without sending an event.
func (o *options) Probe(ctx context.Context, _ sinktype.Deps) (string, error) {
	return sinktype.ProbeHost(ctx, o.url)
}

// Render returns the one request Send makes for ev, with the routing key
// replaced by the name of its variable. When the title template fails on
// ev, the request holds the default summary, as Send would post it, and the
// error says why.
func (o *options) Render(ev *event.Event) ([]sinktype.Request, error) {
	body, err := Body(ev, o.message, "$"+o.routingKeyEnv)
	if body == nil {
		return nil, err
	}
	return []sinktype.Request{{What: "POST " + o.Target(), Body: body}}, err
}
