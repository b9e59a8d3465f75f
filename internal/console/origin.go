package console

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/relay-energy/relay/internal/guard"
)

// front is what the console believes of how the browser reached it: the
// external origin, the listen address and the proxies trusted to say the
// scheme, host and client address.
type front struct {
	// origin is Options.Origin, canonical ("https://relay.example.com"),
	// and originHost its host name; "" when unset.
	origin, originHost string
	// listenHost is the host name of Options.Listen; "" for every address.
	listenHost string
	proxies    guard.Proxies
}

// newFront reads the options; a malformed Origin (which config refuses at
// start) is ignored.
func newFront(o Options) front {
	var f front
	if u, err := url.Parse(o.Origin); err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https") {
		f.origin = strings.ToLower(u.Scheme + "://" + u.Host)
		f.originHost = strings.ToLower(u.Hostname())
	}
	if h, _, err := net.SplitHostPort(o.Listen); err == nil {
		f.listenHost = strings.ToLower(h)
	}
	f.proxies = o.TrustedProxies
	return f
}

// hostAllowed reports whether the host the browser asked for is the
// console's: the external origin's, the listen address's, localhost, an IP
// literal, or a name reserved so that no one can register it (RFC 2606
// and 6761: .localhost, .test, .example, .invalid, example.com, .net and
// .org, which tests and documentation use). A DNS rebinding page's host is
// its attacker's registered domain name, which its fetches carry in Host
// whatever address it resolves to; a trusted proxy's word on the host
// counts, no other peer's.
func (f front) hostAllowed(r *http.Request) bool {
	h := hostname(f.proxies.Host(r))
	switch {
	case h == "":
		return false
	case h == f.originHost, h == f.listenHost, reserved(h):
		return true
	}
	_, err := netip.ParseAddr(h)
	return err == nil
}

// reservedNames are the names and top-level domains no one can register.
var reservedNames = []string{"localhost", "test", "example", "invalid", "example.com", "example.net", "example.org"}

// reserved reports whether host is, or is under, a reserved name.
func reserved(host string) bool {
	for _, n := range reservedNames {
		if host == n || strings.HasSuffix(host, "."+n) {
			return true
		}
	}
	return false
}

// hostname is the lowercase host name of a Host value, without its port,
// brackets or trailing dot.
func hostname(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	return strings.ToLower(host)
}

// sameOrigin reports whether a POST comes from a page of this console:
// its Origin, when sent, is the external origin, or scheme://host where
// host is the one the browser asked for and scheme the one it used (the
// connection's, or a trusted proxy's word) or https; and a browser's
// Sec-Fetch-Site, when sent, says same-origin.
//
// An https Origin of the same host is accepted over a plain connection
// without configuration: that is a TLS-terminating proxy that kept the Host
// header, and only the host's own TLS server can make a page of that
// origin, so it is no weaker than the page's own. An http Origin over TLS
// (or behind a proxy that said https) is refused: anyone on the path can
// write a page of a plain-HTTP origin.
func (f front) sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" && !(f.origin != "" && strings.EqualFold(o, f.origin)) {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, f.proxies.Host(r)) {
			return false
		}
		if s := f.proxies.Scheme(r); u.Scheme != s && !(u.Scheme == "https" && s == "http") {
			return false
		}
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return false
	}
	return true
}

// secure reports whether the browser reached the console over TLS: the
// connection is TLS, a trusted proxy said https, the external origin is
// https and is the host asked for, or the request's Origin (checked by
// sameOrigin) is https.
func (f front) secure(r *http.Request) bool {
	if f.proxies.Scheme(r) == "https" {
		return true
	}
	if strings.HasPrefix(f.origin, "https://") && hostname(f.proxies.Host(r)) == f.originHost {
		return true
	}
	return strings.HasPrefix(strings.ToLower(r.Header.Get("Origin")), "https://")
}

// SessionCookieName returns the name of the session cookie in force:
// CookieName with the port of host, the Host the browser asked for
// ("relay_console_9477"; 80 when it names none), and under TLS the
// __Host- prefix (the browser keeps it only if Secure, with Path=/ and no
// Domain, set by this host over TLS) and 443 when host names no port.
// Cookies do not tell ports apart, so two consoles on two ports of one
// host would otherwise log each other out, over TLS or not.
func SessionCookieName(secure bool, host string) string {
	prefix, port := "", "80"
	if secure {
		prefix, port = "__Host-", "443"
	}
	if _, p, err := net.SplitHostPort(host); err == nil && p != "" {
		port = p
	}
	return prefix + CookieName + "_" + port
}

// cookieName is the name of r's session cookie in force.
func (f front) cookieName(r *http.Request) string {
	return SessionCookieName(f.secure(r), f.proxies.Host(r))
}

// isSessionCookie reports whether name is one a session cookie may have:
// CookieName, with a port or the __Host- prefix.
func isSessionCookie(name string) bool {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(name, "__Host-"), CookieName)
	if !ok || rest == "" {
		return ok
	}
	port, ok := strings.CutPrefix(rest, "_")
	return ok && port != "" && strings.Trim(port, "0123456789") == ""
}

// hostRefused is the text of the answer to a console request for a host
// that is not the console's.
const hostRefused = "refused: this host name is not the console's (a DNS rebinding page's would not be); " +
	"set RELAY_CONSOLE_ORIGIN to the address the browser uses, such as https://relay.example.com, " +
	"or reach the console at localhost or an IP address"
