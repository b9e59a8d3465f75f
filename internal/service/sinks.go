package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/route"
)

// SinkEnvProblems reports every sink of rules the environment cannot serve,
// such as nats sinks without RELAY_NATS_URL or Slack channel sinks without
// RELAY_SLACK_TOKEN. Each problem names the file, line and sink.
func SinkEnvProblems(r *route.Rules, cfg config.Config) []error {
	return envProblems(r, SinkEnv(cfg))
}

// envProblems reports every sink of r that needs a variable env lacks.
func envProblems(r *route.Rules, env sinktype.Env) []error {
	var out []error
	for i, s := range r.Sinks {
		n, ok := s.Config.(sinktype.Needer)
		if !ok {
			continue
		}
		for _, need := range env.Missing(n.Needs()) {
			out = append(out, &route.Error{File: r.File, Line: s.Line, Field: fmt.Sprintf("sinks[%d]", i),
				Msg: fmt.Sprintf("%s sink %q needs environment variable %s, which is not set", s.Type, s.Name, need)})
		}
	}
	return out
}

// SinkEnv returns what of cfg NATS and Slack sinks reach through.
func SinkEnv(cfg config.Config) sinktype.Env {
	return sinktype.Env{NATSURL: cfg.NATS.URL, SlackToken: cfg.Slack.Token, SlackAPIURL: cfg.Slack.APIURL, SlackAppToken: cfg.Slack.AppToken}
}

// buildTargets makes one delivery target per sink of rules.
func buildTargets(ctx context.Context, rules *route.Rules, deps sinktype.Deps) ([]deliver.Target, error) {
	if err := errors.Join(envProblems(rules, deps.Env)...); err != nil {
		return nil, err
	}
	targets := make([]deliver.Target, 0, len(rules.Sinks))
	for _, s := range rules.Sinks {
		sink, err := s.Config.Build(ctx, s.Name, deps)
		if err != nil {
			// Rules refused leave the running sinks alone: let go of
			// what the sinks built so far hold (an MQTT sink's share of
			// its broker's connection).
			closeSinks(targets)
			return nil, fmt.Errorf("%s:%d: sink %q: %w", rules.File, s.Line, s.Name, err)
		}
		targets = append(targets, deliver.Target{Sink: sink, MaxAge: s.MaxAge, MaxRetryAfter: s.MaxRetryAfter,
			Type: s.Type, Target: s.Config.Target()})
	}
	return targets, nil
}
