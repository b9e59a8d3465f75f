package pagerduty

import (
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/robot"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// events are the payloads of a pagerduty sink, whose endpoint and routing
// key robot.Options hold as its URL and secret.
type events struct{}

// decode reads the endpoint, by default the Events API v2's, and the
// variable holding the routing key, which has 32 characters.
func decode(d *sinktype.Decoder) (robot.Options, robot.Payload) {
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
	return o, events{}
}

// Summary names the routing key's variable.
func (events) Summary(o *robot.Options) []string { return []string{"routing_key_env: " + o.SecretEnv} }

// Body is the package's Body with the sink's title template and routing
// key (its variable's name, in a rendering).
func (events) Body(ev *event.Event, o *robot.Options) ([]byte, error) {
	return Body(ev, o.Message, o.Secret)
}
