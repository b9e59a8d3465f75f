package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/relay-energy/relay/internal/svgplot"
)

// series is one curve of the plot.
type series struct {
	name  string
	color string
	// dashed draws a thin dashed curve, left out of the legend.
	dashed bool
	sorted []float64 // ascending samples, in slots; +Inf last
}

// Plot geometry, in SVG user units.
const (
	plotW, plotH           = 760, 440
	marginL, marginR       = 64, 24
	marginT, marginB       = 48, 56
	innerW                 = plotW - marginL - marginR
	innerH                 = plotH - marginT - marginB
	maxPlotSlots           = 12.0
	seriesStroke           = 2.2
	relayColor, naiveColor = "#1f6feb", "#d1495b"
	eagerColor             = "#2a9d8f"
)

// writeCDF writes an SVG plot of the empirical distributions of the start
// detection latency (P1) of every series, in slots, with the relay's p50 and
// p99 targets as grey dashed lines; note explains the dashed series. The x
// axis ends at the largest finite latency, rounded up, and at most at
// maxPlotSlots (the naive baseline's poll interval is 10 slots); a curve
// that ends below 1 at the right edge has samples beyond the axis or never
// detected.
func writeCDF(w io.Writer, ss []series, note string) error {
	xMax := 1.0
	for _, s := range ss {
		for _, v := range slices.Backward(s.sorted) {
			if !math.IsInf(v, 1) {
				xMax = max(xMax, v)
				break
			}
		}
	}
	xMax = min(math.Ceil(xMax), maxPlotSlots)
	step := 1.0
	for xMax/step > 12 {
		step *= 2
	}
	xMax = math.Ceil(xMax/step) * step
	x := func(v float64) float64 { return marginL + min(v, xMax)/xMax*innerW }
	y := func(f float64) float64 { return marginT + (1-f)*innerH }

	p := svgplot.New(w, plotW, plotH, marginL, marginR, marginT, marginB)
	p.Title("Start detection latency (P1), cumulative distribution")
	for v := 0.0; v <= xMax+1e-9; v += step {
		p.VGrid(x(v), fmt.Sprintf("%g", v))
	}
	for f := 0.0; f <= 1.0001; f += 0.25 {
		p.HGrid(y(f), fmt.Sprintf("%g", f))
	}
	p.Frame()
	p.XLabel(fmt.Sprintf("detection − occurrence, in slots (1 slot = %s at %d requests/min)", slot, upstreamRate))
	p.YLabel("fraction of alarm starts")
	// Targets.
	for _, t := range []struct {
		at    float64
		label string
	}{{0.6, "p50 target"}, {1.5, "p99 target"}} {
		if t.at > xMax {
			continue
		}
		p.Line(x(t.at), marginT, x(t.at), marginT+innerH, svgplot.GuideColor, `stroke-dasharray="`+svgplot.GuideDash+`"`)
		p.Text(x(t.at)+3, marginT+12, t.label, `font-size="10"`, `fill="`+svgplot.GuideColor+`"`)
	}
	// Curves, as steps.
	legend := 0
	for _, s := range ss {
		if !s.dashed {
			legend++
		}
	}
	row := 0
	for _, s := range ss {
		if pts := cdf(s.sorted); len(pts) > 0 {
			style := []string{fmt.Sprintf(`stroke-width="%g"`, seriesStroke)}
			if s.dashed {
				style = []string{`stroke-width="1.2"`, `stroke-dasharray="4,3"`, `opacity="0.8"`}
			}
			line := []svgplot.Point{{X: x(0), Y: y(0)}}
			prev := 0.0
			for _, pt := range pts {
				line = append(line, svgplot.Point{X: x(pt.X), Y: y(prev)}, svgplot.Point{X: x(pt.X), Y: y(pt.F)})
				prev = pt.F
			}
			line = append(line, svgplot.Point{X: x(xMax), Y: y(prev)})
			p.Polyline(line, s.color, style...)
		}
		if s.dashed {
			continue
		}
		ly := float64(marginT + innerH - 16*(legend-row) - 24)
		row++
		p.Line(marginL+innerW-250, ly, marginL+innerW-226, ly, s.color, `stroke-width="3"`)
		p.Text(marginL+innerW-220, ly+4, s.label())
	}
	if note != "" {
		p.Text(marginL+innerW-8, marginT+innerH-10, note, `font-size="10"`, `text-anchor="end"`)
	}
	return p.Close()
}

