package mqtt

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
)

// conn is one connection to a broker, shared by every sink of the process
// with the same broker, client identifier and settings: a sink rebuilt by
// a reload of the rules takes over its predecessor's, since two
// connections with one client identifier would take the session from each
// other at every reconnection. A sink with changed settings (credentials,
// trusted authorities, the timeout) replaces it at its first delivery: the
// old one is closed.
type conn struct {
	key  string
	cfg  Config // of the sink that made it
	book *book  // the retained states published through the broker and client id
	refs int    // sinks using it, under connsMu

	once   sync.Once
	cm     *autopaho.ConnectionManager
	err    error
	cancel context.CancelFunc

	mu        sync.Mutex
	lastErr   error  // the last failed connection attempt's, nil once connected
	closed    string // why it was closed, "" while it is not
	maxPacket uint32 // the broker's maximum packet size (CONNACK), 0: none said
	ups       int    // connections made
}

var (
	// connsMu guards conns, books, conn.refs and the sinks of each book.
	connsMu sync.Mutex
	conns   = map[string]*conn{}
	books   = map[string]*book{}
)

// connKey names the broker and client id of cfg: one connection each.
func connKey(cfg Config) string {
	return cfg.URL.Scheme + "://" + strings.ToLower(cfg.URL.Host) + "\x00" + cfg.ClientID
}

// open joins the sink to the book of its broker and client id, and takes
// the running connection if its settings are the sink's. A sink of another
// tenant or name with the same broker and client id and other settings is
// refused: the two would replace each other's connection at every
// delivery.
func (s *Sink) open() error {
	connsMu.Lock()
	defer connsMu.Unlock()
	b := books[s.key]
	if b == nil {
		b = &book{sinks: map[string][]*Sink{}, states: map[string]map[string]*state{}}
		books[s.key] = b
	}
	for owner, live := range b.sinks {
		if owner == s.owner {
			continue
		}
		for _, o := range live {
			if !sameSettings(o.cfg, s.cfg) {
				return fmt.Errorf("mqtt sink %q: sink %q connects to %s with the same client_id %q and other credentials, ca_file or timeout: "+
					"give each sink a client_id of its own", s.cfg.Name, o.cfg.Name, s.cfg.URL.Host, s.cfg.ClientID)
			}
		}
	}
	b.join(s)
	s.book = b
	if c := conns[s.key]; c != nil && sameSettings(c.cfg, s.cfg) {
		c.refs++
		s.conn = c
	}
	return nil
}

// connFor returns the connection of cfg's broker and client id with cfg's
// settings, replacing one with other settings. Under connsMu.
func connFor(cfg Config, key string) *conn {
	c := conns[key]
	if c != nil && sameSettings(c.cfg, cfg) {
		c.refs++
		return c
	}
	if c != nil {
		delete(conns, key)
		c.close("the connection was replaced: the sink's settings changed (credentials, ca_file or timeout)")
	}
	c = &conn{key: key, cfg: cfg, book: books[key], refs: 1}
	conns[key] = c
	return c
}

// sameSettings says whether a and b, of one broker and client identifier,
// connect alike.
func sameSettings(a, b Config) bool {
	roots := a.RootCAs == b.RootCAs || (a.RootCAs != nil && a.RootCAs.Equal(b.RootCAs))
	return a.Username == b.Username && a.Password == b.Password && roots && a.Timeout == b.Timeout
}

// release is a sink's Close: the last sink using c disconnects it. Under
// connsMu.
func (c *conn) release() {
	if c.refs--; c.refs > 0 {
		return
	}
	if conns[c.key] == c {
		delete(conns, c.key)
	}
	c.close("the sink was closed: the rules no longer define it, or this replica no longer serves its tenant")
}

// close ends the connection, if it was started (a DISCONNECT, waited for
// up to a second, so that the broker has let it go before a successor
// connects), and keeps it from starting; why is what its sinks' sends say
// from then on.
func (c *conn) close(why string) {
	c.mu.Lock()
	c.closed = why
	c.mu.Unlock()
	c.once.Do(func() { c.err = errors.New(why) })
	if c.cancel == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.cm.Disconnect(ctx)
	c.cancel()
}

// closedWhy is why c was closed, or "".
func (c *conn) closedWhy() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// start connects in the background, once, for the life of the connection.
func (c *conn) start() {
	c.once.Do(func() {
		cfg := c.cfg
		cc := clientConfig(cfg)
		cc.OnConnectionUp = func(_ *autopaho.ConnectionManager, ack *paho.Connack) {
			c.mu.Lock()
			was := c.lastErr
			c.lastErr = nil
			c.maxPacket = 0
			if ack != nil && ack.Properties != nil && ack.Properties.MaximumPacketSize != nil {
				c.maxPacket = *ack.Properties.MaximumPacketSize
			}
			c.ups++
			again := c.ups > 1
			c.mu.Unlock()
			if was != nil {
				cfg.Logger.Info("mqtt: connected to the broker", "sink", cfg.Name, "broker", cfg.URL.Host)
			}
			if again {
				go c.reassert()
			}
		}
		cc.OnConnectError = func(err error) {
			c.mu.Lock()
			first := c.lastErr == nil
			c.lastErr = err
			c.mu.Unlock()
			if first {
				cfg.Logger.Warn("mqtt: cannot connect to the broker; retrying", "sink", cfg.Name, "broker", cfg.URL.Host, "err", connectError(err))
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		c.cancel = cancel
		c.cm, c.err = autopaho.NewConnection(ctx, cc)
	})
}

// clientConfig is how relay connects with cfg, without the callbacks.
func clientConfig(cfg Config) autopaho.ClientConfig {
	cc := autopaho.ClientConfig{
		ServerUrls: []*url.URL{brokerURL(cfg.URL)},
		KeepAlive:  30,
		// No session: a message the broker refuses by dropping the
		// connection would be resent at every reconnection, and the
		// outbox retries what was not acknowledged anyway.
		CleanStartOnInitialConnection: true,
		SessionExpiryInterval:         0,
		ConnectTimeout:                cfg.Timeout,
		ReconnectBackoff:              autopaho.NewExponentialBackoff(500*time.Millisecond, 30*time.Second, time.Second, 2),
		ConnectUsername:               cfg.Username,
		ConnectPassword:               []byte(cfg.Password),
		ClientConfig:                  paho.ClientConfig{ClientID: cfg.ClientID},
	}
	if cfg.URL.Scheme == "mqtts" {
		cc.TlsCfg = &tls.Config{RootCAs: cfg.RootCAs, ServerName: cfg.URL.Hostname(), MinVersion: tls.VersionTLS12}
	}
	return cc
}

// brokerURL is u as autopaho names the schemes: mqtt and tls.
func brokerURL(u *url.URL) *url.URL {
	out := *u
	if out.Scheme == "mqtts" {
		out.Scheme = "tls"
	}
	return &out
}
