// Package sinktype is what every kind of sink provides to the rest of relay
// (docs/design.md §8): its name and options in the rules file, the decoding
// and validation of those options (with file:line:field errors), the
// construction of the sink, a probe for relay check --online, and the
// rendering of what it sends for relay route --render.
//
// Each sink type lives in its own package under internal/notify (slack,
// webhook, dingtalk, ...) and exports one Type; internal/notify/registry
// lists them. The rules parser, the service, relay check and the docs read
// the registry, so that adding a sink type is one new folder, one registry
// line and its docs.
package sinktype

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/redact"
)

// Type is one kind of sink.
type Type struct {
	// Name is the sink's type in the rules file, such as "dingtalk".
	Name string
	// Doc says in one line what the sink sends where, for relay check and
	// the docs.
	Doc string
	// Options are the keys a sink of this type accepts besides name, type,
	// max_age and max_retry_after.
	Options []Option
	// Decode reads the options of one sink. It records every problem in d
	// and may return nil when the options are too broken to use.
	Decode func(d *Decoder) Config
	// Machines says the sink feeds other programs (a bus), not people:
	// alarm management leaves its deliveries alone unless a route says
	// suppress: true, so that the stream stays complete.
	Machines bool
}

// Option is one key of a sink type's options.
type Option struct {
	// Key is the option's key in the rules file.
	Key string
	// Doc says what it sets, its default, and whether it names a variable.
	Doc string
}

// Keys returns the option keys of t.
func (t Type) Keys() []string {
	keys := make([]string, len(t.Options))
	for i, o := range t.Options {
		keys[i] = o.Key
	}
	return keys
}

// Config is the decoded options of one sink. It is immutable and holds the
// secrets the options name (read from the environment at decode time).
type Config interface {
	// Target says where the sink sends, without any secret: a subject
	// template, a channel, a URL's host.
	Target() string
	// Host returns the scheme and host (with its port, if any) the sink
	// reaches, such as https://oapi.dingtalk.com or nats://nats:4222, for
	// relay check --online: never a credential, path or query. env holds
	// relay's own settings, which NATS and Slack sinks reach through.
	Host(env Env) string
	// Summary lists the options worth showing in relay check's table,
	// without any secret (variable names, not their values).
	Summary() []string
	// AddSecrets adds every secret value of the options to set.
	AddSecrets(set *redact.Set)
	// Destination identifies where the sink's memory of an alarm points
	// (the Slack channel of a thread), for sinks whose memory would be
	// wrong elsewhere; "" when the sink's name alone identifies it.
	Destination() string
	// Build makes the sink called name.
	Build(ctx context.Context, name string, deps Deps) (notify.Sink, error)
	// Probe reaches the destination without sending an event where the
	// vendor's API allows it, and otherwise checks what it can (the host
	// answers) and says so. It returns one line for relay check --online.
	Probe(ctx context.Context, deps Deps) (string, error)
	// Render returns what the sink sends for ev, request by request, as it
	// would send them (for an end, as if its start had been delivered), with
	// secrets and per-request signatures left out.
	Render(ev *event.Event) ([]Request, error)
}

// Needer is a Config whose sink reaches through relay's own settings: it
// names the variables it needs (RELAY_NATS_URL, RELAY_SLACK_TOKEN), and
// relay refuses rules with such a sink when one of them is not set.
type Needer interface {
	Needs() []string
}

// Env is what of relay's own settings NATS and Slack sinks reach through.
type Env struct {
	// NATSURL is RELAY_NATS_URL: the NATS servers, comma-separated.
	NATSURL string
	// SlackToken is RELAY_SLACK_TOKEN, the bot token of Slack channel
	// sinks.
	SlackToken string
	// SlackAPIURL is RELAY_SLACK_API_URL; empty means Slack's own.
	SlackAPIURL string
	// SlackAppToken is RELAY_SLACK_APP_TOKEN, the app-level token of
	// Socket Mode; empty means Slack messages carry no buttons.
	SlackAppToken string
}

// Missing returns those of vars, names of relay variables a sink needs, that
// env leaves empty.
func (e Env) Missing(vars []string) []string {
	value := map[string]string{
		"RELAY_NATS_URL":        e.NATSURL,
		"RELAY_SLACK_TOKEN":     e.SlackToken,
		"RELAY_SLACK_API_URL":   e.SlackAPIURL,
		"RELAY_SLACK_APP_TOKEN": e.SlackAppToken,
	}
	var out []string
	for _, v := range vars {
		if strings.TrimSpace(value[v]) == "" {
			out = append(out, v)
		}
	}
	return out
}

// Request is one request a sink sends, as Render shows it.
type Request struct {
	// What names the request: "POST https://oapi.dingtalk.com/robot/send".
	What string
	// Body is the exact body sent.
	Body []byte
}

// Deps is what building and probing sinks needs besides their options.
type Deps struct {
	// Env is relay's own settings that NATS and Slack sinks read.
	Env Env
	// Tenant is the id of the tenant whose sink it is when the process
	// serves a tenants file, "" otherwise: what tells apart two tenants'
	// sinks of one name where a destination needs names of its own (an
	// MQTT client id).
	Tenant string
	// Sink is the name of the sink a Probe reaches ("" elsewhere: Build
	// takes the name), for a destination that tells clients apart by a
	// name made of it (an MQTT client id).
	Sink string
	// Clock paces messages (the real clock when nil).
	Clock clock.Clock
	// Logger receives what a sink notes besides its errors.
	Logger *slog.Logger
	// HTTP is the client HTTP sinks start from (they never follow redirects).
	// To fence them, its transport is notify.FencedTransport of Fence.
	HTTP *http.Client
	// Fence, when set, is asked immediately before a message leaves by the
	// sinks that wait between the Deliverer's check and the wire and do not
	// speak HTTP (email, after its pace); nil never refuses.
	Fence notify.Fence
	// Console is where console sinks write.
	Console io.Writer
	// NATS returns the shared NATS connection, connecting on first use.
	NATS func(ctx context.Context) (*nats.Conn, error)
	// Limits holds one rate limiter per destination, shared by every sink
	// posting there and kept across reloads.
	Limits *notify.Limits
	// TemplateFailed is told when a message template failed on an event
	// and the default text was sent instead (nil: nobody is told).
	TemplateFailed func(sink string, ev *event.Event, err error)
}

// Defaults fills the zero fields of d that have a safe default.
func (d Deps) Defaults() Deps {
	if d.Clock == nil {
		d.Clock = clock.Real()
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.HTTP == nil {
		d.HTTP = &http.Client{}
	}
	if d.Console == nil {
		d.Console = io.Discard
	}
	if d.Limits == nil {
		d.Limits = notify.NewLimits(d.Clock)
	}
	if d.TemplateFailed == nil {
		d.TemplateFailed = func(string, *event.Event, error) {}
	}
	return d
}
