package isa

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/termtext"
)

// Formats are the formats Write takes.
var Formats = []string{"text", "markdown", "json"}

// listed is how many stale alarms text and Markdown list for one position;
// JSON lists them all.
const listed = 20

// Write writes the report in format: text for a terminal, markdown, or
// json (the Report as it is, which Compute's caller can read back). Text from
// the upstream is escaped for a terminal in text, for a table in Markdown.
func (r *Report) Write(w io.Writer, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "text":
		return r.write(w, textStyle)
	case "markdown":
		return r.write(w, markdownStyle)
	}
	return fmt.Errorf("format %q: want %s", format, strings.Join(Formats, ", "))
}

// style is how write lays out a report.
type style struct {
	markdown bool
	// cell makes upstream text safe in a cell.
	cell func(string) string
}

var (
	textStyle     = style{cell: termtext.Escape}
	markdownStyle = style{markdown: true, cell: func(s string) string {
		return strings.ReplaceAll(termtext.Escape(s), "|", `\|`)
	}}
)

// table is a table being written: aligned columns in text, a Markdown table
// in Markdown.
type table struct {
	st     style
	w      io.Writer
	tw     *tabwriter.Writer
	indent string
}

func (st style) table(w io.Writer, indent string, header ...string) *table {
	t := &table{st: st, w: w, indent: indent}
	if st.markdown {
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
		return t
	}
	t.tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	if t.st.markdown {
		fmt.Fprintf(t.w, "| %s |\n", strings.Join(cells, " | "))
		return
	}
	fmt.Fprintf(t.tw, "%s%s\n", t.indent, strings.Join(cells, "\t"))
}

func (t *table) end() {
	if t.tw != nil {
		t.tw.Flush()
	}
}

// write writes the report as text or Markdown: the period and the terms,
// a summary line per position, then the details of each.
func (r *Report) write(out io.Writer, st style) error {
	w := bufio.NewWriter(out)
	title := fmt.Sprintf("Alarm report, %s to %s UTC (%s)", r.From.UTC().Format("2006-01-02 15:04"),
		r.To.UTC().Format("2006-01-02 15:04"), period(r.To.Sub(r.From)))
	if st.markdown {
		fmt.Fprintf(w, "# %s\n\n", title)
	} else {
		fmt.Fprintf(w, "%s\n\n", title)
	}
	fmt.Fprintf(w, "ISA-18.2 terms: a flood is more than %d alarms started in %g minutes for one operator position; chattering is\n"+
		"%d or more starts of one device and event code within %g s; an alarm ongoing for more than %g h is stale. Alarms count\n"+
		"by occurrence time, each for every route whose match admits its start.",
		FloodStarts, FloodWindow.Minutes(), ChatterStarts, ChatterWindow.Seconds(), StaleAfter.Hours())
	switch {
	case r.Rules != "":
		fmt.Fprintf(w, " Operator positions are the routes of %s.\n", st.cell(r.Rules))
	default:
		fmt.Fprint(w, " No rules were given: only the overall figures.\n")
	}
	if r.Silent > 0 {
		fmt.Fprintf(w, "Alarms recorded silently at the first run (RELAY_BOOTSTRAP=record) count only as stale: %d in the period.\n", r.Silent)
	}
	fmt.Fprintln(w)

	all := append([]Figures{r.Overall}, r.Routes...)
	t := st.table(w, "", "position", "alarms", "a day", "peak 10 min", "in flood", "high", "medium", "low", "top 10", "chattering", "stale")
	for _, f := range all {
		t.row(st.cell(position(f)), fmt.Sprint(f.Alarms), fmt.Sprintf("%.1f", f.AveragePerDay), fmt.Sprint(f.Peak10m),
			Percent(f.FloodShare), Percent(f.Priority[0].Share), Percent(f.Priority[1].Share), Percent(f.Priority[2].Share),
			Percent(f.BadActorShare), fmt.Sprint(len(f.Chattering)), fmt.Sprint(len(f.Stale)))
	}
	t.row("(ISA-18.2 target)", "", "~150", fmt.Sprintf("≤ %d", FloodStarts), "< 1%", Percent(priorities[0].Target),
		Percent(priorities[1].Target), Percent(priorities[2].Target), "< 5%", "0", "< 5")
	t.end()
	for _, f := range all {
		fmt.Fprintln(w)
		writeFigures(w, st, f)
	}
	return w.Flush()
}

// position names the figures' operator position.
func position(f Figures) string {
	if f.Route == "" {
		return "(all alarms)"
	}
	return f.Route
}

