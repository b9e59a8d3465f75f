package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/console"
	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/ha"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/poller"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/store"
)

// process is what every tenant of the process shares: the configuration,
// the log, the metrics registry, the ops server, the NATS connection of the
// sinks, and the set of tenants served now.
type process struct {
	o    Options
	cfg  config.Config
	log  *slog.Logger
	nats *lazyNATS
	ops  *OpsServer
	live *liveTenants
	// labelled says whether the process serves the tenants of a tenants
	// file: their metrics carry a tenant label, their log lines a tenant
	// attribute, and their ops API lives under /tenants/<id>/.
	labelled bool
	// budgets are the shared budgets of the upstream hosts of a tenants
	// file's tenants.
	budgets *hostBudgets
	hup     *hupFanout
	// assigner runs this replica's share of the tenants when the state is
	// in JetStream; nil until it is made, and for a standalone process.
	assigner atomic.Pointer[ha.Assigner]
}

// tenantRun is one tenant served by this process: its store, rules,
// upstream client, poller, alarm management, deliveries and ops API.
type tenantRun struct {
	p          *process
	cfg        config.Tenant
	log        *slog.Logger
	reg        *registrations
	store      *store.Store
	silences   *silence.Silences
	rules      *Rules
	client     *opendata.Client
	poll       *poller.Poller
	manager    *manage.Manager
	deliveries *deliveryLoop
	// fenced is the sinks' HTTP client when a fence guards them: its
	// transport is the tenant run's own (notify.FencedTransport), whose
	// idle connections close with it. Without a fence the sinks share
	// http.DefaultTransport, and it is nil.
	fenced *http.Client
	// statuses are what the deliveries last saw of each sink.
	statuses *deliver.Statuses
	listen   *listeners
	figures  *alarmFigures
	api      *http.ServeMux
	// console is the tenant's operator console, whose live-update streams
	// end when the tenant stops or the ops server shuts down.
	console *console.Console
	hup     chan os.Signal
}

// tenantOptions are what a tenant's start differs in between a process of
// its own and a replica.
type tenantOptions struct {
	// upstream, when set, replaces p.upstreamConfig(t).
	upstream *opendata.Config
	// hard, when set, ends the tenant's deliveries at once when it is
	// done, drained or not: the lease of a replica. Without it they drain
	// for the shutdown grace after ctx ends.
	hard context.Context
	// fence, when set, is asked immediately before every message the
	// tenant's sinks send, by the deliveries, alarm management's schedule
	// and the sinks' HTTP transport: a replica's lease check. Nil (one
	// process, bbolt) never refuses.
	fence notify.Fence
}

