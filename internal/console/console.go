// Package console serves the operator console: web pages on the ops
// listener, rendered on the server from html/template, that show the
// ongoing alarms and let an administrator acknowledge and shelve them.
//
// Access is by login with RELAY_VIEW_TOKEN (read only) or RELAY_ADMIN_TOKEN
// (actions too); a login makes an in-memory session whose cookie is
// HttpOnly and SameSite=Strict, and every state change carries the
// session's CSRF token. Every answer sends a strict Content-Security-Policy.
// Behind a proxy or an ingress (origin.go), a form must come from the
// console's origin, a page is served only for the console's host names (DNS
// rebinding), the cookie's name is per port or __Host- under TLS, and wrong
// tokens are throttled per client address and overall.
package console

import (
	"context"
	"crypto/subtle"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/relay-energy/relay/internal/guard"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/urlpath"
)

//go:embed templates/*.tmpl static/*
var files embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{"age": age, "head": head, "segment": urlpath.Link}).ParseFS(files, "templates/*.tmpl"))

// headData is what the template "head", which opens every page, shows:
// the page's title and, from the console's base, its style sheet.
type headData struct{ Base, Title string }

// head returns the data of the template "head" of a page of the console
// at base.
func head(base, title string) headData { return headData{Base: base, Title: title} }

// CSP is the Content-Security-Policy of every answer: nothing but the
// console's own style sheet, scripts, images, forms and live updates
// (server-sent events), never in a frame.
const CSP = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// CookieName is the base name of the session cookie; the name in force
// (SessionCookieName) is "__Host-relay_console_<port>" under TLS and the name
// with the port the browser sees otherwise ("relay_console_9477").
const CookieName = "relay_console"

// CookiePath is the session cookie's path: the whole ops listener, since
// the sessions and the tokens are the process's, so that one login opens
// the tenant picker and every tenant's console (/tenants/<id>/console/).
// The ops API never reads the cookie: it takes the admin token only.
const CookiePath = "/"

// Manager is what the console reads and changes: a tenant's
// *manage.Manager.
type Manager interface {
	Alarms() ([]manage.AlarmState, error)
	// EachAlarm calls fn with each ongoing alarm, as Alarms returns them,
	// without holding them all (the Now page keeps its first rows).
	EachAlarm(fn func(a *manage.AlarmState) error) error
	Act(ctx context.Context, a notify.Action) (notify.ActionResult, error)
}

// Options configure a tenant's console.
type Options struct {
	// ViewToken (RELAY_VIEW_TOKEN) logs in read only, AdminToken
	// (RELAY_ADMIN_TOKEN) with actions; with neither the console is off.
	ViewToken, AdminToken string
	// Sessions are the logins, shared by the tenants of a process (nil:
	// a set of its own).
	Sessions *Sessions
	// Now tells the time of the alarms' ages (nil: the wall clock).
	Now func() time.Time
	// Logger receives a line for each action and each failure.
	Logger *slog.Logger

	// Store is the tenant's state: the delivery ledger of each alarm, the
	// journal of transitions (History, Report) and the dead letters.
	Store *store.Store
	// Silences are the tenant's silences (the Silences page).
	Silences *silence.Silences
	// Rules returns the rules in force (maintenance windows, sinks).
	Rules func() *route.Rules
	// System returns what the System page shows: the process's tenants
	// and replicas, the tenant's upstream budget, sinks and rules. It is
	// called on every view of the page and must hold no secret (see
	// System). Nil: the page says the service tells nothing.
	System func(ctx context.Context) System

	// LiveEvery is the least time between two live updates of a page
	// (0: DefaultLiveEvery): the changes of a storm are sent together.
	LiveEvery time.Duration

	// Origin is the console's external origin (RELAY_CONSOLE_ORIGIN), such
	// as https://relay.example.com: the Origin check accepts it as it is,
	// its host is admitted by the Host allow-list, and an https one makes
	// the session cookie Secure. Empty: none.
	Origin string
	// TrustedProxies are the proxies trusted to say the client's address,
	// scheme and host (RELAY_TRUSTED_PROXIES), and the headers they say it
	// in (RELAY_FORWARDED_HEADER), read from them only. Zero: none.
	TrustedProxies guard.Proxies
	// Listen is the ops listener's address (RELAY_LISTEN), whose host the
	// Host allow-list admits beside localhost and IP addresses.
	Listen string
	// Throttle slows down the guessing of tokens at login, shared with the
	// ops API's Bearer check (nil: a throttle of the console's own).
	Throttle *guard.Throttle
}

// Console is one tenant's console; it answers under /console/.
type Console struct {
	m   Manager
	o   Options
	f   front
	mux *http.ServeMux
	// closed ends the live-update streams (Close).
	closed    chan struct{}
	closeOnce sync.Once
}

