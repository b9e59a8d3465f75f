package main

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// tenantChurn is the alarm traffic of each tenant of the tenants and
// takeover phases: a small tenant (60 devices) with a few alarms ongoing and
// one starting every two minutes.
var tenantChurn = churn{Ongoing: 20, StartsPerMinute: 0.5, MeanDuration: 30 * time.Minute, MeanMinutes: 30, InvalidFraction: 0.05}

// tenantSimOptions configure the simulator of one tenant of the tenants and
// takeover phases: 4 stations of 3 systems of 5 devices (60 devices).
func tenantSimOptions(seed int64, clk clock.Clock) sim.Options {
	return sim.Options{Seed: seed, Stations: 4, SystemsPerStation: 3, DevicesPerSystem: 5, Clock: clk}
}

// tenantsRules is the rules file of the relays of the tenants and takeover
// phases: every transition to one signed webhook sink, with alarm
// management and the storm digest off, so that every event reaches the
// receiver and can be counted.
const tenantsRules = `sinks:
  - name: hook
    type: webhook
    url: %q
    secret_env: ` + webhookSecretEnv + `
    digest: false
routes:
  - name: everything
    to: [hook]
    suppress: false
`

// benchTenants are the simulated tenants of the tenants and takeover
// phases: one simulator each, holding the alarms of its plan, and the
// verifying receiver their relays deliver to.
type benchTenants struct {
	dir string
	// ids are the tenant ids; sims, plans and origins are by tenant, in
	// the same order. origins are the simulator's originIds of the plan.
	ids     []string
	sims    []*sim.Server
	plans   [][]plannedAlarm
	origins [][]string
	// appSecret is every simulator's app secret; hookSecret signs the
	// webhooks. Both reach the relays through their environment only.
	appSecret, hookSecret string
	recv                  *receiver
	rules                 string
}

// newBenchTenants starts n simulators on clk, each with rateLimit requests a
// minute (0: the upstream's 10, -1: none) and its own alarms drawn from c
// until until, a receiver, and the rules file, in dir.
func newBenchTenants(dir string, n int, seed int64, clk clock.Clock, rateLimit int, c churn, until time.Time) (bt *benchTenants, err error) {
	raw := make([]byte, 32)
	crand.Read(raw)
	bt = &benchTenants{dir: dir, appSecret: "app-" + crand.Text(), hookSecret: "whsec_" + base64.StdEncoding.EncodeToString(raw)}
	defer func() {
		if err != nil {
			bt.close()
		}
	}()
	if bt.recv, err = startReceiver("/hook", math.MaxInt, signedIDs(raw)); err != nil {
		return nil, err
	}
	bt.rules = filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(bt.rules, fmt.Appendf(nil, tenantsRules, bt.recv.url), 0o600); err != nil {
		return nil, err
	}
	now := clk.Now()
	for i := range n {
		id := fmt.Sprintf("t%03d", i+1)
		opts := tenantSimOptions(seed+int64(i), clk)
		opts.AppID, opts.AppSecret, opts.RateLimit = "bench-"+id, bt.appSecret, rateLimit
		s, err := startSim(opts)
		if err != nil {
			return nil, err
		}
		bt.ids, bt.sims = append(bt.ids, id), append(bt.sims, s)
		rng := rand.New(rand.NewPCG(uint64(seed+int64(i)), 0x7e2a))
		plan := planChurn(rng, deviceSNs(s), now, until, c)
		origins, err := schedule(s, plan)
		if err != nil {
			return nil, fmt.Errorf("tenant %s: %w", id, err)
		}
		bt.plans, bt.origins = append(bt.plans, plan), append(bt.origins, origins)
	}
	return bt, nil
}

