// Package tracingtest is an OTLP/HTTP receiver for tests and the benchmark:
// it decodes the protobuf export requests relay's exporter posts (gzipped or
// not) and keeps their spans, so that a test checks what a collector would
// get rather than what the SDK holds in memory.
package tracingtest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Path is where OTLP/HTTP posts traces.
const Path = "/v1/traces"

// Span is one span received, with the resource and scope it came under.
type Span struct {
	*tracepb.Span
	Resource []*commonpb.KeyValue
	Scope    string
}

// HexID is a span or trace id as W3C trace context writes it.
func HexID(b []byte) string { return hex.EncodeToString(b) }

// TraceID is the span's trace id in hex.
func (s Span) TraceID() string { return hex.EncodeToString(s.Span.TraceId) }

// ID is the span's id in hex.
func (s Span) ID() string { return hex.EncodeToString(s.Span.SpanId) }

// ParentID is the span's parent's id in hex; empty for a root.
func (s Span) ParentID() string { return hex.EncodeToString(s.Span.ParentSpanId) }

// TraceParent is the W3C traceparent of the span, sampled.
func (s Span) TraceParent() string { return "00-" + s.TraceID() + "-" + s.ID() + "-01" }

// Attr returns the string form of the span's attribute key; "" when absent.
func (s Span) Attr(key string) string { return Attr(s.Attributes, key) }

// HasEvent reports whether the span has an event named name.
func (s Span) HasEvent(name string) bool {
	for _, e := range s.Events {
		if e.Name == name {
			return true
		}
	}
	return false
}

// Attr returns the string form of attribute key among kvs; "" when absent.
func Attr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return valueString(kv.Value)
		}
	}
	return ""
}

func valueString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return v.String()
}

// Collector is an OTLP/HTTP traces endpoint on loopback.
type Collector struct {
	server *httptest.Server

	mu       sync.Mutex
	spans    []Span
	requests int
	bytes    int64
	errs     []string
}

// Start starts a Collector; Close stops it.
func Start() *Collector {
	c := &Collector{}
	c.server = httptest.NewServer(http.HandlerFunc(c.serve))
	return c
}

// URL is the full traces URL, for the exporter's endpoint.
func (c *Collector) URL() string { return c.server.URL + Path }

// BaseURL is the endpoint as OTEL_EXPORTER_OTLP_ENDPOINT names it.
func (c *Collector) BaseURL() string { return c.server.URL }

// Close stops the server.
func (c *Collector) Close() { c.server.Close() }

func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path || r.Method != http.MethodPost {
		c.fail(fmt.Sprintf("%s %s: not an OTLP traces export", r.Method, r.URL.Path))
		http.NotFound(w, r)
		return
	}
	var body io.Reader = r.Body
	if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			c.fail("gzip: " + err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer gz.Close()
		body = gz
	}
	b, err := io.ReadAll(body)
	if err != nil {
		c.fail("body: " + err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		c.fail("protobuf: " + err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				got = append(got, Span{Span: sp, Resource: rs.GetResource().GetAttributes(), Scope: ss.GetScope().GetName()})
			}
		}
	}
	c.mu.Lock()
	c.spans = append(c.spans, got...)
	c.requests++
	c.bytes += r.ContentLength
	c.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (c *Collector) fail(msg string) {
	c.mu.Lock()
	c.errs = append(c.errs, msg)
	c.mu.Unlock()
}

// Spans returns the spans received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Stats returns how many export requests and spans arrived, and the bytes
// of the requests as sent.
func (c *Collector) Stats() (requests, spans int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests, len(c.spans), c.bytes
}

// Errors returns what was wrong with the requests that could not be read.
func (c *Collector) Errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

// Texts returns every text a collector holds of the spans, keyed by where
// it is (span name, attribute, event, link, status, resource), for a check
// that none holds a secret.
func Texts(spans []Span) map[string]string {
	out := map[string]string{}
	add := func(where string, kvs []*commonpb.KeyValue) {
		for _, kv := range kvs {
			out[where+" "+kv.Key] += valueString(kv.Value) + "\n"
		}
	}
	for _, s := range spans {
		w := "span " + s.Name
		out[w+" name"] += s.Name + "\n"
		out[w+" status"] += s.GetStatus().GetMessage() + "\n"
		out[w+" tracestate"] += s.TraceState + "\n"
		add(w+" attribute", s.Attributes)
		add(w+" resource", s.Resource)
		for _, e := range s.Events {
			out[w+" event "+e.Name] += e.Name + "\n"
			add(w+" event "+e.Name, e.Attributes)
		}
		for _, l := range s.Links {
			add(w+" link", l.Attributes)
			out[w+" link tracestate"] += l.TraceState + "\n"
		}
	}
	return out
}
