package console_test

import (
	"context"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/console"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

const (
	adminToken = "admin-console-0123456789"
	viewToken  = "view-console-0123456789"
)

// rules route only minor alarms, which the tests do not raise: the console
// needs only the alarms and their acknowledgements.
const rules = "sinks:\n  - name: bus\n    type: nats\n    subject: alarms\nroutes:\n  - name: minor\n    match: { levels: [3] }\n    to: [bus]\n"

// site is a tenant's console on a real store and alarm manager, behind an
// httptest server, with ongoing alarms recorded.
type site struct {
	t   testing.TB
	srv *httptest.Server
	mgr *manage.Manager
	st  *store.Store
}

// record is an ongoing alarm at level on device at station since
// minutesAgo.
func record(id string, level int, station, device string, minutesAgo int) event.Alarm {
	at := time.Now().UTC().Add(-time.Duration(minutesAgo) * time.Minute).Truncate(time.Second)
	return event.Alarm{OriginID: id, Status: event.StatusOngoing, Level: level, EventCode: "E1", StationID: station,
		DeviceSN: device, OccurredAt: at, Raw: []byte(`{}`)}
}

func newSite(t testing.TB, o console.Options, tlsOn bool, alarms ...event.Alarm) *site {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "relay.db"), store.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if len(alarms) > 0 {
		if _, err := st.Apply(context.Background(), store.Batch{Observed: alarms}, nil); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := route.Parse("rules.yaml", []byte(rules), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := manage.New(manage.Options{Store: st, Rules: func() *route.Rules { return rs }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	if o.Store == nil {
		o.Store = st
	}
	c := console.New(mgr, o)
	c.Register(mux)
	s := &site{t: t, mgr: mgr, st: st}
	if tlsOn {
		s.srv = httptest.NewTLSServer(mux)
	} else {
		s.srv = httptest.NewServer(mux)
	}
	t.Cleanup(s.srv.Close)
	t.Cleanup(c.Close) // before the server's Close, which waits for the live-update streams
	return s
}

// browser is a client with a cookie jar that does not follow redirects.
func (s *site) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	c := *s.srv.Client() // a copy: each browser has its own jar
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// do sends a request and returns the answer with its body read.
func (s *site) do(c *http.Client, method, path string, form url.Values, header map[string]string) (*http.Response, string) {
	s.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, s.srv.URL+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// login logs c in with token as name and returns the Now page.
func (s *site) login(c *http.Client, token, name string) string {
	s.t.Helper()
	resp, _ := s.do(c, "POST", "/console/login", url.Values{"token": {token}, "name": {name}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		s.t.Fatalf("login: %s, want 303", resp.Status)
	}
	resp, page := s.do(c, "GET", "/console/", nil, nil)
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("GET /console/ after login: %s\n%s", resp.Status, page)
	}
	return page
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of the page's forms.
func csrf(t testing.TB, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF field in the page:\n%s", page)
	}
	return html.UnescapeString(m[1])
}

func TestConsoleLoginSetsAStrictSessionCookie(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[tlsOn], func(t *testing.T) {
			s := newSite(t, console.Options{AdminToken: adminToken}, tlsOn)
			c := s.browser()
			resp, _ := s.do(c, "POST", "/console/login", url.Values{"token": {adminToken}}, nil)
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/" {
				t.Fatalf("login: %s to %q, want 303 to /console/", resp.Status, resp.Header.Get("Location"))
			}
			var ck *http.Cookie
			name := console.SessionCookieName(tlsOn, s.srv.Listener.Addr().String())
			for _, k := range resp.Cookies() {
				if k.Name == name {
					ck = k
				}
			}
			if ck == nil {
				t.Fatalf("no %s cookie in %q", name, resp.Header.Values("Set-Cookie"))
			}
			if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Secure != tlsOn || len(ck.Value) < 40 {
				t.Errorf("cookie %q: want HttpOnly, SameSite=Strict, Path=/, Secure=%v and a long random id", resp.Header.Get("Set-Cookie"), tlsOn)
			}
			if d := time.Until(ck.Expires); d < 11*time.Hour || d > 13*time.Hour {
				t.Errorf("cookie expires in %s, want about 12h", d)
			}
		})
	}
	t.Run("wrong token", func(t *testing.T) {
		s := newSite(t, console.Options{AdminToken: adminToken, ViewToken: viewToken}, false)
		resp, page := s.do(s.browser(), "POST", "/console/login", url.Values{"token": {"not-" + adminToken}}, nil)
		if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 || !strings.Contains(page, "wrong token") {
			t.Errorf("a wrong token: %s with cookies %v, want 401 and no cookie:\n%s", resp.Status, resp.Cookies(), page)
		}
	})
}

func TestConsoleWithoutSessionSendsToTheLoginForm(t *testing.T) {
	s := newSite(t, console.Options{ViewToken: viewToken}, false, record("A1", 0, "S1", "D1", 5))
	c := s.browser()
	resp, page := s.do(c, "GET", "/console/", nil, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/login" {
		t.Fatalf("GET /console/ without a session: %s to %q, want 303 to /console/login", resp.Status, resp.Header.Get("Location"))
	}
	if strings.Contains(page, "A1") || strings.Contains(page, "S1") {
		t.Errorf("the redirect shows an alarm:\n%s", page)
	}
	c.Jar.SetCookies(mustURL(t, s.srv.URL+"/console/"), []*http.Cookie{{Name: console.SessionCookieName(false, s.srv.Listener.Addr().String()), Value: "forged", Path: "/console/"}})
	if resp, _ := s.do(c, "GET", "/console/", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("GET /console/ with a made-up session id: %s, want 303 to the login form", resp.Status)
	}
	resp, page = s.do(c, "GET", "/console/login", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `<form method="post" action="/console/login">`) {
		t.Errorf("GET /console/login: %s, want the login form:\n%s", resp.Status, page)
	}
}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestConsoleRefusesForgedAndUnauthorisedActions(t *testing.T) {
	s := newSite(t, console.Options{AdminToken: adminToken, ViewToken: viewToken}, false, record("A1", 0, "S1", "D1", 5))
	admin := s.browser()
	token := csrf(t, s.login(admin, adminToken, "li.wei"))
	viewer := s.browser()
	viewerPage := s.login(viewer, viewToken, "")
	if strings.Contains(viewerPage, "/alarms/A1/ack") {
		t.Errorf("a viewer's page offers the Acknowledge button:\n%s", viewerPage)
	}
	viewerToken := csrf(t, viewerPage)
	for _, tc := range []struct {
		name   string
		client *http.Client
		form   url.Values
		header map[string]string
	}{
		{"from another origin", admin, url.Values{"csrf": {token}}, map[string]string{"Origin": "http://evil.example"}},
		// An https Origin of this host over plain HTTP is a TLS-terminating
		// proxy's page and is accepted (TestConsoleBehindATLSTerminatingProxy);
		// the reverse is refused (TestConsoleRefusesAnHTTPOriginOverTLS).
		{"from another port", admin, url.Values{"csrf": {token}}, map[string]string{"Origin": s.srv.URL + "1"}},
		{"from another site by Sec-Fetch-Site", admin, url.Values{"csrf": {token}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"without a CSRF token", admin, url.Values{}, nil},
		{"with a wrong CSRF token", admin, url.Values{"csrf": {token + "x"}}, nil},
		{"with another session's CSRF token", admin, url.Values{"csrf": {viewerToken}}, nil},
		{"from a viewer session", viewer, url.Values{"csrf": {viewerToken}}, map[string]string{"Origin": s.srv.URL}},
		{"without a session", s.browser(), url.Values{"csrf": {token}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := s.do(tc.client, "POST", "/console/alarms/A1/ack", tc.form, tc.header)
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s, want 403: %s", resp.Status, body)
			}
			if ack, err := s.mgr.Acknowledgement("A1"); err != nil || ack.Acknowledged {
				t.Errorf("the alarm was acknowledged (%+v, %v)", ack, err)
			}
		})
	}
}

func TestConsoleAdminAcknowledgesFromThePage(t *testing.T) {
	s := newSite(t, console.Options{AdminToken: adminToken, ViewToken: viewToken}, false,
		record("A1", 2, "S1", "D1", 90), record("A2", 0, "S2", "D2", 5))
	c := s.browser()
	page := s.login(c, adminToken, "li.wei")
	if i, j := strings.Index(page, `id="alarm-A2"`), strings.Index(page, `id="alarm-A1"`); i < 0 || j < 0 || i > j {
		t.Fatalf("the urgent A2 is not listed before the major A1:\n%s", page)
	}
	if !strings.Contains(page, `action="/console/alarms/A1/ack"`) {
		t.Fatalf("no Acknowledge form for A1:\n%s", page)
	}
	resp, _ := s.do(c, "POST", "/console/alarms/A1/ack", url.Values{"csrf": {csrf(t, page)}}, map[string]string{"Origin": s.srv.URL})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("acknowledge: %s, want 303 back to the page", resp.Status)
	}
	ack, err := s.mgr.Acknowledgement("A1")
	if err != nil || !ack.Acknowledged || ack.By != "console:li.wei" || ack.Via != "api" {
		t.Fatalf("A1 after the click: %+v, %v; want acknowledged by console:li.wei via api", ack, err)
	}
	_, page = s.do(c, "GET", "/console/", nil, nil)
	if !strings.Contains(page, "ack of A1: done") {
		t.Errorf("the page does not say the acknowledgement was done:\n%s", page)
	}
	if !strings.Contains(page, `action="/console/alarms/A1/unack"`) || strings.Index(page, `id="alarm-A1"`) < strings.Index(page, `id="alarm-A2"`) {
		t.Errorf("acknowledged A1 is not after A2 with an Unacknowledge button:\n%s", page)
	}
	_, page = s.do(c, "GET", "/console/?level=urgent", nil, nil)
	if strings.Contains(page, `id="alarm-A1"`) || !strings.Contains(page, `id="alarm-A2"`) {
		t.Errorf("?level=urgent does not show A2 alone:\n%s", page)
	}
	_, page = s.do(c, "GET", "/console/?station=S1", nil, nil)
	if !strings.Contains(page, `id="alarm-A1"`) || strings.Contains(page, `id="alarm-A2"`) {
		t.Errorf("?station=S1 does not show A1 alone:\n%s", page)
	}
}

// An action from a filtered page goes back to the page with its filters,
// and the form's back field cannot send the browser anywhere else.
func TestConsoleActionKeepsThePageFilters(t *testing.T) {
	s := newSite(t, console.Options{AdminToken: adminToken}, false,
		record("A1", 2, "S1", "D1", 90), record("A2", 0, "S2", "D2", 5))
	c := s.browser()
	s.login(c, adminToken, "")
	_, page := s.do(c, "GET", "/console/?station=S1&level=major", nil, nil)
	if !strings.Contains(page, `name="back" value="level=major&amp;station=S1"`) {
		t.Fatalf("the action forms do not carry the page's filters:\n%s", page)
	}
	for _, tc := range []struct{ back, want string }{
		{"level=major&station=S1", "/console/?level=major&station=S1"},
		{"", "/console/"},
		{"//evil.example/x?station=S1", "/console/"},
		{"station=S1&next=https://evil.example/", "/console/?station=S1"},
	} {
		resp, _ := s.do(c, "POST", "/console/alarms/A1/shelve", url.Values{"csrf": {csrf(t, page)}, "back": {tc.back}},
			map[string]string{"Origin": s.srv.URL})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != tc.want {
			t.Errorf("back %q: %s to %q, want 303 to %q", tc.back, resp.Status, resp.Header.Get("Location"), tc.want)
		}
	}
}

func TestConsoleEscapesUpstreamText(t *testing.T) {
	const hostile = `<script>alert(1)</script>`
	a := record("A1", 0, hostile, `"><img src=x onerror=alert(2)>`, 5)
	a.EventDesc, a.StationName, a.DeviceName = `<script>alert(3)</script>`, `<img src=x onerror=alert(4)>`, `<svg onload=alert(5)>`
	s := newSite(t, console.Options{ViewToken: viewToken}, false, a)
	c := s.browser()
	page := s.login(c, viewToken, `<b>mallory</b>`)
	_, filtered := s.do(c, "GET", "/console/?station="+url.QueryEscape(hostile), nil, nil)
	for _, p := range []string{page, filtered} {
		if strings.Contains(p, "<script>") || strings.Contains(p, "<img") || strings.Contains(p, "<svg") || strings.Contains(p, "<b>mallory") {
			t.Errorf("upstream or user text reached the page unescaped:\n%s", p)
		}
		for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;script&gt;alert(3)&lt;/script&gt;",
			"&lt;img src=x onerror=alert(4)&gt;", "&lt;svg onload=alert(5)&gt;"} {
			if !strings.Contains(p, want) {
				t.Errorf("the hostile %s is not shown escaped:\n%s", want, p)
			}
		}
	}
}