func writeFigures(w io.Writer, st style, f Figures) {
	heading := "All alarms"
	if f.Route != "" {
		heading = "Route " + st.cell(f.Route)
	}
	item := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	if st.markdown {
		fmt.Fprintf(w, "## %s\n\n", heading)
		item = func(format string, args ...any) { fmt.Fprintf(w, "- "+format+"\n", args...) }
	} else {
		fmt.Fprintf(w, "== %s ==\n", heading)
	}
	item("alarms started: %d, %.1f a day", f.Alarms, f.AveragePerDay)
	if f.Peak10m > 0 {
		item("peak 10-minute rate: %d alarm%s, from %s UTC", f.Peak10m, termtext.Plural(f.Peak10m), f.Peak10mAt.UTC().Format(time.DateTime))
	}
	item("time in flood: %s, %s of the period", termtext.Duration(time.Duration(f.FloodSeconds*float64(time.Second))), Percent(f.FloodShare))
	var mix []string
	for _, p := range f.Priority {
		mix = append(mix, fmt.Sprintf("%s (%s) %d = %s (target %s)", p.Name, p.Levels, p.Alarms, Percent(p.Share), Percent(p.Target)))
	}
	item("priority mix: %s", strings.Join(mix, "; "))
	ack := fmt.Sprintf("acknowledged: %d alarm%s", f.Acknowledged, termtext.Plural(f.Acknowledged))
	if f.Acknowledged > 0 {
		ack += ", median time to acknowledge " + termtext.Duration(time.Duration(f.MedianTimeToAckSeconds*float64(time.Second)))
	}
	item("%s; cleared unacknowledged: %d", ack, f.ClearedUnacknowledged)
	sub := func(format string, args ...any) {
		if st.markdown {
			fmt.Fprintf(w, "\n"+format+"\n\n", args...)
		} else {
			fmt.Fprintf(w, format+"\n", args...)
		}
	}
	if len(f.BadActors) > 0 {
		sub("bad actors, the %d most frequent device and event code pair%s: %s of all alarms", len(f.BadActors),
			termtext.Plural(len(f.BadActors)), Percent(f.BadActorShare))
		t := st.table(w, "  ", "alarms", "share", "device", "event", "description", "station")
		for _, b := range f.BadActors {
			t.row(fmt.Sprint(b.Alarms), Percent(b.Share), device(st, b.Source), st.cell(b.EventCode), st.cell(b.EventDesc), st.cell(b.StationName))
		}
		t.end()
	}
	sub("chattering: %d device and event code pair%s", len(f.Chattering), termtext.Plural(len(f.Chattering)))
	if len(f.Chattering) > 0 {
		t := st.table(w, "  ", "most in 60 s", "alarms", "device", "event", "description", "first burst (UTC)")
		for _, c := range f.Chattering {
			t.row(fmt.Sprint(c.MostIn60s), fmt.Sprint(c.Alarms), device(st, c.Source), st.cell(c.EventCode), st.cell(c.EventDesc),
				c.At.UTC().Format(time.DateTime))
		}
		t.end()
	}
	sub("stale: %d alarm%s ongoing for more than %g h", len(f.Stale), termtext.Plural(len(f.Stale)), StaleAfter.Hours())
	if len(f.Stale) > 0 {
		t := st.table(w, "  ", "since (UTC)", "hours", "level", "device", "event", "description", "origin id")
		for _, s := range f.Stale[:min(len(f.Stale), listed)] {
			t.row(s.OccurredAt.UTC().Format(time.DateTime), fmt.Sprintf("%.0f", s.ActiveHours), event.LevelName(s.Level),
				device(st, s.Source), st.cell(s.EventCode), st.cell(s.EventDesc), st.cell(s.OriginID))
		}
		t.end()
		if more := len(f.Stale) - listed; more > 0 {
			sub("… and %d more (--format json lists them all)", more)
		}
	}
	sub("alarms per day (UTC):")
	t := st.table(w, "  ", "day", "alarms", "hours of the day in the period")
	for _, d := range f.PerDay {
		t.row(d.Date, fmt.Sprint(d.Alarms), fmt.Sprintf("%.4g", d.Hours))
	}
	t.end()
}

// device names a source's device: its name and serial number.
func device(st style, s Source) string {
	if s.DeviceName == "" || s.DeviceName == s.DeviceSN {
		return st.cell(s.DeviceSN)
	}
	return st.cell(s.DeviceName) + " (" + st.cell(s.DeviceSN) + ")"
}

// Percent writes a share as a percentage to a tenth, as every report
// shows it: 0%, <0.1%, 4.5%, 80%.
func Percent(f float64) string {
	switch {
	case f == 0:
		return "0%"
	case f < 0.001:
		return "<0.1%"
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", f*100), ".0") + "%"
}

// period writes the length of a period in days and hours, as --since takes
// it.
func period(d time.Duration) string {
	days := d / (24 * time.Hour)
	rest := d - days*24*time.Hour
	switch {
	case days == 0:
		return termtext.Duration(rest)
	case rest == 0:
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd%s", days, termtext.Duration(rest))
}
