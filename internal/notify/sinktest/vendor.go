package sinktest

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// Recorder is an HTTP client's transport that reaches no server: it records
// the URL of every request and answers each with 200 and a fixed body, so
// that a test sees where a sink posts by default (the vendor's own host)
// without sending anything there.
type Recorder struct {
	body string
	mu   sync.Mutex
	urls []string
}

// NewRecorder returns a Recorder answering body, and a client that uses it.
func NewRecorder(body string) (*Recorder, *http.Client) {
	r := &Recorder{body: body}
	return r, &http.Client{Transport: r}
}

// RoundTrip records the request's URL and answers 200 with the body.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	r.mu.Lock()
	r.urls = append(r.urls, req.URL.String())
	r.mu.Unlock()
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": []string{"application/json"}},
		Body:    io.NopCloser(strings.NewReader(r.body)),
		Request: req,
	}, nil
}

// First returns the URL of the first request, failing t when there was none.
func (r *Recorder) First(t testing.TB) string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.urls) == 0 {
		t.Fatal("the sink sent no request")
	}
	return r.urls[0]
}

// Texts returns the text of each of msgs, for Vendor.Received.
func Texts[M interface{ Text() string }](msgs []M) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Text()
	}
	return out
}

// Origin returns the scheme and host of raw, a fake's URL, for Vendor.URL.
func Origin(raw string) string {
	origin, _ := cutPath(raw)
	return origin
}

// Rebase returns raw, a fake's URL, with the scheme and host of base, for
// Vendor.Options.
func Rebase(raw, base string) string {
	_, path := cutPath(raw)
	return base + path
}

// cutPath cuts raw, an absolute URL, before its path.
func cutPath(raw string) (origin, path string) {
	scheme, rest, _ := strings.Cut(raw, "://")
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return scheme + "://" + rest[:i], rest[i:]
	}
	return raw, ""
}
