// Package service wires relay's rooms into the running service: the store,
// the rules (reloaded on SIGHUP and on file change), the upstream client, the
// poller, the delivery loop and the ops endpoints, with a graceful stop on
// SIGTERM (docs/design.md §9 to §11). The run and demo commands share it.
package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/console"
	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/guard"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/natsconn"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/redact"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/tracing"
)

// Options are what a run needs besides the environment's configuration.
type Options struct {
	// Config is the loaded environment; its upstream part must be complete.
	Config config.Config
	// Lookup resolves the variables the rules file names (secret_env).
	Lookup func(string) (string, bool)
	// Logger receives every log line (default: discard).
	Logger *slog.Logger
	// Console is where console sinks write (default os.Stdout).
	Console io.Writer
	// Clock drives everything time-based (default the wall clock).
	Clock clock.Clock
	// HUP delivers SIGHUP: reload the rules.
	HUP <-chan os.Signal
	// ReloadEvery is how often the rules file is checked for a change
	// (default 5s).
	ReloadEvery time.Duration
	// PruneEvery is how often ended alarms past the retention are dropped
	// (default 1h).
	PruneEvery time.Duration
	// Registry receives the metrics (default a new registry with the Go and
	// process collectors).
	Registry *prometheus.Registry
	// OnEvents, when set, sees every batch of produced events (the demo's
	// live feed).
	OnEvents func([]event.Event)
	// OnReport, when set, hears what became of every outbox entry:
	// delivered, retrying or dead-lettered (the demo's live feed). It is
	// called on the delivery loops and must return quickly.
	OnReport func(deliver.Report)
	// Ready, when set, receives the ops server's address once it listens.
	Ready func(addr string)
	// Version is the relay's version, shown to the other replicas.
	Version string
	// ConsoleSessions, when set, are the operator console's logins (the
	// demo makes a one-time login link in them before the run); nil: a set
	// of the run's own.
	ConsoleSessions *console.Sessions
	// Secrets, when set, receives every secret value of the configuration
	// and of each rules file loaded, so that a Logger built on it (see
	// NewLogger) never writes one; dead-letter reasons are cleaned with it.
	Secrets *redact.Set
	// Tracer, when on, traces every poll, transition and delivery attempt
	// (docs/design.md §11, "Traces"); nil traces nothing. The caller shuts
	// it down after Run returned, which exports the last spans.
	Tracer *tracing.Tracer

	// opsTimeouts, when set, replace the ops listener's timeouts (tests).
	opsTimeouts opsTimeouts
}

// StartError is what Run returns when the service could not start: every
// problem found, one per line of output. Nothing was logged about them.
type StartError struct {
	Problems []error
}

func (e *StartError) Error() string { return errors.Join(e.Problems...).Error() }

// Unwrap returns the problems.
func (e *StartError) Unwrap() []error { return e.Problems }

