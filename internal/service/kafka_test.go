package service

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/testwait"
)

// A Kafka sink relay lets go is closed, and its client with it: a reload
// that removes the sink, and a tenant this replica stops serving, leave no
// connection to the brokers open.
func TestKafkaSinksRelayLetsGoCloseTheirClient(t *testing.T) {
	var open atomic.Int64
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "energy.alarms"),
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			ln, err := net.Listen(network, addr)
			return &countingListener{Listener: ln, open: &open}, err
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "rules.yaml")
	kafkaRules := "sinks:\n  - name: stream\n    type: kafka\n    brokers: " + strings.Join(c.ListenAddrs(), ",") +
		"\n  - name: out\n    type: console\nroutes:\n  - name: all\n    to: [stream, out]\n"
	consoleRules := "sinks:\n  - name: out\n    type: console\nroutes:\n  - name: all\n    to: [out]\n"
	writeFile(t, rulesPath, kafkaRules)
	clk := clock.NewFake(reloadT0)
	tr := openTestTenantEnv(t, rulesPath, "http://127.0.0.1:1", clk, nil)

	applyStarts(t, tr, reloadT0, "A1")
	testwait.For(t, 10*time.Second, "the sink to connect", func() bool { return open.Load() > 0 })
	writeFile(t, rulesPath, consoleRules)
	if changed, err := tr.rules.Reload(); !changed || err != nil {
		t.Fatalf("reload: %v, %v", changed, err)
	}
	testwait.For(t, 10*time.Second, "the removed sink's connections to close", func() bool { return open.Load() == 0 })

	writeFile(t, rulesPath, kafkaRules)
	if changed, err := tr.rules.Reload(); !changed || err != nil {
		t.Fatalf("reload: %v, %v", changed, err)
	}
	applyStarts(t, tr, reloadT0, "A2")
	testwait.For(t, 10*time.Second, "the sink to connect again", func() bool { return open.Load() > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tr.stop(ctx)
	testwait.For(t, 10*time.Second, "the stopped tenant's sink's connections to close", func() bool { return open.Load() == 0 })
}

// countingListener counts the connections the brokers hold open: one more
// at each accept, one less when a read ends (either side closed it).
type countingListener struct {
	net.Listener
	open *atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.open.Add(1)
	return &countingConn{Conn: c, open: l.open}, nil
}

type countingConn struct {
	net.Conn
	open  *atomic.Int64
	ended atomic.Bool
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && c.ended.CompareAndSwap(false, true) {
		c.open.Add(-1)
	}
	return n, err
}
