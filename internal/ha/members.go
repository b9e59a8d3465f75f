package ha

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MembersConfig configures this process's membership among the replicas.
type MembersConfig struct {
	// Bucket is the KV bucket of the members, one key per replica; default
	// DefaultMembersBucket.
	Bucket string
	// Replicas is the bucket's replication factor, 1 to 5; default 1.
	Replicas int
	// TTL is how long a member counts as live after its last refresh; it is
	// the bucket's TTL, the lease TTL. At least 1s.
	TTL time.Duration
	// ID is this replica's id, unique among the replicas.
	ID string
	// Version is the relay version this replica runs, shown to operators
	// who read the bucket.
	Version string
	// Logger receives the membership's log lines; default none.
	Logger *slog.Logger
}

// memberValue is what a member key holds, for operators reading the bucket.
type memberValue struct {
	Started string `json:"started"`
	Version string `json:"version,omitempty"`
}

// Members is this process's membership in the members bucket and its view
// of the live replicas. It refreshes its own key every TTL/6 and follows the
// bucket with a watcher, which it re-creates after a reconnect or when its
// own refreshes stop coming back through it. A replica counts as live until
// TTL after the last refresh this process saw, or until it leaves. Its
// methods are safe for concurrent use.
type Members struct {
	kv     jetstream.KeyValue
	nc     *nats.Conn
	id     string
	bucket string
	ttl    time.Duration
	value  []byte
	log    *slog.Logger

	changed chan struct{}
	stop    context.CancelFunc
	stopped chan struct{}

	leaveOnce sync.Once
	leaveErr  error

	mu sync.Mutex
	// expires holds when each other replica stops counting as live, on
	// the monotonic clock.
	expires map[string]time.Time
	// last is the live set last announced on changed.
	last []string
}