// label names the series with its median and sample count, for the legend.
func (s series) label() string {
	p50 := percentile(s.sorted, 50)
	if math.IsNaN(p50) {
		return s.name + " (no samples)"
	}
	if math.IsInf(p50, 1) {
		return fmt.Sprintf("%s: p50 never, n=%d", s.name, len(s.sorted))
	}
	return fmt.Sprintf("%s: p50 %.2f slots, n=%d", s.name, p50, len(s.sorted))
}

// plotSeries returns the report's start-latency samples as plot series:
// the real-rate estimates solid, the accelerated measurements dashed.
func plotSeries(rep report) []series {
	colors := map[string]string{sysRelay: relayColor, sysNaive: naiveColor, sysEager: eagerColor}
	var ss []series
	for _, dashed := range []bool{true, false} {
		for _, sys := range systemNames {
			samples := rep.realCDFs[sys]
			if dashed {
				samples = rep.cdfs[sys]
			}
			sorted := slices.Clone(samples)
			slices.Sort(sorted)
			ss = append(ss, series{name: sys, color: colors[sys], dashed: dashed, sorted: sorted})
		}
	}
	return ss
}

// plotNote explains the plot's two kinds of curve.
func plotNote(rep report) string {
	return fmt.Sprintf("solid: real-rate estimate; dashed: measured at %g×; the samples of %d run(s) pooled", rep.Config.Speed, rep.Runs)
}

// Frontier chart geometry, in SVG user units: four panels in two rows.
const (
	frontierW, frontierH  = 960, 720
	frontierPanelW        = 390
	frontierPanelH        = 210
	frontierLeft0         = 72
	frontierLeft1         = 546
	frontierTop0          = 96
	frontierTop1          = 380
	frontierXPad          = 28
	frontierLimitSamples  = 33
	frontierMarkerHalf    = 3.5
	frontierNoteTop       = 636
	frontierNoteLineSpace = 14
)

// frontierColors are the systems' colours, as in the CDF plot.
var frontierColors = map[string]string{sysRelay: relayColor, sysNaive: naiveColor, sysEager: eagerColor}

// writeFrontier writes c as an SVG chart: one panel per figure of
// frontierPanels, requests a minute across (a log scale: each rate doubles
// the one before), seconds up from 0, one line per system and the physical
// limit dashed. A figure never reached is written "never" at the top of its
// panel; one not measured is left out. Each line is a polyline of class
// frontier-<system> or frontier-limit with data-panel naming its panel.
func writeFrontier(w io.Writer, c frontierChart) error {
	title := fmt.Sprintf("Detection latency by request rate, %s upstream", c.upstream)
	p := svgplot.NewDescribed(w, frontierW, frontierH, frontierLeft0, frontierW-frontierLeft0-frontierPanelW, frontierTop0,
		frontierH-frontierTop0-frontierPanelH, title, frontierDesc(c))
	p.Title(title)
	// Legend.
	lx := float64(frontierLeft0)
	for _, sys := range systemNames {
		p.Line(lx, 52, lx+24, 52, frontierColors[sys], `stroke-width="3"`)
		p.Text(lx+30, 56, sys)
		lx += 110
	}
	p.Line(lx, 52, lx+24, 52, svgplot.GuideColor, `stroke-width="2"`, `stroke-dasharray="`+svgplot.GuideDash+`"`)
	p.Text(lx+30, 56, "physical limit: p/100 × 60 s ÷ rate (see below)")
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range c.rates {
		lo, hi = min(lo, math.Log2(float64(r))), max(hi, math.Log2(float64(r)))
	}
	for k, panel := range frontierPanels {
		p.Left, p.Top = frontierLeft0, frontierTop0
		if k%2 == 1 {
			p.Left = frontierLeft1
		}
		if k >= 2 {
			p.Top = frontierTop1
		}
		p.Right, p.Bottom = frontierW-p.Left-frontierPanelW, frontierH-p.Top-frontierPanelH
		writeFrontierPanel(p, c, k, panel.id, panel.title, panel.p, lo, hi)
	}
	p.Left, p.Right, p.Top, p.Bottom = frontierLeft0, frontierW-frontierLeft0-frontierPanelW, frontierTop0, frontierH-frontierTop0-frontierPanelH
	p.Text(frontierW/2, float64(frontierNoteTop-20), "requests a minute (log scale)", `text-anchor="middle"`)
	for i, n := range c.notes {
		p.Text(frontierLeft0, float64(frontierNoteTop+i*frontierNoteLineSpace), n, `font-size="10"`)
	}
	return p.Close()
}

