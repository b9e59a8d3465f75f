package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relay-energy/relay/cmd/relaybench/internal/memphase"
)

// num is a measured figure. +Inf means it never happened within the run
// (JSON "never"); NaN means it was not measured or does not apply (JSON
// null).
type num float64

// MarshalJSON writes finite figures as numbers.
func (n num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	switch {
	case math.IsNaN(f):
		return []byte("null"), nil
	case math.IsInf(f, 0):
		return []byte(`"never"`), nil
	}
	return strconv.AppendFloat(nil, f, 'g', 6, 64), nil
}

// MarshalJSON writes a summary's figures, leaving out the samples.
func (s summary) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		N       int `json:"n"`
		Missing int `json:"never"`
		P50     num `json:"p50"`
		P99     num `json:"p99"`
		Max     num `json:"max"`
	}{s.N, s.Missing, num(s.P50), num(s.P99), num(s.Max)})
}

// unit says how a row's figures are written.
type unit string

const (
	unitSlots    unit = "slots"
	unitCount    unit = "count"
	unitRate     unit = "events/s"
	unitMiB      unit = "MiB"
	unitRequests unit = "requests"
	unitSeconds  unit = "s"
	unitCPU      unit = "CPU s"
	unitKiB      unit = "KiB"
)

// goal is a target a relay figure meets or not.
type goal struct {
	atMost bool // true: value <= limit; false: value >= limit
	limit  float64
}

func (g goal) met(v float64) bool {
	if math.IsNaN(v) {
		return false
	}
	if g.atMost {
		return v <= g.limit
	}
	return v >= g.limit
}

// metric is one row of the results table and how to read it from a run.
type metric struct {
	id, what, target string
	unit             unit
	// goal, when set, is checked against the relay's figure; rows without
	// one are context for the rows that have.
	goal *goal
	// systems are the columns the metric applies to.
	systems []string
	value   func(r *runFigures, sys string) float64
	// phases are the phases that measure it: not run when none ran.
	phases []string
}

func atMost(v float64) *goal  { return &goal{atMost: true, limit: v} }
func atLeast(v float64) *goal { return &goal{limit: v} }

var (
	allSystems = systemNames
	relayOnly  = []string{sysRelay}
)

const mib = 1 << 20

// lat reads a latency figure of a system: pick chooses the distribution,
// real the real-rate estimate over the measured one, and fig the figure.
func lat(pick func(*systemFigures) latencies, real bool, fig func(summary) float64) func(*runFigures, string) float64 {
	return func(r *runFigures, s string) float64 {
		l := pick(r.Systems[s])
		if real {
			return fig(l.RealRate)
		}
		return fig(l.Measured)
	}
}

func starts(f *systemFigures) latencies   { return f.Start }
func ends(f *systemFigures) latencies     { return f.End }
func level0(f *systemFigures) latencies   { return f.StormLevel0 }
func stormAll(f *systemFigures) latencies { return f.StormAll }
func p50(s summary) float64               { return s.P50 }
func p99(s summary) float64               { return s.P99 }
func last(s summary) float64              { return s.Max }
func missing(s summary) float64           { return float64(s.Missing) }

// Row labels of the two readings of a latency.
const (
	measuredLabel = ", measured on the accelerated clock"
	realLabel     = ", real-rate estimate"
)

// The phases that measure each row.
var (
	inChurn    = []string{phaseChurn}
	inP3       = []string{phaseChurn, phaseStorm, phaseHistory}
	inStorm    = []string{phaseStorm}
	inPipeline = []string{phasePipeline}
	inWebhook  = []string{phaseWebhook}
	inMemory   = []string{phaseMemory}
	inHistory  = []string{phaseHistory}
)

// webhookWhat is the label of the webhook figure's row.
const webhookWhat = "webhook throughput, store + route + alarm management + signed webhook sink to a local receiver"

// notRun is what the report says of a figure whose phase did not run.
const notRun = "not run"

