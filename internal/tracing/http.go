package tracing

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Transport returns rt (http.DefaultTransport when nil) making a client span
// of every request that carries a span in its context: the upstream's calls
// within a poll. The span holds the method, the server, the status and the
// URL without its query, user or fragment, never a header or a body, which
// carry the app secret and the token. No trace context is sent upstream.
// A nil t returns rt as it is.
func (t *Tracer) Transport(rt http.RoundTripper) http.RoundTripper {
	if t == nil {
		return rt
	}
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &transport{t: t, next: rt}
}

type transport struct {
	t    *Tracer
	next http.RoundTripper
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return tr.next.RoundTrip(req)
	}
	host, port := req.URL.Hostname(), req.URL.Port()
	if port == "" {
		port = "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
	}
	p, _ := strconv.Atoi(port)
	_, span := tr.t.tracer.Start(ctx, req.Method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		semconv.HTTPRequestMethodKey.String(req.Method), semconv.ServerAddress(host), semconv.ServerPort(p),
		semconv.URLFull(ShownURL(req.URL))))
	resp, err := tr.next.RoundTrip(req)
	if err != nil {
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
		span.SetStatus(codes.Error, errorType(err))
		span.End()
		return resp, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
		span.SetStatus(codes.Error, "")
	}
	span.End()
	return resp, nil
}

// ShownURL is u as a span shows it: scheme, host and path, without user,
// query or fragment, where credentials and tokens travel.
func ShownURL(u *url.URL) string {
	c := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return c.String()
}

// errorType names a transport failure without its text, which may quote
// the URL: a timeout, a refused or reset connection, another network error.
func errorType(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.As(err, &ne):
		return "network"
	}
	return "error"
}