// Run runs the service until ctx is done, then stops polling, drains the
// outboxes for up to the shutdown grace and closes the store. It returns nil
// after a clean stop, a *StartError when it could not start, and otherwise
// the failure that stopped it, which it has already logged.
func Run(ctx context.Context, o Options) (err error) {
	started := false
	defer func() {
		if err != nil && !started {
			err = &StartError{Problems: config.Problems(err)}
		}
	}()
	o.defaults()
	cfg, log := o.Config, o.Logger
	cfg.AddSecrets(o.Secrets)
	if problems := PreflightTenants(cfg, o.Lookup); len(problems) > 0 {
		return errors.Join(problems...)
	}
	tenants := cfg.Tenants()
	p := &process{
		o: o, cfg: cfg, log: log,
		nats:     &lazyNATS{opts: natsOptions(cfg, "relay", log)},
		live:     newLiveTenants(o.Registry, tenants),
		labelled: cfg.TenantsFile != "",
		budgets:  &hostBudgets{cfg: cfg, clock: o.Clock},
		hup:      &hupFanout{},
	}
	if o.ConsoleSessions != nil {
		p.live.sessions = o.ConsoleSessions
	}
	p.live.front = console.Options{Origin: cfg.Console.Origin, TrustedProxies: guard.Proxies{Nets: cfg.Console.Proxies(), Forwarded: cfg.Console.ForwardedOnly()}, Listen: cfg.Listen,
		Throttle: guard.NewThrottle(o.Clock.Now, log, o.Registry)}
	defer p.nats.close()
	// The tenants' stores and rules are opened before the ops server
	// listens, so /readyz checks only what can change: the stores and the
	// upstreams.
	var runs []*tenantRun
	defer func() {
		for _, tr := range runs {
			if !started {
				tr.close()
			}
		}
	}()
	var stateNC *nats.Conn
	if cfg.Store.Backend == config.BackendJetStream {
		if stateNC, err = connectState(ctx, cfg, p); err != nil {
			return err
		}
		defer stateNC.Close()
	}
	for _, t := range tenants {
		if stateNC != nil {
			// A replica serves the tenants whose leases it holds.
			break
		}
		tr, err := p.openTenant(ctx, t, store.Bolt(), tenantOptions{})
		if err != nil {
			if p.labelled {
				return fmt.Errorf("tenant %s (%s): %w", t.ID, t.Source, err)
			}
			return err
		}
		runs = append(runs, tr)
	}
	var certs *CertFiles
	if cfg.TLS.CertFile != "" {
		if certs, err = LoadCertFiles(cfg.TLS.CertFile, cfg.TLS.KeyFile, o.Registry, log); err != nil {
			return err
		}
	}
	ops, err := ListenOps(cfg.Listen, o.Registry, []Check{
		{Name: "store", Func: p.live.check(func(tr *tenantRun) error { _, err := tr.store.Depth(); return err })},
		{Name: "upstream", Func: p.live.check(func(tr *tenantRun) error { return tr.poll.UpstreamProblem() })},
		{Name: "end_detection", Func: p.live.check(func(tr *tenantRun) error { return tr.poll.EndDetection() }), Advisory: true},
	})
	if err != nil {
		return err
	}
	ops.setTimeouts(o.opsTimeouts)
	if certs != nil {
		ops.UseTLS(certs)
	}
	p.ops = ops
	p.live.register(ops, cfg.ViewToken, cfg.AdminToken)
	ops.OnShutdown(func() { p.live.each(func(tr *tenantRun) { tr.console.Close() }) })
	if o.Ready != nil {
		o.Ready(ops.Addr())
	}
	log.Info("relay started", "listen", ops.Addr(), "tls", certs != nil, "tenants", len(tenants), "backend", cfg.Store.Backend,
		"replica", cfg.Replica.ID)

	// The pollers, the rules watchers, the pruners and the ops server stop
	// with ctx; the deliveries outlive it by up to the grace, so that what
	// was produced before the stop still goes out.
	started = true
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { p.hup.run(gctx, o.HUP); return nil })
	g.Go(func() error { return ops.Serve(gctx) })
	for _, tr := range runs {
		g.Go(func() error { return tr.run(gctx) })
	}
	if stateNC != nil {
		g.Go(func() error { return p.runReplicated(gctx, stateNC, tenants) })
	}
	err = g.Wait()
	if ctx.Err() == nil && err != nil {
		log.Error("relay stopping after a failure", "err", err)
	} else {
		err = nil
		log.Info("relay stopping: polling stopped, draining deliveries", "grace", cfg.Grace)
	}
	graceCtx, cancel := context.WithTimeout(context.Background(), cfg.Grace)
	defer cancel()
	var wg sync.WaitGroup
	for _, tr := range runs {
		wg.Go(func() { tr.stop(graceCtx) })
	}
	wg.Wait()
	log.Info("relay stopped")
	return err
}

// addSinkSecrets adds the secrets of every sink of r to set.
func addSinkSecrets(set *redact.Set, r *route.Rules) {
	for _, s := range r.Sinks {
		s.AddSecrets(set)
	}
}

