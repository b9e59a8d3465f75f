package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/ha"
	"github.com/relay-energy/relay/internal/natstest"
)

// takeoverChurn is the alarm flow of each tenant of the takeover phase, at
// the real rate: steady, so that events are due across every kill.
var takeoverChurn = churn{Ongoing: 10, StartsPerMinute: 6, MeanDuration: 2 * time.Minute, MeanMinutes: 2, InvalidFraction: 0.05}

// takeoverReplicas are the replica ids of the takeover phase.
var takeoverReplicas = []string{"r1", "r2", "r3"}

// takeoverResult is what the takeover phase measured at one lease TTL.
type takeoverResult struct {
	TTL time.Duration `json:"-"`
	// TTLSeconds is RELAY_LEASE_TTL.
	TTLSeconds float64 `json:"ttl_s"`
	Kills      int     `json:"kills"`
	// Takeovers are the seconds from each kill to the first poll, by the
	// replica that took it over, of each tenant the killed replica held;
	// +Inf (JSON "never") when none came within the phase's limit.
	Takeovers []num `json:"takeovers_s"`
	// Overlaps counts the pairs of access tokens the simulators saw used
	// over overlapping spans: two replicas polling one tenant at once.
	Overlaps   int           `json:"poller_overlaps"`
	Deliveries deliveryCheck `json:"deliveries"`
}

// summary returns the median and the largest takeover, in seconds.
func (r takeoverResult) summary() (p50, maxTook float64) {
	vs := make([]float64, len(r.Takeovers))
	for i, v := range r.Takeovers {
		vs[i] = float64(v)
	}
	s := summarize(vs)
	return median(vs), s.Max
}

// takeoverPhase runs the takeover at each lease TTL of the configuration.
func (b *bench) takeoverPhase(ctx context.Context, figs *runFigures) error {
	for i, ttl := range b.cfg.TakeoverTTLs {
		r, err := b.takeover(ctx, ttl, filepath.Join(b.dir, "takeover-"+ttl.String()), b.cfg.Seed+int64(20+i))
		if err != nil {
			return fmt.Errorf("RELAY_LEASE_TTL=%s: %w", ttl, err)
		}
		figs.Takeover = append(figs.Takeover, r)
	}
	return nil
}

// takeoverLimit is how long the phase waits for a takeover, or for the
// replicas to settle, beyond twice the TTL.
const takeoverLimit = 60 * time.Second

