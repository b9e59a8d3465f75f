package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/poller"
	"github.com/relay-energy/relay/internal/store"
)

// The accounts phase (P12) runs N tenants of one simulated upstream host,
// polled from one address, on one budget of 10 requests a minute: an O&M
// company watching the plants of N owners, each with an account of its
// own. The activity is skewed: tenant 1 has half of all alarms, tenants 2
// to 5 a tenth each, the others share the last tenth. The same alarms are
// polled by relay, whose budget hands each slot by the tenants' learned
// rates (opendata.ScheduleLatency), and by the same relay with the budget
// first come, first served (opendata.ScheduleFIFO).

// The systems of the accounts phase, in table order.
const (
	accountsRelay = "relay"
	accountsFIFO  = "fifo"
)

var accountsSystems = []string{accountsRelay, accountsFIFO}

// accountsSchedule is the budget's schedule of each system.
var accountsSchedule = map[string]opendata.Schedule{accountsRelay: opendata.ScheduleLatency, accountsFIFO: opendata.ScheduleFIFO}

// Activity classes of the accounts phase: tenant 1, tenants 2 to 5, the
// rest; and all alarms together.
const (
	classAll   = "all"
	classBusy  = "1"
	classMid   = "2-5"
	classQuiet = "6-N"
)

var accountsClasses = []string{classAll, classBusy, classMid, classQuiet}

// accountsWarmSlots run before the accounts phase measures, and
// accountsWarmPerTenant more per tenant: every tenant's login, first contact
// and first reads take a few slots of the shared budget, and the rates want
// a few minutes of evidence.
const (
	accountsWarmSlots     = 60
	accountsWarmPerTenant = 5
)

// accountShares returns the share of all alarms of each of n tenants:
// tenant 1 half, tenants 2 to 5 a tenth each, the others the last tenth
// between them; with 5 tenants or fewer, the shares of those there are,
// scaled to sum to 1.
func accountShares(n int) []float64 {
	s := make([]float64, n)
	sum := 0.0
	for i := range s {
		switch {
		case i == 0:
			s[i] = 0.5
		case i < 5:
			s[i] = 0.1
		default:
			s[i] = 0.1 / float64(n-5)
		}
		sum += s[i]
	}
	for i := range s {
		s[i] /= sum
	}
	return s
}

// accountClass returns the activity class of tenant i (from 0).
func accountClass(i int) string {
	switch {
	case i == 0:
		return classBusy
	case i < 5:
		return classMid
	}
	return classQuiet
}

// accountChurn is tenant i's part of the churn phase's traffic c.
func accountChurn(c churn, share float64) churn {
	c.Ongoing = int(math.Round(float64(c.Ongoing) * share))
	c.StartsPerMinute *= share
	return c
}

// accountsClassFigures are one class's latencies in one run: real-rate
// estimates in seconds.
type accountsClassFigures struct {
	StartP50  num `json:"start_p50_s"`
	StartMean num `json:"start_mean_s"`
	StartP99  num `json:"start_p99_s"`
	EndP50    num `json:"end_p50_s"`
	EndMean   num `json:"end_mean_s"`
	EndP99    num `json:"end_p99_s"`
	// Starts and Ends count the alarms that started, or ended, in the
	// measured window; the Missing ones were never detected.
	Starts        int `json:"starts"`
	Ends          int `json:"ends"`
	StartsMissing int `json:"starts_never_detected"`
	EndsMissing   int `json:"ends_never_detected"`
}

// accountsSystemFigures are one system's figures at one N in one run.
type accountsSystemFigures struct {
	Classes map[string]*accountsClassFigures `json:"classes"`
	// Requests and Violations are what the host counted for all tenants;
	// RealRateViolations those a real-rate estimate keeps
	// (realRateViolations); MaxPerMinute the most in any 60 s.
	Requests           int `json:"requests"`
	Violations         int `json:"violations"`
	RealRateViolations int `json:"violations_real_rate"`
	MaxPerMinute       int `json:"most_requests_in_60s"`
	// CurrentReads counts the reads of the current alarms answered in the
	// measured window, all tenants together.
	CurrentReads int `json:"current_reads"`
	// LearnedStarts are the start rates each tenant's poller had learned
	// at the end of the window, per hour, by tenant.
	LearnedStarts []float64 `json:"learned_starts_per_hour"`
}

