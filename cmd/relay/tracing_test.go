package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/tracing/tracingtest"
)

// OTEL_* variables relay cannot honour (a platform may set them for every
// pod) turn tracing off with an error in the log; relay runs on. A list
// holding otlp turns it on, the other exporters left out with a warning.
func TestTracingVariablesNeverStopRelay(t *testing.T) {
	c := tracingtest.Start()
	defer c.Close()
	for _, tc := range []struct {
		name    string
		env     map[string]string
		on      bool
		logSays string
	}{
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
		{"zipkin", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, "otlp only"},
		{"a list with otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp,console", "OTEL_EXPORTER_OTLP_ENDPOINT": c.BaseURL()}, true, "exporter=console"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var logs bytes.Buffer
			tr, stop, err := startTracing(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)), nil)
			defer stop()
			if err != nil || tr.Enabled() != tc.on {
				t.Fatalf("startTracing: %v, on %v; want no error, on %v", err, tr.Enabled(), tc.on)
			}
			if !strings.Contains(logs.String(), tc.logSays) {
				t.Errorf("the log does not say %q:\n%s", tc.logSays, logs.String())
			}
		})
	}
}
