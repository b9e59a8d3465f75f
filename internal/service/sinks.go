package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

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
	// pacers space Slack messages per channel, across sinks and reloads.
	pacers *pacers
}

// pacers holds one notify.Pacer per Slack channel (or incoming webhook), so
// that two sinks posting to one channel, or a sink rebuilt by a reload, keep
// to Slack's one message a second in that channel.
type pacers struct {
	clock clock.Clock
	mu    sync.Mutex
	by    map[string]*notify.Pacer
}

func (p *pacers) get(key string) *notify.Pacer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.by == nil {
		p.by = map[string]*notify.Pacer{}
	}
	if p.by[key] == nil {
		p.by[key] = notify.NewPacer(time.Second, p.clock)
	}
	return p.by[key]
}

// SinkEnvProblems reports every sink of rules the environment cannot serve:
// nats sinks without RELAY_NATS_URL, Slack channel sinks without
// RELAY_SLACK_TOKEN. Each problem names the file, line and sink.
func SinkEnvProblems(r *route.Rules, cfg config.Config) []error {
	var out []error
	for i, s := range r.Sinks {
		var need string
		switch {
		case s.Type == route.TypeNATS && strings.TrimSpace(cfg.NATS.URL) == "":
			need = "RELAY_NATS_URL"
		case s.Type == route.TypeSlack && s.Channel != "" && strings.TrimSpace(cfg.Slack.Token) == "":
			need = "RELAY_SLACK_TOKEN"
		default:
			continue
		}
		out = append(out, &route.Error{File: r.File, Line: s.Line, Field: fmt.Sprintf("sinks[%d]", i),
			Msg: fmt.Sprintf("%s sink %q needs environment variable %s, which is not set", s.Type, s.Name, need)})
	}
	return out
}

// buildTargets makes one delivery target per sink of rules.
func buildTargets(ctx context.Context, rules *route.Rules, d sinkDeps) ([]notify.Target, error) {
	if err := errors.Join(SinkEnvProblems(rules, d.cfg)...); err != nil {
		return nil, err
	}
	targets := make([]notify.Target, 0, len(rules.Sinks))
	for _, s := range rules.Sinks {
		sink, err := buildSink(ctx, s, d)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: sink %q: %w", rules.File, s.Line, s.Name, err)
		}
		targets = append(targets, notify.Target{Sink: sink, MaxAge: s.MaxAge, MaxRetryAfter: s.MaxRetryAfter})
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
		key := "channel " + s.Channel
		if s.WebhookURL != "" {
			key = "webhook " + s.WebhookURL
		}
		return notify.NewSlack(notify.SlackConfig{
			Name: s.Name, Channel: s.Channel, Token: d.cfg.Slack.Token, APIURL: d.cfg.Slack.APIURL,
			WebhookURL: s.WebhookURL, HTTPClient: d.http, Clock: d.clock, Logger: d.log,
			Pacer: d.pacers.get(key),
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