// New returns the console of the tenant whose alarms m holds.
func New(m Manager, o Options) *Console {
	c := newAccess(m, o)
	c.registerNow()
	c.registerHistory()
	c.registerSilences()
	c.registerDeadLetters()
	c.registerReport()
	c.registerSystem()
	return c
}

// newAccess returns a console with the defaults of o filled in that
// answers only the style sheet, the login forms and logout: what every
// console, and the tenant picker, has.
func newAccess(m Manager, o Options) *Console {
	if o.Sessions == nil {
		o.Sessions = NewSessions(o.Now)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LiveEvery <= 0 {
		o.LiveEvery = DefaultLiveEvery
	}
	if o.Throttle == nil {
		o.Throttle = guard.NewThrottle(o.Now, o.Logger, nil)
	}
	c := &Console{m: m, o: o, f: newFront(o), mux: http.NewServeMux(), closed: make(chan struct{})}
	static, _ := fs.Sub(files, "static")
	c.mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /console/login", c.loginForm)
	c.mux.HandleFunc("POST /console/login", c.login)
	c.mux.HandleFunc("GET /console/login/once/{code}", c.loginOnce)
	c.mux.HandleFunc("POST /console/logout", c.logout)
	return c
}

// Register adds the console to mux, at /console/.
func (c *Console) Register(mux interface {
	Handle(pattern string, h http.Handler)
}) {
	mux.Handle("/console/", c)
}

// ServeHTTP answers a request under /console/, with the security headers.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secure(w)
	if c.o.ViewToken == "" && c.o.AdminToken == "" {
		http.Error(w, Off, http.StatusNotFound)
		return
	}
	if !c.f.hostAllowed(r) {
		http.Error(w, hostRefused, http.StatusMisdirectedRequest)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	c.mux.ServeHTTP(w, r)
}

// maxForm bounds the body of a form: a token, a name, a CSRF token.
const maxForm = 16 << 10

// Off is the text of every console page while no token is set.
const Off = "the operator console is off: set RELAY_VIEW_TOKEN (read only) or RELAY_ADMIN_TOKEN (with actions) in relay's environment"

// secure sets the headers every answer carries.
func secure(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// "Origin: null" with every form it posts, which sameOrigin refuses.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
}

// Picker serves /console/ of a process with several tenants: after a
// login like a tenant's console (the session is the process's, so it opens
// every tenant's console too), a page that links to each tenant's console.
// It is off like the consoles while no token is set; without a session it
// shows nothing but the login form, not even the tenants' ids.
func Picker(o Options, tenants func() []string) http.Handler {
	c := newAccess(nil, o)
	c.mux.HandleFunc("GET /console/{$}", func(w http.ResponseWriter, r *http.Request) {
		f, ok := c.page(w, r, "tenants")
		if !ok {
			return
		}
		render(w, "picker", pickerPage{frame: f, Tenants: tenants()})
	})
	c.mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "this process serves several tenants: pick one at /console/", http.StatusNotFound)
	})
	return c
}

// pickerPage is what the tenant picker shows.
type pickerPage struct {
	frame
	Tenants []string
}

// base is the path of the console as the browser sees it: /console/, or
// /tenants/<id>/console/ when the tenant's prefix was stripped.
func base(r *http.Request) string {
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		return "/console/"
	}
	if prefix, ok := strings.CutSuffix(u.Path, r.URL.Path); ok && strings.HasPrefix(prefix, "/") {
		return prefix + "/console/"
	}
	return "/console/"
}

// role returns the role a login token gives, or "" for a wrong one. Both
// tokens are compared in constant time whatever matches.
func (c *Console) role(token string) Role {
	admin := c.o.AdminToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(c.o.AdminToken)) == 1
	viewer := c.o.ViewToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(c.o.ViewToken)) == 1
	switch {
	case admin:
		return Admin
	case viewer:
		return Viewer
	}
	return ""
}

func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	render(w, "login", map[string]any{"Base": base(r)})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !c.f.sameOrigin(r) {
		http.Error(w, "refused: the form was sent from another origin", http.StatusForbidden)
		return
	}
	attempt, wait, ok := c.o.Throttle.Allow(c.f.proxies.Client(r), "console")
	if !ok {
		guard.Refuse(w, wait)
		return
	}
	role := c.role(r.PostFormValue("token"))
	if role == "" {
		attempt.Wrong()
		renderStatus(w, http.StatusUnauthorized, "login",
			map[string]any{"Base": base(r), "Error": "wrong token: give RELAY_VIEW_TOKEN or RELAY_ADMIN_TOKEN"})
		return
	}
	attempt.Right()
	name := strings.TrimSpace(r.PostFormValue("name"))
	if len(name) > maxName {
		name = name[:maxName]
	}
	c.startSession(w, r, role, name)
}