// metrics are the rows of the table, in order.
var metrics = []metric{
	{"P1", "start detection latency p50" + measuredLabel, "≤ 0.6 slot", unitSlots, atMost(0.6), allSystems, lat(starts, false, p50), inChurn},
	{"P1", "start detection latency p50" + realLabel, "≤ 0.6 slot", unitSlots, atMost(0.6), allSystems, lat(starts, true, p50), inChurn},
	{"P1", "start detection latency p99" + measuredLabel, "≤ 1.5 slots", unitSlots, atMost(1.5), allSystems, lat(starts, false, p99), inChurn},
	{"P1", "start detection latency p99" + realLabel, "≤ 1.5 slots", unitSlots, atMost(1.5), allSystems, lat(starts, true, p99), inChurn},
	{"P1", "starts never detected", "", unitCount, nil, allSystems, lat(starts, false, missing), inChurn},
	{"P2", "end detection latency p50" + measuredLabel, "≤ 1.5 slots", unitSlots, atMost(1.5), allSystems, lat(ends, false, p50), inChurn},
	{"P2", "end detection latency p50" + realLabel, "≤ 1.5 slots", unitSlots, atMost(1.5), allSystems, lat(ends, true, p50), inChurn},
	{"P2", "end detection latency p99" + measuredLabel, "≤ 3 slots", unitSlots, atMost(3), allSystems, lat(ends, false, p99), inChurn},
	{"P2", "end detection latency p99" + realLabel, "≤ 3 slots", unitSlots, atMost(3), allSystems, lat(ends, true, p99), inChurn},
	{"P2", "ends never detected", "", unitCount, nil, allSystems, lat(ends, false, missing), inChurn},
	{"P3", "rate-limit violations counted by the simulators", "0", unitCount, atMost(0), allSystems,
		func(r *runFigures, s string) float64 { return float64(r.Systems[s].violations()) }, inP3},
	{"P3", "most requests arriving in any 60 s", "≤ 10", unitRequests, atMost(upstreamRate), allSystems,
		func(r *runFigures, s string) float64 { return float64(r.Systems[s].MaxPerMinute) }, inP3},
	{"P4", "storm: last level-0 start delivered" + measuredLabel, "≤ 3 slots", unitSlots, atMost(3), allSystems, lat(level0, false, last), inStorm},
	{"P4", "storm: last level-0 start delivered" + realLabel, "≤ 3 slots", unitSlots, atMost(3), allSystems, lat(level0, true, last), inStorm},
	{"P4", "storm: level-0 starts delivered, p50" + realLabel, "", unitSlots, nil, allSystems, lat(level0, true, p50), inStorm},
	{"P4", "storm: last of all starts delivered" + realLabel, "", unitSlots, nil, allSystems, lat(stormAll, true, last), inStorm},
	{"P5", "pipeline throughput, store + route + JetStream", "≥ 20,000 events/s", unitRate, atLeast(20000), relayOnly,
		func(r *runFigures, _ string) float64 { return r.Pipeline.EventsPerSec }, inPipeline},
	{"P5", "store alone (Apply, beside delivery)", "", unitRate, nil, relayOnly,
		func(r *runFigures, _ string) float64 { return r.Pipeline.ApplyPerSec }, inPipeline},
	{"P5", webhookWhat, "", unitRate, nil, relayOnly,
		func(r *runFigures, _ string) float64 { return r.Webhook.EventsPerSec }, inWebhook},
	{"P6", "resident memory, 100,000 tracked alarms (VmRSS after GC)", "≤ 48 MiB", unitMiB, atMost(48), relayOnly,
		func(r *runFigures, _ string) float64 { return float64(r.Memory.RSS) / mib }, inMemory},
	{"P6", "growth over the process at start (VmRSS)", "", unitMiB, nil, relayOnly,
		func(r *runFigures, _ string) float64 {
			return (float64(r.Memory.RSS) - float64(r.Memory.BaseRSS)) / mib
		}, inMemory},
	{"P6", "of which anonymous (not file-backed)", "", unitMiB, nil, relayOnly,
		func(r *runFigures, _ string) float64 { return float64(r.Memory.RSSAnon) / mib }, inMemory},
	{"P6", "of which the executable's pages (code and read-only data)", "", unitMiB, nil, relayOnly,
		func(r *runFigures, _ string) float64 { return float64(r.Memory.RSSBinary) / mib }, inMemory},
	{"P6", "of which the bbolt file's mapped pages", "", unitMiB, nil, relayOnly,
		func(r *runFigures, _ string) float64 { return float64(r.Memory.RSSStore) / mib }, inMemory},
	{"P6", "Go heap in use", "", unitMiB, nil, relayOnly,
		func(r *runFigures, _ string) float64 { return float64(r.Memory.HeapInuse) / mib }, inMemory},
	{"P6", "peak resident memory while reading them (VmHWM)", "≤ 64 MiB", unitMiB, atMost(64), relayOnly,
		func(r *runFigures, _ string) float64 { return float64(r.Memory.PeakRSS) / mib }, inMemory},
	{"P8", "events sent for alarms that ended before the first run", "0", unitCount, atMost(0), allSystems,
		func(r *runFigures, s string) float64 { return float64(r.Systems[s].HistoryEvents) }, inHistory},
}