// UpstreamConfig is the client configuration the environment describes. Its
// budget file is <RELAY_STATE_PATH>.budget, shared by relay run, relay api
// and relay check --online on one host, when the state file's directory
// exists; otherwise BudgetFile is empty.
func UpstreamConfig(cfg config.Config) opendata.Config {
	u := cfg.Upstream
	c := opendata.Config{
		BaseURL: u.BaseURL, AppID: u.AppID, AppSecret: u.AppSecret, GrantType: u.GrantType,
		AuthScheme: u.AuthScheme, RateLimit: u.RateLimit, Location: u.Location(),
	}
	if st, err := os.Stat(filepath.Dir(cfg.Store.Path)); err == nil && st.IsDir() {
		c.BudgetFile = BudgetFile(cfg)
	}
	return c
}

// BudgetFile is the path of the upstream request budget shared on this host.
func BudgetFile(cfg config.Config) string { return cfg.Store.Path + ".budget" }

// HostBudgetFile is the path of the request budget that the tenants of a
// tenants file share when they reach the upstream host of baseURL.
func HostBudgetFile(stateDir, baseURL string) string {
	host := baseURL
	if u, err := url.Parse(baseURL); err == nil && u.Host != "" {
		host = u.Host
	}
	sum := sha256.Sum256([]byte(strings.ToLower(host)))
	return filepath.Join(stateDir, "upstream-"+hex.EncodeToString(sum[:6])+".budget")
}

func (o *Options) defaults() {
	if o.Secrets == nil {
		o.Secrets = redact.New()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Console == nil {
		o.Console = os.Stdout
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Lookup == nil {
		o.Lookup = os.LookupEnv
	}
	if o.ReloadEvery <= 0 {
		o.ReloadEvery = 5 * time.Second
	}
	if o.PruneEvery <= 0 {
		o.PruneEvery = time.Hour
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
		o.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
}

// serviceMetrics are the metrics of the wiring itself.
type serviceMetrics struct {
	rulesReloads *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *serviceMetrics {
	m := &serviceMetrics{
		rulesReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_rules_reloads_total", Help: "Rules file reloads by result (applied, refused).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.rulesReloads)
	return m
}

// scheduleEvery is how often escalation steps that are due are taken
// (manage.EscalateEvery) and the silences that ended are looked at for
// notify_on_expire; reminders and daily summaries are looked at every
// manage.TickEvery, and alarm management's state is pruned every hour.
const scheduleEvery = manage.EscalateEvery

// schedule runs what alarm management does by the clock: it takes the
// escalation steps that are due; it announces again
// the alarms still ongoing that silences with notify_on_expire withheld, once
// those end; it sends reminders and daily summaries; it prunes its state.
func schedule(ctx context.Context, silences *silence.Silences, m *manage.Manager, clk clock.Clock, log *slog.Logger) {
	t := clk.NewTimer(scheduleEvery)
	defer t.Stop()
	var ticked, pruned time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		t.Reset(scheduleEvery)
		now := clk.Now()
		if ended, err := silences.TakeExpired(now); err != nil {
			log.Error("reading the silences that ended", "err", err)
		} else if len(ended) > 0 {
			ids := make([]string, len(ended))
			for i, s := range ended {
				ids[i] = s.ID
			}
			n, err := m.Reannounce(ids)
			if err != nil {
				log.Error("announcing again the alarms of silences that ended", "silences", ids, "err", err)
			}
			log.Info("silences with notify_on_expire ended: their alarms still ongoing are announced again", "silences", ids, "alarms", n)
		}
		if err := m.Escalate(ctx); err != nil {
			log.Warn("escalation", "err", err)
		}
		if now.Sub(ticked) >= manage.TickEvery {
			ticked = now
			if err := m.Tick(ctx); err != nil {
				log.Warn("reminders and daily summaries", "err", err)
			}
		}
		if now.Sub(pruned) >= time.Hour {
			pruned = now
			if err := m.PruneState(); err != nil {
				log.Error("pruning the state of alarm management", "err", err)
			}
		}
	}
}

// prune drops ended alarms and silences past the retention, every interval.
func prune(ctx context.Context, st *store.Store, silences *silence.Silences, retention, every time.Duration, clk clock.Clock, log *slog.Logger) {
	t := clk.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			n, err := st.Prune(ctx)
			if err != nil {
				log.Error("pruning ended alarms", "err", err)
			} else if n > 0 {
				log.Info("pruned ended alarms past the retention", "alarms", n)
			}
			if n, err := silences.Prune(clk.Now(), retention); err != nil {
				log.Error("pruning ended silences", "err", err)
			} else if n > 0 {
				log.Info("pruned silences that ended longer ago than the retention", "silences", n)
			}
			t.Reset(every)
		}
	}
}

// natsConnectWait is how long start-up waits for a first NATS connection.
const natsConnectWait = 5 * time.Second

// reloadDrain is how long a rules reload lets the old deliveries finish what
// is pending before the new sinks take over; attempts still in flight then
// are cancelled and retried by the new sinks.
const reloadDrain = 10 * time.Second

// lazyNATS connects to NATS on first use, so a rules file without nats sinks
// needs no NATS server.
type lazyNATS struct {
	opts natsconn.Options
	mu   sync.Mutex
	nc   *nats.Conn
}

func (l *lazyNATS) get(ctx context.Context) (*nats.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.nc != nil {
		return l.nc, nil
	}
	// Wait a little for the first connection, then go on: the connection
	// keeps trying in the background and a NATS sink answers "not
	// connected" with a retryable failure, so its outbox holds the events
	// while every other sink, the poller and the probes carry on.
	cctx, cancel := context.WithTimeout(ctx, natsConnectWait)
	defer cancel()
	nc, err := natsconn.Connect(cctx, l.opts)
	if err != nil {
		return nil, err
	}
	l.nc = nc
	return nc, nil
}

func (l *lazyNATS) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.nc != nil {
		_ = l.nc.Drain()
		l.nc = nil
	}
}

