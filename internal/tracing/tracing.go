// Package tracing is relay's OpenTelemetry tracing (docs/design.md §11,
// "Traces"): the tracer built from the standard OTEL_* variables, exporting
// by OTLP over HTTP, and the spans relay makes of a poll, of its calls to the
// upstream, of each alarm transition and of each delivery attempt.
//
// Tracing is off unless the variables ask for it. A nil or off *Tracer
// starts nothing and costs a nil check: every caller asks Enabled before it
// builds an attribute.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of relay's spans.
const ScopeName = "github.com/relay-energy/relay"

// The variables FromEnv reads itself; the OTLP exporter, the resource and
// the sampler read the other OTEL_* variables.
const (
	EnvSDKDisabled     = "OTEL_SDK_DISABLED"
	EnvExporter        = "OTEL_TRACES_EXPORTER"
	EnvEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol  = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	defaultServiceName = "relay"
)

// Tracer makes relay's spans. A nil Tracer is off.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TraceContext
}

// Config builds a Tracer without reading the environment's choice of
// exporter (tests, the benchmark).
type Config struct {
	// Exporter receives the spans, through a batch span processor. Nil
	// builds the OTLP/HTTP exporter, which reads the OTEL_EXPORTER_OTLP_*
	// variables, to EndpointURL when set.
	Exporter sdktrace.SpanExporter
	// EndpointURL is the full OTLP/HTTP traces URL, such as
	// http://127.0.0.1:4318/v1/traces; empty leaves it to the variables.
	EndpointURL string
	// Version is relay's version, the resource's service.version.
	Version string
	// Sampler decides which traces are recorded; nil leaves it to
	// OTEL_TRACES_SAMPLER (default: parent-based, always on).
	Sampler sdktrace.Sampler
	// Sync exports every span as it ends instead of in batches (tests).
	Sync bool
}

// FromEnv returns the Tracer the OTEL_* variables ask for, read through
// lookup, or nil when they ask for none: tracing is on when
// OTEL_TRACES_EXPORTER (a list) holds otlp, or when it is unset and
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set.
// OTEL_TRACES_EXPORTER=none and OTEL_SDK_DISABLED=true turn it off. Spans go
// by OTLP over HTTP (http/protobuf, or http/json); an exporter or protocol
// relay does not have, or an endpoint that is not an http or https URL, is
// an error that names the variable. The exporter, the resource
// (OTEL_SERVICE_NAME, default relay; OTEL_RESOURCE_ATTRIBUTES), the sampler
// (OTEL_TRACES_SAMPLER) and the batch processor (OTEL_BSP_*) read their own
// variables from the process's environment.
func FromEnv(ctx context.Context, lookup func(string) (string, bool), version string) (*Tracer, error) {
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	if strings.EqualFold(get(EnvSDKDisabled), "true") {
		return nil, nil
	}
	endpoint, endpointVar := get(EnvTracesEndpoint), EnvTracesEndpoint
	if endpoint == "" {
		endpoint, endpointVar = get(EnvEndpoint), EnvEndpoint
	}
	exporters := ExporterList(get(EnvExporter))
	switch {
	case len(exporters) == 0:
		if endpoint == "" {
			return nil, nil
		}
	case slices.Contains(exporters, "otlp"):
		// The variable is a list: relay has otlp; the others are not its
		// to make (a platform's fleet-wide "otlp,console").
	case slices.Equal(exporters, []string{"none"}):
		return nil, nil
	default:
		return nil, fmt.Errorf("tracing: %s=%q: relay exports traces by otlp only (or none to turn them off)", EnvExporter, strings.Join(exporters, ","))
	}
	protocol, protocolVar := get(EnvTracesProtocol), EnvTracesProtocol
	if protocol == "" {
		protocol, protocolVar = get(EnvProtocol), EnvProtocol
	}
	switch protocol {
	case "", "http/protobuf", "http/json":
	case "grpc":
		return nil, fmt.Errorf("tracing: %s=grpc: relay exports OTLP over HTTP only; set it to http/protobuf and point %s at the collector's OTLP/HTTP port (usually 4318)", protocolVar, EnvEndpoint)
	default:
		return nil, fmt.Errorf("tracing: %s=%q: relay exports OTLP by http/protobuf or http/json", protocolVar, protocol)
	}
	if endpoint != "" {
		if err := checkEndpoint(endpoint); err != nil {
			return nil, fmt.Errorf("tracing: %s: %w", endpointVar, err)
		}
	}
	return New(ctx, Config{Version: version})
}