// openTenant opens the state of tenant t on backend and builds everything
// the tenant runs, with its deliveries started; run polls, stop stops. On
// an error, what was opened is closed again.
func (p *process) openTenant(ctx context.Context, t config.Tenant, backend store.Backend, to tenantOptions) (_ *tenantRun, err error) {
	log := p.log
	var reg prometheus.Registerer = p.o.Registry
	if p.labelled {
		log = log.With("tenant", t.ID)
		reg = prometheus.WrapRegistererWith(prometheus.Labels{"tenant": t.ID}, reg)
	}
	// tr is not the named result: each failure returns nil, and what was
	// opened must still be closed.
	tr := &tenantRun{p: p, cfg: t, log: log, reg: &registrations{reg: reg}, api: http.NewServeMux(), statuses: deliver.NewStatuses()}
	defer func() {
		if err != nil {
			tr.close()
		}
	}()
	rules, err := loadRulesAt(t.Rules, p.o.Lookup, log, p.o.Clock.Now)
	if err != nil {
		return nil, err
	}
	tr.rules = rules
	addSinkSecrets(p.o.Secrets, rules.Current())
	st, err := store.Open(t.StatePath, store.Options{
		Bootstrap: store.Bootstrap(t.Bootstrap), Retention: p.cfg.Store.Retention, Clock: p.o.Clock, Backend: backend,
		DeadLetterLimit: p.cfg.Store.DeadLetterLimit, Logger: log, Tracer: p.o.Tracer,
	})
	if err != nil {
		return nil, err
	}
	tr.store = st
	if tr.silences, err = silence.Open(st, p.o.Clock); err != nil {
		return nil, err
	}
	m := newMetrics(tr.reg)
	upstream := p.upstreamConfig(t)
	if to.upstream != nil {
		upstream = *to.upstream
	}
	upstream.Clock, upstream.Logger, upstream.Metrics = p.o.Clock, log, opendata.NewMetrics(tr.reg)
	upstream.Tracer = p.o.Tracer
	if p.labelled {
		// The tenants of one upstream host share its budget: the limit is
		// the address's.
		if upstream.Budget, err = p.budgets.get(t); err != nil {
			return nil, err
		}
		upstream.RateLimit = 0
	}
	client, err := opendata.New(upstream)
	if err != nil {
		return nil, err
	}
	tr.client = client
	manager, err := manage.New(manage.Options{Store: st, Rules: rules.Current, Silences: tr.silences, Clock: p.o.Clock, Logger: log, Fence: to.fence,
		Shelf: tr.silences, Metrics: manage.NewMetrics(tr.reg)})
	if err != nil {
		return nil, err
	}
	tr.manager = manager
	router := store.Router(rules.Route)
	cfg := p.cfg
	tr.poll, err = poller.New(poller.Config{
		Client: client, Store: st, Router: func() store.Router { return router },
		// Alarm management sees every transition before it is committed,
		// so that a masking alarm is known before what it masks goes out.
		Observe:   manager.Observe,
		RateLimit: t.Upstream.RateLimit, Lookback: cfg.Poll.Lookback, SweepOverlap: cfg.Poll.SweepOverlap,
		ConfirmTimeout: cfg.Poll.ConfirmTimeout, MaxClockSkew: cfg.Poll.MaxClockSkew, LateHorizon: cfg.Poll.LateHorizon,
		Clock: p.o.Clock, Logger: log,
		Metrics: poller.NewMetrics(tr.reg), OnEvents: p.o.OnEvents, Tracer: p.o.Tracer,
	})
	if err != nil {
		return nil, err
	}
	(&deadLetterAPI{store: st, token: cfg.AdminToken, clock: p.o.Clock, log: log}).register(tr.api)
	(&silenceAPI{silences: tr.silences, token: cfg.AdminToken, clock: p.o.Clock, log: log}).register(tr.api)
	(&ackAPI{manager: manager, token: cfg.AdminToken, log: log}).register(tr.api)
	tr.reg.MustRegister(newDeadLetterGauge(st), newDroppedCounter(st), newUnackedGauge(manager, p.o.Clock.Now))
	(&reportAPI{store: st, rules: rules.Current, token: cfg.AdminToken, clock: p.o.Clock, log: log}).register(tr.api)
	(&stampsAPI{poll: tr.poll, token: cfg.AdminToken, log: log}).register(tr.api)
	co := p.live.consoleOptions(cfg.ViewToken, cfg.AdminToken)
	co.Store, co.Silences, co.Rules, co.System, co.Now, co.Logger = st, tr.silences, rules.Current, tr.system, p.o.Clock.Now, log
	tr.console = console.New(manager, co)
	tr.console.Register(tr.api)
	tr.figures = newAlarmFigures(tr.reg, st, p.o.Clock, log)
	metrics := deliver.NewMetrics(tr.reg)
	tenant := ""
	if p.labelled {
		tenant = t.ID
	}
	sinkHTTP := &http.Client{Transport: notify.FencedTransport(to.fence, nil)}
	if to.fence != nil {
		tr.fenced = sinkHTTP
	}
	deps := sinktype.Deps{
		Env: SinkEnv(cfg), Tenant: tenant, Console: p.o.Console, Clock: p.o.Clock, Logger: log, NATS: p.nats.get,
		HTTP: sinkHTTP, Fence: to.fence,
		Limits: notify.NewLimits(p.o.Clock),
		TemplateFailed: func(sink string, ev *event.Event, err error) {
			log.Warn("a message template failed on an event; the sink's default text was sent instead",
				"sink", sink, "event_id", ev.ID, "err", err)
			metrics.TemplateFailed(sink)
		},
	}
	// People's clicks are read while the tenant is served: with replicas,
	// by the lease holder only.
	lbase := ctx
	if to.hard != nil {
		lbase = to.hard
	}
	tr.listen = &listeners{base: lbase, acts: manager, log: log}
	tr.deliveries = &deliveryLoop{store: st, deps: deps, opts: deliver.Options{
		Clock: p.o.Clock, Logger: log, Metrics: metrics, Secrets: p.o.Secrets, OnReport: p.o.OnReport, Gate: manager,
		Fence: to.fence, Status: tr.statuses, Tracer: p.o.Tracer,
	}, log: log, onSinks: func(sinks []notify.Sink) {
		manager.SetSinks(sinks)
		tr.listen.use(sinks)
	}, onRules: manager.Use, hard: to.hard}
	if err := tr.deliveries.start(ctx, rules.Current()); err != nil {
		tr.deliveries = nil
		return nil, err
	}
	// New rules take effect only once their sinks are built and delivering.
	rules.OnReload(func(r *route.Rules) error {
		// Secrets of earlier files stay: entries and logs may name them.
		addSinkSecrets(p.o.Secrets, r)
		// Alarm management decides by the new rules once the old
		// deliveries are drained, before the loops of the new sinks start
		// (deliveryLoop.restart).
		return tr.deliveries.restart(ctx, r)
	}, func(err error) {
		if err != nil {
			m.rulesReloads.WithLabelValues("refused").Inc()
		} else {
			m.rulesReloads.WithLabelValues("applied").Inc()
		}
	})
	warnStranded(st, rules.Current(), log)
	tr.hup = p.hup.add()
	p.live.add(tr)
	log.Info("tenant started", "upstream", config.RedactURL(t.Upstream.BaseURL), "rules", t.Rules,
		"state", t.StatePath, "backend", backend.Name(), "sinks", len(rules.Current().Sinks), "rate_limit", t.Upstream.RateLimit)
	return tr, nil
}