// row is one line of the results: the median over the runs of each
// system's figure.
type row struct {
	ID     string         `json:"id"`
	What   string         `json:"what"`
	Target string         `json:"target,omitempty"`
	Unit   unit           `json:"unit"`
	Values map[string]num `json:"values"`
	// Met is "met" or "NOT MET" for the relay's figure against the
	// target, empty for rows that give context, "not run" when no phase
	// that measures it ran (its values are then null).
	Met string `json:"met,omitempty"`
	// NotRun says no phase that measures the row ran.
	NotRun bool `json:"not_run,omitempty"`
}

// machine describes where the figures were measured.
type machine struct {
	CPU   string `json:"cpu"`
	Cores int    `json:"cores"`
	Go    string `json:"go"`
	OS    string `json:"os"`
}

// report is everything results.md and results.json say.
type report struct {
	Date    string  `json:"date"`
	Command string  `json:"command"`
	Machine machine `json:"machine"`
	Config  config  `json:"config"`
	Runs    int     `json:"runs"`
	Rows    []row   `json:"rows"`
	// Upstream are the relay's figures against skewed and hostile
	// upstreams, medians over the runs.
	Upstream []upstreamRow `json:"upstream"`
	// Frontier are the systems' figures by request rate and upstream,
	// when the frontier phase ran.
	Frontier []frontierRow `json:"frontier,omitempty"`
	// Accounts are the accounts phase's figures (P12), when it ran.
	Accounts *accountsReport `json:"accounts,omitempty"`
	// Alertmanager is the reference beside the webhook figure, nil when
	// the webhook phase did not run.
	Alertmanager *amReference `json:"alertmanager,omitempty"`
	Notes        []string     `json:"notes"`
	PerRun       []runSummary `json:"per_run"`
	// cdfs are the start-latency samples of every run, per system, for the
	// plot: measured and real-rate estimates.
	cdfs, realCDFs map[string][]float64
}

// runSummary is one run's figures in results.json.
type runSummary struct {
	ElapsedSec float64                   `json:"elapsed_s"`
	Systems    map[string]*systemFigures `json:"systems"`
	Pipeline   pipelineResult            `json:"pipeline"`
	Webhook    pipelineResult            `json:"webhook"`
	// Alertmanager is the same work as Webhook through Alertmanager.
	Alertmanager *amResult       `json:"alertmanager,omitempty"`
	Memory       memphase.Result `json:"memory"`
	// SlotUse counts the relay's answered requests by query in the churn
	// phase; PollCostMs is the median real cost of one current-list read.
	SlotUse    map[string]int `json:"relay_churn_requests_by_query"`
	PollCostMs float64        `json:"current_poll_real_ms"`
	// Upstream are the relay's figures against each upstream variant.
	Upstream map[string]*upstreamFigures `json:"upstream"`
	// Tenants and Takeover are the sizing figures (tenants and takeover
	// phases).
	Tenants  *tenantsResult   `json:"tenants,omitempty"`
	Takeover []takeoverResult `json:"takeover,omitempty"`
	// Frontier holds the frontier phase's points.
	Frontier []frontierPoint `json:"frontier,omitempty"`
	// Accounts holds the accounts phase's points (P12).
	Accounts []accountsPoint `json:"accounts,omitempty"`
}

