// Package natstest runs real nats-server instances with JetStream in the test
// process: a single server, open or with authentication or TLS, for the tests
// of whatever publishes to NATS, and clusters for the tests of relay's
// replicated state: three servers that route to each other and replicate
// streams and KV buckets with R3, any of which can be stopped and started
// again as a node that dies and comes back.
package natstest

import (
	"fmt"
	"net"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// TB is what a server or a cluster needs of its test: testing.TB has it, and
// so has Main, for a cluster that TestMain starts for a whole package.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(fn func())
	TempDir() string
}

// Main is the TB of a cluster that lives for a whole test binary: TestMain
// starts it with a Main and calls Close after the tests. Fatalf panics.
type Main struct {
	dirs     []string
	cleanups []func()
}

// Helper does nothing.
func (m *Main) Helper() {}

// Fatalf panics with the message.
func (m *Main) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// Cleanup registers fn for Close.
func (m *Main) Cleanup(fn func()) { m.cleanups = append(m.cleanups, fn) }

// TempDir returns a new directory that Close removes.
func (m *Main) TempDir() string {
	dir, err := os.MkdirTemp("", "natstest")
	if err != nil {
		m.Fatalf("natstest: %v", err)
	}
	m.dirs = append(m.dirs, dir)
	return dir
}

// Close runs the cleanups, last first, and removes the directories.
func (m *Main) Close() {
	for i := len(m.cleanups) - 1; i >= 0; i-- {
		m.cleanups[i]()
	}
	for _, d := range m.dirs {
		_ = os.RemoveAll(d)
	}
}

// node is one server of a Server or a Cluster: what survives a restart (its
// store directory and ports) and the running server, nil while it is down.
type node struct {
	name        string
	storeDir    string
	port        int // client port, kept across restarts
	clusterPort int
	srv         *server.Server
}

// start runs the server of nd with opts, which say what is particular to it
// (its name, cluster, authentication, TLS), and waits until it accepts
// clients; the port it listens on is kept for its restarts.
func (nd *node) start(t TB, opts *server.Options) {
	t.Helper()
	opts.Host = "127.0.0.1"
	opts.Port = nd.port
	opts.JetStream = true
	opts.StoreDir = nd.storeDir
	opts.NoLog = true
	opts.NoSigs = true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("natstest: server %s: %v", nd.name, err)
	}
	go srv.Start()
	// 60 s: on 2 cores under -race with other packages' tests and fuzzing
	// beside it, a cluster's third server once took longer than 20 s.
	if !srv.ReadyForConnections(60 * time.Second) {
		srv.Shutdown()
		t.Fatalf("natstest: server %s not ready", nd.name)
	}
	nd.srv = srv
	nd.port = srv.Addr().(*net.TCPAddr).Port
}

// stop shuts the server of nd down and waits for it; its streams stay on
// disk.
func (nd *node) stop() {
	if nd.srv == nil {
		return
	}
	nd.srv.Shutdown()
	nd.srv.WaitForShutdown()
	nd.srv = nil
}
