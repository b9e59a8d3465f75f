package console_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/relay-energy/relay/internal/console"
	"github.com/relay-energy/relay/internal/guard"
)

// TestConsoleBehindATLSTerminatingProxy: a proxy that terminates TLS and
// keeps the Host header (httputil.NewSingleHostReverseProxy) in front of a
// console without any configuration: login, acknowledge and logout work,
// and the session cookie is a Secure __Host- cookie. On the code before
// the fix the login was refused with 403 (the Origin's https against the
// connection's http).
func TestConsoleBehindATLSTerminatingProxy(t *testing.T) {
	s := newSite(t, console.Options{AdminToken: adminToken}, false, record("A1", 0, "S1", "D1", 5))
	target, _ := url.Parse(s.srv.URL)
	front := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(target))
	t.Cleanup(front.Close)
	jar, _ := cookiejar.New(nil)
	c := *front.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	post := func(path string, form url.Values) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", front.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", front.URL) // what a browser on the proxy's page sends
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := post("/console/login", url.Values{"token": {adminToken}, "name": {"li.wei"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login through the proxy: %s, want 303", resp.Status)
	}
	if len(resp.Cookies()) != 1 {
		t.Fatalf("login set cookies %q, want one", resp.Header.Values("Set-Cookie"))
	}
	ck := resp.Cookies()[0]
	fu, _ := url.Parse(front.URL)
	if want := "__Host-relay_console_" + fu.Port(); ck.Name != want || ck.Name != console.SessionCookieName(true, fu.Host) || !ck.Secure || ck.Path != "/" || ck.Domain != "" {
		t.Errorf("cookie %q: want %s, Secure, Path=/, no Domain", resp.Header.Get("Set-Cookie"), want)
	}
	page := get(t, &c, front.URL+"/console/")
	token := csrf(t, page)
	if resp := post("/console/alarms/A1/ack", url.Values{"csrf": {token}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("acknowledge through the proxy: %s, want 303", resp.Status)
	}
	if ack, err := s.mgr.Acknowledgement("A1"); err != nil || !ack.Acknowledged || ack.By != "console:li.wei" {
		t.Fatalf("A1 after the click through the proxy: %+v, %v; want acknowledged by console:li.wei", ack, err)
	}
	if resp := post("/console/logout", url.Values{"csrf": {token}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout through the proxy: %s, want 303", resp.Status)
	}
	resp, _ = c.Get(front.URL + "/console/")
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the Now page after logout: %s, want 303 to the login form", resp.Status)
	}
}

func get(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", u, resp.Status, b)
	}
	return string(b)
}

// TestConsoleRefusesAnHTTPOriginOverTLS: the reverse of the proxy case is
// refused: a page of http://host (which anyone on the path can write)
// cannot post to the console served over TLS.
func TestConsoleRefusesAnHTTPOriginOverTLS(t *testing.T) {
	s := newSite(t, console.Options{AdminToken: adminToken}, true)
	resp, _ := s.do(s.browser(), "POST", "/console/login", url.Values{"token": {adminToken}},
		map[string]string{"Origin": strings.Replace(s.srv.URL, "https:", "http:", 1)})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("login over TLS from an http origin: %s, want 403", resp.Status)
	}
}

// TestConsoleThrottlesTokenGuessing: wrong tokens from one address are
// answered 401 five times, then 429 with Retry-After, and then even the
// right token gets 429 (else guessing would go on). On the code before the
// fix all 200 wrong tokens got an immediate 401.
func TestConsoleThrottlesTokenGuessing(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	s := newSite(t, console.Options{AdminToken: adminToken, Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))}, false)
	c := s.browser()
	var unauthorized, throttled int
	for i := range 200 {
		resp, _ := s.do(c, "POST", "/console/login", url.Values{"token": {"guess-" + strconv.Itoa(i) + "-0123456789"}}, nil)
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			unauthorized++
		case http.StatusTooManyRequests:
			throttled++
			if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || n < 1 {
				t.Fatalf("429 with Retry-After %q, want whole seconds", resp.Header.Get("Retry-After"))
			}
		default:
			t.Fatalf("wrong token %d: %s", i, resp.Status)
		}
	}
	if unauthorized > 6 || throttled < 190 {
		t.Fatalf("200 wrong tokens: %d answered 401, %d 429; want at most 6 checked and the rest refused", unauthorized, throttled)
	}
	if resp, _ := s.do(c, "POST", "/console/login", url.Values{"token": {adminToken}}, nil); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the right token while throttled: %s, want 429", resp.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "client=127.0.0.1") ||
		strings.Contains(logs.String(), "guess-") || strings.Contains(logs.String(), adminToken) {
		t.Errorf("the log should warn naming the client and no token:\n%s", logs.String())
	}
}

