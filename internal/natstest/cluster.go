package natstest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RunMain runs the tests of m (TestMain's *testing.M) with a cluster of n
// servers that lives for the whole test binary: use receives the cluster
// and a connection to it before the tests run. It returns m.Run's code, for
// os.Exit.
func RunMain(m interface{ Run() int }, n int, use func(c *Cluster, nc *nats.Conn)) int {
	main := &Main{}
	defer main.Close()
	c := StartCluster(main, n)
	use(c, c.Connect())
	return m.Run()
}

// Cluster is a JetStream cluster of in-process servers listening on
// 127.0.0.1, each with its own store directory. It is shut down when the test
// ends.
type Cluster struct {
	t    TB
	name string
	// routes are the cluster addresses of every server: JetStream in a
	// cluster needs them configured, not learnt.
	routes []*url.URL
	nodes  []*node
}

// StartCluster starts a cluster of n servers and waits until JetStream can
// create a stream replicated on all of them; n = 1 starts one server with
// no cluster.
func StartCluster(t TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("natstest: a cluster of %d servers", n)
	}
	c := &Cluster{t: t, name: "relay-test"}
	t.Cleanup(c.Shutdown)
	for i := range n {
		port := freePort(t)
		c.nodes = append(c.nodes, &node{name: "n" + strconv.Itoa(i+1), storeDir: t.TempDir(), port: -1, clusterPort: port})
		c.routes = append(c.routes, &url.URL{Scheme: "nats", Host: "127.0.0.1:" + strconv.Itoa(port)})
	}
	for _, nd := range c.nodes {
		c.start(nd)
	}
	c.WaitReady(n)
	return c
}

func (c *Cluster) start(nd *node) {
	c.t.Helper()
	opts := &server.Options{ServerName: nd.name}
	if len(c.nodes) > 1 {
		// Clients know the servers from URL: one behind a Proxy must not
		// learn the others' addresses and route around it.
		opts.Cluster = server.ClusterOpts{Name: c.name, Host: "127.0.0.1", Port: nd.clusterPort, NoAdvertise: true}
		opts.Routes = c.routes
	}
	nd.start(c.t, opts)
}

// freePort returns a port of 127.0.0.1 that was free a moment ago: the
// cluster ports must be known before the first server starts.
func freePort(t TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Size returns how many servers the cluster has, running or not.
func (c *Cluster) Size() int { return len(c.nodes) }

// URL returns the client URLs of every server, comma-separated, the form
// RELAY_NATS_URL takes.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.nodes))
	for i := range c.nodes {
		urls[i] = c.ServerURL(i)
	}
	return strings.Join(urls, ",")
}

// ServerURL returns the client URL of server i.
func (c *Cluster) ServerURL(i int) string {
	return "nats://127.0.0.1:" + strconv.Itoa(c.nodes[i].port)
}

// Connect returns a client connection to every server of the cluster that
// is closed when the test ends.
func (c *Cluster) Connect(opts ...nats.Option) *nats.Conn {
	c.t.Helper()
	nc, err := nats.Connect(c.URL(), append([]nats.Option{nats.MaxReconnects(-1)}, opts...)...)
	if err != nil {
		c.t.Fatalf("natstest: connect: %v", err)
	}
	c.t.Cleanup(nc.Close)
	return nc
}

// Stop shuts server i down and waits for it, as a node that dies; its
// streams stay on disk.
func (c *Cluster) Stop(i int) { c.nodes[i].stop() }

// Restart starts a stopped server i again on the same ports with the same
// store, as a node that comes back.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.Stop(i)
	c.start(c.nodes[i])
}

// Shutdown stops every server.
func (c *Cluster) Shutdown() {
	for i := range c.nodes {
		c.Stop(i)
	}
}

// WaitReady waits until JetStream places a stream with the given number of
// replicas, which needs a meta leader and that many servers that agree on
// it. It fails the test after 30 s.
func (c *Cluster) WaitReady(replicas int) {
	c.t.Helper()
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1))
	if err != nil {
		c.t.Fatalf("natstest: connect: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatalf("natstest: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	name := fmt.Sprintf("NATSTEST_READY_%d", time.Now().UnixNano())
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{
			Name: name, Subjects: []string{"natstest.ready." + name}, Replicas: replicas,
			Storage: jetstream.MemoryStorage,
		})
		if err == nil {
			err = js.DeleteStream(ctx, name)
		}
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("natstest: the cluster cannot place a stream of %d replicas after 30s: %v", replicas, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
