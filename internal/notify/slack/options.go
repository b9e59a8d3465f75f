package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
	"github.com/relay-energy/relay/internal/termtext"
)

// pace is Slack's limit of one message a second in a channel.
var pace = notify.Window{N: 1, Per: time.Second}

// Type is the Slack sink type.
var Type = sinktype.Type{
	Name: "slack",
	Doc:  "posts to a Slack channel with the bot token (RELAY_SLACK_TOKEN), ends threaded under their starts; or to an incoming webhook",
	Options: append([]sinktype.Option{
		{Key: "channel", Doc: "channel id or name the bot posts to (needs RELAY_SLACK_TOKEN; invite the bot); with RELAY_SLACK_APP_TOKEN set, starts carry Acknowledge and Shelve buttons"},
		{Key: "webhook_url_env", Doc: "variable holding an incoming-webhook URL (a secret), instead of channel"},
		{Key: "webhook_url", Doc: "an incoming-webhook URL written in the rules (prefer webhook_url_env: the URL is a secret)"},
	}, sinktype.MessageOptions("attachment's title", "message's text")...),
	Decode: decode,
}

type options struct {
	channel       string
	webhookURL    string
	webhookURLEnv string
	message       *sinktype.Message
}

func decode(d *sinktype.Decoder) sinktype.Config {
	o := &options{message: d.Message(slackEscape)}
	switch d.OneOf("a slack sink", "channel", "webhook_url_env", "webhook_url") {
	case "channel":
		o.channel = d.String("channel")
	case "webhook_url_env":
		o.webhookURLEnv, o.webhookURL = d.URLEnv("webhook_url_env")
	case "webhook_url":
		o.webhookURL = d.URL("webhook_url")
	}
	return o
}

func (o *options) Target() string {
	if o.channel != "" {
		return "channel " + o.channel
	}
	return "incoming webhook " + sinktype.RedactURL(o.webhookURL, false)
}

func (o *options) Host(env sinktype.Env) string {
	if o.webhookURL != "" {
		return sinktype.RedactURL(o.webhookURL, false)
	}
	return sinktype.RedactURL(apiURL(env.SlackAPIURL), false)
}

func (o *options) Summary() []string {
	var out []string
	if o.webhookURLEnv != "" {
		out = append(out, "webhook_url_env: "+o.webhookURLEnv+" (set)")
	}
	if o.message.Templated() {
		out = append(out, "templated")
	}
	return out
}

func (o *options) AddSecrets(set *redact.Set) {
	if o.webhookURL != "" {
		set.Add(o.webhookURL)
		set.AddURL(o.webhookURL, true)
	}
}

func (o *options) Destination() string {
	if o.channel != "" {
		return "slack:" + o.channel
	}
	return ""
}

// Needs names the bot token a channel sink posts with; an incoming webhook
// needs nothing of relay's.
func (o *options) Needs() []string {
	if o.channel != "" {
		return []string{"RELAY_SLACK_TOKEN"}
	}
	return nil
}

// appToken is the app-level token a channel sink's buttons are read with;
// an incoming webhook has no buttons.
func (o *options) appToken(env sinktype.Env) string {
	if o.channel == "" {
		return ""
	}
	return env.SlackAppToken
}

func (o *options) limiter(deps sinktype.Deps) *notify.Limiter {
	key := "slack:channel " + o.channel
	if o.webhookURL != "" {
		key = "slack:webhook " + o.webhookURL
	}
	return deps.Limits.Get(key, pace)
}

func (o *options) Build(_ context.Context, name string, deps sinktype.Deps) (notify.Sink, error) {
	deps = deps.Defaults()
	msg, app := o.message, o.appToken(deps.Env)
	if app == "" {
		// Without buttons, a start says how to acknowledge it.
		m := *o.message
		m.EndWithAckLine("\n\n")
		msg = &m
	}
	return New(Config{
		Name: name, Channel: o.channel, Token: deps.Env.SlackToken, APIURL: deps.Env.SlackAPIURL, AppToken: app,
		WebhookURL: o.webhookURL, HTTPClient: deps.HTTP, Clock: deps.Clock, Logger: deps.Logger,
		Limiter: o.limiter(deps), Message: msg, TemplateFailed: deps.TemplateFailed,
	})
}

// Probe checks the bot token with auth.test, which posts nothing; an
// incoming webhook has no such call, so its host is dialled.
func (o *options) Probe(ctx context.Context, deps sinktype.Deps) (string, error) {
	if o.webhookURL != "" {
		return sinktype.ProbeHost(ctx, o.webhookURL)
	}
	token := deps.Env.SlackToken
	resp, err := slackapi.New(token, slackapi.OptionAPIURL(apiURL(deps.Env.SlackAPIURL))).AuthTestContext(ctx)
	if err != nil {
		return "", fmt.Errorf("slack auth.test: %s", redact.New(token).String(err.Error()))
	}
	return fmt.Sprintf("token valid for team %s as %s; posts to channel %s (the bot must be invited)",
		termtext.Escape(resp.Team), termtext.Escape(resp.User), o.channel), nil
}

// Render shows the messages as JSON, and the error of a template that failed
// and left the default in its place. With the bot token, slack-go sends the
// same fields form-encoded, the attachments as JSON; an end updates the
// start (ts of the start) and replies in its thread.
func (o *options) Render(ev *event.Event) ([]sinktype.Request, error) {
	text, att, terr := compose(o.message, ev)
	if o.webhookURL != "" {
		body, err := json.Marshal(webhookMessage{Text: text, Attachments: []slackapi.Attachment{att}})
		if err != nil {
			return nil, err
		}
		return []sinktype.Request{{What: "POST " + o.Target(), Body: body}}, terr
	}
	type message struct {
		Channel     string                `json:"channel"`
		TS          string                `json:"ts,omitempty"`
		ThreadTS    string                `json:"thread_ts,omitempty"`
		Text        string                `json:"text"`
		Attachments []slackapi.Attachment `json:"attachments,omitempty"`
	}
	const startTS = "<ts of the start>"
	var msgs []message
	var whats []string
	if ev.Data.Transition == event.Start {
		msgs = append(msgs, message{Channel: o.channel, Text: text, Attachments: []slackapi.Attachment{att}})
		whats = append(whats, "chat.postMessage to channel "+o.channel)
	} else {
		msgs = append(msgs, message{Channel: o.channel, TS: startTS, Text: text, Attachments: []slackapi.Attachment{att}},
			message{Channel: o.channel, ThreadTS: startTS, Text: replyText(ev)})
		whats = append(whats, "chat.update in channel "+o.channel, "chat.postMessage (thread reply) to channel "+o.channel)
	}
	out := make([]sinktype.Request, len(msgs))
	for i, m := range msgs {
		body, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		out[i] = sinktype.Request{What: whats[i], Body: body}
	}
	return out, terr
}

// apiURL returns the Web API base URL with its trailing slash.
func apiURL(u string) string {
	if u == "" {
		u = DefaultAPIURL
	}
	if !strings.HasSuffix(u, "/") {
		u += "/"
	}
	return u
}
