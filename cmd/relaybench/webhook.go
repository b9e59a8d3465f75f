package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/notify/webhook"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/tracing"
)

// webhookSecretEnv is the variable the webhook rules read the signing
// secret from; the bench answers it from memory, not from the environment.
const webhookSecretEnv = "RELAYBENCH_WEBHOOK_SECRET"

// webhookRules is the rules file of the webhook figure: every event to one
// signed webhook sink, which alarm management manages (the default for sinks
// that feed people).
const webhookRules = `sinks:
  - name: hook
    type: webhook
    url: %q
    secret_env: ` + webhookSecretEnv + `
routes:
  - name: everything
    to: [hook]
`

// webhookPipeline is the pipeline of the webhook figure and the receiver it
// delivers to.
type webhookPipeline struct {
	*pipeline
	recv *receiver
}

// newWebhookPipeline prepares the starts of alarms distinct synthetic alarms
// for a fresh store in dir, delivered by a webhook sink signed with a fresh
// secret, built from a rules file through the sink registry as the service
// builds it, to a receiver on 127.0.0.1 that verifies every signature.
func newWebhookPipeline(ctx context.Context, dir, name string, alarms int, tracer *tracing.Tracer, log *slog.Logger) (*webhookPipeline, error) {
	raw := make([]byte, 32)
	rand.Read(raw)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(raw)
	recv, err := startReceiver("/hook", alarms, signedIDs(raw))
	if err != nil {
		return nil, err
	}
	p, err := func() (*pipeline, error) {
		rules, err := route.Parse("relaybench-webhook.yaml", fmt.Appendf(nil, webhookRules, recv.url), func(name string) (string, bool) {
			return secret, name == webhookSecretEnv
		})
		if err != nil {
			return nil, err
		}
		rs, ok := rules.Sink("hook")
		if !ok || rs.Type != webhook.Type.Name {
			return nil, errors.New("webhook bench rules: no webhook sink hook")
		}
		sink, err := rs.Config.Build(ctx, rs.Name, sinktype.Deps{Logger: log, HTTP: &http.Client{}}.Defaults())
		if err != nil {
			return nil, err
		}
		target := deliver.Target{Sink: sink, MaxAge: rs.MaxAge, MaxRetryAfter: rs.MaxRetryAfter, Type: rs.Type, Target: rs.Config.Target()}
		return newPipelineTo(dir, name, rules, target, recv.progress, alarms, 0, tracer, log)
	}()
	if err != nil {
		return nil, errors.Join(err, recv.close())
	}
	return &webhookPipeline{pipeline: p, recv: recv}, nil
}

// close closes the store and the receiver.
func (w *webhookPipeline) close() error {
	return errors.Join(w.pipeline.close(), w.recv.close())
}

// webhookPhase measures the webhook figure: WebhookAlarms starts through the
// store, route, alarm management, the Deliverer and the signed webhook sink
// to the local receiver; then, with --alertmanager, the same alarms through
// Alertmanager to the same kind of receiver.
func (b *bench) webhookPhase(ctx context.Context, figs *runFigures) error {
	w, err := newWebhookPipeline(ctx, b.dir, "webhook", b.cfg.WebhookAlarms, b.tracer, b.log)
	if err != nil {
		return err
	}
	res, err := w.run(ctx)
	if err = errors.Join(err, w.close()); err != nil {
		return err
	}
	figs.Webhook = res
	if b.alertmanager == "" {
		return nil
	}
	am, err := runAlertmanager(ctx, b.alertmanager, b.dir, b.cfg.WebhookAlarms, b.log)
	if err != nil {
		return fmt.Errorf("alertmanager %s: %w", b.alertmanager, err)
	}
	figs.Alertmanager = &am
	return nil
}
