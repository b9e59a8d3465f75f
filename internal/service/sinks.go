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
	var out []error
	for i, s := range r.Sinks {
		if s.Config == nil {
			continue
		}
		for _, need := range s.Config.Needs(cfg) {
			out = append(out, &route.Error{File: r.File, Line: s.Line, Field: fmt.Sprintf("sinks[%d]", i),
				Msg: fmt.Sprintf("%s sink %q needs environment variable %s, which is not set", s.Type, s.Name, need)})
		}
	}
	return out
}

// buildTargets makes one delivery target per sink of rules.
func buildTargets(ctx context.Context, rules *route.Rules, deps sinktype.Deps) ([]deliver.Target, error) {
	if err := errors.Join(SinkEnvProblems(rules, deps.Config)...); err != nil {
		return nil, err
	}
	targets := make([]deliver.Target, 0, len(rules.Sinks))
	for _, s := range rules.Sinks {
		sink, err := s.Config.Build(ctx, s.Name, deps)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: sink %q: %w", rules.File, s.Line, s.Name, err)
		}
		targets = append(targets, deliver.Target{Sink: sink, MaxAge: s.MaxAge, MaxRetryAfter: s.MaxRetryAfter})
	}
	return targets, nil
}
