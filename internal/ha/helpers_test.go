package ha_test

import (
	"context"
	"log/slog"
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

// connectVia returns a client connection through proxy p, closed when the
// test ends; the cluster's servers do not advertise their addresses, so it
// cannot route around a cut.
func connectVia(t *testing.T, p *natstest.Proxy) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(p.URL(), nats.MaxReconnects(-1), nats.IgnoreDiscoveredServers(),
		nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// cluster starts a cluster of three servers for a test.
func cluster(t *testing.T) *natstest.Cluster {
	t.Helper()
	return natstest.StartCluster(t, 3)
}
