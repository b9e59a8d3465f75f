package tracing

// What an adversarial review found: each test failed on the code reviewed.

import (
	"context"
	"testing"

	"github.com/relay-energy/relay/internal/tracing/tracingtest"
)

// OTEL_TRACES_EXPORTER is a comma-separated list (OpenTelemetry's
// "Environment Variable Specification", general SDK configuration), and
// platforms set it fleet-wide ("otlp,console" in a debugging profile, or
// "otlp,prometheus"-style lists from an operator's injected defaults). The
// spec asks an SDK to warn about a value it does not know and ignore it; relay
// refuses to start (the alarm relay down for a telemetry variable), though
// the list asks for otlp, which relay has.
func TestTracingAnExporterListWithOTLPTurnsTracingOn(t *testing.T) {
	c := tracingtest.Start()
	defer c.Close()
	tr, err := FromEnv(context.Background(), lookup(map[string]string{EnvExporter: "otlp,console", EnvEndpoint: c.BaseURL()}), "test")
	if err != nil || !tr.Enabled() {
		t.Fatalf("OTEL_TRACES_EXPORTER=otlp,console: FromEnv = %v, %v; want tracing on by otlp (console ignored with a warning)", tr, err)
	}
	_ = tr.Shutdown(context.Background())
}
