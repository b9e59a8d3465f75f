package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// The frontier phase runs the churn phase's scenario for the relay and both
// baselines at several request rates, against the clean upstream and the
// hostile one, so that the figures show what each rate buys: the latency a
// system reaches with a budget, beside the physical limit of that budget.

// frontierFigures are one system's figures at one rate on one upstream:
// real-rate estimates in seconds (a slot is 60 s ÷ rate, so seconds compare
// across rates where slots do not).
type frontierFigures struct {
	StartP50 num `json:"p1_start_p50_s"`
	StartP99 num `json:"p1_start_p99_s"`
	EndP50   num `json:"p2_end_p50_s"`
	EndP99   num `json:"p2_end_p99_s"`
	// Starts and Ends count the alarms that started, or ended, in the
	// measured window; the Missing ones were never detected.
	Starts        int `json:"starts"`
	Ends          int `json:"ends"`
	StartsMissing int `json:"starts_never_detected"`
	EndsMissing   int `json:"ends_never_detected"`
	// Requests and Violations are what the system's simulator counted;
	// MaxPerMinute is the most requests that arrived in any 60 s.
	Requests     int `json:"requests"`
	Violations   int `json:"p3_violations"`
	MaxPerMinute int `json:"most_requests_in_60s"`
	// RealRateViolations are the Violations the simulator would still
	// count if the local delay between the client's budget and the
	// simulator's clock weighed what it weighs at the real rate (see
	// realRateViolations): the others are the accelerated clock's.
	RealRateViolations int `json:"p3_violations_real_rate"`
}

// frontierPoint is one churn of the frontier phase: every system at one
// rate against one upstream.
type frontierPoint struct {
	Upstream string `json:"upstream"`
	Rate     int    `json:"requests_per_minute"`
	// Speed is the clock of the point (see frontierSpeed).
	Speed   float64                     `json:"clock_speed"`
	Systems map[string]*frontierFigures `json:"systems"`
}

// frontierSpeed is the clock of the frontier at rate: the suite's, slowed
// at rates above the production one so that a slot never takes less real
// time than in the churn phase, and the systems' local work weighs no more
// on their latency than it does there.
func frontierSpeed(speed float64, rate int) float64 {
	return min(speed, speed*upstreamRate/float64(rate))
}

// inSeconds converts a latency in slots of the production rate (as
// churnLatencies returns them) to seconds.
func inSeconds(slots float64) float64 { return slots * slot.Seconds() }

// frontierVariant returns the upstream variant of the frontier phase named
// name.
func frontierVariant(name string) (upstreamVariant, int, error) {
	for i, v := range upstreamVariants {
		if v.name == name {
			return v, i, nil
		}
	}
	return upstreamVariant{}, 0, fmt.Errorf("frontier upstream %q unknown: want one of the upstream phase's variants", name)
}

// frontierPhase runs the churn for every system at each of FrontierRates
// against each of FrontierUpstreams, each point with the same alarms (the
// same seed, drawn in time, not in slots): ChurnSlots of the production
// rate (ChurnSlots × 6 s) are measured at every rate.
func (b *bench) frontierPhase(ctx context.Context, figs *runFigures) error {
	seed := b.cfg.Seed + 13
	devices := deviceSNs(sim.New(simOptions(seed, clock.Real())))
	for _, name := range b.cfg.FrontierUpstreams {
		v, i, err := frontierVariant(name)
		if err != nil {
			return err
		}
		for _, rate := range b.cfg.FrontierRates {
			began := time.Now()
			pt, err := b.frontierPoint(ctx, fmt.Sprintf("frontier-%d-%d", i, rate), seed, v.name, rate, v.hostile(devices))
			if err != nil {
				return fmt.Errorf("%s upstream at %d requests/min: %w", v.name, rate, err)
			}
			figs.Frontier = append(figs.Frontier, pt)
			line := fmt.Sprintf("    %s upstream, %d requests/min (clock %g×)", v.name, rate, pt.Speed)
			for _, sys := range systemNames {
				if f := pt.Systems[sys]; f.Violations > 0 {
					line += fmt.Sprintf(": %s RATE-LIMIT VIOLATIONS %d", sys, f.Violations)
				}
			}
			b.progress("%-47s %6.1fs", line, time.Since(began).Seconds())
		}
	}
	return nil
}

