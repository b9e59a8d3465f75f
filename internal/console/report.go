package console

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/relay-energy/relay/internal/isa"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/termtext"
)

// reportRanges are the periods the Report page offers, in days.
var reportRanges = []int{1, 7, 30}

// reportPage is what the Report page shows: the figures of relay report
// (isa.FromStore, as GET /report computes them) for the last Days days.
type reportPage struct {
	frame
	Days   int
	Ranges []int
	Report isa.Report
	// Positions is the summary row of each operator position: all alarms,
	// then each route.
	Positions []positionRow
	Target    positionRow
	// Priority, BadActors and Hours are the overall figures' rows.
	Priority  []priorityRow
	BadActors []badActorRow
	Hours     []isa.Hour
	// The charts, written by isa as inline SVG: numbers and escaped text
	// only.
	Hourly, Mix, Actors, Acks template.HTML
}

// positionRow is one operator position's summary, as relay report's first
// table has it, with the acknowledgement figures.
type positionRow struct {
	Name, Alarms, PerDay, Peak10m, Flood, High, Medium, Low, TopTen, Chattering, Stale string
	Acknowledged, MedianToAck, ClearedUnacknowledged                                   string
}

// priorityRow is one priority of the mix.
type priorityRow struct {
	Name, Levels, Share, Target string
	Alarms                      int
}

// badActorRow is one bad actor.
type badActorRow struct {
	isa.BadActor
	Rank  int
	Share string
}

// registerReport adds the Report page.
func (c *Console) registerReport() {
	c.mux.HandleFunc("GET /console/report", c.report)
}

// report serves the ISA-18.2 figures of the last 1, 7 or 30 days (?days=,
// default 1) with their charts.
func (c *Console) report(w http.ResponseWriter, r *http.Request) {
	f, ok := c.page(w, r, "report")
	if !ok {
		return
	}
	days := 1
	if s := r.URL.Query().Get("days"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || (n != 1 && n != 7 && n != 30) {
			http.Error(w, fmt.Sprintf("days=%q: want 1, 7 or 30", s), http.StatusBadRequest)
			return
		}
		days = n
	}
	var rules *route.Rules
	if c.o.Rules != nil {
		rules = c.o.Rules()
	}
	acks, err := manage.FirstAcks(c.o.Store)
	if err != nil {
		c.reportFailed(w, err)
		return
	}
	rep, err := isa.FromStore(c.o.Store, rules, c.o.Now(), time.Duration(days)*24*time.Hour, acks)
	if err != nil {
		c.reportFailed(w, err)
		return
	}
	p, err := newReportPage(f, days, rep)
	if err != nil {
		c.reportFailed(w, err)
		return
	}
	render(w, "report", p)
}

// newReportPage lays out rep for the page.
func newReportPage(f frame, days int, rep isa.Report) (reportPage, error) {
	p := reportPage{frame: f, Days: days, Ranges: reportRanges, Report: rep, Hours: rep.Overall.PerHour}
	for _, fg := range append([]isa.Figures{rep.Overall}, rep.Routes...) {
		p.Positions = append(p.Positions, summary(fg))
	}
	p.Target = positionRow{Name: "ISA-18.2 target", PerDay: "~150", Peak10m: fmt.Sprintf("≤ %d", isa.FloodStarts), Flood: "< 1%",
		TopTen: "< 5%", Chattering: "0", Stale: "< 5"}
	for _, pr := range rep.Overall.Priority {
		p.Priority = append(p.Priority, priorityRow{Name: pr.Name, Levels: pr.Levels, Alarms: pr.Alarms,
			Share: isa.Percent(pr.Share), Target: isa.Percent(pr.Target)})
	}
	p.Target.High, p.Target.Medium, p.Target.Low = p.Priority[0].Target, p.Priority[1].Target, p.Priority[2].Target
	for i, b := range rep.Overall.BadActors {
		p.BadActors = append(p.BadActors, badActorRow{BadActor: b, Rank: i + 1, Share: isa.Percent(b.Share)})
	}
	for _, ch := range []struct {
		to    *template.HTML
		write func(io.Writer) error
	}{
		{&p.Hourly, rep.WriteSVG}, {&p.Mix, rep.Overall.WritePrioritySVG}, {&p.Actors, rep.Overall.WriteBadActorsSVG},
		{&p.Acks, rep.WriteAckSVG},
	} {
		var b bytes.Buffer
		if err := ch.write(&b); err != nil {
			return p, err
		}
		// isa's charts escape every text they write (svgplot): the
		// markup is theirs, never the upstream's.
		*ch.to = template.HTML(b.String())
	}
	return p, nil
}

// summary is the summary row of one position's figures.
func summary(f isa.Figures) positionRow {
	name := f.Route
	if name == "" {
		name = "all alarms"
	}
	row := positionRow{Name: name, Alarms: strconv.Itoa(f.Alarms), PerDay: fmt.Sprintf("%.1f", f.AveragePerDay),
		Peak10m: strconv.Itoa(f.Peak10m), Flood: isa.Percent(f.FloodShare), High: isa.Percent(f.Priority[0].Share),
		Medium: isa.Percent(f.Priority[1].Share), Low: isa.Percent(f.Priority[2].Share), TopTen: isa.Percent(f.BadActorShare),
		Chattering: strconv.Itoa(len(f.Chattering)), Stale: strconv.Itoa(len(f.Stale)),
		Acknowledged: strconv.Itoa(f.Acknowledged), MedianToAck: "–", ClearedUnacknowledged: strconv.Itoa(f.ClearedUnacknowledged)}
	if f.Acknowledged > 0 {
		row.MedianToAck = termtext.Duration(time.Duration(f.MedianTimeToAckSeconds * float64(time.Second)))
	}
	return row
}

// reportFailed answers a report that could not be computed.
func (c *Console) reportFailed(w http.ResponseWriter, err error) {
	c.o.Logger.Error("console: computing the report failed", "err", err)
	http.Error(w, "console: computing the report: "+err.Error(), http.StatusInternalServerError)
}
