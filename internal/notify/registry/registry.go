// Package registry lists relay's sink types. The rules parser, the service,
// relay check and the docs read it: adding a sink type is its package under
// internal/notify and one line here.
package registry

import (
	"slices"

	"github.com/relay-energy/relay/internal/notify/console"
	"github.com/relay-energy/relay/internal/notify/dingtalk"
	"github.com/relay-energy/relay/internal/notify/email"
	"github.com/relay-energy/relay/internal/notify/feishu"
	"github.com/relay-energy/relay/internal/notify/kafka"
	"github.com/relay-energy/relay/internal/notify/mqtt"
	"github.com/relay-energy/relay/internal/notify/nats"
	"github.com/relay-energy/relay/internal/notify/pagerduty"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/notify/slack"
	"github.com/relay-energy/relay/internal/notify/teams"
	"github.com/relay-energy/relay/internal/notify/telegram"
	"github.com/relay-energy/relay/internal/notify/webhook"
	"github.com/relay-energy/relay/internal/notify/wecom"
)

// types are the sink types, in the order docs and errors list them.
var types = []sinktype.Type{
	nats.Type,
	mqtt.Type,
	kafka.Type,
	slack.Type,
	webhook.Type,
	console.Type,
	dingtalk.Type,
	feishu.Type,
	wecom.Type,
	teams.Type,
	pagerduty.Type,
	telegram.Type,
	email.Type,
}

// Types returns every sink type.
func Types() []sinktype.Type { return slices.Clone(types) }

// Lookup returns the sink type called name.
func Lookup(name string) (sinktype.Type, bool) {
	for _, t := range types {
		if t.Name == name {
			return t, true
		}
	}
	return sinktype.Type{}, false
}

// Names returns the names of the sink types.
func Names() []string {
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = t.Name
	}
	return out
}
