package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/relay-energy/relay/internal/svgplot"
)

// accountsRow is one system's class at one number of tenants in the report:
// latencies are medians over the runs, in seconds.
type accountsRow struct {
	Tenants   int    `json:"tenants"`
	System    string `json:"system"`
	Class     string `json:"class"`
	StartP50  num    `json:"start_p50_s"`
	StartMean num    `json:"start_mean_s"`
	StartP99  num    `json:"start_p99_s"`
	EndP50    num    `json:"end_p50_s"`
	EndMean   num    `json:"end_mean_s"`
	EndP99    num    `json:"end_p99_s"`
	// StartsMissing and EndsMissing hold one count per run.
	StartsMissing []int `json:"starts_never_detected_per_run"`
	EndsMissing   []int `json:"ends_never_detected_per_run"`
}

// accountsSummary is what P12 checks at one number of tenants: medians over
// the runs of each run's figures and ratios.
type accountsSummary struct {
	Tenants int `json:"tenants"`
	// Bound is the square-root rule's mean start latency (sqrtRuleBound).
	Bound num `json:"sqrt_rule_bound_mean_start_s"`
	// RelayVsFIFO and RelayVsBound are relay's mean start latency over
	// first come, first served's and over the bound; WorstP99Ratio is the
	// largest over the classes of relay's start p99 over first come, first
	// served's.
	RelayVsFIFO   num `json:"relay_vs_fifo_mean_start"`
	RelayVsBound  num `json:"relay_vs_bound_mean_start"`
	WorstP99Ratio num `json:"worst_class_start_p99_relay_vs_fifo"`
	// WorstClass is the class of WorstP99Ratio in the last run.
	WorstClass string `json:"worst_class"`
	// Violations and RealRateViolations hold one count per run and system.
	Violations         map[string][]int `json:"violations_per_run"`
	RealRateViolations map[string][]int `json:"violations_real_rate_per_run"`
	MaxPerMinute       int              `json:"most_requests_in_60s"`
}

// accountsReport is the accounts phase's part of the report.
type accountsReport struct {
	Rows    []accountsRow     `json:"rows"`
	Summary []accountsSummary `json:"summary"`
}

// The acceptance of P12, at acceptTenants tenants: relay's mean start
// latency at most acceptVsFIFO times first come, first served's and within
// acceptVsBound of the square-root bound, no class's p99 over acceptP99
// times first come, first served's, and no request refused at the real
// rate.
const (
	acceptTenants = 20
	acceptVsFIFO  = 0.6
	acceptVsBound = 0.15
	acceptP99     = 2.0
)

// buildAccountsReport gathers the accounts points of runs.
func buildAccountsReport(cfg config, runs []runFigures) *accountsReport {
	rep := &accountsReport{}
	points := func(n int) []accountsPoint {
		var out []accountsPoint
		for _, r := range runs {
			for _, pt := range r.Accounts {
				if pt.Tenants == n {
					out = append(out, pt)
				}
			}
		}
		return out
	}
	for _, n := range cfg.AccountsTenants {
		pts := points(n)
		for _, sys := range accountsSystems {
			for _, c := range accountsClasses {
				rw := accountsRow{Tenants: n, System: sys, Class: c}
				var f [6][]float64
				for _, pt := range pts {
					cf := pt.Systems[sys].Classes[c]
					if cf == nil {
						continue
					}
					for k, v := range []num{cf.StartP50, cf.StartMean, cf.StartP99, cf.EndP50, cf.EndMean, cf.EndP99} {
						f[k] = append(f[k], float64(v))
					}
					rw.StartsMissing = append(rw.StartsMissing, cf.StartsMissing)
					rw.EndsMissing = append(rw.EndsMissing, cf.EndsMissing)
				}
				if len(rw.StartsMissing) == 0 {
					continue
				}
				rw.StartP50, rw.StartMean, rw.StartP99 = num(median(f[0])), num(median(f[1])), num(median(f[2]))
				rw.EndP50, rw.EndMean, rw.EndP99 = num(median(f[3])), num(median(f[4])), num(median(f[5]))
				rep.Rows = append(rep.Rows, rw)
			}
		}
		s := accountsSummary{Tenants: n, Violations: map[string][]int{}, RealRateViolations: map[string][]int{}}
		var bound, vsFIFO, vsBound, worst []float64
		for _, pt := range pts {
			rl, fi := pt.Systems[accountsRelay], pt.Systems[accountsFIFO]
			bound = append(bound, float64(pt.Bound))
			vsFIFO = append(vsFIFO, float64(rl.Classes[classAll].StartMean/fi.Classes[classAll].StartMean))
			vsBound = append(vsBound, float64(rl.Classes[classAll].StartMean/pt.Bound))
			w := 0.0
			for _, c := range accountsClasses[1:] {
				if rc, fc := rl.Classes[c], fi.Classes[c]; rc != nil && fc != nil {
					if r := float64(rc.StartP99 / fc.StartP99); r > w || math.IsNaN(r) {
						w, s.WorstClass = r, c
					}
				}
			}
			worst = append(worst, w)
			for _, sys := range accountsSystems {
				f := pt.Systems[sys]
				s.Violations[sys] = append(s.Violations[sys], f.Violations)
				s.RealRateViolations[sys] = append(s.RealRateViolations[sys], f.RealRateViolations)
				s.MaxPerMinute = max(s.MaxPerMinute, f.MaxPerMinute)
			}
		}
		s.Bound, s.RelayVsFIFO, s.RelayVsBound, s.WorstP99Ratio = num(median(bound)), num(median(vsFIFO)), num(median(vsBound)), num(median(worst))
		rep.Summary = append(rep.Summary, s)
	}
	return rep
}

