// Command relaybench measures relay against the performance targets of
// docs/design.md §12 (P1 to P8), and two naive relays beside it, and writes
// the results as Markdown, JSON and an SVG plot.
//
// Usage:
//
//	go run ./cmd/relaybench [--out DIR] [--quick] [--runs N] [--seed N] [--speed X] [--keep-state DIR]
//		[--phases LIST] [--alertmanager PATH] [--tenants N]
//
// --phases runs only some of the phases (churn, upstream, storm, history,
// pipeline, webhook, memory: the default; tenants and takeover, the sizing
// figures, frontier, the latency of each system at 5, 10 and 20
// requests a minute on the clean and the hostile upstream, and accounts,
// 5, 20 and 50 tenants of one upstream host on one budget (P12), run only
// when named); the report says "not run" for the figures of the others. --alertmanager measures that Alertmanager binary on the
// webhook phase's work in the same run. --tenants sets how many tenants one
// relay process serves in the tenants phase.
//
// The simulator, the relay and the baselines run at the production rate of
// 10 requests per minute on a clock that runs --speed (default 60) times
// faster than real time, so one 6 s slot takes 100 ms. Each system polls a
// simulator of its own holding the same seeded alarms. The whole suite takes
// about six minutes on two cores; --quick about one. --phases tenants,takeover
// takes about ten minutes more (two with --quick): the tenants phase runs
// one relay process serving --tenants tenants and one serving a single
// tenant, as child processes whose CPU time and memory it reads; the
// takeover phase runs three relay processes on a three-server JetStream
// cluster and kills the one holding a tenant. --phases frontier takes about
// 18 minutes a run (four with --quick) and writes frontier-clean.svg and
// frontier-hostile.svg; it fails, after writing the results, when a
// simulator refused a request over its rate limit. --phases accounts takes
// about 11 minutes a run (3.5 with --quick), runs 5, 20 and 50 tenants of one
// simulated upstream host on one budget, relay's schedule beside first come,
// first served (P12), and writes accounts.svg.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/relay-energy/relay/cmd/relaybench/internal/memphase"
	"github.com/relay-energy/relay/internal/tracing"
	"github.com/relay-energy/relay/internal/tracing/tracingtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// fullConfig is the default suite; quickConfig the --quick one.
func fullConfig() config {
	return config{
		Seed:              1,
		Speed:             30,
		ChurnSlots:        600,
		Churn:             churn{Ongoing: 300, StartsPerMinute: 5, MeanDuration: time.Hour, MeanMinutes: 60, InvalidFraction: 0.05},
		StormAlarms:       5000,
		StormCapSlots:     120,
		HistoryAlarms:     5000,
		HistorySlots:      40,
		PipelineEvents:    20000,
		WebhookAlarms:     20000,
		MemoryAlarms:      100000,
		Phases:            defaultPhases,
		Tenants:           200,
		TenantsWarm:       5 * time.Minute,
		TenantsSpan:       20 * time.Minute,
		TakeoverTTLs:      []time.Duration{3 * time.Second, 15 * time.Second},
		TakeoverKills:     4,
		TakeoverTenants:   6,
		TakeoverRate:      upstreamRate,
		FrontierRates:     []int{5, 10, 20},
		FrontierUpstreams: []string{"clean", "hostile"},
		AccountsTenants:   []int{5, 20, 50},
	}
}

// quickConfig is the --quick suite: a faster clock and shorter phases.
func quickConfig() config {
	c := fullConfig()
	c.Speed = 60
	c.ChurnSlots = 200
	c.StormCapSlots = 60
	c.HistoryAlarms = 2000
	c.HistorySlots = 30
	c.PipelineEvents = 5000
	c.WebhookAlarms = 5000
	c.Tenants = 50
	c.TenantsSpan = 10 * time.Minute
	c.TakeoverTTLs = c.TakeoverTTLs[:1]
	c.TakeoverKills = 3
	return c
}