// lockedWriter serializes the writes of a logger to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestConsoleRefusesARebindingHost settles the DNS rebinding suspicion:
// on the code before the fix a page of a rebound name (its Host and Origin
// both the attacker's name) was served and could log in. Now a console
// path asked for by a host name that is not the console's (the external
// origin's, the listen address's, localhost or an IP literal) is refused
// with 421 naming RELAY_CONSOLE_ORIGIN; an X-Forwarded-Host from an
// untrusted peer changes nothing.
func TestConsoleRefusesARebindingHost(t *testing.T) {
	s := newSite(t, console.Options{AdminToken: adminToken, Origin: "https://relay.example.com"}, false)
	for _, tc := range []struct {
		host, fwd string
		want      int
	}{
		{"rebind.attacker.net", "", http.StatusMisdirectedRequest},
		{"rebind.attacker.net:80", "relay.example.com", http.StatusMisdirectedRequest},
		{"relay.example.com", "", http.StatusOK},
		{"relay.example.net", "", http.StatusOK},
		{"console.test", "", http.StatusOK},
		{"localhost:9477", "", http.StatusOK},
		{"[::1]:9477", "", http.StatusOK},
		{"10.1.2.3", "", http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", s.srv.URL+"/console/login", nil)
		req.Host = tc.host
		if tc.fwd != "" {
			req.Header.Set("X-Forwarded-Host", tc.fwd)
		}
		resp, err := s.browser().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %q: %s, want %d", tc.host, resp.Status, tc.want)
		}
		if tc.want != http.StatusOK && !strings.Contains(string(b), "RELAY_CONSOLE_ORIGIN") {
			t.Errorf("Host %q: refusal %q does not name RELAY_CONSOLE_ORIGIN", tc.host, b)
		}
	}
}

// TestConsolesOnTwoPortsKeepTheirSessions settles the cookie suspicion: on
// the code before the fix two consoles on two ports of 127.0.0.1 (two
// port-forwarded relays) shared the cookie relay_console, so logging in to
// one logged the browser out of the other. Now each port has its cookie,
// over TLS too (on e932ec2 both TLS consoles set __Host-relay_console).
func TestConsolesOnTwoPortsKeepTheirSessions(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		a := newSite(t, console.Options{AdminToken: adminToken}, tlsOn)
		b := newSite(t, console.Options{AdminToken: adminToken}, tlsOn)
		c := a.browser()
		a.login(c, adminToken, "a")
		b.login(c, adminToken, "b")
		for _, s := range []*site{a, b} {
			if resp, _ := s.do(c, "GET", "/console/", nil, nil); resp.StatusCode != http.StatusOK {
				t.Errorf("console %s after logging in to both: %s, want 200", s.srv.URL, resp.Status)
			}
		}
		u, _ := url.Parse(a.srv.URL)
		want := "relay_console_" + u.Port()
		if tlsOn {
			want = "__Host-" + want
		}
		if got := console.SessionCookieName(tlsOn, u.Host); got != want {
			t.Errorf("cookie name for %s: %q, want %q", a.srv.URL, got, want)
		}
	}
	if got, want := console.SessionCookieName(true, "relay.example.com"), "__Host-relay_console_443"; got != want {
		t.Errorf("cookie name over TLS for a host without a port: %q, want %q", got, want)
	}
}