// writeTenantsFile writes the tenants file of the tenants of idx to path.
func (bt *benchTenants) writeTenantsFile(path string, idx []int) error {
	var b strings.Builder
	b.WriteString("tenants:\n")
	for _, i := range idx {
		id, _ := bt.sims[i].Credentials()
		fmt.Fprintf(&b, "  - id: %s\n    base_url: %s\n    app_id: %s\n    app_secret_env: %s\n", bt.ids[i], bt.sims[i].URL(), id, secretEnv)
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// env returns the environment of a relay serving the tenants of
// tenantsFile with the rules, keeping its state (or its caches) in
// stateDir, which it creates.
func (bt *benchTenants) env(tenantsFile, stateDir string) (map[string]string, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	return map[string]string{
		"RELAY_TENANTS_FILE":   tenantsFile,
		"RELAY_RULES":          bt.rules,
		"RELAY_STATE_DIR":      stateDir,
		"RELAY_STATE_PATH":     filepath.Join(stateDir, "relay.db"),
		"RELAY_LISTEN":         "127.0.0.1:0",
		"RELAY_LOG_FORMAT":     "json",
		"RELAY_LOG_LEVEL":      "info",
		"RELAY_SHUTDOWN_GRACE": "5s",
		secretEnv:              bt.appSecret,
		webhookSecretEnv:       bt.hookSecret,
	}, nil
}

// deliveryCheck compares the events the receiver accepted with those the
// tenants' alarms call for.
type deliveryCheck struct {
	// Expected counts the events due: the start of every alarm ongoing
	// at some point of the window, the end (or invalidation) of every
	// alarm that ended in it. Delivered counts those the receiver
	// accepted.
	Expected  int `json:"expected"`
	Delivered int `json:"delivered"`
	// Complete counts the tenants that got every event due.
	Complete int `json:"tenants_complete"`
	// Repeats counts deliveries of an event already delivered.
	Repeats int `json:"repeats"`
}

// missing returns how many events due were not delivered.
func (d deliveryCheck) missing() int { return d.Expected - d.Delivered }

// deliveries checks the events due to the tenants of idx for alarms that
// were ongoing or ended from from to to.
func (bt *benchTenants) deliveries(idx []int, from, to time.Time) deliveryCheck {
	var d deliveryCheck
	for _, i := range idx {
		complete := true
		for k, a := range bt.plans[i] {
			if !a.Occurred.Before(to) || a.End.Before(from) {
				continue
			}
			id := bt.origins[i][k]
			d.Expected++
			if bt.recv.accepted(event.ID(id, event.Start)) {
				d.Delivered++
			} else {
				complete = false
			}
			if a.End.Before(to) {
				d.Expected++
				if bt.recv.accepted(event.ID(id, event.End)) || bt.recv.accepted(event.ID(id, event.Invalid)) {
					d.Delivered++
				} else {
					complete = false
				}
			}
		}
		if complete {
			d.Complete++
		}
	}
	d.Repeats = bt.recv.repeats()
	return d
}

// traffic returns the requests and rate-limit violations the simulators of
// idx counted, and the violations a real-rate estimate finds (see
// realRateViolations) for a clock of speed.
func (bt *benchTenants) traffic(idx []int, speed float64) (requests, violations, realRate int) {
	for _, i := range idx {
		st := bt.sims[i].Stats()
		requests += st.Requests
		violations += st.Violations
		realRate += realRateViolations(bt.sims[i].Arrivals(), upstreamRate, time.Minute, speed)
	}
	return requests, violations, realRate
}

// sleepUntil sleeps until until on clk; it returns ctx's error when ctx ends
// first.
func sleepUntil(ctx context.Context, clk clock.Clock, until time.Time) error {
	t := clk.NewTimer(until.Sub(clk.Now()))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// clientMargin is what the opendata client adds to the upstream's window
// before a request start frees its slot in the budget.
const clientMargin = time.Second

// realRateViolations returns how many of the arrivals that a simulator's
// limit of limit requests per window refused it would still refuse if the
// local delays between the client's budget and the simulator's clock counted
// at their real duration, as they would at the real rate. A refused arrival
// came less than window after the limit-th admitted arrival before it from
// its address; the client spaces those starts by window plus clientMargin,
// so the shortfall is local delay, which the clock of speed multiplies. At
// the real rate it would be refused only if the gap fell short of the
// window by more than the margin after dividing that delay by speed: if the
// gap is under window + clientMargin × (1 − speed). At speed 1 that is the
// simulator's own rule.
func realRateViolations(arrivals []sim.Arrival, limit int, window time.Duration, speed float64) int {
	admitted := map[string][]time.Time{}
	n := 0
	for _, a := range arrivals {
		log := admitted[a.IP]
		if !a.Limited {
			admitted[a.IP] = append(log, a.At)
			continue
		}
		if len(log) < limit || a.At.Sub(log[len(log)-limit]) < window+time.Duration(float64(clientMargin)*(1-speed)) {
			n++
		}
	}
	return n
}

// close stops the simulators and the receiver.
func (bt *benchTenants) close() error {
	var errs []error
	for _, s := range bt.sims {
		errs = append(errs, s.Close())
	}
	if bt.recv != nil {
		errs = append(errs, bt.recv.close())
	}
	return errors.Join(errs...)
}

// span returns the indexes from i to j (exclusive).
func span(i, j int) []int {
	idx := make([]int, 0, j-i)
	for k := i; k < j; k++ {
		idx = append(idx, k)
	}
	return idx
}

// tenantsResult is what the tenants phase measured: one relay process
// serving Tenants tenants, beside one serving a single tenant, both over the
// same span of upstream time.
type tenantsResult struct {
	Tenants int `json:"tenants"`
	// Speed is the phase's clock, SpanHours the measured span of
	// upstream (scaled) time, RealSeconds the same span on the wall.
	Speed       float64 `json:"speed"`
	SpanHours   float64 `json:"span_upstream_hours"`
	RealSeconds float64 `json:"span_real_s"`
	// CPU and OneCPU are the CPU seconds (user and system) of the process
	// of Tenants tenants and of the one-tenant process over the span.
	CPU    float64 `json:"cpu_s"`
	OneCPU float64 `json:"one_tenant_cpu_s"`
	// RSS and Anon are VmRSS and RssAnon at the end of the span, PeakRSS
	// VmHWM; the One figures are the one-tenant process's.
	RSS     uint64 `json:"rss"`
	Anon    uint64 `json:"rss_anon"`
	PeakRSS uint64 `json:"peak_rss"`
	OneRSS  uint64 `json:"one_tenant_rss"`
	OneAnon uint64 `json:"one_tenant_rss_anon"`
	// StateBytes is the disk space the state files of the Tenants
	// tenants take (bbolt grows a file in steps of 16 MB, sparse).
	StateBytes int64 `json:"state_bytes_on_disk"`
	// Deliveries are the events of both processes' tenants.
	Deliveries deliveryCheck `json:"deliveries"`
	// Requests and Violations are what the simulators of both counted;
	// RealRateViolations those of Violations a real-rate estimate keeps
	// (realRateViolations).
	Requests           int `json:"requests"`
	Violations         int `json:"violations"`
	RealRateViolations int `json:"violations_real_rate"`
}

// cpuPerTenantHour returns the CPU seconds of the process per tenant per
// hour of upstream time.
func (r *tenantsResult) cpuPerTenantHour() float64 {
	if r.Tenants == 0 || r.SpanHours == 0 {
		return math.NaN()
	}
	return r.CPU / float64(r.Tenants) / r.SpanHours
}

// marginalCPUPerTenantHour returns what one more tenant costs, in CPU
// seconds per hour of upstream time: the difference between the two
// processes over the tenants that make it.
func (r *tenantsResult) marginalCPUPerTenantHour() float64 {
	if r.Tenants < 2 || r.SpanHours == 0 {
		return math.NaN()
	}
	return (r.CPU - r.OneCPU) / float64(r.Tenants-1) / r.SpanHours
}

// rssPerTenant and anonPerTenant return the resident memory one more tenant
// takes, in bytes: the difference between the two processes over the
// tenants that make it.
func (r *tenantsResult) rssPerTenant() float64 {
	if r.Tenants < 2 {
		return math.NaN()
	}
	return (float64(r.RSS) - float64(r.OneRSS)) / float64(r.Tenants-1)
}

func (r *tenantsResult) anonPerTenant() float64 {
	if r.Tenants < 2 {
		return math.NaN()
	}
	return (float64(r.Anon) - float64(r.OneAnon)) / float64(r.Tenants-1)
}

// tenantsGraceSlots run after the measured span of the tenants phase, for
// the events of its last alarms to be delivered; the phase ends as soon as
// all are.
const tenantsGraceSlots = 60

// tenantsPhase runs one relay process serving cfg.Tenants tenants and one
// serving a single tenant, each tenant with a simulator of its own on a
// scaled clock, and measures both processes over a span of upstream time
// after a warm-up: their CPU time, their resident memory at its end, and
// whether every event due reached the receiver.
func (b *bench) tenantsPhase(ctx context.Context, figs *runFigures) error {
	n := b.cfg.Tenants
	speed := b.cfg.tenantsSpeed()
	clk := clock.NewScaled(time.Now().UTC().Truncate(time.Second), speed)
	t0 := clk.Now()
	from := t0.Add(b.cfg.TenantsWarm)
	to := from.Add(b.cfg.TenantsSpan)
	dir := filepath.Join(b.dir, "tenants")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	bt, err := newBenchTenants(dir, n+1, b.cfg.Seed+11, clk, 0, tenantChurn, to.Add(tenantsGraceSlots*slot))
	if err != nil {
		return err
	}
	defer bt.close()
	b.progress("    %d tenants in one relay process and 1 in another, on a clock %g× real time: %g min of upstream time to warm up, %g measured",
		n, speed, b.cfg.TenantsWarm.Minutes(), b.cfg.TenantsSpan.Minutes())
	many, one := span(0, n), []int{n}
	var procs []*relayProc
	defer func() { _ = stopAll(procs, 30*time.Second) }()
	for _, p := range []struct {
		name string
		idx  []int
	}{{"many", many}, {"one", one}} {
		file := filepath.Join(dir, p.name+"-tenants.yaml")
		if err := bt.writeTenantsFile(file, p.idx); err != nil {
			return err
		}
		env, err := bt.env(file, filepath.Join(dir, p.name))
		if err != nil {
			return err
		}
		rp, err := startRelayProc(p.name, env, clk)
		if err != nil {
			return err
		}
		procs = append(procs, rp)
	}
	wait := func(until time.Time) error {
		if err := sleepUntil(ctx, clk, until); err != nil {
			return err
		}
		return errors.Join(procs[0].alive(), procs[1].alive())
	}
	if err := wait(from); err != nil {
		return err
	}
	for i, s := range bt.sims {
		if s.Stats().Logins == 0 {
			return fmt.Errorf("tenant %s has not logged in after the warm-up of %s: the process is too slow for %d tenants at %g×; lower --speed or --tenants",
				bt.ids[i], b.cfg.TenantsWarm, n, speed)
		}
	}
	cpu0, err := procs[0].cpu()
	if err != nil {
		return err
	}
	oneCPU0, err := procs[1].cpu()
	if err != nil {
		return err
	}
	began := time.Now()
	if err := wait(to); err != nil {
		return err
	}
	cpu1, err := procs[0].cpu()
	if err != nil {
		return err
	}
	oneCPU1, err := procs[1].cpu()
	if err != nil {
		return err
	}
	elapsed := time.Since(began)
	mem, err := procs[0].memory()
	if err != nil {
		return err
	}
	oneMem, err := procs[1].memory()
	if err != nil {
		return err
	}
	all := span(0, n+1)
	for deadline := to.Add(tenantsGraceSlots * slot); bt.deliveries(all, from, to).missing() > 0 && clk.Now().Before(deadline); {
		if err := wait(clk.Now().Add(slot)); err != nil {
			return err
		}
	}
	res := &tenantsResult{
		Tenants: n, Speed: speed, SpanHours: b.cfg.TenantsSpan.Hours(), RealSeconds: elapsed.Seconds(),
		CPU: (cpu1 - cpu0).Seconds(), OneCPU: (oneCPU1 - oneCPU0).Seconds(),
		RSS: mem.RSS, Anon: mem.Anon, PeakRSS: mem.HWM, OneRSS: oneMem.RSS, OneAnon: oneMem.Anon,
		Deliveries: bt.deliveries(all, from, to),
	}
	res.Requests, res.Violations, res.RealRateViolations = bt.traffic(all, speed)
	err = stopAll(procs, 30*time.Second)
	for _, id := range bt.ids[:n] {
		if fi, serr := os.Stat(filepath.Join(dir, "many", id+".db")); serr == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				res.StateBytes += st.Blocks * 512
			}
		}
	}
	figs.Tenants = res
	return err
}
