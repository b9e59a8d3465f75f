// Package guard holds what the ops listener believes of a request's
// client, and how often a client may fail to authenticate: the proxies
// trusted to say the client's address, scheme and host
// (RELAY_TRUSTED_PROXIES), and the throttle of wrong tokens at the console's
// login and the ops API's Bearer check.
package guard

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies are the peers trusted to say, in X-Forwarded-For,
// X-Forwarded-Proto, X-Forwarded-Host and RFC 7239 Forwarded, who the
// client is and what scheme and host its browser used. The headers of any
// other peer are ignored: a page can set any header on a fetch of its own
// origin (DNS rebinding), so only a proxy's word counts. The zero value
// trusts no one.
type Proxies []netip.Prefix

// trusts reports whether the request came straight from a trusted proxy.
func (p Proxies) trusts(r *http.Request) bool {
	if len(p) == 0 {
		return false
	}
	a, ok := peer(r)
	return ok && p.contains(a)
}

func (p Proxies) contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, pf := range p {
		if pf.Contains(a) {
			return true
		}
	}
	return false
}

// peer is the address of the connection's other end.
func peer(r *http.Request) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// Client returns the client's address: the peer's, or, when the peer is a
// trusted proxy, the last address of X-Forwarded-For that is not a
// trusted proxy's (the one the first trusted proxy saw). "" when none is
// known.
func (p Proxies) Client(r *http.Request) string {
	a, ok := peer(r)
	if !ok {
		return r.RemoteAddr
	}
	if !p.contains(a) {
		return a.String()
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		h, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break // a hop that is not an address: trust nothing before it
		}
		a = h.Unmap()
		if !p.contains(a) {
			break
		}
	}
	return a.String()
}

// Scheme returns the scheme the client used: https over a TLS connection,
// else what a trusted proxy said (Forwarded proto=, then
// X-Forwarded-Proto), else http.
func (p Proxies) Scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	if p.trusts(r) {
		s := forwarded(r, "proto")
		if s == "" {
			s = firstValue(r.Header.Get("X-Forwarded-Proto"))
		}
		if s = strings.ToLower(s); s == "https" || s == "http" {
			return s
		}
	}
	return "http"
}

// Host returns the host (with its port, if any) the client asked for: what
// a trusted proxy said (Forwarded host=, then X-Forwarded-Host), else the
// request's Host header.
func (p Proxies) Host(r *http.Request) string {
	if p.trusts(r) {
		h := forwarded(r, "host")
		if h == "" {
			h = firstValue(r.Header.Get("X-Forwarded-Host"))
		}
		if h != "" {
			return h
		}
	}
	return r.Host
}

// firstValue is the first of a comma-separated list of values.
func firstValue(v string) string {
	v, _, _ = strings.Cut(v, ",")
	return strings.TrimSpace(v)
}

// forwarded returns the parameter name of the first element of the
// request's Forwarded headers (RFC 7239), unquoted, or "".
func forwarded(r *http.Request, name string) string {
	first := firstValue(strings.Join(r.Header.Values("Forwarded"), ","))
	for pair := range strings.SplitSeq(first, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if ok && strings.EqualFold(k, name) {
			return strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	return ""
}

// ParseProxies reads a comma-separated list of CIDRs or addresses, such as
// "10.0.0.0/8, 192.168.1.7", as RELAY_TRUSTED_PROXIES writes them.
func ParseProxies(s string) (Proxies, error) {
	var p Proxies
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if pf, err := netip.ParsePrefix(f); err == nil {
			p = append(p, pf.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, &net.ParseError{Type: "CIDR or IP address", Text: f}
		}
		p = append(p, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return p, nil
}
