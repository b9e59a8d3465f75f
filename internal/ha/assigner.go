package ha

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrConnClosed is returned by Assigner.Run when the NATS connection was
// closed: it never comes back, so the process cannot serve tenants again.
var ErrConnClosed = errors.New("ha: the NATS connection is closed")

// AssignerConfig configures an Assigner.
type AssignerConfig struct {
	// ReplicaID is this replica's id, unique among the replicas.
	ReplicaID string
	// Version is the relay version, shown in the members bucket.
	Version string
	// TTL is the lease TTL, also the members' TTL. At least 1s.
	TTL time.Duration
	// Replicas is the replication factor of both buckets, 1 to 5;
	// default 1.
	Replicas int
	// LeaseBucket and MembersBucket name the buckets; defaults
	// DefaultLeaseBucket and DefaultMembersBucket.
	LeaseBucket   string
	MembersBucket string
	// Tenants are the ids of the tenants this process can serve; every
	// replica should list the same.
	Tenants []string
	// Start starts serving a tenant under lease.Context() and returns once
	// it runs; the tenant must stop when that context ends. An error
	// releases the lease, and the tenant is tried again a TTL later. A
	// tenant that fails later may give itself up by releasing its lease:
	// the assigner then calls Stop, and acquires the lease again at a later
	// pass if this replica still owns the tenant.
	Start func(lease *Lease) error
	// Stop stops the tenant Start started with lease and returns once it
	// has stopped; the lease is released only after it returns. It is
	// called exactly once for every successful Start.
	Stop func(lease *Lease)
	// Logger receives the assigner's log lines; default none.
	Logger *slog.Logger
}

// Assigner runs this replica's share of the tenants: those whose owner, by
// rendezvous hashing over the live members, is this replica. It acquires
// their leases (retrying while another replica holds one, until that replica
// releases it or it expires), starts them, stops those whose lease is lost,
// and hands over those another replica now owns: it stops them, then
// releases their leases.
type Assigner struct {
	js  jetstream.JetStream
	cfg AssignerConfig
	log *slog.Logger

	mu   sync.Mutex
	held map[string]*Lease
	// leases and members are set once Run joined the replicas (View).
	leases  *Leases
	members *Members
}

// NewAssigner checks cfg and returns an assigner of it; Run does the work.
func NewAssigner(js jetstream.JetStream, cfg AssignerConfig) (*Assigner, error) {
	if cfg.LeaseBucket == "" {
		cfg.LeaseBucket = DefaultLeaseBucket
	}
	if cfg.MembersBucket == "" {
		cfg.MembersBucket = DefaultMembersBucket
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if err := checkBucketConfig("lease", cfg.LeaseBucket, cfg.Replicas, cfg.TTL); err != nil {
		return nil, err
	}
	if err := checkBucketConfig("members", cfg.MembersBucket, cfg.Replicas, cfg.TTL); err != nil {
		return nil, err
	}
	if err := checkKey("replica id", cfg.ReplicaID); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, t := range cfg.Tenants {
		if err := checkKey("tenant id", t); err != nil {
			return nil, err
		}
		if seen[t] {
			return nil, fmt.Errorf("ha: tenant id %q is listed twice", t)
		}
		seen[t] = true
	}
	if cfg.Start == nil || cfg.Stop == nil {
		return nil, errors.New("ha: the assigner needs both Start and Stop")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.Tenants = slices.Clone(cfg.Tenants)
	slices.Sort(cfg.Tenants)
	return &Assigner{js: js, cfg: cfg, log: log.With("replica", cfg.ReplicaID), held: map[string]*Lease{}}, nil
}

// Held returns the tenants this replica started and has not stopped yet,
// sorted. A tenant whose lease was just lost is among them until the next
// pass stops it; its lease's context has ended already.
func (a *Assigner) Held() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.held))
	for t := range a.held {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Run joins the members, then assigns tenants until ctx ends; then it leaves
// the members first (so that the others take over at once), stops every
// tenant it serves and releases their leases. While NATS cannot be reached
// it retries; it returns ErrConnClosed, after stopping every tenant, when the
// connection is closed for good, and nil after ctx ends. Stop may be called
// for several tenants at once.
func (a *Assigner) Run(ctx context.Context) error {
	every := a.cfg.TTL / renewDivisor
	leases, members, err := a.join(ctx, every)
	if err != nil || members == nil {
		return err
	}
	a.mu.Lock()
	a.leases, a.members = leases, members
	a.mu.Unlock()
	var wg sync.WaitGroup
	wake := make(chan struct{}, 1)
	watchCtx, stopWatches := context.WithCancel(ctx)
	defer func() {
		stopWatches()
		wg.Wait()
	}()
	// retryAt holds when a tenant whose Start failed may be tried again.
	retryAt := map[string]time.Time{}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		// The first pass waits a renewal period, so that replicas started
		// together see each other before they start tenants.
		select {
		case <-ctx.Done():
			a.shutdown(members)
			return nil
		case <-tick.C:
		case <-members.Changed():
		case <-wake:
		}
		if a.js.Conn().IsClosed() {
			a.shutdown(members)
			return ErrConnClosed
		}
		live := members.Live()
		var drop []*Lease
		for _, tenant := range a.cfg.Tenants {
			a.mu.Lock()
			lease := a.held[tenant]
			a.mu.Unlock()
			if lease == nil {
				continue
			}
			if err := lease.Err(); errors.Is(err, ErrReleased) {
				// Released by the caller, after the tenant failed.
				a.log.Info("stopping a tenant whose lease was released", "tenant", tenant)
				drop = append(drop, lease)
			} else if err != nil {
				a.log.Warn("stopping a tenant whose lease was lost", "tenant", tenant, "err", err)
				drop = append(drop, lease)
			} else if owner := Owner(tenant, live); owner != a.cfg.ReplicaID {
				a.log.Info("handing a tenant over", "tenant", tenant, "to", owner)
				drop = append(drop, lease)
			}
		}
		a.stopAll(drop)
		a.releaseAll(drop, every)
		for _, tenant := range a.cfg.Tenants {
			if ctx.Err() != nil {
				break
			}
			a.mu.Lock()
			held := a.held[tenant] != nil
			a.mu.Unlock()
			if held || Owner(tenant, live) != a.cfg.ReplicaID || time.Now().Before(retryAt[tenant]) {
				continue
			}
			l, err := a.acquire(ctx, leases, tenant, every)
			if errors.Is(err, ErrHeld) {
				continue
			}
			if err != nil {
				// NATS did not answer: the other tenants wait for the next
				// pass rather than a timeout each.
				if ctx.Err() == nil {
					a.log.Debug("cannot acquire a tenant's lease yet", "tenant", tenant, "err", err)
				}
				break
			}
			if err := a.cfg.Start(l); err != nil {
				a.log.Error("cannot start a tenant; releasing its lease and trying again later", "tenant", tenant, "err", err, "retry_in", a.cfg.TTL)
				a.releaseAll([]*Lease{l}, every)
				retryAt[tenant] = time.Now().Add(a.cfg.TTL)
				continue
			}
			delete(retryAt, tenant)
			a.mu.Lock()
			a.held[tenant] = l
			a.mu.Unlock()
			a.log.Info("started a tenant", "tenant", tenant, "token", l.Token(), "live", len(live))
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-l.Done():
					select {
					case wake <- struct{}{}:
					default:
					}
				case <-watchCtx.Done():
				}
			}()
		}
	}
}

