package pagerduty

import (
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/robot"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// Type is the pagerduty sink type.
var Type = sinktype.Type{
	Name: vendor.Name,
	Doc:  "sends a PagerDuty Events API v2 trigger when an alarm starts and a resolve when it ends, keyed by its originId, at most 120 a minute per routing key",
	Options: []sinktype.Option{
		{Key: "routing_key_env", Doc: "variable holding the 32-character Integration Key of the service's Events API v2 integration (required; a secret)"},
		{Key: "url", Doc: "the Events API v2 endpoint (default " + DefaultURL + ")"},
		{Key: "title", Doc: "Go template of the alert's summary over the fields of subjects, as plain text cut to 1024 characters (default: the level, the alarm and the place); " +
			"there is no text template: custom_details carries the event's data"},
	},
	Decode: decode,
}

// options are what a pagerduty sink decodes of its own: nothing, besides
// the endpoint and the routing key, which robot.Options hold as its URL and
// secret.
type options struct{}

func decode(d *sinktype.Decoder) sinktype.Config {
	o := robot.Options{URL: DefaultURL}
	if d.Has("url") {
		o.URL = d.URL("url")
	}
	if d.Missing("routing_key_env", "a pagerduty sink needs routing_key_env, the variable holding the Integration Key of an Events API v2 integration") {
		o.SecretEnv, o.Secret = d.Env("routing_key_env")
		if o.Secret != "" && !d.Placeholder(o.Secret) && len(o.Secret) != RoutingKeyLen {
			d.Errorf("routing_key_env", "environment variable %s holds %d characters, not the %d of an Integration Key: copy it from the service's Integrations tab, Events API v2",
				o.SecretEnv, len(o.Secret), RoutingKeyLen)
			o.Secret = ""
		}
	}
	// The summary is plain text: nothing to escape.
	o.Message = d.Message(nil)
	return vendor.Config(o, options{})
}

// Summary names the routing key's variable.
func (options) Summary(o *robot.Options) []string { return []string{"routing_key_env: " + o.SecretEnv} }

// Body is the package's Body with the sink's title template and routing
// key (its variable's name, in a rendering).
func (options) Body(ev *event.Event, o *robot.Options) ([]byte, error) {
	return Body(ev, o.Message, o.Secret)
}
