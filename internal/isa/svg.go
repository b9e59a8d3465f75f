package isa

import (
	"fmt"
	"io"
	"math"

	"github.com/relay-energy/relay/internal/svgplot"
)

// The chart of alarms per hour, in SVG user units.
const (
	chartW, chartH       = 960, 420
	chartL, chartR       = 64, 24
	chartT, chartB       = 48, 56
	barColor, floodColor = "#1f6feb", "#d1495b"
)

// WriteSVG writes a chart of the alarms started in each hour of the period
// (all of them: the overall figures), with the flood threshold drawn as a
// line at FloodPerHour, the rate that keeps every 10 minutes at the flood
// threshold.
func (r *Report) WriteSVG(w io.Writer) error {
	hours := r.Overall.PerHour
	title := fmt.Sprintf("Alarms started per hour, %s to %s UTC", r.From.UTC().Format("2006-01-02 15:04"), r.To.UTC().Format("2006-01-02 15:04"))
	top, busiest := FloodPerHour, 0
	for _, h := range hours {
		top, busiest = max(top, h.Alarms), max(busiest, h.Alarms)
	}
	p := svgplot.NewDescribed(w, chartW, chartH, chartL, chartR, chartT, chartB, title,
		fmt.Sprintf("A bar for each of the %d hours: %d alarms in all, %d in the busiest hour. "+
			"The dashed line is the flood threshold, %d an hour (%d in 10 minutes, sustained).",
			len(hours), r.Overall.Alarms, busiest, FloodPerHour, FloodStarts))
	p.Title(title)
	step := niceStep(float64(top)*1.1, 8)
	yMax := math.Ceil(float64(top)*1.1/step) * step
	innerW, innerH := float64(p.InnerW()), float64(p.InnerH())
	y := func(v float64) float64 { return chartT + (1-v/yMax)*innerH }
	for v := 0.0; v <= yMax+step/2; v += step {
		p.HGrid(y(v), fmt.Sprintf("%g", v))
	}
	n := max(len(hours), 1)
	barW := innerW / float64(n)
	x := func(i int) float64 { return chartL + float64(i)*barW }
	every := tickEvery(len(hours))
	for i, h := range hours {
		at := h.Hour.UTC()
		tick := at.Hour()%every == 0
		if every >= 24 {
			tick = at.Hour() == 0 && at.Unix()/86400%int64(every/24) == 0
		}
		if tick {
			label := "15:04"
			if at.Hour() == 0 {
				label = "Jan 2"
			}
			p.VGrid(x(i), at.Format(label))
		}
	}
	gap := 0.0
	if barW >= 4 {
		gap = 1
	}
	for i, h := range hours {
		if h.Alarms == 0 {
			continue
		}
		p.Rect(x(i)+gap/2, y(float64(h.Alarms)), barW-gap, y(0)-y(float64(h.Alarms)), barColor)
	}
	ft := y(float64(FloodPerHour))
	flood := fmt.Sprintf("flood threshold: %d an hour (%d in %s, sustained)", FloodPerHour, FloodStarts, "10 minutes")
	p.TitledLine(chartL, ft, chartL+innerW, ft, floodColor, flood, `class="flood-line"`, `stroke-width="1.5"`,
		`stroke-dasharray="`+svgplot.GuideDash+`"`)
	p.Text(chartL+innerW-4, ft-5, flood, `text-anchor="end"`, `font-size="11"`, `fill="`+floodColor+`"`)
	p.Frame()
	p.XLabel("hour of occurrence (UTC)")
	p.YLabel("alarms started")
	return p.Close()
}

// tickEvery returns how many hours apart the x axis's ticks are for a chart
// of n hours: a few hours for a day or two, then days.
func tickEvery(n int) int {
	switch {
	case n <= 12:
		return 1
	case n <= 36:
		return 3
	case n <= 72:
		return 6
	}
	return 24 * int(math.Ceil(float64(n)/24/14))
}

// niceStep returns a step of 1, 2 or 5 times a power of ten that divides
// span into at most ticks parts.
func niceStep(span float64, ticks int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(ticks)
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= raw {
			return max(m*pow, 1)
		}
	}
	return 10 * pow
}