// takeover runs three relay processes with their state on a three-server
// JetStream cluster (R3) and the lease TTL ttl, serving TakeoverTenants
// tenants at the real rate; it kills the replica holding a tenant with
// SIGKILL TakeoverKills times (starting it again after each takeover) and
// measures, for each tenant it held, the time from the kill to the first
// poll by another replica. It checks that no two replicas polled a tenant at
// once and that every event due reached the receiver.
func (b *bench) takeover(ctx context.Context, ttl time.Duration, dir string, seed int64) (res takeoverResult, err error) {
	began := time.Now()
	res = takeoverResult{TTL: ttl, TTLSeconds: ttl.Seconds()}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return res, err
	}
	m := &natstest.Main{}
	defer m.Close()
	cluster, err := startCluster(m)
	if err != nil {
		return res, err
	}
	perKill := 2*ttl + 2*takeoverLimit
	until := time.Now().Add(time.Duration(b.cfg.TakeoverKills+2)*perKill + 5*time.Minute)
	bt, err := newBenchTenants(dir, b.cfg.TakeoverTenants, seed, clock.Real(), -1, takeoverChurn, until)
	if err != nil {
		return res, err
	}
	defer bt.close()
	all := span(0, len(bt.ids))
	tenantsFile := filepath.Join(dir, "tenants.yaml")
	if err := bt.writeTenantsFile(tenantsFile, all); err != nil {
		return res, err
	}
	procs := map[string]*relayProc{}
	var started []*relayProc
	defer func() { _ = stopAll(started, 30*time.Second) }()
	start := func(id string) error {
		env, err := bt.env(tenantsFile, filepath.Join(dir, id))
		if err != nil {
			return err
		}
		env["RELAY_STATE_BACKEND"] = "jetstream"
		env["RELAY_STATE_REPLICAS"] = "3"
		env["RELAY_LEASE_TTL"] = ttl.String()
		env["RELAY_REPLICA_ID"] = id
		env["RELAY_RATE_LIMIT"] = strconv.Itoa(b.cfg.TakeoverRate)
		env["RELAY_NATS_URL"] = cluster.URL()
		p, err := startRelayProc(id+"#"+strconv.Itoa(len(started)+1), env, nil)
		if err != nil {
			return err
		}
		procs[id] = p
		started = append(started, p)
		return nil
	}
	for _, id := range takeoverReplicas {
		if err := start(id); err != nil {
			return res, err
		}
	}
	// The replicas have settled when each tenant is served by its owner
	// among the three, and by no other.
	settled := func() error {
		for _, t := range bt.ids {
			owner := ha.Owner(t, takeoverReplicas)
			for id, p := range procs {
				if err := p.alive(); err != nil {
					return err
				}
				if _, ok := p.serves(t); ok != (id == owner) {
					return fmt.Errorf("tenant %s is served by %s, not by its owner %s alone", t, servers(procs, t), owner)
				}
			}
		}
		return nil
	}
	if err := waitUntil(ctx, takeoverLimit+2*ttl, settled); err != nil {
		return res, err
	}
	from := time.Now()
	b.progress("    RELAY_LEASE_TTL=%s: %d replicas serve %d tenants after %.1f s", ttl, len(takeoverReplicas), len(bt.ids), time.Since(began).Seconds())
	for k := range b.cfg.TakeoverKills {
		if err := waitUntil(ctx, takeoverLimit+2*ttl, settled); err != nil {
			return res, fmt.Errorf("before kill %d: %w", k+1, err)
		}
		// Kill at a random moment of the holder's renewal period, drawn
		// afresh in every run: the replicas settle at the same moment of
		// it, so a seeded draw would kill at the same moment every run.
		if err := sleep(ctx, time.Second+rand.N(ttl/6)); err != nil {
			return res, err
		}
		victimID := ha.Owner(bt.ids[k%len(bt.ids)], takeoverReplicas)
		victim := procs[victimID]
		held := victim.servingNow()
		if err := victim.kill(); err != nil {
			return res, err
		}
		killed := time.Now()
		for _, t := range held {
			s := bt.sims[slices.Index(bt.ids, t)]
			var first time.Time
			werr := waitUntil(ctx, takeoverLimit+2*ttl, func() error {
				for _, u := range s.TokenUses() {
					if u.First.After(killed) {
						first = u.First
						return nil
					}
				}
				return fmt.Errorf("tenant %s: no poll since %s was killed", t, victimID)
			})
			switch {
			case ctx.Err() != nil:
				return res, ctx.Err()
			case werr != nil:
				res.Takeovers = append(res.Takeovers, num(math.Inf(1)))
			default:
				res.Takeovers = append(res.Takeovers, num(first.Sub(killed).Seconds()))
			}
		}
		res.Kills++
		b.progress("    kill %d of %d (RELAY_LEASE_TTL=%s): %s held %s; taken over after %s s",
			k+1, b.cfg.TakeoverKills, ttl, victimID, strings.Join(held, ", "), takeoverList(res.Takeovers[len(res.Takeovers)-len(held):]))
		// The killed replica comes back as a new process, and takes its
		// tenants back.
		if err := start(victimID); err != nil {
			return res, err
		}
	}
	if err := waitUntil(ctx, takeoverLimit+2*ttl, settled); err != nil {
		return res, fmt.Errorf("after the last kill: %w", err)
	}
	to := time.Now()
	b.progress("    RELAY_LEASE_TTL=%s: settled after the last kill at %.1f s", ttl, time.Since(began).Seconds())
	_ = waitUntil(ctx, 2*takeoverLimit, func() error {
		if d := bt.deliveries(all, from, to); d.missing() > 0 {
			return fmt.Errorf("%d of %d events due not delivered", d.missing(), d.Expected)
		}
		return nil
	})
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	res.Deliveries = bt.deliveries(all, from, to)
	for _, s := range bt.sims {
		res.Overlaps += len(s.PollerOverlaps())
	}
	return res, stopAll(started, 30*time.Second)
}

// takeoverList writes takeovers in seconds: "3.4, 3.3".
func takeoverList(takeovers []num) string {
	s := make([]string, len(takeovers))
	for i, v := range takeovers {
		s[i] = formatValue(unitSeconds, v)
		s[i] = strings.TrimSuffix(s[i], " s")
	}
	return strings.Join(s, ", ")
}

// servers names the replicas of procs that serve tenant, for errors.
func servers(procs map[string]*relayProc, tenant string) string {
	var ids []string
	for id, p := range procs {
		if _, ok := p.serves(tenant); ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return "no replica"
	}
	slices.Sort(ids)
	return strings.Join(ids, " and ")
}

// startCluster starts a three-server JetStream cluster that m shuts down.
func startCluster(m *natstest.Main) (c *natstest.Cluster, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("nats cluster: %v", r)
		}
	}()
	return natstest.StartCluster(m, 3), nil
}

// waitUntil calls check every 50 ms until it returns nil, and returns its
// last error when limit passes first, or ctx's when it ends.
func waitUntil(ctx context.Context, limit time.Duration, check func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", limit, err)
		}
		if serr := sleep(ctx, 50*time.Millisecond); serr != nil {
			return errors.Join(serr, err)
		}
	}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
