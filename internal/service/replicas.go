package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/ha"
	"github.com/relay-energy/relay/internal/jsbackend"
	"github.com/relay-energy/relay/internal/natsconn"
	"github.com/relay-energy/relay/internal/opendata"
)

// stateConnectWait is how long start-up waits for the first connection to
// the NATS servers that hold the state; the connection keeps trying after.
const stateConnectWait = 30 * time.Second

// replicas runs the tenants of a process whose state is in JetStream: the
// assigner starts the tenants whose leases this replica holds and stops
// those it loses or hands over.
type replicas struct {
	p  *process
	nc *nats.Conn
	js jetstream.JetStream

	byID map[string]config.Tenant

	mu      sync.Mutex
	running map[string]*replicaTenant
}

// replicaTenant is one tenant this replica serves under a lease.
type replicaTenant struct {
	tr     *tenantRun
	cancel context.CancelFunc
	done   chan struct{}
}

// connectState connects to the NATS servers that hold the state: the same
// servers and credentials as the NATS sinks, on a connection of its own so
// that a sink's slow consumer never delays a lease renewal.
func connectState(ctx context.Context, cfg config.Config, p *process) (*nats.Conn, error) {
	opts := natsOptions(cfg, "relay-state "+cfg.Replica.ID, p.log)
	cctx, cancel := context.WithTimeout(ctx, stateConnectWait)
	defer cancel()
	nc, err := natsconn.Connect(cctx, opts)
	if err != nil {
		return nil, fmt.Errorf("RELAY_STATE_BACKEND=jetstream: connecting to RELAY_NATS_URL: %w", err)
	}
	return nc, nil
}

// runReplicated serves the tenants whose leases this replica holds until ctx
// ends, then stops them and releases their leases.
func (p *process) runReplicated(ctx context.Context, nc *nats.Conn, tenants []config.Tenant) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	r := &replicas{p: p, nc: nc, js: js, byID: make(map[string]config.Tenant), running: make(map[string]*replicaTenant)}
	ids := make([]string, len(tenants))
	for i, t := range tenants {
		ids[i] = t.ID
		r.byID[t.ID] = t
	}
	cfg := p.cfg
	assigner, err := ha.NewAssigner(js, ha.AssignerConfig{
		ReplicaID: cfg.Replica.ID, Version: p.o.Version, TTL: cfg.Replica.LeaseTTL, Replicas: cfg.Store.Replicas,
		Tenants: ids, Start: r.start, Stop: r.stop, Logger: p.log,
	})
	if err != nil {
		return err
	}
	p.assigner.Store(assigner)
	return assigner.Run(ctx)
}

// start opens the tenant of lease on its JetStream state and runs it under
// the lease.
func (r *replicas) start(lease *ha.Lease) error {
	p, cfg := r.p, r.p.cfg
	t := r.byID[lease.Tenant()]
	backend, err := jsbackend.New(r.nc, jsbackend.Options{
		Tenant: t.ID, Fence: lease.Token(), Holder: cfg.Replica.ID, Replicas: cfg.Store.Replicas, Logger: p.log,
		Context: lease.Context(),
	})
	if err != nil {
		return err
	}
	upstream, err := r.upstream(t)
	if err != nil {
		return err
	}
	tr, err := p.openTenant(lease.Context(), t, backend, tenantOptions{upstream: &upstream, hard: lease.Context(), fence: lease.Check})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(lease.Context())
	rt := &replicaTenant{tr: tr, cancel: cancel, done: make(chan struct{})}
	r.mu.Lock()
	r.running[t.ID] = rt
	r.mu.Unlock()
	go func() {
		defer close(rt.done)
		err := tr.run(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		// The tenant cannot go on here (its state diverged or was fenced,
		// its poller failed): give the lease back, so that the assigner
		// stops it and it starts again, here or elsewhere, from the state
		// in JetStream.
		tr.log.Error("the tenant stopped after a failure; releasing its lease", "err", err)
		rctx, rcancel := context.WithTimeout(context.Background(), cfg.Replica.LeaseTTL)
		defer rcancel()
		if rerr := lease.Release(rctx); rerr != nil && !errors.Is(rerr, ha.ErrReleased) {
			tr.log.Warn("releasing the lease", "err", rerr)
		}
	}()
	return nil
}

// stop stops the tenant of lease: while the lease is held (a handover, a
// shutdown) its deliveries drain for up to the shutdown grace, but no longer
// than a third of the TTL; a lost lease stops them at once, since another
// replica may take the tenant over.
func (r *replicas) stop(lease *ha.Lease) {
	r.mu.Lock()
	rt := r.running[lease.Tenant()]
	delete(r.running, lease.Tenant())
	r.mu.Unlock()
	if rt == nil {
		return
	}
	rt.cancel()
	<-rt.done
	grace := min(r.p.cfg.Grace, r.p.cfg.Replica.LeaseTTL/3)
	ctx, cancel := context.WithTimeout(lease.Context(), grace)
	defer cancel()
	rt.tr.stop(ctx)
}

// upstream is the client configuration of tenant t on a replica: with an
// egress group, the request budget is shared through the KV store by every
// replica of the group, where the tenant bids for the free slots by what
// waits in its account.
func (r *replicas) upstream(t config.Tenant) (opendata.Config, error) {
	c := r.p.upstreamConfig(t)
	group := r.p.cfg.Replica.EgressGroup
	if group == "" {
		return c, nil
	}
	b, err := ha.NewBudget(r.js, ha.BudgetConfig{Group: group, BaseURL: t.Upstream.BaseURL, Replicas: r.p.cfg.Store.Replicas, Bidder: t.ID})
	if err != nil {
		return c, err
	}
	c.BudgetFile, c.Shared = "", b
	return c, nil
}