// run parses args, runs the suite (or the memory phase's relay process) and
// returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("relaybench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "bench-out", "directory the results are written to")
	quick := fs.Bool("quick", false, "shorter phases: about one minute instead of six")
	runs := fs.Int("runs", 1, "run the suite this many times and report the median of each figure")
	seed := fs.Int64("seed", 0, "seed of the scenarios (default 1)")
	speed := fs.Float64("speed", 0, "how many times faster than real time the clock runs (default 30, 60 with --quick)")
	verbose := fs.Bool("v", false, "log the systems' warnings to stderr")
	phases := fs.String("phases", strings.Join(defaultPhases, ","), "run only these phases (comma-separated, of "+strings.Join(allPhases, ", ")+
		"); the report says \"not run\" for the others' figures")
	tenants := fs.Int("tenants", 0, "tenants one relay process serves in the tenants phase (default 200, 50 with --quick)")
	trace := fs.Bool("trace", false, "trace the pipeline and webhook phases as relay run does with OTEL_EXPORTER_OTLP_ENDPOINT set, into an OTLP/HTTP receiver in this process (the cost of tracing on, see docs/performance.md)")
	alertmanager := fs.String("alertmanager", "", "Alertmanager binary to measure beside the relay's webhook figure in the same run (see docs/performance.md)")
	keepState := fs.String("keep-state", "", "leave the churn phase's relay state file in this directory, with its rules and the alarms the simulator generated (churn-alarms.json), for relay report --state")
	relayChildMode := fs.Bool(relayChildFlag, false, "internal: be a relay process of the tenants or takeover phase")
	var ra relayChildArgs
	fs.Int64Var(&ra.base, "clock-base", 0, "internal: scaled clock reading, Unix ns")
	fs.Int64Var(&ra.real, "clock-real", 0, "internal: wall time of that reading, Unix ns")
	fs.Float64Var(&ra.speed, "clock-speed", 1, "internal: clock speed of the relay process")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "relaybench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	level := slog.LevelError
	if *verbose {
		level = slog.LevelWarn
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if *relayChildMode {
		if err := relayChild(ctx, ra, stderr); err != nil {
			fmt.Fprintf(stderr, "relaybench: relay process: %v\n", err)
			return 1
		}
		return 0
	}

	cfg := fullConfig()
	if *quick {
		cfg = quickConfig()
	}
	if *seed != 0 {
		cfg.Seed = *seed
	}
	if *speed != 0 {
		cfg.Speed = *speed
	}
	if *tenants != 0 {
		cfg.Tenants = *tenants
	}
	var err error
	if cfg.Phases, err = parsePhases(*phases); err != nil {
		fmt.Fprintf(stderr, "relaybench: --phases: %v\n", err)
		return 2
	}
	switch {
	case *keepState != "" && !cfg.runs(phaseChurn):
		fmt.Fprintf(stderr, "relaybench: --keep-state keeps the churn phase's state: add churn to --phases\n")
		return 2
	case *alertmanager != "" && !cfg.runs(phaseWebhook):
		fmt.Fprintf(stderr, "relaybench: --alertmanager is measured in the webhook phase: add webhook to --phases\n")
		return 2
	case *runs < 1:
		fmt.Fprintf(stderr, "relaybench: --runs %d: want 1 or more\n", *runs)
		return 2
	case *tenants != 0 && !cfg.runs(phaseTenants):
		fmt.Fprintf(stderr, "relaybench: --tenants sets the tenants phase: add tenants to --phases\n")
		return 2
	case cfg.Tenants < 2:
		fmt.Fprintf(stderr, "relaybench: --tenants %d: want 2 or more (the figures per tenant compare it with a process of one)\n", cfg.Tenants)
		return 2
	case cfg.Speed < 1 || cfg.Speed > 120:
		fmt.Fprintf(stderr, "relaybench: --speed %g: want 1 to 120 (faster clocks leave the systems no time to answer within a slot)\n", cfg.Speed)
		return 2
	}
	command := strings.TrimSpace("go run ./cmd/relaybench " + strings.Join(args, " "))
	if err := suite(ctx, cfg, *runs, *out, *keepState, *alertmanager, *trace, command, stdout, stderr, log); err != nil {
		fmt.Fprintf(stderr, "relaybench: %v\n", err)
		return 1
	}
	return 0
}