// ExporterList is the value of OTEL_TRACES_EXPORTER as the list it is,
// trimmed and lower case, without empty members.
func ExporterList(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.ToLower(strings.TrimSpace(e)); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// checkEndpoint reports what is wrong with an OTLP/HTTP endpoint, without
// repeating it: it may hold credentials.
func checkEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("not an http or https URL (OTLP over HTTP, such as http://collector:4318)")
	}
	if u.Host == "" {
		return errors.New("the URL names no host")
	}
	return nil
}

// New returns a Tracer exporting as cfg says, with W3C trace context.
func New(ctx context.Context, cfg Config) (*Tracer, error) {
	exp := cfg.Exporter
	if exp == nil {
		var opts []otlptracehttp.Option
		if cfg.EndpointURL != "" {
			if err := checkEndpoint(cfg.EndpointURL); err != nil {
				return nil, fmt.Errorf("tracing: the OTLP endpoint: %w", err)
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(cfg.EndpointURL))
		}
		var err error
		if exp, err = otlptracehttp.New(ctx, opts...); err != nil {
			return nil, fmt.Errorf("tracing: the OTLP exporter: %w", err)
		}
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(defaultServiceName), semconv.ServiceVersion(cfg.Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("tracing: the resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if cfg.Sync {
		opts = append(opts, sdktrace.WithSyncer(exp))
	} else {
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	if cfg.Sampler != nil {
		opts = append(opts, sdktrace.WithSampler(cfg.Sampler))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	return &Tracer{provider: tp, tracer: tp.Tracer(ScopeName, trace.WithInstrumentationVersion(cfg.Version))}, nil
}

// Enabled reports whether t makes spans. Callers ask it before they build
// anything for a span.
func (t *Tracer) Enabled() bool { return t != nil }

// Shutdown exports the spans still buffered and stops t, within ctx.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flushing the last spans: %w", err)
	}
	return nil
}

// Start starts a span named name under the span of ctx, if any.
func (t *Tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, name, opts...)
}

// Header names of W3C trace context, in events (CloudEvents' distributed
// tracing extension) and in the headers sinks send.
const (
	TraceParent = "traceparent"
	TraceState  = "tracestate"
)

// Parent is a span context as W3C trace context writes it: the traceparent
// and tracestate values an event carries to its deliveries.
type Parent struct {
	TraceParent, TraceState string
}

// ParentOf returns the W3C trace context of the span of ctx; empty when ctx
// holds none.
func (t *Tracer) ParentOf(ctx context.Context) Parent {
	c := propagation.MapCarrier{}
	t.prop.Inject(ctx, c)
	return Parent{TraceParent: c[TraceParent], TraceState: c[TraceState]}
}

// ContextOf returns ctx with p as its remote parent span; ctx as it is when
// p is empty or not valid trace context.
func (t *Tracer) ContextOf(ctx context.Context, p Parent) context.Context {
	if p.TraceParent == "" {
		return ctx
	}
	c := propagation.MapCarrier{TraceParent: p.TraceParent}
	if p.TraceState != "" {
		c[TraceState] = p.TraceState
	}
	return t.prop.Extract(ctx, c)
}

// Attributes of relay's own, beside those of the semantic conventions.
const (
	AttrSinkType   = attribute.Key("relay.sink.type")
	AttrSinkTarget = attribute.Key("relay.sink.target")
	AttrTenant     = attribute.Key("relay.tenant_id")
	AttrStation    = attribute.Key("relay.station_id")
	AttrOrigin     = attribute.Key("relay.origin_id")
	AttrEventID    = attribute.Key("relay.event.id")
	AttrTransition = attribute.Key("relay.transition")
	AttrLevel      = attribute.Key("relay.level")
	AttrInferred   = attribute.Key("relay.inferred")
	AttrAttempt    = attribute.Key("relay.attempt")
	AttrDigest     = attribute.Key("relay.digest")
	AttrQuery      = attribute.Key("relay.query")
	AttrPage       = attribute.Key("relay.page")
	AttrRecords    = attribute.Key("relay.records")
	AttrError      = attribute.Key("relay.error")
	AttrRetryIn    = attribute.Key("relay.retry_in")
	AttrReason     = attribute.Key("relay.reason")
	AttrKind       = attribute.Key("relay.dead_letter.kind")
)