// accountsPoint is the phase at one number of tenants in one run.
type accountsPoint struct {
	Tenants int     `json:"tenants"`
	Speed   float64 `json:"clock_speed"`
	// Span is the measured window in minutes of upstream time.
	SpanMinutes float64 `json:"span_minutes"`
	// TrueStarts are the tenants' start rates per hour, as drawn.
	TrueStarts []float64                         `json:"true_starts_per_hour"`
	Systems    map[string]*accountsSystemFigures `json:"systems"`
	// Bound is the square-root rule's mean start latency, in seconds, for
	// relay's current reads (see sqrtRuleBound).
	Bound num `json:"sqrt_rule_bound_mean_start_s"`
}

// sqrtRuleBound returns the least mean start latency, in seconds, of any
// schedule that reads the current alarms of tenants whose alarms start at
// rates (any unit) reads times over span, sharing the reads out among the
// tenants at the best frequencies: (Σ √λᵢ)² / (2 Λ f), f the reads a
// second. A start waits for the next read of its tenant: for reads of
// tenant i at frequency fᵢ, at least 1/(2 fᵢ) on average (exactly that when
// they are evenly spaced), and Σ λᵢ / (2 fᵢ Λ) under Σ fᵢ = f is least at
// fᵢ ∝ √λᵢ. It measures how the reads are shared out, not how many there
// are: relay spends the rest of the budget on confirms of what ended.
func sqrtRuleBound(rates []float64, reads int, span time.Duration) float64 {
	if reads <= 0 || span <= 0 {
		return math.NaN()
	}
	var roots, sum float64
	for _, r := range rates {
		roots += math.Sqrt(r)
		sum += r
	}
	if sum == 0 {
		return math.NaN()
	}
	f := float64(reads) / span.Seconds()
	return roots * roots / (2 * sum * f)
}

// accountTenant is one tenant of a system of the accounts phase: its
// account at the host, its client on the shared budget, its poller and
// store.
type accountTenant struct {
	account *sim.Server
	ids     []string // the account's originIds of the tenant's plan
	rec     *recorder
	reg     *prometheus.Registry
	poll    *poller.Poller
	st      *store.Store
	client  *opendata.Client
}

// accountsRun is one system of the accounts phase: its host and tenants.
type accountsRun struct {
	host    *sim.Host
	tenants []*accountTenant
	cancel  context.CancelFunc
	errc    chan error
}

// startAccounts starts one system: a host of an account per plan, holding
// it, and a tenant per account polling it on one budget with sched.
func startAccounts(ctx context.Context, dir string, seed int64, plans [][]plannedAlarm, sched opendata.Schedule, clk clock.Clock, log *slog.Logger) (_ *accountsRun, err error) {
	r := &accountsRun{errc: make(chan error, len(plans))}
	defer func() {
		if err != nil {
			r.stop()
		}
	}()
	var accounts []*sim.Server
	for i := range plans {
		opts := tenantSimOptions(seed+int64(i), clk)
		opts.AppID, opts.AppSecret, opts.RateLimit = fmt.Sprintf("owner-%02d", i+1), "bench-secret", -1
		s := sim.New(opts)
		ids, err := schedule(s, plans[i])
		if err != nil {
			return nil, err
		}
		accounts = append(accounts, s)
		r.tenants = append(r.tenants, &accountTenant{account: s, ids: ids, rec: newRecorder(), reg: prometheus.NewRegistry()})
	}
	if r.host, err = sim.NewHost(sim.HostOptions{RateLimit: upstreamRate, Clock: clk}, accounts...); err != nil {
		return nil, err
	}
	if err := r.host.Start("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("simulated host: %w", err)
	}
	budget, err := opendata.NewBudget(opendata.BudgetConfig{RateLimit: upstreamRate, Clock: clk, Schedule: sched})
	if err != nil {
		return nil, err
	}
	ctx, r.cancel = context.WithCancel(ctx)
	for i, t := range r.tenants {
		id, secret := t.account.Credentials()
		if t.client, err = opendata.New(opendata.Config{BaseURL: r.host.URL(), AppID: id, AppSecret: secret, Clock: clk, Logger: log, Budget: budget}); err != nil {
			return nil, err
		}
		if t.st, err = store.Open(filepath.Join(dir, fmt.Sprintf("tenant-%02d.db", i+1)), store.Options{Clock: clk}); err != nil {
			return nil, err
		}
		t.poll, err = poller.New(poller.Config{
			Client: t.client, Store: t.st, RateLimit: upstreamRate, Clock: clk,
			Logger:   log.With("system", sched.String(), "tenant", id),
			Metrics:  poller.NewMetrics(t.reg),
			OnEvents: t.rec.onEvents(clk),
		})
		if err != nil {
			return nil, err
		}
		go func(p *poller.Poller) { r.errc <- p.Run(ctx) }(t.poll)
	}
	return r, nil
}