// deliveryLoop runs the Deliverer of the rules in force and replaces it when
// reloaded rules change the sinks.
type deliveryLoop struct {
	store *store.Store
	deps  sinktype.Deps
	opts  deliver.Options
	log   *slog.Logger

	// onSinks, when set, is told the sinks of each Deliverer started.
	onSinks func([]notify.Sink)
	// onRules, when set, is told the rules of each Deliverer before it
	// starts, and the rules of each reload that keeps the sinks: alarm
	// management decides by them from then on (manage.Manager.Use).
	onRules func(*route.Rules)
	// hard, when set, ends the Deliverer when it is done (see
	// tenantOptions.hard).
	hard context.Context

	mu      sync.Mutex
	sinks   []route.Sink
	targets []deliver.Target
	cur     *deliver.Deliverer
	cancel  context.CancelFunc
	done    chan error
}

func (l *deliveryLoop) start(ctx context.Context, rules *route.Rules) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	targets, err := buildTargets(ctx, rules, l.deps)
	if err != nil {
		return err
	}
	if err := adoptRenamed(l.store, rules, l.log); err != nil {
		return err
	}
	return l.startLocked(ctx, rules, targets)
}

// adoptRenamed moves the memory and pending entries of a sink renamed in
// rules (same destination, new name) to its new name (see
// store.Store.AdoptSinks), and tells the store which sinks want no ends
// (send_resolved: false).
func adoptRenamed(st *store.Store, rules *route.Rules, log *slog.Logger) error {
	st.SetResolvedOff(rules.ResolvedOff())
	dests := make(map[string]string, len(rules.Sinks))
	for _, s := range rules.Sinks {
		dests[s.Name] = s.Destination()
	}
	if alarms, dead, err := st.AdoptLedger(rules.SinksFor, dests); err != nil {
		return err
	} else if alarms+dead > 0 {
		log.Info("state written before the delivery ledger: its ongoing alarms' ends now go where the rules in force send their starts, "+
			"and its dead starts keep their ends", "alarms", alarms, "dead_starts", dead)
	}
	renamed, removed, err := st.AdoptSinks(dests, manage.SinkNamespaces...)
	for _, r := range renamed {
		log.Info("sink renamed: its alarm threads, pending events and dead letters moved to the new name",
			"from", r.From, "to", r.To, "destination", r.Destination, "alarms", r.Memories, "pending", r.Entries,
			"dead_letters", r.DeadLetters)
	}
	for _, r := range removed {
		log.Warn("sink removed from the rules: the events waiting for it were recorded as dropped, not sent, "+
			"and so will be the ends of the alarms it announced (relay_dropped_total)",
			"sink", r.Sink, "dropped", len(r.Dropped))
	}
	return err
}

