package main

import (
	"fmt"
	"io"
	"math"
	"slices"

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
