package ha_test

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relay-energy/relay/internal/natstest"
)

// newJS returns the JetStream context of nc.
func newJS(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// testLogger writes info lines and above to the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// ctxTimeout returns a context that ends after d or with the test.
func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond every 20 ms until it holds, and fails the test naming
// what when it does not within limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// proxy forwards TCP connections to one server, and can cut them off as a
// network partition does: bytes stop flowing both ways while the
// connections stay open, so the client notices only by timeouts.
type proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
	wg    sync.WaitGroup
}

// startProxy listens on 127.0.0.1 and forwards to target (host:port) until
// the test ends.
func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL is the proxy's NATS URL.
func (p *proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// connect returns a client connection through the proxy that never learns
// the cluster's other servers, so that it cannot route around a cut.
func (p *proxy) connect(t *testing.T) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(p.URL(), nats.MaxReconnects(-1), nats.IgnoreDiscoveredServers(),
		nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Cut stops every byte from flowing, on the connections open and on those
// made while cut.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
}

// Heal closes the connections open, whose streams lost bytes during the
// cut, and forwards again: the client reconnects.
func (p *proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) isCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(server, client)
		go p.pipe(client, server)
	}
}

// pipe copies from src to dst, dropping what it reads while cut, until
// either side closes; then it closes both.
func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.isCut() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// cluster starts a cluster of three servers for a test.
func cluster(t *testing.T) *natstest.Cluster {
	t.Helper()
	return natstest.StartCluster(t, 3)
}

// serverAddr returns host:port of server i of c.
func serverAddr(c *natstest.Cluster, i int) string {
	u := c.ServerURL(i)
	return u[len("nats://"):]
}
