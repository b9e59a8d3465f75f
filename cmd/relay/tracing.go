package main

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/relay-energy/relay/internal/redact"
	"github.com/relay-energy/relay/internal/tracing"
)

// tracingShutdownTimeout bounds the export of the last spans at exit.
const tracingShutdownTimeout = 5 * time.Second

// startTracing builds the tracer the OTEL_* variables ask for (nil when
// they ask for none, or for what relay cannot export: an error logged, and
// relay runs without traces), with the values of the OTLP headers (which may hold a
// collector's token) added to secrets and the SDK's own errors logged to
// log. stop exports the last spans.
func startTracing(ctx context.Context, log *slog.Logger, secrets *redact.Set) (t *tracing.Tracer, stop func(), err error) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for _, kv := range strings.Split(os.Getenv(name), ",") {
			if _, v, found := strings.Cut(kv, "="); found && secrets != nil {
				if u, err := url.QueryUnescape(strings.TrimSpace(v)); err == nil {
					secrets.AddHeader(u)
				}
				secrets.AddHeader(strings.TrimSpace(v))
			}
		}
	}
	t, err = tracing.FromEnv(ctx, os.LookupEnv, relayVersion())
	if err != nil {
		// Traces are not worth an alarm relay that does not start: the
		// platform may set OTEL_* for every pod.
		log.Error("tracing off: the OTEL_* variables ask for what relay cannot export", "err", err)
		return nil, func() {}, nil
	}
	if !t.Enabled() {
		return nil, func() {}, nil
	}
	for _, e := range tracing.ExporterList(os.Getenv("OTEL_TRACES_EXPORTER")) {
		if e != "otlp" {
			log.Warn("tracing: an exporter of OTEL_TRACES_EXPORTER relay does not have is left out", "exporter", e)
		}
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: the OpenTelemetry SDK failed", "err", err)
	}))
	log.Info("tracing on: spans are exported by OTLP over HTTP")
	return t, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingShutdownTimeout)
		defer cancel()
		if err := t.Shutdown(sctx); err != nil {
			log.Warn("tracing: the last spans were not all exported", "err", err)
		}
	}, nil
}
