package natstest

import (
	"net"
	"sync"
)

// Proxy forwards TCP connections to one server, and can cut them: the
// network between one client and the cluster. The cluster's servers do not
// advertise their addresses to clients, so a client that connects through
// a proxy stays behind it.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	mode   proxyMode
	conns  []net.Conn
	wg     sync.WaitGroup
	closed bool
}

type proxyMode int

const (
	forwarding proxyMode = iota
	// blackholed drops every byte, on open connections and new ones: a
	// partition the client notices only by its pings.
	blackholed
	// refusing closes every connection, open or new: a client whose
	// connection was closed and cannot get another.
	refusing
)

// StartProxy listens on 127.0.0.1 and forwards to server i of c until the
// test ends.
func (c *Cluster) StartProxy(i int) *Proxy {
	c.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatalf("natstest: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: c.ServerURL(i)[len("nats://"):]}
	p.wg.Add(1)
	go p.accept()
	c.t.Cleanup(p.Close)
	return p
}

// URL is the proxy's NATS URL.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Blackhole stops every byte from flowing, on the connections open and on
// those made meanwhile.
func (p *Proxy) Blackhole() { p.set(blackholed) }

// Refuse closes the connections open and every one made meanwhile.
func (p *Proxy) Refuse() { p.set(refusing) }

// Heal forwards again; connections open during a blackhole, whose streams
// lost bytes, are closed, and the client reconnects.
func (p *Proxy) Heal() { p.set(forwarding) }

func (p *Proxy) set(m proxyMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m != blackholed {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
	p.mode = m
}

func (p *Proxy) current() proxyMode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.current() == refusing {
			client.Close()
			continue
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

// pipe copies from src to dst, dropping what it reads while blackholed,
// until either side closes; then it closes both.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && p.current() == forwarding {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
