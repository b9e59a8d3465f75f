// Package svgplot writes the simple SVG charts of relay report and of the
// benchmark: a white canvas, a plotting area inside margins with its frame,
// title and axis labels, and lines, bars and text on it. Text uses the
// reader's own sans-serif fonts: a chart needs no external font, stylesheet
// or script, and opens anywhere.
package svgplot

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"strings"
)

// The look shared by every chart.
const (
	FontFamily = "system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"
	// TextColor is the colour of text, axes and the frame.
	TextColor = "#333333"
	// GridColor is the colour of grid lines.
	GridColor = "#e4e4e4"
	// GuideColor and GuideDash draw a target or threshold line.
	GuideColor = "#9a9a9a"
	GuideDash  = "5,4"
)

// Plot is one chart being written. Coordinates are SVG user units from the
// canvas's top left corner. Write errors are kept and returned by Close.
type Plot struct {
	// Width and Height are the canvas's size.
	Width, Height int
	// Left, Right, Top and Bottom are the margins around the plotting area.
	Left, Right, Top, Bottom int

	bw *bufio.Writer
}

// New starts a chart of width by height on w, whose plotting area lies inside
// the margins left, right, top and bottom.
func New(w io.Writer, width, height, left, right, top, bottom int) *Plot {
	return NewDescribed(w, width, height, left, right, top, bottom, "", "")
}

// NewDescribed is New for a chart that tells assistive technology what it
// shows: the svg element has role="img" and class "chart", and its first
// children are title, its accessible name, and desc, its description (each
// left out when empty). A page that inlines the chart can size it by the
// class.
func NewDescribed(w io.Writer, width, height, left, right, top, bottom int, title, desc string) *Plot {
	p := &Plot{Width: width, Height: height, Left: left, Right: right, Top: top, Bottom: bottom, bw: bufio.NewWriter(w)}
	role := ""
	if title != "" {
		role = ` role="img" class="chart"`
	}
	fmt.Fprintf(p.bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s" font-size="12"%s>`+"\n",
		width, height, width, height, FontFamily, role)
	if title != "" {
		fmt.Fprintf(p.bw, "<title>%s</title>\n", html.EscapeString(title))
	}
	if desc != "" {
		fmt.Fprintf(p.bw, "<desc>%s</desc>\n", html.EscapeString(desc))
	}
	fmt.Fprintf(p.bw, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	return p
}

// InnerW is the plotting area's width.
func (p *Plot) InnerW() int { return p.Width - p.Left - p.Right }

// InnerH is the plotting area's height.
func (p *Plot) InnerH() int { return p.Height - p.Top - p.Bottom }

// bottomEdge is the y of the plotting area's bottom edge.
func (p *Plot) bottomEdge() int { return p.Top + p.InnerH() }

// Title writes the chart's title above the plotting area.
func (p *Plot) Title(s string) {
	fmt.Fprintf(p.bw, `<text x="%d" y="24" font-size="15" font-weight="600" fill="%s">%s</text>`+"\n", p.Left, TextColor, html.EscapeString(s))
}

// Frame outlines the plotting area.
func (p *Plot) Frame() {
	fmt.Fprintf(p.bw, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", p.Left, p.Top, p.InnerW(), p.InnerH(), TextColor)
}

// XLabel writes the x axis's label, centred below the tick labels.
func (p *Plot) XLabel(s string) {
	p.Text(float64(p.Left+p.InnerW()/2), float64(p.Height-14), s, `text-anchor="middle"`)
}

// YLabel writes the y axis's label, turned upright left of the tick labels.
func (p *Plot) YLabel(s string) {
	fmt.Fprintf(p.bw, `<text transform="translate(16 %d) rotate(-90)" text-anchor="middle" fill="%s">%s</text>`+"\n",
		p.Top+p.InnerH()/2, TextColor, html.EscapeString(s))
}

// VGrid draws a vertical grid line across the plotting area at x, with label
// centred below it.
func (p *Plot) VGrid(x float64, label string) {
	p.Line(x, float64(p.Top), x, float64(p.bottomEdge()), GridColor)
	p.Text(x, float64(p.bottomEdge()+18), label, `text-anchor="middle"`)
}

// HGrid draws a horizontal grid line across the plotting area at y, with
// label right-aligned left of it.
func (p *Plot) HGrid(y float64, label string) {
	p.Line(float64(p.Left), y, float64(p.Left+p.InnerW()), y, GridColor)
	p.Text(float64(p.Left-8), y+4, label, `text-anchor="end"`)
}

// Line draws a line of colour stroke; attrs are further attributes, such as
// `stroke-width="3"`.
func (p *Plot) Line(x1, y1, x2, y2 float64, stroke string, attrs ...string) {
	fmt.Fprintf(p.bw, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"%s/>`+"\n", x1, y1, x2, y2, stroke, join(attrs))
}

// TitledLine is Line with a title, which a browser shows when the pointer
// rests on the line and assistive technology reads.
func (p *Plot) TitledLine(x1, y1, x2, y2 float64, stroke, title string, attrs ...string) {
	fmt.Fprintf(p.bw, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"%s><title>%s</title></line>`+"\n",
		x1, y1, x2, y2, stroke, join(attrs), html.EscapeString(title))
}

// Rect fills a rectangle with colour fill; attrs are further attributes.
func (p *Plot) Rect(x, y, w, h float64, fill string, attrs ...string) {
	fmt.Fprintf(p.bw, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"%s/>`+"\n", x, y, w, h, fill, join(attrs))
}

// Point is a point of a polyline.
type Point struct{ X, Y float64 }

// Polyline draws an open line through pts in colour stroke; attrs are
// further attributes.
func (p *Plot) Polyline(pts []Point, stroke string, attrs ...string) {
	fmt.Fprintf(p.bw, `<polyline fill="none" stroke="%s"%s points="`, stroke, join(attrs))
	for i, pt := range pts {
		if i > 0 {
			p.bw.WriteByte(' ')
		}
		fmt.Fprintf(p.bw, "%.1f,%.1f", pt.X, pt.Y)
	}
	p.bw.WriteString("\"/>\n")
}

// Text writes s at x, y in the text colour; attrs are further attributes,
// such as `text-anchor="end"` or a `fill` of its own.
func (p *Plot) Text(x, y float64, s string, attrs ...string) {
	fill := ` fill="` + TextColor + `"`
	for _, a := range attrs {
		if strings.HasPrefix(a, "fill=") {
			fill = ""
		}
	}
	fmt.Fprintf(p.bw, `<text x="%.1f" y="%.1f"%s%s>%s</text>`+"\n", x, y, join(attrs), fill, html.EscapeString(s))
}

// Close ends the chart and returns the first write error.
func (p *Plot) Close() error {
	p.bw.WriteString("</svg>\n")
	return p.bw.Flush()
}

func join(attrs []string) string {
	if len(attrs) == 0 {
		return ""
	}
	return " " + strings.Join(attrs, " ")
}