// acceptance returns P12's verdicts, one line each, at acceptTenants
// tenants; none when the phase did not run at that number.
func (a *accountsReport) acceptance() []string {
	i := slices.IndexFunc(a.Summary, func(s accountsSummary) bool { return s.Tenants == acceptTenants })
	if i < 0 {
		return nil
	}
	s := a.Summary[i]
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**NOT MET**"
	}
	realRate := 0
	for _, v := range s.RealRateViolations[accountsRelay] {
		realRate += v
	}
	return []string{
		fmt.Sprintf("relay's mean start latency ≤ %.1f× first come, first served's: %.2f× — %s", acceptVsFIFO, float64(s.RelayVsFIFO),
			verdict(float64(s.RelayVsFIFO) <= acceptVsFIFO)),
		fmt.Sprintf("within %.0f%% of the square-root rule's bound: %.2f× the bound — %s", 100*acceptVsBound, float64(s.RelayVsBound),
			verdict(float64(s.RelayVsBound) <= 1+acceptVsBound)),
		fmt.Sprintf("no class's start p99 worse than %g× first come, first served's: the worst is %.2f× (class %s) — %s", acceptP99,
			float64(s.WorstP99Ratio), s.WorstClass, verdict(float64(s.WorstP99Ratio) <= acceptP99)),
		fmt.Sprintf("rate-limit violations at the real rate: %s (relay), %s (first come, first served) — %s", ints(s.RealRateViolations[accountsRelay]),
			ints(s.RealRateViolations[accountsFIFO]), verdict(realRate == 0)),
	}
}

