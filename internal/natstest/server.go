package natstest

import (
	"crypto/tls"
	"net"
	"strconv"

	"github.com/nats-io/nats-server/v2/server"
)

// Config configures a single server. The zero value accepts anyone over
// plain TCP.
type Config struct {
	// User and Password, when set, are required of every client.
	User, Password string
	// Token, when set, is required of every client.
	Token string
	// NKey, when set, is the one user public key ("U...") the server accepts.
	NKey string
	// TLS, when set, makes the server speak TLS only; with ClientAuth set
	// to tls.RequireAndVerifyClientCert it verifies client certificates.
	TLS *tls.Config
}

// Server is a single in-process nats-server with JetStream, listening on
// 127.0.0.1 on a port of its own and storing streams in a directory of the
// test's. It is shut down when the test ends.
type Server struct {
	t   TB
	cfg Config
	nd  node
}

// StartServer starts a single server for t.
func StartServer(t TB, cfg Config) *Server {
	t.Helper()
	s := &Server{t: t, cfg: cfg, nd: node{name: "nats", storeDir: t.TempDir(), port: -1}}
	s.start()
	t.Cleanup(s.Shutdown)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	opts := &server.Options{
		Username:      s.cfg.User,
		Password:      s.cfg.Password,
		Authorization: s.cfg.Token,
	}
	if s.cfg.NKey != "" {
		opts.Nkeys = []*server.NkeyUser{{Nkey: s.cfg.NKey}}
	}
	if s.cfg.TLS != nil {
		opts.TLS = true
		opts.TLSConfig = s.cfg.TLS
		opts.TLSVerify = s.cfg.TLS.ClientAuth == tls.RequireAndVerifyClientCert
		opts.TLSTimeout = 2
	}
	s.nd.start(s.t, opts)
}

// URL returns the client URL, nats://127.0.0.1:<port> (tls:// with TLS).
func (s *Server) URL() string {
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.nd.port))
	if s.cfg.TLS != nil {
		return "tls://" + host
	}
	return "nats://" + host
}

// Shutdown stops the server and waits for it; streams stay on disk.
func (s *Server) Shutdown() { s.nd.stop() }

// Restart starts a stopped server again on the same port with the same
// streams, as after an outage.
func (s *Server) Restart() {
	s.t.Helper()
	s.Shutdown()
	s.start()
}