// startSession opens a session for role, of the person name, sets its
// cookie and sends the browser to the console.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, role Role, name string) {
	id, exp := c.o.Sessions.open(role, name)
	secure := c.f.secure(r)
	http.SetCookie(w, &http.Cookie{Name: c.f.cookieName(r), Value: id, Path: CookiePath, Expires: exp,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, base(r), http.StatusSeeOther)
}

// frame is what every page after login shows around its content: the
// navigation with the current page, who is logged in, the logout form and
// the message left by the last action. Each page's data embeds it.
type frame struct {
	Base, CSRF, Flash, Name string
	// Page is the current page's name in the navigation: now, history,
	// silences, deadletters, report, system.
	Page  string
	Admin bool
}

// page admits a GET of a page: with a session it returns the page's
// frame; without one it sends the browser to the login form.
func (c *Console) page(w http.ResponseWriter, r *http.Request, name string) (frame, bool) {
	id, s, ok := c.session(r)
	if !ok {
		http.Redirect(w, r, base(r)+"login", http.StatusSeeOther)
		return frame{}, false
	}
	return frame{Base: base(r), CSRF: s.csrf, Name: s.name, Flash: c.o.Sessions.takeFlash(id), Page: name,
		Admin: s.role == Admin}, true
}

// admin admits a state change that needs the admin token: change, and the
// session's role. It answers the refusal itself.
func (c *Console) admin(w http.ResponseWriter, r *http.Request) (string, session, bool) {
	id, s, ok := c.change(w, r)
	if !ok {
		return "", session{}, false
	}
	if s.role != Admin {
		http.Error(w, "refused: actions need the admin token (RELAY_ADMIN_TOKEN); this session logged in with RELAY_VIEW_TOKEN", http.StatusForbidden)
		return "", session{}, false
	}
	return id, s, true
}

// session returns the request's session and its id, or false. It reads
// the cookie of the name in force first, then every other name a session
// cookie may have (isSessionCookie): a login over TLS read by a GET whose
// scheme is not known without an Origin, a page asked for by another
// port. Only setting a cookie can log another console out; a session id
// is known only to the process that opened it.
func (c *Console) session(r *http.Request) (string, session, bool) {
	inForce := c.f.cookieName(r)
	cookies := r.Cookies()
	for _, first := range []bool{true, false} {
		for _, ck := range cookies {
			if (ck.Name == inForce) != first || !isSessionCookie(ck.Name) {
				continue
			}
			if s, ok := c.o.Sessions.get(ck.Value); ok {
				return ck.Value, s, true
			}
		}
	}
	return "", session{}, false
}

// change admits a state change: a session, a request from this origin,
// and the session's CSRF token in the form. It answers the refusal itself.
func (c *Console) change(w http.ResponseWriter, r *http.Request) (string, session, bool) {
	id, s, ok := c.session(r)
	if !ok {
		http.Error(w, "not logged in: log in at "+base(r)+"login", http.StatusForbidden)
		return "", session{}, false
	}
	if !c.f.sameOrigin(r) {
		http.Error(w, "refused: the form was sent from another origin", http.StatusForbidden)
		return "", session{}, false
	}
	if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) != 1 {
		http.Error(w, "refused: the form's CSRF token is missing or wrong; reload the page", http.StatusForbidden)
		return "", session{}, false
	}
	return id, s, true
}

// logout ends the session of every session cookie the browser sent that
// is one of this process's, not only the one the page was served with: a
// browser that logged in to this console by two of its addresses (two
// ports, http and https) sends both, and the other would serve the next
// page. It deletes those cookies and the one of the name in force, and no
// other: the browser sends the cookies of every port of the host, and
// another relay's session is not this one's to end.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := c.change(w, r); !ok {
		return
	}
	inForce := c.f.cookieName(r)
	for _, ck := range r.Cookies() {
		if !isSessionCookie(ck.Name) {
			continue
		}
		if mine := c.o.Sessions.close(ck.Value); mine || ck.Name == inForce {
			http.SetCookie(w, &http.Cookie{Name: ck.Name, Value: "", Path: CookiePath, MaxAge: -1,
				HttpOnly: true, Secure: strings.HasPrefix(ck.Name, "__Host-"), SameSite: http.SameSiteStrictMode})
		}
	}
	http.Redirect(w, r, base(r)+"login", http.StatusSeeOther)
}

// render writes the page name with data, or a 500 when it fails.
func render(w http.ResponseWriter, name string, data any) { renderStatus(w, http.StatusOK, name, data) }

// renderStatus is render with the status code status.
func renderStatus(w http.ResponseWriter, status int, name string, data any) {
	var b strings.Builder
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		http.Error(w, "console: page "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// pathText returns the text the segment name of r's path names: the
// segment as the pattern decoded it, read back as urlpath.Link wrote it
// (the console's pages write every identifier with Link, so that an id "."
// or ".." is not resolved away by the browser).
func pathText(r *http.Request, name string) string {
	return urlpath.FromLink(r.PathValue(name))
}