// writeAccountsTable writes P12 as Markdown: the acceptance at 20 tenants,
// then every system and class at every number of tenants.
func writeAccountsTable(bw *bufio.Writer, rep report) {
	a := rep.Accounts
	fmt.Fprintf(bw, "\nP12, tenants of one upstream host on one budget of %d requests/min: relay (the budget served by the tenants' learned rates) "+
		"and first come, first served (fifo), the same alarms (real-rate estimates, seconds, median of %d run(s)). "+
		"Tenant 1 has half the alarms, tenants 2-5 a tenth each, the others share the last tenth.\n\n", upstreamRate, rep.Runs)
	if lines := a.acceptance(); len(lines) > 0 {
		fmt.Fprintf(bw, "At %d tenants:\n\n", acceptTenants)
		for _, l := range lines {
			fmt.Fprintf(bw, "- %s\n", l)
		}
		bw.WriteString("\n")
	}
	bw.WriteString("| tenants | square-root bound, mean start | relay ÷ fifo, mean start | relay ÷ bound | worst class p99, relay ÷ fifo | violations relay / fifo (at the real rate) | most requests in 60 s |\n")
	bw.WriteString("|---|---|---|---|---|---|---|\n")
	for _, s := range a.Summary {
		fmt.Fprintf(bw, "| %d | %s | %.2f | %.2f | %.2f (%s) | %s / %s (%s / %s) | %d |\n", s.Tenants, formatSeconds(float64(s.Bound)),
			float64(s.RelayVsFIFO), float64(s.RelayVsBound), float64(s.WorstP99Ratio), s.WorstClass,
			ints(s.Violations[accountsRelay]), ints(s.Violations[accountsFIFO]),
			ints(s.RealRateViolations[accountsRelay]), ints(s.RealRateViolations[accountsFIFO]), s.MaxPerMinute)
	}
	bw.WriteString("\n| tenants | system | class | start p50 | start mean | start p99 | end p50 | end mean | end p99 | starts / ends never detected |\n")
	bw.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range a.Rows {
		fmt.Fprintf(bw, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |\n", r.Tenants, r.System, r.Class,
			formatSeconds(float64(r.StartP50)), formatSeconds(float64(r.StartMean)), formatSeconds(float64(r.StartP99)),
			formatSeconds(float64(r.EndP50)), formatSeconds(float64(r.EndMean)), formatSeconds(float64(r.EndP99)),
			ints(r.StartsMissing), ints(r.EndsMissing))
	}
}

// accountsFile is the name of P12's chart.
const accountsFile = "accounts.svg"

// Accounts chart geometry, in SVG user units: two panels side by side.
const (
	accountsW, accountsH = 960, 460
	accountsPanelW       = 390
	accountsPanelH       = 260
	accountsTop          = 96
	accountsXPad         = 28
	accountsNoteTop      = 420
)

var accountsColors = map[string]string{accountsRelay: relayColor, accountsFIFO: naiveColor}

