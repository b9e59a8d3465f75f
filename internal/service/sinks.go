package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/nats-io/nats.go"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/route"
)

// sinkDeps is what building sinks needs besides the rules.
type sinkDeps struct {
	cfg     config.Config
	console io.Writer
	clock   clock.Clock
	log     *slog.Logger
	http    *http.Client
	// nats returns the shared NATS connection, connecting on first use.
	nats func(ctx context.Context) (*nats.Conn, error)
}

// checkSinkEnv reports, for every sink of rules, a setting the environment
// lacks: RELAY_NATS_URL for nats sinks, RELAY_SLACK_TOKEN for Slack sinks that
// post with the bot token.
func checkSinkEnv(rules *route.Rules, cfg config.Config) error {
	for _, s := range rules.Sinks {
		switch {
		case s.Type == "nats" && cfg.NATS.URL == "":
			return fmt.Errorf("%s:%d: sink %q is a nats sink and RELAY_NATS_URL is not set", rules.File, s.Line, s.Name)
		case s.Type == "slack" && s.WebhookURL == "" && cfg.Slack.Token == "":
			return fmt.Errorf("%s:%d: sink %q posts to channel %s and RELAY_SLACK_TOKEN is not set", rules.File, s.Line, s.Name, s.Channel)
		}
	}
	return nil
}

// buildTargets makes one delivery target per sink of rules.
func buildTargets(ctx context.Context, rules *route.Rules, d sinkDeps) ([]notify.Target, error) {
	if err := checkSinkEnv(rules, d.cfg); err != nil {
		return nil, err
	}
	targets := make([]notify.Target, 0, len(rules.Sinks))
	for _, s := range rules.Sinks {
		sink, err := buildSink(ctx, s, d)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: sink %q: %w", rules.File, s.Line, s.Name, err)
		}
		targets = append(targets, notify.Target{Sink: sink, MaxAge: s.MaxAge})
	}
	return targets, nil
}

func buildSink(ctx context.Context, s route.Sink, d sinkDeps) (notify.Sink, error) {
	switch s.Type {
	case "console":
		return notify.NewConsole(s.Name, d.console)
	case "webhook":
		return notify.NewWebhook(notify.WebhookConfig{
			Name: s.Name, URL: s.URL, Headers: s.Headers, Secret: s.Secret, Timeout: s.Timeout,
			HTTPClient: d.http, Clock: d.clock,
		})
	case "slack":
		return notify.NewSlack(notify.SlackConfig{
			Name: s.Name, Channel: s.Channel, Token: d.cfg.Slack.Token, APIURL: d.cfg.Slack.APIURL,
			WebhookURL: s.WebhookURL, HTTPClient: d.http, Clock: d.clock, Logger: d.log,
		})
	case "nats":
		nc, err := d.nats(ctx)
		if err != nil {
			return nil, err
		}
		sink := s
		return notify.NewNATS(nc, notify.NATSConfig{
			Name: s.Name, Subject: sink.RenderSubject, SubjectText: s.SubjectText,
			JetStream: s.JetStream, CreateStream: s.CreateStream, Logger: d.log,
		})
	}
	return nil, fmt.Errorf("unknown sink type %q", s.Type)
}