func (l *deliveryLoop) startLocked(ctx context.Context, rules *route.Rules, targets []deliver.Target) error {
	d, err := deliver.NewDeliverer(l.store, targets, l.opts)
	if err != nil {
		closeSinks(targets)
		return err
	}
	if l.onRules != nil {
		l.onRules(rules)
	}
	if l.onSinks != nil {
		sinks := make([]notify.Sink, len(targets))
		for i, t := range targets {
			sinks[i] = t.Sink
		}
		l.onSinks(sinks)
	}
	// The deliverer's context is not ctx: on shutdown it is drained, not cut.
	base := context.WithoutCancel(ctx)
	if l.hard != nil {
		base = l.hard
	}
	dctx, cancel := context.WithCancel(base)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	l.sinks, l.targets, l.cur, l.cancel, l.done = rules.Sinks, targets, d, cancel, done
	return nil
}

// closeSinks closes the sinks of targets that hold a connection of their
// own (io.Closer: an MQTT sink's to its broker), once their Deliverer has
// stopped.
func closeSinks(targets []deliver.Target) {
	for _, t := range targets {
		if c, ok := t.Sink.(io.Closer); ok {
			_ = c.Close()
		}
	}
}

// restart swaps in a Deliverer for the new rules when their sinks differ.
// The new sinks are built first, so rules whose sinks cannot be built are
// refused with the old deliveries untouched. The old Deliverer then drains for
// up to reloadDrain, so attempts in flight finish instead of being sent again,
// under the rules it ran under: alarm management is handed the new rules
// only after the drain, so that what the old rules withhold from a sink the
// new ones rename or remove (a silenced start, a start within its hold, the
// end of a withheld start) stays withheld. When the sinks are the same, the
// running Deliverer decides by the new rules at once.
func (l *deliveryLoop) restart(ctx context.Context, rules *route.Rules) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sameSinks(l.sinks, rules.Sinks) {
		if l.onRules != nil {
			l.onRules(rules)
		}
		return nil
	}
	targets, err := buildTargets(ctx, rules, l.deps)
	if err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, reloadDrain)
	err = l.stopLocked(dctx)
	cancel()
	if err != nil {
		l.log.Warn("rules reload: pending deliveries did not finish in time; the new sinks retry them", "err", err)
	}
	if err := adoptRenamed(l.store, rules, l.log); err != nil {
		l.log.Error("rules reload: renamed sinks keep no memory of earlier alarms", "err", err)
	}
	l.log.Info("sinks changed; delivery restarted", "sinks", len(rules.Sinks))
	if err := l.startLocked(ctx, rules, targets); err != nil {
		return err
	}
	warnStranded(l.store, rules, l.log)
	return nil
}

func (l *deliveryLoop) drain(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopLocked(ctx)
}

// stopLocked drains the running Deliverer until ctx ends, then stops it and
// waits for it.
func (l *deliveryLoop) stopLocked(ctx context.Context) error {
	if l.cur == nil {
		return nil // stopped already
	}
	defer func() { l.cur, l.targets = nil, nil }()
	defer closeSinks(l.targets)
	defer l.cancel()
	err := l.cur.Drain(ctx)
	select {
	case rerr := <-l.done:
		if err == nil {
			err = rerr
		}
	case <-ctx.Done():
		// Drain can return before Run began; cut Run at the deadline.
		l.cancel()
		<-l.done
		if err == nil {
			err = ctx.Err()
		}
	}
	return err
}

// warnStranded logs the outboxes of sinks the rules no longer name: their
// events wait until a sink of that name comes back.
func warnStranded(st *store.Store, rules *route.Rules, log *slog.Logger) {
	depth, err := st.Depth()
	if err != nil {
		return
	}
	for sink, n := range depth {
		if _, ok := rules.Sink(sink); !ok && n > 0 {
			log.Warn("events wait in the outbox of a sink the rules do not define; they go out when it is defined again",
				"sink", sink, "events", n)
		}
	}
}

// sameSinks compares sink definitions by what they configure; compiled
// templates are compared by their text.
func sameSinks(a, b []route.Sink) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Same(b[i]) {
			return false
		}
	}
	return true
}