// MarshalJSON writes a system's figures with JSON names.
func (f *systemFigures) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Start         latencies      `json:"p1_start_latency_slots"`
		End           latencies      `json:"p2_end_latency_slots"`
		Requests      map[string]int `json:"requests_by_phase"`
		Violations    map[string]int `json:"p3_violations_by_phase"`
		MaxPerMinute  int            `json:"p3_max_requests_in_60s"`
		StormLevel0   latencies      `json:"p4_storm_level0_delivered_slots"`
		StormAll      latencies      `json:"p4_storm_all_delivered_slots"`
		HistoryEvents int            `json:"p8_history_events"`
	}{f.Start, f.End, f.Requests, f.Violations, f.MaxPerMinute, f.StormLevel0, f.StormAll, f.HistoryEvents})
}

// buildReport takes the median of every figure over runs and checks the
// relay's against the targets.
func buildReport(cfg config, runs []runFigures, command string, now time.Time) report {
	rep := report{
		Date:     now.UTC().Format(time.DateOnly),
		Command:  command,
		Machine:  thisMachine(),
		Config:   cfg,
		Runs:     len(runs),
		cdfs:     map[string][]float64{},
		realCDFs: map[string][]float64{},
	}
	for i := range runs {
		r := &runs[i]
		rep.PerRun = append(rep.PerRun, runSummary{
			ElapsedSec: r.Elapsed.Seconds(), Systems: r.Systems, Pipeline: r.Pipeline, Webhook: r.Webhook, Alertmanager: r.Alertmanager, Memory: r.Memory,
			SlotUse: r.SlotUse, PollCostMs: float64(r.PollCost.Microseconds()) / 1000, Upstream: r.Upstream,
			Tenants: r.Tenants, Takeover: r.Takeover, Frontier: r.Frontier, Accounts: r.Accounts,
		})
		for _, sys := range systemNames {
			rep.cdfs[sys] = append(rep.cdfs[sys], r.Systems[sys].Start.Measured.sorted...)
			rep.realCDFs[sys] = append(rep.realCDFs[sys], r.Systems[sys].Start.RealRate.sorted...)
		}
	}
	for _, m := range append(slices.Clone(metrics), sizingMetrics(cfg)...) {
		rw := row{ID: m.id, What: m.what, Target: m.target, Unit: m.unit, Values: map[string]num{}}
		if !slices.ContainsFunc(m.phases, cfg.runs) {
			rw.Met, rw.NotRun = notRun, true
			for _, sys := range m.systems {
				rw.Values[sys] = num(math.NaN())
			}
			rep.Rows = append(rep.Rows, rw)
			continue
		}
		for _, sys := range m.systems {
			vs := make([]float64, len(runs))
			for i := range runs {
				vs[i] = m.value(&runs[i], sys)
			}
			rw.Values[sys] = num(median(vs))
		}
		if m.goal != nil {
			rw.Met = "NOT MET"
			if m.goal.met(float64(rw.Values[sysRelay])) {
				rw.Met = "met"
			}
		}
		rep.Rows = append(rep.Rows, rw)
	}
	p7 := row{ID: "P7", What: "naive and eager baselines measured in the same run, beside P1 to P4", Target: "reported", Unit: unitCount, Values: map[string]num{},
		Met: notRun, NotRun: true}
	for _, rw := range rep.Rows {
		if rw.ID < "P1" || rw.ID > "P4" || rw.NotRun {
			continue
		}
		if p7.NotRun {
			p7.Met, p7.NotRun = "met", false
		}
		for _, sys := range []string{sysNaive, sysEager} {
			if v, ok := rw.Values[sys]; !ok || math.IsNaN(float64(v)) {
				p7.Met = "NOT MET"
			}
		}
	}
	if p7.NotRun {
		for _, sys := range systemNames {
			p7.Values[sys] = num(math.NaN())
		}
	}
	rep.Rows = insertBefore(rep.Rows, "P8", p7)
	if cfg.runs(phaseUpstream) {
		rep.Upstream = upstreamRows(runs)
	}
	if cfg.runs(phaseWebhook) {
		rep.Alertmanager = alertmanagerReference(runs)
	}
	if cfg.runs(phaseFrontier) {
		rep.Frontier = frontierRows(cfg, runs)
	}
	if cfg.runs(phaseAccounts) {
		rep.Accounts = buildAccountsReport(cfg, runs)
	}
	return rep
}