// JoinMembers creates the members bucket of cfg (or brings an existing one to
// cfg's TTL and replicas), writes this replica's key, reads the members
// already there, and keeps both up to date in the background until Leave.
func JoinMembers(ctx context.Context, js jetstream.JetStream, cfg MembersConfig) (*Members, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultMembersBucket
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if err := checkBucketConfig("members", cfg.Bucket, cfg.Replicas, cfg.TTL); err != nil {
		return nil, err
	}
	if err := checkKey("replica id", cfg.ID); err != nil {
		return nil, err
	}
	kv, err := openBucket(ctx, js, jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "relay: the live replicas, each refreshing its key",
		History:     1,
		TTL:         cfg.TTL,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, err
	}
	value, err := json.Marshal(memberValue{Started: time.Now().UTC().Format(time.RFC3339Nano), Version: cfg.Version})
	if err != nil {
		return nil, fmt.Errorf("ha: member %s: %w", cfg.ID, err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Members{
		kv: kv, nc: js.Conn(), id: cfg.ID, bucket: cfg.Bucket, ttl: cfg.TTL, value: value, log: log,
		changed: make(chan struct{}, 1),
		stopped: make(chan struct{}),
		expires: map[string]time.Time{},
	}
	if _, err := kv.Put(ctx, m.id, m.value); err != nil {
		return nil, fmt.Errorf("ha: member %s/%s: joining: %w", m.bucket, m.id, err)
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	m.stop = stop
	w, err := m.watch(ctx, runCtx)
	if err != nil {
		stop()
		return nil, err
	}
	// Changed reports changes from here on.
	m.last = m.Live()
	go m.run(runCtx, w)
	log.Info("joined the replicas", "bucket", m.bucket, "id", m.id, "live", m.Live())
	return m, nil
}

// ID returns this replica's id.
func (m *Members) ID() string { return m.id }

// Live returns the ids of the live replicas, this one included, sorted.
func (m *Members) Live() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.liveLocked(time.Now())
}

func (m *Members) liveLocked(now time.Time) []string {
	live := []string{m.id}
	for id, until := range m.expires {
		if id != m.id && now.Before(until) {
			live = append(live, id)
		}
	}
	slices.Sort(live)
	return live
}

// Changed returns a channel that receives a value after the live set
// changed. Changes that follow each other before the receiver reads come as
// one.
func (m *Members) Changed() <-chan struct{} { return m.changed }

// Leave stops refreshing and watching, and deletes this replica's key so
// that the others stop counting it at once rather than after the TTL. Later
// calls return what the first returned.
func (m *Members) Leave(ctx context.Context) error {
	m.leaveOnce.Do(func() {
		m.stop()
		<-m.stopped
		if err := m.kv.Delete(ctx, m.id); err != nil {
			m.leaveErr = fmt.Errorf("ha: member %s/%s: leaving: %w", m.bucket, m.id, err)
			return
		}
		m.log.Info("left the replicas", "bucket", m.bucket, "id", m.id)
	})
	return m.leaveErr
}

// watcher is a KV watcher with the context that ends it.
type watcher struct {
	w      jetstream.KeyWatcher
	cancel context.CancelFunc
	// loading is true until the watcher delivered the bucket's current
	// keys; seen collects them, so that a re-created watcher forgets the
	// members that vanished meanwhile.
	loading bool
	seen    map[string]bool
}

func (w *watcher) close() {
	w.cancel()
	_ = w.w.Stop()
}

// watch starts a watcher of the bucket that lives until runCtx ends or it is
// closed, and applies the current keys, waiting for them until ctx ends.
func (m *Members) watch(ctx, runCtx context.Context) (*watcher, error) {
	wctx, cancel := context.WithCancel(runCtx)
	kw, err := m.kv.WatchAll(wctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("ha: members %s: watching: %w", m.bucket, err)
	}
	w := &watcher{w: kw, cancel: cancel, loading: true, seen: map[string]bool{}}
	for w.loading {
		select {
		case e, ok := <-kw.Updates():
			if !ok {
				w.close()
				return nil, fmt.Errorf("ha: members %s: the watcher ended before it delivered the current members", m.bucket)
			}
			m.apply(w, e)
		case <-ctx.Done():
			w.close()
			return nil, fmt.Errorf("ha: members %s: reading the current members: %w", m.bucket, ctx.Err())
		}
	}
	return w, nil
}

// apply records one update of watcher w: a member's refresh, its leaving,
// or (nil) the end of the current keys.
func (m *Members) apply(w *watcher, e jetstream.KeyValueEntry) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if e == nil {
		if w.loading {
			w.loading = false
			for id := range m.expires {
				if !w.seen[id] {
					delete(m.expires, id)
				}
			}
		}
		return
	}
	id := e.Key()
	if e.Operation() != jetstream.KeyValuePut {
		delete(m.expires, id)
		return
	}
	until := now.Add(m.ttl)
	if w.loading {
		// A key read as current may have been written up to a TTL ago:
		// count it from when the servers stored it.
		w.seen[id] = true
		age := min(max(time.Since(e.Created()), 0), m.ttl)
		until = now.Add(m.ttl - age)
	}
	m.expires[id] = until
}

// announce signals Changed if the live set differs from the one last
// announced.
func (m *Members) announce() {
	m.mu.Lock()
	live := m.liveLocked(time.Now())
	same := slices.Equal(live, m.last)
	m.last = live
	m.mu.Unlock()
	if same {
		return
	}
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// run refreshes this replica's key and follows the bucket until ctx ends.
func (m *Members) run(ctx context.Context, w *watcher) {
	defer close(m.stopped)
	defer func() {
		if w != nil {
			w.close()
		}
	}()
	every := m.ttl / renewDivisor
	tick := time.NewTicker(every)
	defer tick.Stop()
	reconnects := m.nc.Stats().Reconnects
	// selfSeen is when the watcher last delivered this replica's own
	// refresh; refreshed is when a refresh last succeeded.
	selfSeen, refreshed, failing := time.Now(), time.Now(), false
	for {
		var updates <-chan jetstream.KeyValueEntry
		if w != nil {
			updates = w.w.Updates()
		}
		select {
		case <-ctx.Done():
			return
		case e, ok := <-updates:
			if !ok {
				w.close()
				w = nil
				continue
			}
			if e != nil && e.Key() == m.id {
				selfSeen = time.Now()
			}
			m.apply(w, e)
		case <-tick.C:
			rctx, cancel := context.WithTimeout(ctx, every)
			_, err := m.kv.Put(rctx, m.id, m.value)
			cancel()
			switch {
			case err != nil && ctx.Err() != nil:
				return
			case err != nil && !failing:
				failing = true
				m.log.Warn("cannot refresh this replica's membership", "bucket", m.bucket, "id", m.id, "err", err)
			case err == nil:
				if failing {
					failing = false
					m.log.Info("refreshing this replica's membership again", "bucket", m.bucket, "id", m.id)
				}
				refreshed = time.Now()
			}
			rc := m.nc.Stats().Reconnects
			stale := refreshed.Sub(selfSeen) > m.ttl/2
			if w == nil || rc != reconnects || stale {
				if w != nil {
					w.close()
					w = nil
				}
				wctx, cancel := context.WithTimeout(ctx, every)
				nw, err := m.watch(wctx, ctx)
				cancel()
				if err != nil {
					m.log.Debug("cannot follow the members bucket yet", "bucket", m.bucket, "err", err)
				} else {
					m.log.Debug("following the members bucket anew", "bucket", m.bucket, "reconnected", rc != reconnects, "stale", stale)
					w, reconnects, selfSeen = nw, rc, time.Now()
				}
			}
		}
		m.announce()
	}
}