// currentReads counts the reads of the current alarms its tenants' pollers
// had answered.
func (r *accountsRun) currentReads() (int, error) {
	n := 0
	for _, t := range r.tenants {
		use, err := (&relaySystem{metrics: t.reg}).slotUse()
		if err != nil {
			return 0, err
		}
		n += use["current"]
	}
	return n, nil
}

// stop stops the pollers, closes the stores and the host, and returns the
// first error a poller returned.
func (r *accountsRun) stop() error {
	var errs []error
	if r.cancel != nil {
		r.cancel()
		for _, t := range r.tenants {
			if t.poll != nil {
				errs = append(errs, <-r.errc)
			}
		}
		r.cancel = nil
	}
	for _, t := range r.tenants {
		if t.client != nil {
			t.client.Close()
		}
		if t.st != nil {
			errs = append(errs, t.st.Close())
		}
	}
	if r.host != nil {
		errs = append(errs, r.host.Close())
	}
	return errors.Join(errs...)
}

// accountsPhase runs the phase at each number of tenants of
// AccountsTenants.
func (b *bench) accountsPhase(ctx context.Context, figs *runFigures) error {
	for _, n := range b.cfg.AccountsTenants {
		began := time.Now()
		pt, err := b.accountsPoint(ctx, n)
		if err != nil {
			return fmt.Errorf("%d tenants: %w", n, err)
		}
		figs.Accounts = append(figs.Accounts, pt)
		rl, fi := pt.Systems[accountsRelay].Classes[classAll], pt.Systems[accountsFIFO].Classes[classAll]
		b.progress("    %d tenants: mean start latency relay %.1f s, fifo %.1f s, square-root bound %.1f s; violations %d / %d (%.0fs)",
			n, float64(rl.StartMean), float64(fi.StartMean), float64(pt.Bound),
			pt.Systems[accountsRelay].Violations, pt.Systems[accountsFIFO].Violations, time.Since(began).Seconds())
	}
	return nil
}