// upstreamRow is the relay against one upstream variant: medians over the
// runs, latencies as real-rate estimates in slots.
type upstreamRow struct {
	Upstream       string `json:"upstream"`
	StartP50       num    `json:"p1_start_p50_slots"`
	StartP99       num    `json:"p1_start_p99_slots"`
	EndP50         num    `json:"p2_end_p50_slots"`
	EndP99         num    `json:"p2_end_p99_slots"`
	StartsMissing  num    `json:"starts_never_detected"`
	EndsMissing    num    `json:"ends_never_detected"`
	Violations     num    `json:"p3_violations"`
	ReconcileShare num    `json:"reconcile_share"`
	// StartVsClean is the median over the runs of this variant's start p50
	// over the clean upstream's in the same run.
	StartVsClean num `json:"p1_start_p50_vs_clean"`
}

func upstreamRows(runs []runFigures) []upstreamRow {
	var out []upstreamRow
	for _, v := range upstreamVariants {
		pick := func(f func(u, clean *upstreamFigures) float64) num {
			var vs []float64
			for i := range runs {
				u, clean := runs[i].Upstream[v.name], runs[i].Upstream[upstreamVariants[0].name]
				if u != nil && clean != nil {
					vs = append(vs, f(u, clean))
				}
			}
			if len(vs) == 0 {
				return num(math.NaN())
			}
			return num(median(vs))
		}
		out = append(out, upstreamRow{
			Upstream:       v.name,
			StartP50:       pick(func(u, _ *upstreamFigures) float64 { return u.Start.RealRate.P50 }),
			StartP99:       pick(func(u, _ *upstreamFigures) float64 { return u.Start.RealRate.P99 }),
			EndP50:         pick(func(u, _ *upstreamFigures) float64 { return u.End.RealRate.P50 }),
			EndP99:         pick(func(u, _ *upstreamFigures) float64 { return u.End.RealRate.P99 }),
			StartsMissing:  pick(func(u, _ *upstreamFigures) float64 { return float64(u.Start.Measured.Missing) }),
			EndsMissing:    pick(func(u, _ *upstreamFigures) float64 { return float64(u.End.Measured.Missing) }),
			Violations:     pick(func(u, _ *upstreamFigures) float64 { return float64(u.Violations) }),
			ReconcileShare: pick(func(u, _ *upstreamFigures) float64 { return u.ReconcileShare }),
			StartVsClean: pick(func(u, clean *upstreamFigures) float64 {
				return u.Start.RealRate.P50 / clean.Start.RealRate.P50
			}),
		})
	}
	return out
}

// insertBefore inserts r before the first row with id, or at the end.
func insertBefore(rows []row, id string, r row) []row {
	for i := range rows {
		if rows[i].ID == id {
			return append(rows[:i:i], append([]row{r}, rows[i:]...)...)
		}
	}
	return append(rows, r)
}

// formatValue writes one figure of a row for the Markdown table.
func formatValue(u unit, v num) string {
	f := float64(v)
	switch {
	case math.IsNaN(f):
		return "–"
	case math.IsInf(f, 1):
		return "never"
	}
	switch u {
	case unitSlots:
		return fmt.Sprintf("%.2f slots (%.1f s)", f, f*slot.Seconds())
	case unitRate:
		return groupThousands(int64(math.Round(f))) + " events/s"
	case unitMiB:
		return fmt.Sprintf("%.1f MiB", f)
	case unitKiB:
		return fmt.Sprintf("%.0f KiB", f)
	case unitSeconds:
		return fmt.Sprintf("%.1f s", f)
	case unitCPU:
		return fmt.Sprintf("%.2f CPU s", f)
	}
	return groupThousands(int64(math.Round(f)))
}

