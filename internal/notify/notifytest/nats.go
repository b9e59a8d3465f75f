// Package notifytest holds the real, in-process counterparts of relay's sinks
// for tests: an embedded nats-server with JetStream, a fake Slack Web API
// that records what it is asked, and a webhook receiver that checks Standard
// Webhooks signatures with its own implementation of the scheme.
package notifytest

import (
	"crypto/tls"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATSConfig configures an embedded NATS server. The zero value accepts
// anyone over plain TCP.
type NATSConfig struct {
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

// NATSServer is an in-process nats-server with JetStream, listening on
// 127.0.0.1 on a port of its own and storing streams in a directory of the
// test's. It is shut down when the test ends.
type NATSServer struct {
	t        testing.TB
	cfg      NATSConfig
	storeDir string
	port     int
	srv      *server.Server
}

// StartNATS starts an embedded NATS server for t.
func StartNATS(t testing.TB, cfg NATSConfig) *NATSServer {
	t.Helper()
	s := &NATSServer{t: t, cfg: cfg, storeDir: t.TempDir(), port: -1}
	s.start()
	t.Cleanup(s.Shutdown)
	return s
}

func (s *NATSServer) start() {
	s.t.Helper()
	opts := &server.Options{
		Host:          "127.0.0.1",
		Port:          s.port,
		JetStream:     true,
		StoreDir:      s.storeDir,
		NoLog:         true,
		NoSigs:        true,
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
	srv, err := server.NewServer(opts)
	if err != nil {
		s.t.Fatalf("notifytest: nats server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		s.t.Fatalf("notifytest: nats server on port %d not ready", s.port)
	}
	s.srv = srv
	s.port = srv.Addr().(*net.TCPAddr).Port
}

// URL returns the client URL, nats://127.0.0.1:<port> (tls:// with TLS).
func (s *NATSServer) URL() string {
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	if s.cfg.TLS != nil {
		return "tls://" + host
	}
	return "nats://" + host
}

// Shutdown stops the server and waits for it; streams stay on disk.
func (s *NATSServer) Shutdown() {
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.srv = nil
}

// Restart starts a stopped server again on the same port with the same
// streams, as after an outage.
func (s *NATSServer) Restart() {
	s.t.Helper()
	s.Shutdown()
	s.start()
}
