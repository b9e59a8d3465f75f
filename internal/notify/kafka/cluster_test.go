package kafka_test

import (
	"context"
	"encoding/binary"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cluster is an in-process Kafka cluster for one test (franz-go's kfake,
// which speaks the real protocol): three brokers by default, the topics a
// test asks for, and listeners whose connections the test can cut.
type cluster struct {
	t     *testing.T
	c     *kfake.Cluster
	addrs []string
	ln    *cutListeners

	// What the brokers saw of the produce requests: how many, how many
	// asked for less than every in-sync replica (acks other than -1), and
	// how many record batches came from no idempotent producer (producer
	// id -1).
	produces, weakAcks, notIdempotent atomic.Int64
}

// startCluster starts a cluster with opts and seeds topics, each with
// partitions partitions.
func startCluster(t *testing.T, partitions int32, topics []string, opts ...kfake.Opt) *cluster {
	t.Helper()
	k := &cluster{t: t, ln: &cutListeners{}}
	opts = append([]kfake.Opt{kfake.ListenFn(k.ln.listen), kfake.SeedTopics(partitions, topics...)}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	k.c, k.addrs = c, c.ListenAddrs()
	// Look at every produce request on the wire, and let the cluster
	// answer it.
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.ProduceRequest)
		k.produces.Add(1)
		if req.Acks != -1 {
			k.weakAcks.Add(1)
		}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				var b kmsg.RecordBatch
				if err := b.ReadFrom(p.Records); err != nil || b.ProducerID < 0 {
					k.notIdempotent.Add(1)
				}
			}
		}
		return nil, nil, false
	})
	return k
}

// brokers is the sink's brokers option.
func (k *cluster) brokers() string { return "[" + strings.Join(k.addrs, ", ") + "]" }

// consumed is a record as an independent consumer read it.
type consumed struct {
	partition int32
	offset    int64
	key       string
	value     string
	headers   map[string]string
	order     []string // header keys in order
	producer  int64    // the producer id of the record's batch
}

// read consumes every record topic holds now, from its start to the end
// offsets the cluster gives at the call, with a plain franz-go consumer (no
// group); it returns them in partition and offset order.
func (k *cluster) read(topic string, opts ...kgo.Opt) []consumed {
	k.t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(k.addrs...), kgo.ClientID("test-consumer")}, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(opts...)
	if err != nil {
		k.t.Fatal(err)
	}
	ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, topic)
	admin.Close()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		k.t.Fatalf("end offsets of %s: %v", topic, err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		k.t.Fatal(err)
	}
	defer cl.Close()
	var out []consumed
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			k.t.Fatalf("consumer: %d partitions of %s not read to their end within 30 s", len(left), topic)
		}
		for _, e := range fs.Errors() {
			k.t.Fatalf("consumer: topic %s partition %d: %v", e.Topic, e.Partition, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			c := consumed{partition: r.Partition, offset: r.Offset, key: string(r.Key), value: string(r.Value), headers: map[string]string{},
				producer: r.ProducerID}
			for _, h := range r.Headers {
				c.headers[h.Key] = string(h.Value)
				c.order = append(c.order, h.Key)
			}
			out = append(out, c)
			if end, ok := left[r.Partition]; ok && r.Offset >= end-1 {
				delete(left, r.Partition)
			}
		})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].partition != out[j].partition {
			return out[i].partition < out[j].partition
		}
		return out[i].offset < out[j].offset
	})
	return out
}

// cutListeners wraps the brokers' listeners so that a test can cut their
// connections: all of them at once, or the connection carrying a produce
// request just after the broker stored it, before its answer leaves.
type cutListeners struct {
	mu       sync.Mutex
	conns    []*cutConn
	accepted atomic.Int64
	open     atomic.Int64 // connections not yet closed by either side
	// swallow is how many produce answers are still to be swallowed, each
	// by closing its connection instead of writing it.
	swallow  atomic.Int64
	swallows atomic.Int64 // answers swallowed so far
}

func (l *cutListeners) listen(network, addr string) (net.Listener, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	return &cutListener{Listener: ln, l: l}, nil
}

// cutAll closes every connection the brokers have accepted.
func (l *cutListeners) cutAll() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Conn.Close()
	}
	n := len(l.conns)
	l.conns = nil
	return n
}

// swallowProduceAnswers makes the next n answers to produce requests
// vanish: the broker stores the records, then the connection closes where
// its acknowledgement would be written.
func (l *cutListeners) swallowProduceAnswers(n int) { l.swallow.Add(int64(n)) }

type cutListener struct {
	net.Listener
	l *cutListeners
}

func (ln *cutListener) Accept() (net.Conn, error) {
	c, err := ln.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &cutConn{Conn: c, l: ln.l}
	ln.l.accepted.Add(1)
	ln.l.open.Add(1)
	ln.l.mu.Lock()
	ln.l.conns = append(ln.l.conns, cc)
	ln.l.mu.Unlock()
	return cc, nil
}

// cutConn is one connection to a broker. It reads the framing of the
// requests it carries (a 4-byte size, then the 2-byte API key) to know
// whether it is a connection for produce requests: franz-go produces on a
// connection of its own, after the handshake, so that every answer written
// there once a produce request was read answers a produce request.
type cutConn struct {
	net.Conn
	l *cutListeners

	mu      sync.Mutex
	hdr     []byte
	left    int
	produce bool
	ended   bool
}

func (c *cutConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.scan(p[:n])
	if err != nil && !c.ended {
		c.ended = true
		c.l.open.Add(-1)
	}
	c.mu.Unlock()
	return n, err
}

func (c *cutConn) scan(b []byte) {
	for len(b) > 0 {
		if c.left > 0 {
			k := min(c.left, len(b))
			c.left -= k
			b = b[k:]
			continue
		}
		k := min(6-len(c.hdr), len(b))
		c.hdr = append(c.hdr, b[:k]...)
		b = b[k:]
		if len(c.hdr) == 6 {
			size := int(binary.BigEndian.Uint32(c.hdr[:4]))
			if int16(binary.BigEndian.Uint16(c.hdr[4:6])) == int16(kmsg.Produce) {
				c.produce = true
			}
			c.left, c.hdr = size-2, c.hdr[:0]
		}
	}
}

func (c *cutConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	produce := c.produce
	c.mu.Unlock()
	if produce {
		for {
			n := c.l.swallow.Load()
			if n <= 0 {
				break
			}
			if c.l.swallow.CompareAndSwap(n, n-1) {
				c.l.swallows.Add(1)
				_ = c.Conn.Close()
				return 0, net.ErrClosed
			}
		}
	}
	return c.Conn.Write(p)
}