// frontierPoint runs one point of the frontier: every system at rate
// against a simulator of its own admitting rate requests a minute and
// misbehaving as hostile says.
func (b *bench) frontierPoint(ctx context.Context, name string, seed int64, upstream string, rate int, hostile sim.Hostile) (frontierPoint, error) {
	pc := pace{rate: rate, speed: frontierSpeed(b.cfg.Speed, rate)}
	// Late uploads are found by reconciliation, which the upstream phase
	// gives twice the lag to run.
	grace := graceSlots*pc.slot() + 2*hostile.IngestLag
	run, err := b.runChurn(ctx, churnSpec{
		name: name, seed: seed, salt: 0xf7, names: systemNames, pace: pc, hostile: hostile, churn: b.cfg.Churn,
		warm: warmSlots * pc.slot(), measure: time.Duration(b.cfg.ChurnSlots) * slot, grace: grace,
	})
	if err != nil {
		return frontierPoint{}, err
	}
	p := run.p
	err = p.stopSystems()
	pt := frontierPoint{Upstream: upstream, Rate: rate, Speed: pc.speed, Systems: map[string]*frontierFigures{}}
	for _, sys := range systemNames {
		start, end := run.latencies(sys)
		s := p.sims[sys]
		st := s.Stats()
		sec := func(v float64) num { return num(inSeconds(v)) }
		pt.Systems[sys] = &frontierFigures{
			StartP50: sec(start.RealRate.P50), StartP99: sec(start.RealRate.P99),
			EndP50: sec(end.RealRate.P50), EndP99: sec(end.RealRate.P99),
			Starts: start.RealRate.N, Ends: end.RealRate.N,
			StartsMissing: start.RealRate.Missing, EndsMissing: end.RealRate.Missing,
			Requests: st.Requests, Violations: st.Violations, MaxPerMinute: s.MaxArrivals(time.Minute),
			RealRateViolations: realRateViolations(s.Arrivals(), rate, time.Minute, pc.speed),
		}
	}
	return pt, errors.Join(err, p.close())
}