// suite runs the suite runs times and writes the results into out; with
// keepState, the last run leaves its churn phase's state there.
func suite(ctx context.Context, cfg config, runs int, out, keepState, alertmanager string, trace bool, command string, stdout, stderr io.Writer, log *slog.Logger) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("results directory: %w", err)
	}
	dir, err := os.MkdirTemp("", "relaybench-")
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	defer os.RemoveAll(dir)
	env, err := startNATS(ctx, filepath.Join(dir, "nats"), log)
	if err != nil {
		return err
	}
	defer env.close()

	var tracer *tracing.Tracer
	if trace {
		collector := tracingtest.Start()
		defer collector.Close()
		var err error
		if tracer, err = tracing.New(ctx, tracing.Config{EndpointURL: collector.URL(), Version: "relaybench"}); err != nil {
			return err
		}
		defer func() {
			_ = tracer.Shutdown(context.WithoutCancel(ctx))
			requests, spans, bytes := collector.Stats()
			fmt.Fprintf(stderr, "tracing: %d spans in %d OTLP requests (%d bytes) reached the receiver\n", spans, requests, bytes)
		}()
	}
	var memrelay string
	if cfg.runs(phaseMemory) {
		if memrelay, err = buildMemrelay(ctx, dir); err != nil {
			return err
		}
	}
	var figs []runFigures
	for i := range runs {
		runDir := filepath.Join(dir, fmt.Sprintf("run%d", i+1))
		if err := os.Mkdir(runDir, 0o755); err != nil {
			return fmt.Errorf("state directory: %w", err)
		}
		fmt.Fprintf(stderr, "run %d of %d (clock %g× real time, 1 slot = %s)\n", i+1, runs, cfg.Speed, time.Duration(float64(slot)/cfg.Speed))
		b := &bench{cfg: cfg, dir: runDir, log: log, nats: env, memrelay: memrelay, keepState: keepState, alertmanager: alertmanager, tracer: tracer, progress: func(format string, args ...any) {
			fmt.Fprintf(stderr, format+"\n", args...)
		}}
		f, err := b.run(ctx)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		figs = append(figs, f)
	}
	rep := buildReport(cfg, figs, command, time.Now())
	rep.Notes = notes(cfg, figs)
	if trace {
		rep.Notes = append(rep.Notes, "Tracing on (--trace): the pipeline and webhook phases made a trace per event, exported by OTLP/HTTP "+
			"to a receiver in the bench's own process, which decoded every span; compare them with a run without --trace.")
	}
	written, err := writeFiles(out, rep)
	if err != nil {
		return err
	}
	if err := writeMarkdown(stdout, rep); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s\n", strings.Join(written, ", "))
	return frontierViolations(figs)
}

// resultFile is one file of the results and how to write it.
type resultFile struct {
	name  string
	write func(io.Writer) error
}

// writeFiles writes results.md, results.json and, when the churn phase ran,
// start-latency-cdf.svg, when the frontier phase ran one frontier chart per
// upstream, and returns their paths.
func writeFiles(out string, rep report) ([]string, error) {
	files := []resultFile{
		{"results.md", func(w io.Writer) error { return writeMarkdown(w, rep) }},
		{"results.json", func(w io.Writer) error { return writeJSON(w, rep) }},
	}
	if rep.Config.runs(phaseChurn) {
		files = append(files, resultFile{"start-latency-cdf.svg", func(w io.Writer) error { return writeCDF(w, plotSeries(rep), plotNote(rep)) }})
	}
	if rep.Config.runs(phaseFrontier) {
		for _, c := range frontierCharts(rep) {
			files = append(files, resultFile{frontierFile(c.upstream), func(w io.Writer) error { return writeFrontier(w, c) }})
		}
	}
	if rep.Accounts != nil {
		files = append(files, resultFile{accountsFile, func(w io.Writer) error { return writeAccountsChart(w, rep) }})
	}
	var written []string
	for _, f := range files {
		path := filepath.Join(out, f.name)
		fh, err := os.Create(path)
		if err != nil {
			return written, err
		}
		err = f.write(fh)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return written, fmt.Errorf("writing %s: %w", path, err)
		}
		written = append(written, path)
	}
	return written, nil
}

