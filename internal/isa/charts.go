package isa

import (
	"fmt"
	"io"
	"time"

	"github.com/relay-energy/relay/internal/svgplot"
	"github.com/relay-energy/relay/internal/termtext"
)

// The horizontal bar charts of the priority mix, the bad actors and the
// time to acknowledge, in SVG user units.
const (
	barsW, barsRow          = 960, 30
	barsL, barsR            = 300, 250
	barsT, barsB            = 40, 12
	targetColor             = "#222222"
	maxLabel                = 44
	barsBarH, barsTextShift = 18, 4
)

// hbar is one bar of a horizontal bar chart: its label left of the axis,
// its value, the text written after it, and a target drawn across it when
// target is not negative.
type hbar struct {
	label, text string
	value       float64
	target      float64
	targetText  string
}

// writeBars writes a chart titled title, described by desc, of a bar per
// row, scaled so that top fills the plotting area's width.
func writeBars(w io.Writer, title, desc string, top float64, bars []hbar) error {
	h := barsT + barsB + barsRow*max(len(bars), 1)
	p := svgplot.NewDescribed(w, barsW, h, barsL, barsR, barsT, barsB, title, desc)
	p.Title(title)
	if top <= 0 {
		top = 1
	}
	innerW := float64(p.InnerW())
	for i, b := range bars {
		y := float64(barsT + i*barsRow)
		mid := y + barsRow/2
		p.Text(barsL-8, mid+barsTextShift, clip(b.label), `text-anchor="end"`)
		bw := b.value / top * innerW
		p.Rect(barsL, mid-barsBarH/2, bw, barsBarH, barColor)
		p.Text(barsL+bw+6, mid+barsTextShift, b.text)
		if b.target >= 0 {
			x := barsL + b.target/top*innerW
			p.TitledLine(x, y+2, x, y+barsRow-2, targetColor, b.targetText, `class="target"`, `stroke-width="3"`)
		}
	}
	if len(bars) == 0 {
		p.Text(barsL, barsT+barsRow/2+barsTextShift, "no alarm in the period")
	}
	p.Line(barsL, barsT, barsL, float64(h-barsB), svgplot.TextColor)
	return p.Close()
}

// clip shortens a label to maxLabel characters.
func clip(s string) string {
	if r := []rune(s); len(r) > maxLabel {
		return string(r[:maxLabel-1]) + "…"
	}
	return s
}

// WritePrioritySVG writes a chart of the priority mix of f, a bar per
// priority with the guideline's target share drawn across it.
func (f *Figures) WritePrioritySVG(w io.Writer) error {
	bars := make([]hbar, 0, len(f.Priority))
	desc := fmt.Sprintf("Share of the %d alarms by priority, against the guideline:", f.Alarms)
	for _, pr := range f.Priority {
		bars = append(bars, hbar{label: pr.Name + " (" + pr.Levels + ")", value: pr.Share, target: pr.Target,
			text:       fmt.Sprintf("%s, %d alarms (target %s)", Percent(pr.Share), pr.Alarms, Percent(pr.Target)),
			targetText: "target " + Percent(pr.Target) + " of " + pr.Name})
		desc += fmt.Sprintf(" %s %s (target %s);", pr.Name, Percent(pr.Share), Percent(pr.Target))
	}
	return writeBars(w, "Priority mix against the 5/15/80 guideline", desc+" the dark marks are the targets.", 1, bars)
}

// WriteBadActorsSVG writes a chart of the bad actors of f, the most
// frequent device and event code first.
func (f *Figures) WriteBadActorsSVG(w io.Writer) error {
	bars := make([]hbar, 0, len(f.BadActors))
	top := 0
	for _, b := range f.BadActors {
		top = max(top, b.Alarms)
		label := b.DeviceSN
		if b.DeviceName != "" {
			label = b.DeviceName + " " + b.DeviceSN
		}
		bars = append(bars, hbar{label: label + " · " + b.EventCode, value: float64(b.Alarms), target: -1,
			text: fmt.Sprintf("%d (%s)", b.Alarms, Percent(b.Share))})
	}
	desc := fmt.Sprintf("The %d most frequent device and event code pairs, most frequent first; together %s of the %d alarms "+
		"(the guideline wants the top 10 under about 5%%).", len(bars), Percent(f.BadActorShare), f.Alarms)
	return writeBars(w, fmt.Sprintf("Top %d bad actors", BadActors), desc, float64(top), bars)
}

// WriteAckSVG writes a chart of the median time to acknowledge of every
// operator position of r: all routes, then each route.
func (r *Report) WriteAckSVG(w io.Writer) error {
	all := append([]Figures{r.Overall}, r.Routes...)
	bars := make([]hbar, 0, len(all))
	top := 0.0
	desc := "Median time from detection to the first acknowledgement, by operator position:"
	for _, f := range all {
		name := f.Route
		if name == "" {
			name = "all routes"
		}
		top = max(top, f.MedianTimeToAckSeconds)
		text := fmt.Sprintf("none of %d acknowledged", f.Alarms)
		if f.Acknowledged > 0 {
			text = fmt.Sprintf("%s median, %d of %d acknowledged", termtext.Duration(time.Duration(f.MedianTimeToAckSeconds*float64(time.Second))), f.Acknowledged, f.Alarms)
		}
		bars = append(bars, hbar{label: name, value: f.MedianTimeToAckSeconds, target: -1, text: text})
		desc += fmt.Sprintf(" %s %s;", name, text)
	}
	return writeBars(w, "Time to acknowledge", desc, top, bars)
}