// frontierViolations returns an error naming every point of runs at which a
// system's simulator refused a request over the rate limit, nil when none
// did: the frontier's figures hold only at the rate each system kept to.
func frontierViolations(runs []runFigures) error {
	var bad []string
	for i, r := range runs {
		for _, pt := range r.Frontier {
			for _, sys := range systemNames {
				if f := pt.Systems[sys]; f != nil && f.Violations > 0 {
					bad = append(bad, fmt.Sprintf("run %d: %s at %d requests/min on the %s upstream: %d (%d at the real rate)",
						i+1, sys, pt.Rate, pt.Upstream, f.Violations, f.RealRateViolations))
				}
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("frontier: the simulators refused requests over the rate limit (%s); the figures are written but do not hold: "+
		"none at the real rate means the machine's load delayed requests by more than the client's 1 s margin on the accelerated clock: "+
		"rerun on a less loaded machine, or with a slower --speed", strings.Join(bad, "; "))
}

// frontierRow is one system at one rate on one upstream in the report:
// latencies are medians over the runs, in seconds; the counts are per run.
type frontierRow struct {
	Upstream string `json:"upstream"`
	Rate     int    `json:"requests_per_minute"`
	System   string `json:"system"`
	StartP50 num    `json:"p1_start_p50_s"`
	StartP99 num    `json:"p1_start_p99_s"`
	EndP50   num    `json:"p2_end_p50_s"`
	EndP99   num    `json:"p2_end_p99_s"`
	// StartsMissing, EndsMissing, Violations and RealRateViolations hold
	// one count per run.
	StartsMissing      []int `json:"starts_never_detected_per_run"`
	EndsMissing        []int `json:"ends_never_detected_per_run"`
	Violations         []int `json:"p3_violations_per_run"`
	RealRateViolations []int `json:"p3_violations_real_rate_per_run"`
	// MaxPerMinute is the most requests in any 60 s of any run.
	MaxPerMinute int `json:"most_requests_in_60s"`
}

// frontierRows gathers the frontier points of runs into rows, in the order
// of upstreams, rates and systemNames.
func frontierRows(cfg config, runs []runFigures) []frontierRow {
	var out []frontierRow
	for _, up := range cfg.FrontierUpstreams {
		for _, rate := range cfg.FrontierRates {
			for _, sys := range systemNames {
				rw := frontierRow{Upstream: up, Rate: rate, System: sys}
				var s50, s99, e50, e99 []float64
				for _, r := range runs {
					for _, pt := range r.Frontier {
						f := pt.Systems[sys]
						if pt.Upstream != up || pt.Rate != rate || f == nil {
							continue
						}
						s50, s99 = append(s50, float64(f.StartP50)), append(s99, float64(f.StartP99))
						e50, e99 = append(e50, float64(f.EndP50)), append(e99, float64(f.EndP99))
						rw.StartsMissing = append(rw.StartsMissing, f.StartsMissing)
						rw.EndsMissing = append(rw.EndsMissing, f.EndsMissing)
						rw.Violations = append(rw.Violations, f.Violations)
						rw.RealRateViolations = append(rw.RealRateViolations, f.RealRateViolations)
						rw.MaxPerMinute = max(rw.MaxPerMinute, f.MaxPerMinute)
					}
				}
				rw.StartP50, rw.StartP99 = num(median(s50)), num(median(s99))
				rw.EndP50, rw.EndP99 = num(median(e50)), num(median(e99))
				out = append(out, rw)
			}
		}
	}
	return out
}

// physicalLimit is the smallest p-th percentile (0 < p < 100) of detection
// latency, in seconds, that any system making rate requests a minute can
// reach: an event is seen at the earliest by the first request after it,
// and of events spread evenly in time at most a share w × rate ÷ 60 s is
// followed by a request within w, whatever the schedule; so the percentile
// is at least p/100 of a slot (0.5 slot for p50, 0.99 for p99), for starts
// and ends alike. Reaching it takes every request seeing every event.
func physicalLimit(p float64, rate int) float64 {
	return p / 100 * (time.Minute / time.Duration(rate)).Seconds()
}

// frontierUpstreamNote says how the limit relates to an upstream's figures.
func frontierUpstreamNote(upstream string) string {
	if upstream == "clean" {
		return ""
	}
	return "This upstream lists the alarms (and ends) of a fifth of the devices 3 min late: the limit drawn, a prompt upstream's, stays a lower bound."
}

// frontierFile is the name of the frontier chart of upstream.
func frontierFile(upstream string) string {
	return "frontier-" + strings.ReplaceAll(strings.ToLower(upstream), " ", "-") + ".svg"
}

// frontierPanels are the four figures of the frontier chart, in the order
// of frontierChart.values.
var frontierPanels = []struct {
	id, title string
	p         float64
}{
	{"p1-p50", "P1 start detection, p50", 50},
	{"p1-p99", "P1 start detection, p99", 99},
	{"p2-p50", "P2 end detection, p50", 50},
	{"p2-p99", "P2 end detection, p99", 99},
}

// frontierChart is what one frontier SVG shows.
type frontierChart struct {
	upstream string
	rates    []int
	// values[sys][panel][i] is sys's figure of frontierPanels[panel] at
	// rates[i], in seconds: NaN not measured, +Inf never.
	values map[string][4][]float64
	// notes are lines written under the panels.
	notes []string
}

// frontierCharts returns one chart per upstream of the report's frontier.
func frontierCharts(rep report) []frontierChart {
	var out []frontierChart
	for _, up := range rep.Config.FrontierUpstreams {
		c := frontierChart{upstream: up, rates: rep.Config.FrontierRates, values: map[string][4][]float64{}}
		for _, sys := range systemNames {
			var v [4][]float64
			for _, rate := range c.rates {
				fig := [4]float64{math.NaN(), math.NaN(), math.NaN(), math.NaN()}
				if i := slices.IndexFunc(rep.Frontier, func(r frontierRow) bool {
					return r.Upstream == up && r.Rate == rate && r.System == sys
				}); i >= 0 {
					r := rep.Frontier[i]
					fig = [4]float64{float64(r.StartP50), float64(r.StartP99), float64(r.EndP50), float64(r.EndP99)}
				}
				for k := range v {
					v[k] = append(v[k], fig[k])
				}
			}
			c.values[sys] = v
		}
		c.notes = []string{
			fmt.Sprintf("Real-rate estimates, median of %d run(s), in seconds: a slot (60 s ÷ rate) is 12 s at 5 requests/min and 3 s at 20,", rep.Runs),
			"so slots would hide what a budget buys. Dashed: the physical limit, p/100 of a slot (0.5 slot at p50, 0.99 at p99): an event is seen",
			"at the earliest by the next request, and r requests a minute follow at most a share w·r/60 s of evenly spread events within w,",
			"whatever the schedule. It holds for starts and ends alike; reaching it takes every request seeing every event.",
		}
		if n := frontierUpstreamNote(up); n != "" {
			c.notes = append(c.notes, n)
		}
		out = append(out, c)
	}
	return out
}

// writeFrontierTable writes the report's frontier as a Markdown table, the
// physical limit as a row of each rate.
func writeFrontierTable(bw *bufio.Writer, rep report) {
	fmt.Fprintf(bw, "\nThe frontier: each system at each request rate against the clean and the hostile upstream, the same alarms at every rate "+
		"(real-rate estimates, median of %d run(s); seconds, with slots of that rate, 60 s ÷ rate, in brackets). "+
		"The physical limit is p/100 of a slot (see docs/performance.md, Frontier). Counts are per run; "+
		"P3 violations are the simulators' count, with in brackets those left once local delay weighs what it does at the real rate.\n\n", rep.Runs)
	bw.WriteString("| upstream | requests/min | system | P1 start p50 | P1 start p99 | P2 end p50 | P2 end p99 | starts / ends never detected | P3 violations | most requests in 60 s |\n")
	bw.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	cell := func(v num, rate int) string {
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return formatSeconds(f)
		}
		return fmt.Sprintf("%.1f s (%.2f)", f, f/physicalLimit(100, rate))
	}
	for i, rw := range rep.Frontier {
		if i == 0 || rep.Frontier[i-1].Rate != rw.Rate || rep.Frontier[i-1].Upstream != rw.Upstream {
			l50, l99 := num(physicalLimit(50, rw.Rate)), num(physicalLimit(99, rw.Rate))
			fmt.Fprintf(bw, "| %s | %d | physical limit | %s | %s | %s | %s | – | – | %d |\n", rw.Upstream, rw.Rate,
				cell(l50, rw.Rate), cell(l99, rw.Rate), cell(l50, rw.Rate), cell(l99, rw.Rate), rw.Rate)
		}
		fmt.Fprintf(bw, "| %s | %d | %s | %s | %s | %s | %s | %s / %s | %s (%s) | %d |\n", rw.Upstream, rw.Rate, rw.System,
			cell(rw.StartP50, rw.Rate), cell(rw.StartP99, rw.Rate), cell(rw.EndP50, rw.Rate), cell(rw.EndP99, rw.Rate),
			ints(rw.StartsMissing), ints(rw.EndsMissing), ints(rw.Violations), ints(rw.RealRateViolations), rw.MaxPerMinute)
	}
}

// ints writes vs as a list: "0, 0, 1"; "–" when empty.
func ints(vs []int) string {
	if len(vs) == 0 {
		return "–"
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ", ")
}