// notes say how the figures were produced, for whoever reads the table.
func notes(cfg config, figs []runFigures) []string {
	peak := 0
	for _, f := range figs {
		peak = max(peak, f.PeakOngoing)
	}
	// Each note is about the figures of some phases, and kept when one of them ran.
	simulated := []string{phaseChurn, phaseUpstream, phaseStorm, phaseHistory}
	all := []struct {
		phases []string
		text   string
	}{
		{simulated, fmt.Sprintf("Time runs %g× faster than real time on one clock shared by the simulators, the relay and the baselines, all with production settings "+
			"(10 requests/min and a 60 s rate-limit window per simulator, the client's 1 s margin, 6 s slots, 10 min confirm timeout, 2 min sweep overlap, 720 h lookback). "+
			"Local work (HTTP, JSON, bbolt commits, JetStream round trips) is not accelerated, so on this clock it weighs %g× what it weighs at the real rate: "+
			"the measured latencies are upper bounds. The real-rate estimates count the work after the request that detected an event "+
			"(from its arrival at the simulator to detection, or to the PubAck for P4) at its real duration instead.",
			cfg.Speed, cfg.Speed)},
		{simulated, fmt.Sprintf("Each system polls a simulator of its own (20 stations, 600 devices) holding the same seeded alarms (seed %d), through the same opendata client.", cfg.Seed)},
		{[]string{phaseChurn}, fmt.Sprintf("P1, P2: %d slots of steady churn, all three systems at once: %d alarms ongoing at the start, %g starts/min, exponential durations of mean %g min, "+
			"%g%% ending invalid; at most %d ongoing at once. P1 counts the alarms that started in the window, P2 those that ended in it, "+
			"against the recovery time the simulator recorded.",
			cfg.ChurnSlots, cfg.Churn.Ongoing, cfg.Churn.StartsPerMinute, cfg.Churn.MeanMinutes, cfg.Churn.InvalidFraction*100, peak)},
		{[]string{phaseStorm}, fmt.Sprintf("P4: %d alarms start at once on a light background (%d ongoing, %g start/min), one system at a time; latency runs from the storm to the delivery of each start. "+
			"The relay delivers through its bbolt outbox and the notify JetStream sink to an in-process nats-server (file storage, PubAck awaited); "+
			"the baselines count an event delivered the moment they detect it. The phase ends when every start is delivered, or after %d slots.",
			cfg.StormAlarms, background.Ongoing, background.StartsPerMinute, cfg.StormCapSlots)},
		{[]string{phaseChurn, phaseStorm, phaseHistory}, "P3 sums the rate-limit refusals the simulators counted in the churn, storm and history phases (per phase in results.json); " +
			"\"most requests in any 60 s\" is the worst 60 s of the same phases."},
		{[]string{phasePipeline}, fmt.Sprintf("P5: %d events (starts, then ends, in batches of %d records) applied to a fresh bbolt store, routed, and delivered by the notify Deliverer "+
			"through the JetStream sink to the in-process nats-server, from the first Apply to the last PubAck.", cfg.PipelineEvents, pipelineBatch)},
		{[]string{phaseMemory}, fmt.Sprintf("P6: a separate relay process (opendata client, poller and bbolt store, as the service runs them) "+
			"reads %d ongoing alarms from a simulator in the parent process (clock %d× real time, the simulator's rate limit off; the relay's own budget still paces it) "+
			"and is measured once it tracks all of them, after a forced GC. The process is cmd/relaybench/memrelay, built as relay's image is "+
			"(CGO_ENABLED=0, -trimpath, -ldflags \"-s -w\") and linking what relay links, not the bench's simulator driver or nats-server: "+
			"the executable's pages counted are relay's.",
			cfg.MemoryAlarms, memphase.Speed)},
		{[]string{phaseWebhook}, fmt.Sprintf("P5, webhook: the starts of %d distinct alarms (events of about 1 KB) applied to a fresh bbolt store in batches of %d, routed, "+
			"passed by alarm management (which manages webhook sinks by default) and delivered by the notify Deliverer through a webhook sink built from a rules file, "+
			"signed with a secret, to a receiver in the same process (127.0.0.1, answering 204 after verifying the signature), "+
			"from the first Apply to the receiver's answer to the last distinct event.", cfg.WebhookAlarms, pipelineBatch)},
		{[]string{phaseHistory}, fmt.Sprintf("P8: the tenant holds %d alarms that ended in the 7 days before the first run, 50 of them in its last 2 minutes (inside the sweep overlap), "+
			"and %d ongoing; %d slots are run, all three systems at once.", cfg.HistoryAlarms, background.Ongoing, cfg.HistorySlots)},
		{[]string{phaseTenants}, fmt.Sprintf("S1 to S3: one relay process (this binary running the service as relay run does, a bbolt state file per tenant) serves %d tenants "+
			"from a tenants file, each polling a simulator of its own (60 devices; %d alarms ongoing at the start, %g starts/min, mean duration %g min, %g%% ending invalid) "+
			"at the upstream's 10 requests/min, on a clock %g× real time; a second process serves one more tenant beside it. Both deliver every transition "+
			"through one signed webhook sink to a receiver in the bench that verifies each signature. After %g min of upstream time to warm up, both are measured over %g min: "+
			"CPU time (utime + stime of /proc/<pid>/stat) and, at the end, VmRSS and RssAnon (no forced GC). Per tenant is the process's figure ÷ tenants; "+
			"\"one more tenant\" is its difference from the one-tenant process ÷ (tenants − 1), free of the process's own background work, "+
			"which runs on the wall clock and so weighs 1/%g of its real share per hour of upstream time. Events due: the start of every alarm ongoing in the span, "+
			"the end of every alarm that ended in it, for both processes' tenants. Rate-limit violations count over the whole phase, start-up included; "+
			"on this clock the client's 1 s margin is %.0f ms of real time, so the real-rate estimate keeps only the refusals whose gap to the 10th request "+
			"before falls short of 60 s by more than the margin once the local delay counts at its real duration.",
			cfg.Tenants, tenantChurn.Ongoing, tenantChurn.StartsPerMinute, tenantChurn.MeanMinutes, tenantChurn.InvalidFraction*100, cfg.tenantsSpeed(),
			cfg.TenantsWarm.Minutes(), cfg.TenantsSpan.Minutes(), cfg.tenantsSpeed(), 1000/cfg.tenantsSpeed())},
		{[]string{phaseTakeover}, fmt.Sprintf("S4 to S6: three relay processes (RELAY_STATE_BACKEND=jetstream, RELAY_STATE_REPLICAS=3, no RELAY_EGRESS_GROUP) "+
			"on a three-server JetStream cluster in the bench process share %d tenants at %d requests/min on the wall clock, with a steady alarm flow "+
			"(%g starts/min per tenant, mean duration %g min). %d times per TTL (%s), the replica that owns a tenant is killed with SIGKILL at a random moment of its "+
			"renewal period; a takeover runs from the kill to the first request another replica makes with an access token of its own, for every tenant "+
			"the killed replica held. The killed replica then starts again and takes its tenants back before the next kill. The simulators' rate limit is off: "+
			"in the bench every replica polls from 127.0.0.1.",
			cfg.TakeoverTenants, cfg.TakeoverRate, takeoverChurn.StartsPerMinute, takeoverChurn.MeanMinutes, cfg.TakeoverKills, durations(cfg.TakeoverTTLs))},
		{[]string{phaseFrontier}, fmt.Sprintf("Frontier: the churn phase's scenario (seed %d, the same alarms at every rate) for the relay and both baselines at once, "+
			"at %s requests/min against the %s upstreams (of the upstream phase), each simulator admitting that rate; %d slots of 6 s (%g min) measured at every rate, "+
			"after %d slots of the rate to warm up and before %d more (and twice the upload lag of a lagging upstream). The eager baseline makes one request a slot of 60 s ÷ rate; "+
			"the naive one reads both lists every 60 s at every rate. The clock runs %g× real time, slowed above 10 requests/min so that a slot never takes less real time than in the churn phase.",
			cfg.Seed+13, ints(cfg.FrontierRates), strings.Join(cfg.FrontierUpstreams, " and "), cfg.ChurnSlots, float64(cfg.ChurnSlots)*slot.Minutes(),
			warmSlots, graceSlots, cfg.Speed)},
		{[]string{phaseAccounts}, fmt.Sprintf("P12: %s tenants, each an account of its own (60 devices) on one simulated upstream host that admits %d requests/min "+
			"from one address across all of them (sim.Host). Tenant 1 has half of the churn phase's alarms (%d ongoing at the start, %g starts/min, mean duration %g min), "+
			"tenants 2-5 a tenth each, the others share the last tenth (with 5 tenants, the shares are scaled to sum to 1). "+
			"Each tenant runs relay's poller and a bbolt store, with a client on one budget shared by all: relay's budget serves the tenants by their learned rates "+
			"with a floor; fifo is the same budget first come, first served. Both systems run at once, each on a host of its own with the same alarms, on a clock %g× real time; "+
			"%d slots and %d more a tenant to warm up (logins, first contacts, first rates), %d measured, and at least %d more (12 slots a tenant) for the last alarms to be detected. "+
			"Latencies are of detection, real-rate estimates, in seconds. The bound is the square-root rule's: the least mean start latency "+
			"of relay's reads of the current alarms shared out among the tenants at frequencies proportional to the square root of their true start rates.",
			ints(cfg.AccountsTenants), upstreamRate, cfg.Churn.Ongoing, cfg.Churn.StartsPerMinute, cfg.Churn.MeanMinutes, cfg.Speed,
			accountsWarmSlots, accountsWarmPerTenant, cfg.ChurnSlots, graceSlots)},
		{[]string{phaseUpstream}, fmt.Sprintf("Upstreams: the relay alone against each upstream variant in turn, on a simulator of its own with the same churn (seed %d), "+
			"for %d slots, and %d more for late alarms and ends to be found.", cfg.Seed+7, max(cfg.ChurnSlots/4, 40), upstreamGraceSlots)},
	}
	var n []string
	for _, note := range all {
		if slices.ContainsFunc(note.phases, cfg.runs) {
			n = append(n, note.text)
		}
	}
	if !cfg.runs(phaseChurn) {
		return appendWallTime(n, figs)
	}
	var costs, current, confirm, sweep, reconcile, answered []float64
	for _, f := range figs {
		costs = append(costs, float64(f.PollCost.Microseconds())/1000)
		all := 0
		for _, v := range f.SlotUse {
			all += v
		}
		answered = append(answered, float64(all))
		share := func(q string) float64 { return 100 * float64(f.SlotUse[q]) / float64(max(all, 1)) }
		current, confirm, sweep = append(current, share("current")), append(confirm, share("confirm")), append(sweep, share("sweep"))
		reconcile = append(reconcile, share("reconcile"))
	}
	if c := median(costs); !math.IsNaN(c) {
		n = append(n, fmt.Sprintf("One read of the current list (about 300 alarms) took %.1f ms of real time (median, request to decoded answer), "+
			"that is %.2f slot at %g×: part of every latency above that would be %.4f slot at the real rate.",
			c, c/1000*cfg.Speed/slot.Seconds(), cfg.Speed, c/1000/slot.Seconds()))
	}
	if a := median(answered); a > 0 {
		n = append(n, fmt.Sprintf("In the churn phase the relay spent its %.0f answered requests on current snapshots %.0f%%, confirm queries %.0f%%, sweeps %.0f%%, "+
			"reconciliation %.0f%% (its poller's relay_poller_polls_total).", a, median(current), median(confirm), median(sweep), median(reconcile)))
	}
	return appendWallTime(n, figs)
}

// durations writes ds as a list: "3s and 15s".
func durations(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.String()
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// appendWallTime appends the mean wall time of figs' runs to n.
func appendWallTime(n []string, figs []runFigures) []string {
	var total time.Duration
	for _, f := range figs {
		total += f.Elapsed
	}
	if len(figs) > 0 {
		n = append(n, fmt.Sprintf("Wall time per run: %.0f s.", (total/time.Duration(len(figs))).Seconds()))
	}
	return n
}
