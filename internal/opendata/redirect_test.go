package opendata_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/relay-energy/relay/internal/opendata"
)

// TestRedirectsAreRefused: an upstream answering the login with a 307 or 308
// to another host would have the app secret posted there; the client never
// follows, and says which status pointed where.
func TestRedirectsAreRefused(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			var stolen atomic.Int32
			elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { stolen.Add(1) }))
			defer elsewhere.Close()
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, elsewhere.URL+r.URL.Path, status)
			}))
			defer up.Close()
			c, err := opendata.New(opendata.Config{BaseURL: up.URL, AppID: "app", AppSecret: "s3cret-app-secret", RateLimit: 600})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Login(t.Context())
			if stolen.Load() != 0 {
				t.Fatal("the login followed the redirect: the app secret reached another host")
			}
			host := strings.TrimPrefix(elsewhere.URL, "http://")
			var oe *opendata.Error
			if !errors.As(err, &oe) || oe.Kind != opendata.KindBadRequest || !strings.Contains(err.Error(), "redirect refused") ||
				!strings.Contains(err.Error(), host) || strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("err = %v; want a bad request naming the redirect to %s, without the secret", err, host)
			}
		})
	}
}