// run polls, watches the rules, prunes, keeps the alarm figures and runs
// alarm management's schedule until ctx ends or one of them fails.
func (tr *tenantRun) run(ctx context.Context) error {
	p := tr.p
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return tr.poll.Run(gctx) })
	g.Go(func() error {
		tr.rules.Watch(gctx, tr.hup, p.o.ReloadEvery, p.o.Clock)
		return nil
	})
	g.Go(func() error {
		prune(gctx, tr.store, tr.silences, p.cfg.Store.Retention, p.o.PruneEvery, p.o.Clock, tr.log)
		return nil
	})
	g.Go(func() error { tr.figures.run(gctx, alarmFiguresEvery); return nil })
	g.Go(func() error { schedule(gctx, tr.silences, tr.manager, p.o.Clock, tr.log); return nil })
	return g.Wait()
}

// stop drains the tenant's deliveries until ctx ends, then closes its
// store; the tenant is no longer served.
func (tr *tenantRun) stop(ctx context.Context) {
	tr.p.live.remove(tr)
	tr.listen.stop()
	if derr := tr.deliveries.drain(ctx); derr != nil {
		tr.log.Warn("undelivered entries stay in the outbox for the next start", "err", derr)
	}
	depth, _ := tr.store.Depth()
	tr.close()
	tr.log.Info("tenant stopped", "outbox", depth)
}

// close closes what openTenant opened: the store, and the metrics.
func (tr *tenantRun) close() {
	if tr.console != nil {
		tr.console.Close()
	}
	if tr.hup != nil {
		tr.p.hup.remove(tr.hup)
	}
	if tr.listen != nil {
		tr.listen.stop()
	}
	if tr.store != nil {
		if err := tr.store.Close(); err != nil {
			tr.log.Error("closing the store", "err", err)
		}
	}
	if tr.client != nil {
		tr.client.Close()
	}
	if tr.fenced != nil {
		tr.fenced.CloseIdleConnections()
	}
	tr.reg.unregisterAll()
}

// upstreamConfig is the client configuration of tenant t (TenantUpstream).
func (p *process) upstreamConfig(t config.Tenant) opendata.Config { return TenantUpstream(p.cfg, t) }