// accountsPoint runs both systems at once, each on a host of its own with
// the same alarms, with n tenants.
func (b *bench) accountsPoint(ctx context.Context, n int) (accountsPoint, error) {
	seed := b.cfg.Seed + 17
	speed := b.cfg.Speed
	clk := clock.NewScaled(time.Now().UTC().Truncate(time.Second), speed)
	t0 := clk.Now()
	from := t0.Add(time.Duration(accountsWarmSlots+accountsWarmPerTenant*n) * slot)
	to := from.Add(time.Duration(b.cfg.ChurnSlots) * slot)
	// First come, first served reads each tenant once in n slots, and a
	// read may be a confirm or a sweep; an alarm that started and ended
	// between two reads waits for a sweep, up to 8 × n slots: its alarms
	// may wait several times n slots.
	grace := time.Duration(max(graceSlots, 12*n)) * slot
	shares := accountShares(n)
	pt := accountsPoint{Tenants: n, Speed: speed, SpanMinutes: to.Sub(from).Minutes(), Systems: map[string]*accountsSystemFigures{}}
	plans := make([][]plannedAlarm, n)
	for i := range n {
		c := accountChurn(b.cfg.Churn, shares[i])
		pt.TrueStarts = append(pt.TrueStarts, c.StartsPerMinute*60)
		// Each account's fleet is drawn from its own seed, the same in
		// both systems' hosts (startAccounts).
		rng := rand.New(rand.NewPCG(uint64(seed)+uint64(i), 0xacc))
		devs := deviceSNs(sim.New(tenantSimOptions(seed+int64(i), clock.Real())))
		plans[i] = planChurn(rng, devs, t0, to.Add(grace), c)
	}
	dir := filepath.Join(b.dir, fmt.Sprintf("accounts-%d", n))
	runs := map[string]*accountsRun{}
	defer func() {
		for _, r := range runs {
			_ = r.stop()
		}
	}()
	for _, sys := range accountsSystems {
		d := filepath.Join(dir, sys)
		if err := os.MkdirAll(d, 0o700); err != nil {
			return pt, err
		}
		r, err := startAccounts(ctx, d, seed, plans, accountsSchedule[sys], clk, b.log)
		if err != nil {
			return pt, err
		}
		runs[sys] = r
	}
	wait := func(until time.Time) error { return sleepUntil(ctx, clk, until) }
	reads := map[string]int{}
	if err := wait(from); err != nil {
		return pt, err
	}
	for _, sys := range accountsSystems {
		n, err := runs[sys].currentReads()
		if err != nil {
			return pt, err
		}
		reads[sys] = -n
	}
	if err := wait(to); err != nil {
		return pt, err
	}
	for _, sys := range accountsSystems {
		n, err := runs[sys].currentReads()
		if err != nil {
			return pt, err
		}
		reads[sys] += n
	}
	if err := wait(to.Add(grace)); err != nil {
		return pt, err
	}
	var errs []error
	for _, sys := range accountsSystems {
		r := runs[sys]
		f := &accountsSystemFigures{Classes: map[string]*accountsClassFigures{}, CurrentReads: reads[sys]}
		for _, t := range r.tenants {
			f.LearnedStarts = append(f.LearnedStarts, t.poll.Learned().Rates.StartsPerHour)
		}
		errs = append(errs, r.stop())
		delete(runs, sys)
		st := r.host.Stats()
		f.Requests, f.Violations, f.MaxPerMinute = st.Requests, st.Violations, r.host.MaxArrivals(time.Minute)
		f.RealRateViolations = realRateViolations(r.host.Arrivals(), upstreamRate, time.Minute, speed)
		samples := map[string][2][][]float64{} // class: starts, ends (real-rate slots)
		for i, t := range r.tenants {
			start, end := churnLatencies(newTiming(t.rec, t.account, speed), plans[i], t.ids, from, to)
			for _, c := range []string{classAll, accountClass(i)} {
				s := samples[c]
				s[0] = append(s[0], start.RealRate.sorted)
				s[1] = append(s[1], end.RealRate.sorted)
				samples[c] = s
			}
		}
		for _, c := range accountsClasses {
			s, ok := samples[c]
			if !ok {
				continue
			}
			f.Classes[c] = classFigures(slices.Concat(s[0]...), slices.Concat(s[1]...))
		}
		pt.Systems[sys] = f
	}
	pt.Bound = num(sqrtRuleBound(pt.TrueStarts, reads[accountsRelay], to.Sub(from)))
	return pt, errors.Join(errs...)
}

// classFigures summarises the start and end latencies of a class, given in
// slots, in seconds.
func classFigures(starts, ends []float64) *accountsClassFigures {
	s, e := summarize(starts), summarize(ends)
	sec := func(v float64) num { return num(inSeconds(v)) }
	return &accountsClassFigures{
		StartP50: sec(s.P50), StartMean: sec(mean(starts)), StartP99: sec(s.P99),
		EndP50: sec(e.P50), EndMean: sec(mean(ends)), EndP99: sec(e.P99),
		Starts: s.N, Ends: e.N, StartsMissing: s.Missing, EndsMissing: e.Missing,
	}
}

// mean returns the mean of vs: +Inf when one of them never happened, NaN
// for none.
func mean(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	sum := 0.0
	for _, v := range vs {
		sum += v
	}
	return sum / float64(len(vs))
}