func TestConsoleSendsStrictHeadersOnEveryAnswer(t *testing.T) {
	s := newSite(t, console.Options{AdminToken: adminToken}, false, record("A1", 0, "S1", "D1", 5))
	c := s.browser()
	s.login(c, adminToken, "")
	off := newSite(t, console.Options{}, false)
	for _, tc := range []struct {
		name, method, path string
		site               *site
		status             int
	}{
		{"now", "GET", "/console/", s, 200},
		{"login form", "GET", "/console/login", s, 200},
		{"style sheet", "GET", "/console/static/console.css", s, 200},
		{"refused action", "POST", "/console/alarms/A1/ack", s, 403},
		{"unknown page", "GET", "/console/nothing", s, 404},
		{"console off", "GET", "/console/", off, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := c
			if tc.site != s {
				client = tc.site.browser()
			}
			var form url.Values
			if tc.method == "POST" {
				form = url.Values{}
			}
			resp, body := tc.site.do(client, tc.method, tc.path, form, nil)
			if resp.StatusCode != tc.status {
				t.Errorf("%s %s: %s, want %d: %s", tc.method, tc.path, resp.Status, tc.status, body)
			}
			for k, want := range map[string]string{"Content-Security-Policy": console.CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"} {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("%s: %q, want %q", k, got, want)
				}
			}
		})
	}
	if !strings.Contains(console.CSP, "default-src 'none'") || !strings.Contains(console.CSP, "frame-ancestors 'none'") {
		t.Errorf("CSP %q is not strict", console.CSP)
	}
}

func TestConsoleIsOffWithoutTokens(t *testing.T) {
	s := newSite(t, console.Options{}, false, record("A1", 0, "S1", "D1", 5))
	for _, path := range []string{"/console/", "/console/login"} {
		resp, body := s.do(s.browser(), "GET", path, nil, nil)
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "RELAY_VIEW_TOKEN") {
			t.Errorf("GET %s with no token set: %s %q, want 404 saying to set RELAY_VIEW_TOKEN", path, resp.Status, body)
		}
	}
	resp, _ := s.do(s.browser(), "POST", "/console/login", url.Values{"token": {""}}, nil)
	if resp.StatusCode != http.StatusNotFound || len(resp.Cookies()) != 0 {
		t.Errorf("login with an empty token while off: %s %v, want 404 and no cookie", resp.Status, resp.Cookies())
	}
}
