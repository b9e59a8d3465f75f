package service

import (
	"context"
	"time"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/console"
	"github.com/relay-energy/relay/internal/redact"
	"github.com/relay-energy/relay/internal/store"
)

// systemReadWait bounds how long the System page waits for the lease bucket.
const systemReadWait = 2 * time.Second

// system is what the console's System page of tenant tr shows: the
// process's tenants and replicas, and the tenant's upstream budget, sinks
// and rules. It holds no secret: sinks are shown by name, type and
// route.Sink.Target with every URL cut to its scheme and host, and every
// error text is cleaned of the configuration's and the rules' secrets and
// of URLs' paths and queries (cleanText).
func (tr *tenantRun) system(ctx context.Context) console.System {
	p := tr.p
	secrets := p.o.Secrets
	s := console.System{Tenant: tr.cfg.ID}
	if p.labelled {
		p.live.each(func(o *tenantRun) { s.Tenants = append(s.Tenants, o.cfg.ID) })
	}
	s.Replicas = p.replicaView(ctx)

	s.Upstream = tr.poll.Usage()
	if b := tr.client.Budget(); b.Tenants() > 1 {
		s.Shared = console.SharedBudget{Tenants: b.Tenants(), Schedule: b.Schedule().String(), Floor: b.Floor().Round(time.Second),
			ReadBound: b.ReadBound().Round(time.Second)}
	}
	s.Learned = tr.poll.Learned()
	s.Upstream.LastError = cleanText(secrets, s.Upstream.LastError)

	rules := tr.rules.Current()
	depth, err := tr.store.Depth()
	if err != nil {
		tr.log.Warn("console: reading the outbox depths", "err", err)
	}
	dead, err := tr.store.DeadLetterCounts()
	if err != nil {
		tr.log.Warn("console: counting the dead letters", "err", err)
	}
	dropped := tr.store.DroppedCounts()
	for _, sk := range rules.Sinks {
		st := tr.statuses.Get(sk.Name)
		s.Sinks = append(s.Sinks, console.Sink{Name: sk.Name, Type: sk.Type, Target: cleanText(secrets, sk.Target()),
			Depth: depth[sk.Name], DeadLetters: dead[sk.Name], Discarded: dropped[[2]string{sk.Name, store.DropDeadLetterLimit}],
			LastDelivered: st.LastDelivered,
			LastFailure:   st.LastFailed, LastError: cleanText(secrets, st.LastError)})
	}

	at, digest := tr.rules.Loaded()
	refusedAt, refused := tr.rules.LastRefusal()
	s.Rules = console.Rules{Path: tr.rules.Path(), Digest: digest, LoadedAt: at,
		ReloadError: cleanText(secrets, refused), ReloadFailedAt: refusedAt,
		Routes: len(rules.Routes), Sinks: len(rules.Sinks), Silences: len(tr.silences.List(false)), Maintenance: len(rules.Maintenance)}
	for _, rt := range rules.Routes {
		s.Rules.Table = append(s.Rules.Table, console.Route{Name: rt.Name, Match: rt.Match.String(), To: rt.To,
			Continue: rt.Continue, Options: rt.Options()})
	}
	return s
}

// replicaView is what the process knows of the replicas: standalone, or
// the live replicas and the lease holders as this replica's assigner reads
// them.
func (p *process) replicaView(ctx context.Context) console.Replicas {
	if p.cfg.Store.Backend != config.BackendJetStream {
		return console.Replicas{}
	}
	r := console.Replicas{Replicated: true, ID: p.cfg.Replica.ID}
	a := p.assigner.Load()
	if a == nil {
		return r
	}
	ctx, cancel := context.WithTimeout(ctx, systemReadWait)
	defer cancel()
	v, err := a.View(ctx)
	r.Joined, r.Live = v.Joined, v.Live
	for _, h := range v.Holders {
		r.Leases = append(r.Leases, console.Lease{Tenant: h.Tenant, Replica: h.Replica, Since: h.Since})
	}
	if err != nil {
		r.Error = cleanText(p.o.Secrets, err.Error())
	}
	return r
}

// cleanText returns text without the secrets of set and with every URL in
// it cut to its scheme and host (console.HideURLPaths), as the console
// shows targets and error texts: a signed URL in a transport error, or a
// webhook whose path is its secret, must not reach the page.
func cleanText(set *redact.Set, text string) string {
	return console.HideURLPaths(set.String(text))
}
