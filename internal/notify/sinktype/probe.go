package sinktype

import (
	"context"
	"fmt"
	"net"
	"net/url"
)

// ProbeHost dials the host of a URL, which shows that DNS, routes and
// network policies are in place without sending anything. The line it
// returns names the host and port, never the URL's path or query, which may
// hold a token.
func ProbeHost(ctx context.Context, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("not a URL with a host")
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("cannot reach %s: %w", addr, err)
	}
	conn.Close()
	return fmt.Sprintf("%s reachable; nothing was sent", addr), nil
}

// RedactURL returns scheme://host and, when withPath, the path, leaving out
// credentials and the query; for an unparsable URL, "(invalid URL)".
func RedactURL(raw string, withPath bool) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(invalid URL)"
	}
	out := u.Scheme + "://" + u.Host
	if withPath {
		out += u.EscapedPath()
		if u.RawQuery != "" {
			out += "?…"
		}
	}
	return out
}