// groupThousands writes n with commas between groups of three digits.
func groupThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// writeMarkdown writes the report as a Markdown section.
func writeMarkdown(w io.Writer, rep report) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "## relay performance (%s)\n\n", rep.Date)
	fmt.Fprintf(bw, "Measured %s on %d × %s (%s, %s), median of %d run(s), with `%s`.\n\n",
		rep.Date, rep.Machine.Cores, rep.Machine.CPU, rep.Machine.OS, rep.Machine.Go, rep.Runs, rep.Command)
	fmt.Fprintf(bw, "A slot is one upstream request at the real rate of %d per minute: 1 slot = %s. "+
		"The relay is checked against the targets of docs/design.md §12; the baselines are measured in the same run for comparison.\n\n",
		upstreamRate, slot)
	bw.WriteString("| id | figure | target | relay | naive | eager | relay |\n")
	bw.WriteString("|---|---|---|---|---|---|---|\n")
	for _, rw := range rep.Rows {
		cells := []string{rw.ID, rw.What, orDash(rw.Target)}
		for _, sys := range systemNames {
			v, ok := rw.Values[sys]
			switch {
			case rw.NotRun && ok:
				cells = append(cells, notRun)
			case rw.ID == "P7" && sys != sysRelay && !rw.NotRun:
				cells = append(cells, "reported")
			case !ok:
				cells = append(cells, "–")
			default:
				cells = append(cells, formatValue(rw.Unit, v))
			}
		}
		met := rw.Met
		if met == "NOT MET" {
			met = "**NOT MET**"
		}
		cells = append(cells, orDash(met))
		for i := range cells {
			cells[i] = strings.ReplaceAll(cells[i], "|", `\|`)
		}
		fmt.Fprintf(bw, "| %s |\n", strings.Join(cells, " | "))
	}
	if len(rep.Upstream) > 0 {
		bw.WriteString("\nThe relay against skewed and hostile upstreams, with the same churn (real-rate estimates; " +
			"hostile: a tenth of the devices stamping their own clocks, 2 min behind or UTC+8 as UTC, a fifth uploading 3 min late, " +
			"pages capped at 100 rows, deviceSnLists of at most 5):\n\n")
		bw.WriteString("| upstream | P1 start p50 | P1 p50 vs clean | P1 start p99 | P2 end p50 | P2 end p99 | starts / ends never detected | P3 violations | slots on reconciliation |\n")
		bw.WriteString("|---|---|---|---|---|---|---|---|---|\n")
		for _, u := range rep.Upstream {
			fmt.Fprintf(bw, "| %s | %s | %.2f× | %s | %s | %s | %s / %s | %s | %.1f%% |\n", u.Upstream,
				formatValue(unitSlots, u.StartP50), float64(u.StartVsClean), formatValue(unitSlots, u.StartP99),
				formatValue(unitSlots, u.EndP50), formatValue(unitSlots, u.EndP99),
				formatValue(unitCount, u.StartsMissing), formatValue(unitCount, u.EndsMissing),
				formatValue(unitCount, u.Violations), 100*float64(u.ReconcileShare))
		}
	}
	if len(rep.Frontier) > 0 {
		writeFrontierTable(bw, rep)
	}
	if rep.Accounts != nil {
		writeAccountsTable(bw, rep)
	}
	if am := rep.Alertmanager; am != nil {
		writeAlertmanager(bw, am)
	}
	if len(rep.Notes) > 0 {
		bw.WriteString("\n")
		for _, n := range rep.Notes {
			fmt.Fprintf(bw, "- %s\n", n)
		}
	}
	return bw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// writeJSON writes the report as indented JSON.
func writeJSON(w io.Writer, rep report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// thisMachine describes the machine the bench runs on.
func thisMachine() machine {
	m := machine{CPU: "unknown CPU", Cores: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			m.CPU = strings.TrimSpace(v)
			break
		}
	}
	return m
}