// TenantUpstream is the client configuration of tenant t. The one tenant of
// the environment shares the budget file of its state file with relay api
// and relay check (UpstreamConfig); the tenants of a tenants file that reach
// one upstream host share one budget file in the state directory, since the
// upstream limits requests per address.
func TenantUpstream(cfg config.Config, t config.Tenant) opendata.Config {
	if cfg.TenantsFile == "" {
		return UpstreamConfig(cfg)
	}
	u := t.Upstream
	c := opendata.Config{
		BaseURL: u.BaseURL, AppID: u.AppID, AppSecret: u.AppSecret, GrantType: u.GrantType,
		AuthScheme: u.AuthScheme, RateLimit: u.RateLimit, Location: u.Location(),
	}
	if st, err := os.Stat(cfg.StateDir()); err == nil && st.IsDir() {
		c.BudgetFile = HostBudgetFile(cfg.StateDir(), u.BaseURL)
	}
	return c
}

// registrations registers a tenant's collectors and unregisters them all
// when the tenant stops, so that it can start again in the same process.
type registrations struct {
	reg prometheus.Registerer
	mu  sync.Mutex
	cs  []prometheus.Collector
}

// Register registers c.
func (r *registrations) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	r.cs = append(r.cs, c)
	r.mu.Unlock()
	return nil
}

// MustRegister registers cs and panics on an error, as the registry does.
func (r *registrations) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister unregisters c.
func (r *registrations) Unregister(c prometheus.Collector) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := slices.Index(r.cs, c); i >= 0 {
		r.cs = slices.Delete(r.cs, i, i+1)
	}
	return r.reg.Unregister(c)
}

func (r *registrations) unregisterAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.cs {
		r.reg.Unregister(c)
	}
	r.cs = nil
}

// liveTenants are the tenants the process serves now, for the ops API and
// the readiness checks.
type liveTenants struct {
	// only is the id of the one tenant the process may serve, whose API
	// also answers at the paths without /tenants/<id>; empty with several.
	only string
	// served is 1 for each tenant the process serves now, 0 for the
	// others it may serve.
	served *prometheus.GaugeVec
	// sessions are the operator console's logins, one set for every
	// tenant's console, kept while the process runs.
	sessions *console.Sessions
	// front is how browsers and clients reach the ops listener: the
	// console's external origin, the trusted proxies, the listen address
	// and the throttle of wrong tokens, shared by the consoles, the
	// picker and the ops API.
	front console.Options
	mu    sync.Mutex
	runs  map[string]*tenantRun
}

// newLiveTenants returns the set of the tenants served, none yet, with the
// gauge relay_tenant_served in reg.
func newLiveTenants(reg prometheus.Registerer, tenants []config.Tenant) *liveTenants {
	l := &liveTenants{
		runs:     make(map[string]*tenantRun),
		sessions: console.NewSessions(nil),
		served: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "relay_tenant_served",
			Help: "1 for each tenant this process polls and delivers for now (it holds the tenant's lease, with replicas), 0 for the others it may serve.",
		}, []string{"tenant"}),
	}
	reg.MustRegister(l.served)
	for _, t := range tenants {
		l.served.WithLabelValues(t.ID).Set(0)
	}
	if len(tenants) == 1 {
		l.only = tenants[0].ID
	}
	return l
}

// consoleOptions are the options every console of the process shares,
// with the tokens given.
func (l *liveTenants) consoleOptions(viewToken, adminToken string) console.Options {
	o := l.front
	o.ViewToken, o.AdminToken, o.Sessions = viewToken, adminToken, l.sessions
	return o
}

func (l *liveTenants) add(tr *tenantRun) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[tr.cfg.ID] = tr
	l.served.WithLabelValues(tr.cfg.ID).Set(1)
}

func (l *liveTenants) remove(tr *tenantRun) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.runs[tr.cfg.ID] == tr {
		delete(l.runs, tr.cfg.ID)
		l.served.WithLabelValues(tr.cfg.ID).Set(0)
	}
}

func (l *liveTenants) get(id string) *tenantRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[id]
}