// Logging out of one of two relays port-forwarded to two ports of
// 127.0.0.1 (the case the port in the cookie name is for) leaves the
// browser logged in to the other: the browser sends both cookies to each,
// and the logout deletes only its own relay's (on 258a954 it deleted the
// other relay's cookie too).
func TestLogoutLeavesAnotherRelaysSession(t *testing.T) {
	a := newSite(t, console.Options{AdminToken: adminToken}, false)
	b := newSite(t, console.Options{AdminToken: adminToken}, false)
	c := a.browser()
	page := a.login(c, adminToken, "a")
	b.login(c, adminToken, "b")
	resp, _ := a.do(c, "POST", "/console/logout", url.Values{"csrf": {csrf(t, page)}}, map[string]string{"Origin": a.srv.URL})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout of A: %s", resp.Status)
	}
	set := resp.Header.Values("Set-Cookie")
	if resp, _ := b.do(c, "GET", "/console/", nil, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("relay B after logging out of relay A: %s, want 200; the logout set %q", resp.Status, set)
	}
	if resp, _ := a.do(c, "GET", "/console/", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("relay A after its logout: %s, want 303 to the login form", resp.Status)
	}
}

// TestLogoutEndsEverySessionTheBrowserSent: a browser that logged in to one
// console by two of its addresses (two ports, or http and https) sends both
// session cookies to each; a logout ends both, so that the other session
// does not take over. On e932ec2 the logout closed the session it found
// first, and the next page was served with the other one.
func TestLogoutEndsEverySessionTheBrowserSent(t *testing.T) {
	s := newSite(t, console.Options{AdminToken: adminToken, ViewToken: viewToken}, false)
	other := httptest.NewServer(s.srv.Config.Handler)
	t.Cleanup(other.Close)
	s2 := &site{t: t, mgr: s.mgr, st: s.st, srv: other}
	c := s.browser()
	s2.login(c, adminToken, "admin by the other port")
	page := s.login(c, viewToken, "viewer")
	resp, _ := s.do(c, "POST", "/console/logout", url.Values{"csrf": {csrf(t, page)}}, map[string]string{"Origin": s.srv.URL})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %s, want 303", resp.Status)
	}
	for _, site := range []*site{s, s2} {
		if resp, page := site.do(c, "GET", "/console/", nil, nil); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("GET %s/console/ after the logout: %s, want 303 to the login form; the page's frame: %q", site.srv.URL, resp.Status, page[:min(len(page), 300)])
		}
	}
}

// TestConsoleTrustsOnlyConfiguredProxies: X-Forwarded-Proto makes the
// console see https only from a trusted proxy, and the configured external
// origin is accepted as it is.
func TestConsoleTrustsOnlyConfiguredProxies(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       console.Options
		origin  string
		want    int
		cookie  string
		headers map[string]string
	}{
		{"the configured origin", console.Options{Origin: "https://relay.example.com"}, "https://relay.example.com", http.StatusSeeOther, "__Host-relay_console_", nil},
		{"another origin", console.Options{Origin: "https://relay.example.com"}, "https://other.example.com", http.StatusForbidden, "", nil},
		{"a trusted proxy's https", console.Options{TrustedProxies: guard.Proxies{Nets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}, "https://10.9.8.7", http.StatusSeeOther, "__Host-relay_console_",
			map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "10.9.8.7"}},
		{"an untrusted proxy's host", console.Options{TrustedProxies: guard.Proxies{Nets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}, "https://10.9.8.7", http.StatusForbidden, "",
			map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "10.9.8.7"}},
		{"a trusted Forwarded", console.Options{TrustedProxies: guard.Proxies{Nets: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Forwarded: true}}, "https://10.9.8.7", http.StatusSeeOther, "__Host-relay_console_",
			map[string]string{"Forwarded": `for=192.0.2.7;proto=https;host="10.9.8.7"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.AdminToken = adminToken
			s := newSite(t, tc.o, false)
			h := map[string]string{"Origin": tc.origin}
			for k, v := range tc.headers {
				h[k] = v
			}
			resp, body := s.do(s.browser(), "POST", "/console/login", url.Values{"token": {adminToken}}, h)
			if resp.StatusCode != tc.want {
				t.Fatalf("login: %s, want %d\n%s", resp.Status, tc.want, body)
			}
			if tc.cookie != "" && (len(resp.Cookies()) != 1 || !strings.HasPrefix(resp.Cookies()[0].Name, tc.cookie) || !resp.Cookies()[0].Secure) {
				t.Errorf("cookies %q, want a Secure %s<port>", resp.Header.Values("Set-Cookie"), tc.cookie)
			}
		})
	}
}
