package notifytest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
)

// NewEcho starts an HTTP server that refuses every request with status and
// writes the whole request back in its answer, as WriteEcho does.
// Receivers, proxies and gateways do this in their error pages; a sink that
// quotes the answer must still show no secret.
func NewEcho(t testing.TB, status int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { WriteEcho(w, r, status, 0) }))
	t.Cleanup(srv.Close)
	return srv
}

// WriteEcho answers r with status and, after pad bytes of filler, the whole
// request: method, URL with its query, basic-auth credentials, every
// header, the body.
func WriteEcho(w http.ResponseWriter, r *http.Request, status, pad int) {
	body, _ := io.ReadAll(r.Body)
	var b strings.Builder
	b.WriteString(strings.Repeat("-", pad))
	fmt.Fprintf(&b, "%s %s\n", r.Method, r.URL.RequestURI())
	if u, p, ok := r.BasicAuth(); ok {
		fmt.Fprintf(&b, "basic-auth %s:%s\n", u, p)
	}
	names := make([]string, 0, len(r.Header))
	for k := range r.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(r.Header[k], ", "))
	}
	b.Write(body)
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, b.String())
}
