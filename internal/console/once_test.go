package console_test

import (
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/console"
)

// A one-time login link opens a session once, as a login with a token
// does (the same cookie), as the role and name it was made for; used
// again, made up, or past its 10 minutes it gets the login form saying so.
// The code is never logged.
func TestOneTimeLoginLinkWorksOnce(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	sessions := console.NewSessions(clock)
	var logs strings.Builder
	s := newSite(t, console.Options{AdminToken: adminToken, ViewToken: viewToken, Sessions: sessions,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, true, record("A1", 0, "S1", "D1", 5))

	refused := func(c *http.Client, code, why string) {
		t.Helper()
		resp, page := s.do(c, "GET", "/console/login/once/"+code, nil, nil)
		if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 ||
			!strings.Contains(page, "used already or has expired") || !strings.Contains(page, `action="/console/login"`) {
			t.Fatalf("%s: %s with cookies %v, want 401, no cookie and the login form saying why:\n%s", why, resp.Status, resp.Cookies(), page)
		}
	}

	code := sessions.OneTime(console.Admin, "demo")
	c := s.browser()
	resp, _ := s.do(c, "GET", "/console/login/once/"+code, nil, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/" {
		t.Fatalf("the link: %s to %q, want 303 to /console/", resp.Status, resp.Header.Get("Location"))
	}
	if len(resp.Cookies()) != 1 {
		t.Fatalf("the link set cookies %v, want the session's", resp.Cookies())
	}
	if ck := resp.Cookies()[0]; ck.Name != console.SessionCookieName(true, s.srv.Listener.Addr().String()) || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode ||
		ck.Path != "/" || !ck.Secure {
		t.Errorf("cookie %q: want the login's: HttpOnly, SameSite=Strict, Path=/, Secure over TLS", resp.Header.Get("Set-Cookie"))
	}
	resp, page := s.do(c, "GET", "/console/", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="alarm-A1"`) || !strings.Contains(page, ">Acknowledge</button>") ||
		!strings.Contains(page, "demo") {
		t.Fatalf("the Now page after the link: %s, want alarm A1 with the administrator's buttons, as demo:\n%s", resp.Status, page)
	}
	refused(s.browser(), code, "the link used again")
	refused(s.browser(), "made-up-"+code[8:], "a made-up code")

	viewer := sessions.OneTime(console.Viewer, "")
	c = s.browser()
	if resp, _ := s.do(c, "GET", "/console/login/once/"+viewer, nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a viewer's link: %s, want 303", resp.Status)
	}
	if _, page := s.do(c, "GET", "/console/", nil, nil); !strings.Contains(page, `id="alarm-A1"`) || strings.Contains(page, ">Acknowledge</button>") {
		t.Fatalf("a viewer's link opened a session with buttons, or none:\n%s", page)
	}

	late := sessions.OneTime(console.Admin, "late")
	mu.Lock()
	now = now.Add(console.OneTimeLifetime)
	mu.Unlock()
	refused(s.browser(), late, "a link 10 minutes old")

	for _, c := range []string{code, viewer, late} {
		if strings.Contains(logs.String(), c) {
			t.Fatalf("a one-time code was logged:\n%s", logs.String())
		}
	}
	if !strings.Contains(logs.String(), "one-time link") {
		t.Errorf("no log line for the login with a one-time link:\n%s", logs.String())
	}
}
