package notifytest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
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

// AssertNoSecret fails t for each secret found in any of texts, which are
// keyed by where they come from (an error, the log, a dead letter, the
// metrics). Each secret is also looked for in its URL-escaped forms. It is
// the check every sink type and the upstream client run, as Alertmanager's
// AssertNotifyLeaksNoSecret does for its notifiers.
func AssertNoSecret(t testing.TB, secrets []string, texts map[string]string) {
	t.Helper()
	for _, secret := range secrets {
		if len(secret) < 4 {
			t.Fatalf("secret %q is too short to look for", secret)
		}
		for where, text := range texts {
			for _, form := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret)} {
				if strings.Contains(text, form) {
					t.Errorf("%s holds the secret %q:\n%s", where, secret, text)
					break
				}
			}
		}
	}
}
