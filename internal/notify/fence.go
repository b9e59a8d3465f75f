package notify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// Fence says whether this process may still send for its tenant: nil while
// it may, otherwise why not. A replica's fence is its lease's check
// (docs/design.md §14): once the lease is past its validity on the monotonic
// clock, every send is refused, also in a process that was paused and has
// just resumed. A fence that has refused must keep refusing. A nil Fence
// never refuses.
type Fence func() error

// Check returns the fence's refusal, or nil when f is nil or allows.
func (f Fence) Check() error {
	if f == nil {
		return nil
	}
	return f()
}

// FencedTransport returns a RoundTripper that asks fence immediately before
// each request and sends it with next (a copy of http.DefaultTransport when
// nil) only when fence allows; a refused request fails with the fence's
// error and reaches nobody. This is the last check before the wire for every
// HTTP sink: it comes after the sink's own pacing, and before each request
// of a send that makes several (a thread reply and the edit of its start, a
// digest and its list).
//
// When next is an *http.Transport (or nil) that dials with DialContext, the
// request is also fenced on its way to the socket: the transport is a copy
// of next whose connections ask fence before they are dialled and before
// each write (FencedDial). A request that
// passed the first check and then waited (for a connection of a busy host,
// for a dial, for the goroutine that writes it) while the process was
// paused past its lease is refused there, and one cut short mid-write
// closes its connection, so that the server never takes it for whole. Each
// call makes a transport of its own, with connections of its own: call it
// once per fence. A transport that makes its TLS connections itself
// (DialTLSContext) or dials with the deprecated Dial or DialTLS is fenced
// before each request only: under a fenced TLS connection net/http could
// not see what the handshake chose. With a nil fence it returns next itself.
func FencedTransport(fence Fence, next http.RoundTripper) http.RoundTripper {
	if fence == nil {
		return next
	}
	if next == nil {
		next = http.DefaultTransport
	}
	if t, ok := next.(*http.Transport); ok && t.DialTLSContext == nil && t.DialTLS == nil && t.Dial == nil {
		next = fenceConns(fence, t)
	}
	return &fencedTransport{fence: fence, next: next}
}

type fencedTransport struct {
	fence Fence
	next  http.RoundTripper
}

// RoundTrip sends req when the fence allows.
func (t *fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.fence(); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("not sent: %w", err)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		// Refused at the socket: the transport may report the closed
		// connection's read error rather than the refused write's.
		if ferr := t.fence(); ferr != nil && !errors.Is(err, ferr) {
			err = fmt.Errorf("not sent, or sent as the fence closed: %w (%v)", ferr, err)
		}
	}
	return resp, err
}

// CloseIdleConnections closes the idle connections of the transport under
// the fence, which http.Client.CloseIdleConnections reaches through it.
func (t *fencedTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// fenceConns returns a copy of t whose connections ask fence before they
// are dialled and before every write. TLS runs over them, so its records
// are fenced too. t dials with its DialContext, or a net.Dialer.
func fenceConns(fence Fence, t *http.Transport) *http.Transport {
	c := t.Clone()
	dial := c.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	c.DialContext = FencedDial(fence, dial)
	return c
}

// FencedDial returns dial asking fence before it dials, its connections
// fenced (each write asks it too): for the HTTP sinks' transport, and for a sink that
// dials its own connections (email), so that what waited between the sink's
// check and the wire is refused there.
func FencedDial(fence Fence, dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if err := fence.Check(); err != nil {
			return nil, fmt.Errorf("not connected: %w", err)
		}
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return fenceConn(fence, conn), nil
	}
}

// fenceConn returns conn asking fence before each write. Once the fence
// refuses, conn is closed. With a nil fence it returns conn itself.
func fenceConn(fence Fence, conn net.Conn) net.Conn {
	if fence == nil {
		return conn
	}
	return &fencedConn{Conn: conn, fence: fence}
}

// fencedConn is a connection that asks its fence before each write. Once
// the fence refuses, the connection is closed: a request cut short must not
// be completed by a later write, nor be taken for whole by the server.
type fencedConn struct {
	net.Conn
	fence Fence
}

// Write writes p when the fence allows.
func (c *fencedConn) Write(p []byte) (int, error) {
	if err := c.fence(); err != nil {
		_ = c.Conn.Close()
		return 0, fmt.Errorf("not sent: %w", err)
	}
	return c.Conn.Write(p)
}

// KeepIdleConns returns rt made to keep n idle connections per host, for a
// sink that has n requests in flight at once: with the default of two, the
// others of each run would be closed and dialled again. For nil or
// http.DefaultTransport it is a copy of http.DefaultTransport; for a
// transport of FencedTransport over an *http.Transport, the same fence over
// a copy of that transport (its connections fenced as before); any other rt
// is returned as it is. The copy has connections of its own.
func KeepIdleConns(rt http.RoundTripper, n int) http.RoundTripper {
	keep := func(t *http.Transport) *http.Transport {
		c := t.Clone()
		c.MaxIdleConnsPerHost = n
		return c
	}
	switch t := rt.(type) {
	case nil:
		return keep(http.DefaultTransport.(*http.Transport))
	case *fencedTransport:
		if next, ok := t.next.(*http.Transport); ok {
			return &fencedTransport{fence: t.fence, next: keep(next)}
		}
	case *http.Transport:
		if t == http.DefaultTransport {
			return keep(t)
		}
	}
	return rt
}