// writeAccountsChart writes P12 as an SVG chart: the mean and the p99 of
// start latency of all alarms against the number of tenants (a log scale),
// both systems, and in the mean's panel the square-root rule's bound dashed.
func writeAccountsChart(w io.Writer, rep report) error {
	a := rep.Accounts
	ns := rep.Config.AccountsTenants
	title := "Start detection latency of N tenants on one budget of 10 requests a minute"
	value := func(n int, sys string, pick func(accountsRow) num) float64 {
		i := slices.IndexFunc(a.Rows, func(r accountsRow) bool { return r.Tenants == n && r.System == sys && r.Class == classAll })
		if i < 0 {
			return math.NaN()
		}
		return float64(pick(a.Rows[i]))
	}
	bound := func(n int) float64 {
		i := slices.IndexFunc(a.Summary, func(s accountsSummary) bool { return s.Tenants == n })
		if i < 0 {
			return math.NaN()
		}
		return float64(a.Summary[i].Bound)
	}
	var desc strings.Builder
	fmt.Fprintf(&desc, "%s, in seconds, at %s tenants.", title, ints(ns))
	for _, sys := range accountsSystems {
		for _, pick := range []struct {
			name string
			f    func(accountsRow) num
		}{{"mean", func(r accountsRow) num { return r.StartMean }}, {"p99", func(r accountsRow) num { return r.StartP99 }}} {
			vs := make([]string, len(ns))
			for i, n := range ns {
				vs[i] = formatSeconds(value(n, sys, pick.f))
			}
			fmt.Fprintf(&desc, " %s %s: %s.", sys, pick.name, strings.Join(vs, ", "))
		}
	}
	bs := make([]string, len(ns))
	for i, n := range ns {
		bs[i] = formatSeconds(bound(n))
	}
	fmt.Fprintf(&desc, " Square-root bound of the mean: %s.", strings.Join(bs, ", "))
	p := svgplot.NewDescribed(w, accountsW, accountsH, frontierLeft0, accountsW-frontierLeft0-accountsPanelW, accountsTop,
		accountsH-accountsTop-accountsPanelH, title, desc.String())
	p.Title(title)
	lx := float64(frontierLeft0)
	for _, sys := range accountsSystems {
		p.Line(lx, 52, lx+24, 52, accountsColors[sys], `stroke-width="3"`)
		name := sys
		if sys == accountsFIFO {
			name = "first come, first served"
		}
		p.Text(lx+30, 56, name)
		lx += 220
	}
	p.Line(lx, 52, lx+24, 52, svgplot.GuideColor, `stroke-width="2"`, `stroke-dasharray="`+svgplot.GuideDash+`"`)
	p.Text(lx+30, 56, "square-root rule's bound (mean)")
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, n := range ns {
		lo, hi = min(lo, math.Log2(float64(n))), max(hi, math.Log2(float64(n)))
	}
	panels := []struct {
		id, title string
		pick      func(accountsRow) num
		bound     bool
	}{
		{"mean", "mean start latency, all alarms", func(r accountsRow) num { return r.StartMean }, true},
		{"p99", "start latency p99, all alarms", func(r accountsRow) num { return r.StartP99 }, false},
	}
	for k, panel := range panels {
		p.Left = frontierLeft0
		if k == 1 {
			p.Left = frontierLeft1
		}
		p.Right = accountsW - p.Left - accountsPanelW
		left, top := float64(p.Left), float64(p.Top)
		iw, ih := float64(p.InnerW()), float64(p.InnerH())
		x := func(n int) float64 {
			if hi == lo {
				return left + iw/2
			}
			return left + accountsXPad + (math.Log2(float64(n))-lo)/(hi-lo)*(iw-2*accountsXPad)
		}
		yMax := 0.0
		for _, n := range ns {
			for _, sys := range accountsSystems {
				if v := value(n, sys, panel.pick); !math.IsNaN(v) && !math.IsInf(v, 0) {
					yMax = max(yMax, v)
				}
			}
			if b := bound(n); panel.bound && !math.IsNaN(b) {
				yMax = max(yMax, b)
			}
		}
		step := niceStep(yMax * 1.1)
		yMax = math.Ceil(yMax*1.1/step) * step
		y := func(v float64) float64 { return top + (1-v/yMax)*ih }
		p.Text(left, top-10, panel.title, `font-weight="600"`)
		for _, n := range ns {
			p.VGrid(x(n), fmt.Sprint(n))
		}
		for v := 0.0; v <= yMax+step/2; v += step {
			p.HGrid(y(v), fmt.Sprintf("%g", v))
		}
		p.Frame()
		p.Text(left-40, top+ih/2, "seconds", `text-anchor="middle"`, fmt.Sprintf(`transform="rotate(-90 %.1f %.1f)"`, left-40, top+ih/2))
		if panel.bound {
			var line []svgplot.Point
			for _, n := range ns {
				if b := bound(n); !math.IsNaN(b) {
					line = append(line, svgplot.Point{X: x(n), Y: y(b)})
				}
			}
			p.Polyline(line, svgplot.GuideColor, `stroke-width="1.6"`, `stroke-dasharray="`+svgplot.GuideDash+`"`, `class="accounts-bound"`)
		}
		for _, sys := range accountsSystems {
			var line []svgplot.Point
			for _, n := range ns {
				v := value(n, sys, panel.pick)
				switch {
				case math.IsNaN(v):
					continue
				case math.IsInf(v, 1):
					p.Text(x(n), top+12+float64(12*slices.Index(accountsSystems, sys)), sys+": never", `font-size="10"`, `text-anchor="middle"`,
						`fill="`+accountsColors[sys]+`"`)
					continue
				}
				line = append(line, svgplot.Point{X: x(n), Y: y(v)})
				p.Rect(x(n)-frontierMarkerHalf, y(v)-frontierMarkerHalf, 2*frontierMarkerHalf, 2*frontierMarkerHalf, accountsColors[sys])
			}
			if len(line) > 0 {
				p.Polyline(line, accountsColors[sys], fmt.Sprintf(`stroke-width="%g"`, seriesStroke), `class="accounts-`+sys+`"`, `data-panel="`+panel.id+`"`)
			}
		}
	}
	p.Left = frontierLeft0
	p.Text(accountsW/2, float64(accountsNoteTop-24), "tenants of one upstream host (log scale)", `text-anchor="middle"`)
	p.Text(frontierLeft0, accountsNoteTop, fmt.Sprintf("Real-rate estimates, median of %d run(s). The bound: (Σ √λᵢ)² / (2 Λ f), the true start rates λᵢ and relay's reads of the current alarms f a second.", rep.Runs),
		`font-size="10"`)
	return p.Close()
}
