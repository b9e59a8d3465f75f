package tracing

import (
	"context"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/relay-energy/relay/internal/tracing/tracingtest"
)

func lookup(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func TestTracingIsOffUnlessTheVariablesAskForIt(t *testing.T) {
	for name, vars := range map[string]map[string]string{
		"no variables":   {},
		"exporter none":  {EnvExporter: "none", EnvEndpoint: "http://127.0.0.1:4318"},
		"SDK disabled":   {EnvSDKDisabled: "true", EnvExporter: "otlp"},
		"only a service": {"OTEL_SERVICE_NAME": "relay-east"},
		"empty endpoint": {EnvEndpoint: " "},
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := FromEnv(context.Background(), lookup(vars), "test")
			if err != nil || tr.Enabled() {
				t.Fatalf("FromEnv = %v, %v; want off", tr, err)
			}
			// Off costs nothing and fails nothing.
			if tr.Transitions(context.Background()) != nil || tr.Shutdown(context.Background()) != nil {
				t.Fatal("an off tracer made something")
			}
			rt := http.DefaultTransport
			if tr.Transport(rt) != rt {
				t.Fatal("an off tracer wrapped the transport")
			}
		})
	}
}

func TestTracingIsOnForAnEndpointOrTheOTLPExporter(t *testing.T) {
	c := tracingtest.Start()
	defer c.Close()
	for name, vars := range map[string]map[string]string{
		"endpoint":             {EnvEndpoint: c.BaseURL()},
		"traces endpoint":      {EnvTracesEndpoint: c.URL()},
		"otlp without address": {EnvExporter: "otlp"},
		"http/json":            {EnvExporter: "otlp", EnvProtocol: "http/json"},
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := FromEnv(context.Background(), lookup(vars), "test")
			if err != nil || !tr.Enabled() {
				t.Fatalf("FromEnv = %v, %v; want on", tr, err)
			}
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestWhatRelayCannotExportIsAClearError(t *testing.T) {
	for name, c := range map[string]struct {
		vars map[string]string
		want []string
	}{
		"an unknown exporter": {map[string]string{EnvExporter: "zipkin"}, []string{EnvExporter, `"zipkin"`, "otlp only"}},
		"console exporter":    {map[string]string{EnvExporter: "console"}, []string{EnvExporter, "otlp only"}},
		"grpc": {map[string]string{EnvEndpoint: "http://collector:4317", EnvProtocol: "grpc"},
			[]string{EnvProtocol + "=grpc", "http/protobuf", "4318"}},
		"grpc for traces": {map[string]string{EnvExporter: "otlp", EnvTracesProtocol: "grpc"}, []string{EnvTracesProtocol}},
		"another protocol": {map[string]string{EnvExporter: "otlp", EnvProtocol: "thrift"},
			[]string{EnvProtocol, `"thrift"`}},
		"an endpoint without a scheme": {map[string]string{EnvEndpoint: "collector:4318"},
			[]string{EnvEndpoint, "not an http or https URL"}},
		"an endpoint that is no URL": {map[string]string{EnvTracesEndpoint: "http://user:pa ss@[::1"},
			[]string{EnvTracesEndpoint, "not a URL"}},
		"an endpoint without a host": {map[string]string{EnvEndpoint: "http:///v1/traces"},
			[]string{EnvEndpoint, "no host"}},
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := FromEnv(context.Background(), lookup(c.vars), "test")
			if err == nil {
				_ = tr.Shutdown(context.Background())
				t.Fatal("no error")
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "pa ss") {
				t.Errorf("error %q repeats the endpoint's password", err)
			}
		})
	}
}

func TestTheUpstreamCallsOfAPollAreChildSpansWithoutQueryOrHeaders(t *testing.T) {
	c := tracingtest.Start()
	defer c.Close()
	tr, err := New(context.Background(), Config{EndpointURL: c.URL(), Version: "v9.9.9", Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	defer upstream.Close()
	client := &http.Client{Transport: tr.Transport(nil)}

	ctx, poll := tr.StartPoll(context.Background(), "current", 1)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, upstream.URL+"/api/alarms?token=query-secret-1#frag", nil)
	req.Header.Set("Authorization", "header-secret-2")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := req.Header.Get("traceparent"); got != "" {
		t.Fatalf("trace context sent upstream: %q", got)
	}
	ts := tr.Transitions(ctx)
	p := ts.Start("alarm start", AttrOrigin.String("1"))
	ts.End(nil)
	EndPoll(poll, 1, nil)
	// A request outside a poll makes no span.
	resp, err = client.Get(upstream.URL + "/untraced")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	spans := c.Spans()
	byName := map[string]tracingtest.Span{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	if len(spans) != 4 {
		t.Fatalf("got %d spans, want poll, POST, alarm start, store commit: %v", len(spans), byName)
	}
	pollSpan, post, root, commit := byName["poll current"], byName["POST"], byName["alarm start"], byName["store commit"]
	if post.ParentID() != pollSpan.ID() || post.TraceID() != pollSpan.TraceID() {
		t.Fatal("the upstream call is not a child of its poll")
	}
	if got := post.Attr("url.full"); got != upstream.URL+"/api/alarms" {
		t.Fatalf("url.full %q, want the URL without query or fragment", got)
	}
	for key, want := range map[string]string{"http.request.method": "POST", "http.response.status_code": "418", "server.address": "127.0.0.1"} {
		if got := post.Attr(key); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	if root.TraceID() == pollSpan.TraceID() || root.ParentID() != "" {
		t.Fatal("a transition's root is not a trace of its own")
	}
	if len(root.Links) != 1 || pollSpan.ID() != spanID(root.Links[0].SpanId) {
		t.Fatal("a transition's root does not link to its poll")
	}
	if root.StartTimeUnixNano != pollSpan.StartTimeUnixNano {
		t.Fatal("a transition's root does not start with its poll")
	}
	if commit.ParentID() != root.ID() || commit.TraceID() != root.TraceID() {
		t.Fatal("store commit is not a child of the transition's root")
	}
	if p.TraceParent != root.TraceParent() {
		t.Fatalf("the event's traceparent %q is not its root's %q", p.TraceParent, root.TraceParent())
	}
	if got := tracingtest.Attr(root.Resource, "service.name"); got != "relay" {
		t.Fatalf("service.name %q", got)
	}
	if got := tracingtest.Attr(root.Resource, "service.version"); got != "v9.9.9" {
		t.Fatalf("service.version %q", got)
	}
	texts := tracingtest.Texts(spans)
	for where, text := range texts {
		for _, secret := range []string{"query-secret-1", "header-secret-2", "frag"} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds %q", where, secret)
			}
		}
	}
}

func spanID(b []byte) string { return hex.EncodeToString(b) }

// discard is an exporter that drops every span.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

func TestAnEventsTraceContextIsTheParentOfItsDeliveries(t *testing.T) {
	tr, err := New(context.Background(), Config{Exporter: discard{}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	ts := tr.Transitions(context.Background())
	p := ts.Start("alarm end")
	ts.End(nil)
	ctx := tr.ContextOf(context.Background(), p)
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsRemote() || tr.ParentOf(ctx) != p {
		t.Fatalf("context of %v is %v", p, sc)
	}
	if tr.ContextOf(context.Background(), Parent{}) != context.Background() {
		t.Fatal("an empty parent made a context")
	}
	bad := tr.ContextOf(context.Background(), Parent{TraceParent: "00-zz-01"})
	if trace.SpanContextFromContext(bad).IsValid() {
		t.Fatal("a malformed traceparent made a valid parent")
	}
}
