package main

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
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
	plotW, plotH              = 760, 440
	marginL, marginR          = 64, 24
	marginT, marginB          = 48, 56
	innerW                    = plotW - marginL - marginR
	innerH                    = plotH - marginT - marginB
	maxPlotSlots              = 12.0
	seriesStroke, targetDash  = 2.2, "5,4"
	targetColor, gridColor    = "#9a9a9a", "#e4e4e4"
	fontFamily                = "system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"
	relayColor, naiveColor    = "#1f6feb", "#d1495b"
	eagerColor, axisTextColor = "#2a9d8f", "#333333"
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

	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s" font-size="12">`+"\n",
		plotW, plotH, plotW, plotH, fontFamily)
	fmt.Fprintf(bw, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", plotW, plotH)
	fmt.Fprintf(bw, `<text x="%d" y="24" font-size="15" font-weight="600" fill="%s">Start detection latency (P1), cumulative distribution</text>`+"\n",
		marginL, axisTextColor)
	// Grid and ticks.
	for v := 0.0; v <= xMax+1e-9; v += step {
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x(v), marginT, x(v), marginT+innerH, gridColor)
		fmt.Fprintf(bw, `<text x="%.1f" y="%d" text-anchor="middle" fill="%s">%g</text>`+"\n", x(v), marginT+innerH+18, axisTextColor, v)
	}
	for f := 0.0; f <= 1.0001; f += 0.25 {
		fmt.Fprintf(bw, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", marginL, y(f), marginL+innerW, y(f), gridColor)
		fmt.Fprintf(bw, `<text x="%d" y="%.1f" text-anchor="end" fill="%s">%g</text>`+"\n", marginL-8, y(f)+4, axisTextColor, f)
	}
	fmt.Fprintf(bw, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", marginL, marginT, innerW, innerH, axisTextColor)
	fmt.Fprintf(bw, `<text x="%d" y="%d" text-anchor="middle" fill="%s">detection − occurrence, in slots (1 slot = %s at %d requests/min)</text>`+"\n",
		marginL+innerW/2, plotH-14, axisTextColor, slot, upstreamRate)
	fmt.Fprintf(bw, `<text transform="translate(16 %d) rotate(-90)" text-anchor="middle" fill="%s">fraction of alarm starts</text>`+"\n",
		marginT+innerH/2, axisTextColor)
	// Targets.
	for _, t := range []struct {
		at    float64
		label string
	}{{0.6, "p50 target"}, {1.5, "p99 target"}} {
		if t.at > xMax {
			continue
		}
		fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-dasharray="%s"/>`+"\n",
			x(t.at), marginT, x(t.at), marginT+innerH, targetColor, targetDash)
		fmt.Fprintf(bw, `<text x="%.1f" y="%d" font-size="10" fill="%s">%s</text>`+"\n", x(t.at)+3, marginT+12, targetColor, t.label)
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
		pts := cdf(s.sorted)
		if len(pts) > 0 {
			style := fmt.Sprintf(`stroke-width="%g"`, seriesStroke)
			if s.dashed {
				style = `stroke-width="1.2" stroke-dasharray="4,3" opacity="0.8"`
			}
			fmt.Fprintf(bw, `<polyline fill="none" stroke="%s" %s points="%.1f,%.1f`, s.color, style, x(0), y(0))
			prev := 0.0
			for _, p := range pts {
				fmt.Fprintf(bw, " %.1f,%.1f %.1f,%.1f", x(p.X), y(prev), x(p.X), y(p.F))
				prev = p.F
			}
			fmt.Fprintf(bw, " %.1f,%.1f\"/>\n", x(xMax), y(prev))
		}
		if s.dashed {
			continue
		}
		ly := marginT + innerH - 16*(legend-row) - 24
		row++
		fmt.Fprintf(bw, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", marginL+innerW-250, ly, marginL+innerW-226, ly, s.color)
		fmt.Fprintf(bw, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", marginL+innerW-220, ly+4, axisTextColor, html.EscapeString(s.label()))
	}
	if note != "" {
		fmt.Fprintf(bw, `<text x="%d" y="%d" font-size="10" text-anchor="end" fill="%s">%s</text>`+"\n",
			marginL+innerW-8, marginT+innerH-10, axisTextColor, html.EscapeString(note))
	}
	bw.WriteString("</svg>\n")
	return bw.Flush()
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