// each calls fn with every tenant served now, in id order.
func (l *liveTenants) each(fn func(tr *tenantRun)) {
	l.mu.Lock()
	runs := make([]*tenantRun, 0, len(l.runs))
	for _, tr := range l.runs {
		runs = append(runs, tr)
	}
	l.mu.Unlock()
	slices.SortFunc(runs, func(a, b *tenantRun) int { return strings.Compare(a.cfg.ID, b.cfg.ID) })
	for _, tr := range runs {
		fn(tr)
	}
}

// check joins the errors of check over the tenants served now, each
// prefixed with its tenant when the process may serve several.
func (l *liveTenants) check(check func(tr *tenantRun) error) func() error {
	return func() error {
		var errs []error
		l.each(func(tr *tenantRun) {
			if err := check(tr); err != nil {
				if l.only == "" {
					err = fmt.Errorf("tenant %s: %w", tr.cfg.ID, err)
				}
				errs = append(errs, err)
			}
		})
		return errors.Join(errs...)
	}
}

// The paths of the ops API of a tenant.
var tenantAPIPaths = []string{"/deadletters", "/deadletters/", "/silences", "/silences/", "/alarms", "/alarms/", "/report", "/stamps", "/console/"}

// register routes the ops API: /tenants/<id>/... to tenant id, and, when
// the process serves one tenant, the paths without the prefix to it. The
// ops API's Bearer failures are throttled with the consoles' logins
// (throttleBearer); the consoles check their own.
//
// With several tenants, /console/ is a page that links to each tenant's
// console; viewToken and adminToken turn it on as they do the consoles.
func (l *liveTenants) register(o *OpsServer, viewToken, adminToken string) {
	picker := console.Picker(l.consoleOptions(viewToken, adminToken),
		func() []string {
			var ids []string
			l.each(func(tr *tenantRun) { ids = append(ids, tr.cfg.ID) })
			return ids
		})
	o.Handle("/tenants/{tenant}/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("tenant")
		tr := l.get(id)
		if tr == nil {
			http.Error(w, fmt.Sprintf("tenant %q is not served by this process now (not configured, starting, or served by another replica)", id),
				http.StatusServiceUnavailable)
			return
		}
		var api http.Handler = tr.api
		if !strings.HasPrefix(strings.TrimPrefix(r.URL.Path, "/tenants/"+id), "/console/") {
			api = throttleBearer(l.front.Throttle, l.front.TrustedProxies, api)
		}
		http.StripPrefix("/tenants/"+id, api).ServeHTTP(w, r)
	}))
	for _, path := range tenantAPIPaths {
		o.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if l.only == "" && path == "/console/" {
				picker.ServeHTTP(w, r)
				return
			}
			if l.only == "" {
				http.Error(w, "this process serves several tenants: name one, as /tenants/<id>"+r.URL.Path+
					" (relay silence, deadletters and report take --tenant)", http.StatusBadRequest)
				return
			}
			tr := l.get(l.only)
			if tr == nil {
				http.Error(w, fmt.Sprintf("tenant %q is not served by this process now (starting, or served by another replica)", l.only),
					http.StatusServiceUnavailable)
				return
			}
			if path == "/console/" {
				tr.api.ServeHTTP(w, r)
				return
			}
			throttleBearer(l.front.Throttle, l.front.TrustedProxies, tr.api).ServeHTTP(w, r)
		}))
	}
}

// hupFanout hands every SIGHUP to every tenant's rules watcher.
type hupFanout struct {
	mu   sync.Mutex
	subs []chan os.Signal
}

func (h *hupFanout) run(ctx context.Context, in <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case sig := <-in:
			h.mu.Lock()
			for _, c := range h.subs {
				select {
				case c <- sig:
				default: // a reload is already due
				}
			}
			h.mu.Unlock()
		}
	}
}

func (h *hupFanout) add() chan os.Signal {
	c := make(chan os.Signal, 1)
	h.mu.Lock()
	h.subs = append(h.subs, c)
	h.mu.Unlock()
	return c
}

func (h *hupFanout) remove(c chan os.Signal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i := slices.Index(h.subs, c); i >= 0 {
		h.subs = slices.Delete(h.subs, i, i+1)
	}
}