// writeFrontierPanel draws panel k of c in p's plotting area; the x axis
// runs from log2 lo to log2 hi of the rates.
func writeFrontierPanel(p *svgplot.Plot, c frontierChart, k int, id, title string, pct float64, lo, hi float64) {
	left, top := float64(p.Left), float64(p.Top)
	iw, ih := float64(p.InnerW()), float64(p.InnerH())
	x := func(rate float64) float64 {
		if hi == lo {
			return left + iw/2
		}
		return left + frontierXPad + (math.Log2(rate)-lo)/(hi-lo)*(iw-2*frontierXPad)
	}
	yMax := 0.0
	for _, r := range c.rates {
		yMax = max(yMax, physicalLimit(pct, r))
	}
	for _, sys := range systemNames {
		for _, v := range c.values[sys][k] {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				yMax = max(yMax, v)
			}
		}
	}
	step := niceStep(yMax * 1.1)
	yMax = math.Ceil(yMax*1.1/step) * step
	y := func(v float64) float64 { return top + (1-v/yMax)*ih }

	p.Text(left, top-10, title, `font-weight="600"`)
	for _, r := range c.rates {
		p.VGrid(x(float64(r)), fmt.Sprintf("%d", r))
	}
	for v := 0.0; v <= yMax+step/2; v += step {
		p.HGrid(y(v), fmt.Sprintf("%g", v))
	}
	p.Frame()
	p.Text(left-40, top+ih/2, "seconds", `text-anchor="middle"`, fmt.Sprintf(`transform="rotate(-90 %.1f %.1f)"`, left-40, top+ih/2))
	// The limit, sampled evenly along the axis.
	if len(c.rates) > 0 {
		var line []svgplot.Point
		for i := range frontierLimitSamples {
			r := math.Exp2(lo + (hi-lo)*float64(i)/float64(frontierLimitSamples-1))
			line = append(line, svgplot.Point{X: x(r), Y: y(pct / 100 * 60 / r)})
		}
		p.Polyline(line, svgplot.GuideColor, `stroke-width="1.6"`, `stroke-dasharray="`+svgplot.GuideDash+`"`,
			`class="frontier-limit"`, `data-panel="`+id+`"`)
	}
	for _, sys := range systemNames {
		color := frontierColors[sys]
		var line []svgplot.Point
		for i, v := range c.values[sys][k] {
			rx := x(float64(c.rates[i]))
			switch {
			case math.IsNaN(v):
				continue
			case math.IsInf(v, 1):
				p.Text(rx, top+12+float64(12*slices.Index(systemNames, sys)), sys+": never", `font-size="10"`, `text-anchor="middle"`, `fill="`+color+`"`)
				continue
			}
			line = append(line, svgplot.Point{X: rx, Y: y(v)})
			p.Rect(rx-frontierMarkerHalf, y(v)-frontierMarkerHalf, 2*frontierMarkerHalf, 2*frontierMarkerHalf, color)
		}
		if len(line) > 0 {
			p.Polyline(line, color, fmt.Sprintf(`stroke-width="%g"`, seriesStroke), `class="frontier-`+sys+`"`, `data-panel="`+id+`"`)
		}
	}
}

// niceStep returns a grid step of 1, 2 or 5 times a power of ten that cuts
// 0 to top into at most six intervals.
func niceStep(top float64) float64 {
	if !(top > 0) {
		return 1
	}
	for mag := math.Pow(10, math.Floor(math.Log10(top/6))); ; mag *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if top/(m*mag) <= 6 {
				return m * mag
			}
		}
	}
}

// frontierDesc describes c's figures in words, for assistive technology.
func frontierDesc(c frontierChart) string {
	rates := make([]string, len(c.rates))
	for i, r := range c.rates {
		rates[i] = fmt.Sprintf("%d", r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Detection latency in seconds of relay, naive and eager against the %s upstream at %s requests a minute.", c.upstream, strings.Join(rates, ", "))
	for k, panel := range frontierPanels {
		fmt.Fprintf(&b, " %s:", panel.title)
		for _, sys := range systemNames {
			vs := make([]string, len(c.rates))
			for i, v := range c.values[sys][k] {
				vs[i] = formatSeconds(v)
			}
			fmt.Fprintf(&b, " %s %s;", sys, strings.Join(vs, ", "))
		}
		ls := make([]string, len(c.rates))
		for i, r := range c.rates {
			ls[i] = formatSeconds(physicalLimit(panel.p, r))
		}
		fmt.Fprintf(&b, " physical limit %s.", strings.Join(ls, ", "))
	}
	return b.String()
}

// formatSeconds writes a latency in seconds: "3.2 s", "never" or "–".
func formatSeconds(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(v, 1):
		return "never"
	}
	return fmt.Sprintf("%.1f s", v)
}