// join opens the lease bucket and joins the members, retrying every period
// while NATS cannot be reached. It returns nil members when ctx ended first.
func (a *Assigner) join(ctx context.Context, every time.Duration) (*Leases, *Members, error) {
	for warned := false; ; {
		if a.js.Conn().IsClosed() {
			return nil, nil, ErrConnClosed
		}
		jctx, cancel := context.WithTimeout(ctx, max(every, 2*time.Second))
		leases, err := OpenLeases(jctx, a.js, LeaseConfig{
			Bucket: a.cfg.LeaseBucket, Replicas: a.cfg.Replicas, TTL: a.cfg.TTL, Holder: a.cfg.ReplicaID, Logger: a.log,
		})
		var members *Members
		if err == nil {
			members, err = JoinMembers(jctx, a.js, MembersConfig{
				Bucket: a.cfg.MembersBucket, Replicas: a.cfg.Replicas, TTL: a.cfg.TTL,
				ID: a.cfg.ReplicaID, Version: a.cfg.Version, Logger: a.log,
			})
		}
		cancel()
		if err == nil {
			return leases, members, nil
		}
		if ctx.Err() != nil {
			return nil, nil, nil
		}
		if !warned {
			warned = true
			a.log.Warn("cannot join the replicas yet; retrying", "err", err, "every", every)
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, nil
		case <-t.C:
		}
	}
}

// acquire tries tenant's lease once, for at most one renewal period.
func (a *Assigner) acquire(ctx context.Context, leases *Leases, tenant string, every time.Duration) (*Lease, error) {
	actx, cancel := context.WithTimeout(ctx, every)
	defer cancel()
	l, err := leases.Acquire(actx, tenant)
	if errors.Is(err, ErrHeld) {
		a.log.Debug("waiting for another replica to release a tenant's lease or lose it", "tenant", tenant)
	}
	return l, err
}

// stopAll stops the tenants of leases, all at once, and returns when every
// one has stopped.
func (a *Assigner) stopAll(leases []*Lease) {
	var wg sync.WaitGroup
	for _, l := range leases {
		wg.Go(func() { a.cfg.Stop(l) })
	}
	wg.Wait()
	a.mu.Lock()
	for _, l := range leases {
		delete(a.held, l.Tenant())
	}
	a.mu.Unlock()
}

// releaseAll releases leases within one renewal period altogether: a lease
// not deleted in time expires after its TTL.
func (a *Assigner) releaseAll(leases []*Lease, every time.Duration) {
	if len(leases) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(every, time.Second))
	defer cancel()
	closed := a.js.Conn().IsClosed()
	for _, l := range leases {
		if err := l.Release(ctx); err != nil && !closed {
			a.log.Warn("cannot release a lease; it expires after its TTL", "tenant", l.Tenant(), "err", err)
		}
	}
}

// shutdown leaves the members, stops every tenant and releases their
// leases. On a closed connection the leaving and releasing fail at once and
// are not warned about: the servers expire both after the TTL.
func (a *Assigner) shutdown(members *Members) {
	every := a.cfg.TTL / renewDivisor
	ctx, cancel := context.WithTimeout(context.Background(), max(every, time.Second))
	err := members.Leave(ctx)
	cancel()
	if err != nil && !a.js.Conn().IsClosed() {
		a.log.Warn("cannot leave the replicas; the others count this one until its TTL passes", "err", err)
	}
	a.mu.Lock()
	leases := make([]*Lease, 0, len(a.held))
	for _, l := range a.held {
		leases = append(leases, l)
	}
	a.mu.Unlock()
	a.stopAll(leases)
	a.releaseAll(leases, every)
	a.log.Info("stopped every tenant", "tenants", len(leases))
}
