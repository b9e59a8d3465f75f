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

// Proxies are the peers trusted to say who the client is and what scheme
// and host its browser used, and which headers they say it in: X-Forwarded-
// For, -Proto and -Host, or RFC 7239 Forwarded (RELAY_FORWARDED_HEADER).
// Only that family is read: a proxy that writes one passes the other on
// as the client sent it. The headers of any other peer are ignored: a page
// can set any header on a fetch of its own origin (DNS rebinding), so only
// a proxy's word counts. The zero value trusts no one.
type Proxies struct {
	// Nets are the proxies' addresses (RELAY_TRUSTED_PROXIES).
	Nets []netip.Prefix
	// Forwarded makes Forwarded the header read; otherwise X-Forwarded-*.
	Forwarded bool
}

// trusts reports whether the request came straight from a trusted proxy.
func (p Proxies) trusts(r *http.Request) bool {
	if len(p.Nets) == 0 {
		return false
	}
	a, ok := peer(r)
	return ok && p.contains(a)
}

func (p Proxies) contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, pf := range p.Nets {
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
// trusted proxy, the last address its proxies name that is not a trusted
// proxy's (the one the first trusted proxy saw): of X-Forwarded-For, or
// of the for= parameters of RFC 7239 Forwarded.
// Both are lists each proxy appends to, so only their ends are the
// proxies' word; what comes before may be the client's own invention.
// A hop that is not an address ("unknown", an obfuscated name) ends the
// walk at the last address before it. RemoteAddr when the peer's is no
// address.
func (p Proxies) Client(r *http.Request) string {
	a, ok := peer(r)
	if !ok {
		return r.RemoteAddr
	}
	if !p.contains(a) {
		return a.String()
	}
	client, _ := p.walk(a, p.hops(r))
	return client.String()
}

// hops returns the client addresses the proxies named, the nearest proxy's
// last: X-Forwarded-For's, or Forwarded's for= values ("" for an element
// without one).
func (p Proxies) hops(r *http.Request) []string {
	if !p.Forwarded {
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			return strings.Split(strings.Join(xff, ","), ",")
		}
		return nil
	}
	var hops []string
	for _, e := range forwardedElements(r) {
		hops = append(hops, e["for"])
	}
	return hops
}

// walk goes back from the trusted peer a through hops, past every address
// of a trusted proxy, and returns the first that is not one (or the last
// address before a hop that is no address), with the index of the hop it
// stopped at (-1 when there is none).
func (p Proxies) walk(a netip.Addr, hops []string) (netip.Addr, int) {
	at := -1
	for i := len(hops) - 1; i >= 0; i-- {
		at = i
		h, ok := hopAddr(hops[i])
		if !ok {
			break // a hop that is not an address: trust nothing before it
		}
		a = h
		if !p.contains(a) {
			break
		}
	}
	return a, at
}

// hopAddr reads one hop of X-Forwarded-For or one for= value of
// Forwarded: an address, quoted or not, an IPv6 one in brackets, either
// with a port or not.
func hopAddr(v string) (netip.Addr, bool) {
	v = strings.Trim(strings.TrimSpace(v), `"`)
	if ap, err := netip.ParseAddrPort(v); err == nil {
		return ap.Addr().Unmap(), true
	}
	v = strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
	a, err := netip.ParseAddr(v)
	return a.Unmap(), err == nil
}

// Scheme returns the scheme the client used: https over a TLS connection,
// else what a trusted proxy said (X-Forwarded-Proto's last value, or the
// proto= of the Forwarded element that names the client), else http.
func (p Proxies) Scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	if p.trusts(r) {
		s := lastValue(r.Header.Values("X-Forwarded-Proto"))
		if p.Forwarded {
			s = p.forwardedParam(r, "proto")
		}
		if s = strings.ToLower(s); s == "https" || s == "http" {
			return s
		}
	}
	return "http"
}

// Host returns the host (with its port, if any) the client asked for: what
// a trusted proxy said (X-Forwarded-Host's last value, or the host= of the
// Forwarded element that names the client), else the request's Host
// header.
func (p Proxies) Host(r *http.Request) string {
	if p.trusts(r) {
		h := lastValue(r.Header.Values("X-Forwarded-Host"))
		if p.Forwarded {
			h = p.forwardedParam(r, "host")
		}
		if h != "" {
			return h
		}
	}
	return r.Host
}

// lastValue is the last of the comma-separated values of a header: the
// one the nearest proxy wrote, when proxies append to it; a value before
// it may be the client's own.
func lastValue(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	v := vs[len(vs)-1]
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return strings.TrimSpace(v)
}

// forwardedParam returns the parameter name of the Forwarded element that
// names the client (the one Client stops at, walking from the last), or
// "". Each proxy appends an element saying what its own client used, so
// that element's proto= and host= are what the browser used.
func (p Proxies) forwardedParam(r *http.Request, name string) string {
	es := forwardedElements(r)
	if len(es) == 0 {
		return ""
	}
	a, _ := peer(r)
	hops := make([]string, len(es))
	for i, e := range es {
		hops[i] = e["for"]
	}
	_, at := p.walk(a, hops)
	return es[at][name]
}

// forwardedElements returns the elements of the request's Forwarded
// headers (RFC 7239) in order, each its parameters by lower-case name,
// unquoted. A comma or semicolon inside a quoted value does not split it.
func forwardedElements(r *http.Request) []map[string]string {
	var es []map[string]string
	for _, h := range r.Header.Values("Forwarded") {
		for _, elem := range splitQuoted(h, ',') {
			e := map[string]string{}
			for _, pair := range splitQuoted(elem, ';') {
				k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok {
					e[strings.ToLower(strings.TrimSpace(k))] = unquote(strings.TrimSpace(v))
				}
			}
			es = append(es, e)
		}
	}
	return es
}

// unquote returns a quoted-string's text (RFC 9110: between double
// quotes, a backslash escapes the next character), or v as it is.
func unquote(v string) string {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return v
	}
	var b strings.Builder
	for i := 1; i < len(v)-1; i++ {
		if v[i] == '\\' && i+1 < len(v)-1 {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// splitQuoted splits s at sep outside double quotes.
func splitQuoted(s string, sep byte) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == sep && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// ParseProxies reads a comma-separated list of CIDRs or addresses, such as
// "10.0.0.0/8, 192.168.1.7", as RELAY_TRUSTED_PROXIES writes them, the
// proxies writing X-Forwarded-*.
func ParseProxies(s string) (Proxies, error) {
	var p Proxies
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if pf, err := netip.ParsePrefix(f); err == nil {
			p.Nets = append(p.Nets, pf.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return Proxies{}, &net.ParseError{Type: "CIDR or IP address", Text: f}
		}
		p.Nets = append(p.Nets, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return p, nil
}
