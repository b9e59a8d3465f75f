package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// svgShape is a polyline or rect of a chart, as parsed back.
type svgShape struct {
	class, panel string
	points       [][2]float64
}

// parseFrontier parses a frontier chart as XML and returns its polylines,
// its unfilled rects (the panels' frames, in order) as [y, height], and its
// text.
func parseFrontier(t *testing.T, svg []byte) (lines []svgShape, frames [][2]float64, text string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var texts []string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.CharData:
			texts = append(texts, string(tok))
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range tok.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch {
			case tok.Name.Local == "polyline":
				s := svgShape{class: attr["class"], panel: attr["data-panel"]}
				for pt := range strings.FieldsSeq(attr["points"]) {
					xs, ys, _ := strings.Cut(pt, ",")
					x, _ := strconv.ParseFloat(xs, 64)
					y, _ := strconv.ParseFloat(ys, 64)
					s.points = append(s.points, [2]float64{x, y})
				}
				lines = append(lines, s)
			case tok.Name.Local == "rect" && attr["fill"] == "none":
				y, _ := strconv.ParseFloat(attr["y"], 64)
				h, _ := strconv.ParseFloat(attr["height"], 64)
				frames = append(frames, [2]float64{y, h})
			}
		}
	}
	return lines, frames, strings.Join(texts, "|")
}

// TestFrontierChartDrawsEachSystemAtItsHeightAndTheLimit writes a chart of
// known figures and reads it back: each system's line at heights
// proportional to its figures from the panel's zero, the rates evenly
// spaced (each doubles the one before), the limit line through the figures
// equal to it, "never" for a figure never reached, nothing for one not
// measured, and text from outside escaped.
func TestFrontierChartDrawsEachSystemAtItsHeightAndTheLimit(t *testing.T) {
	rates := []int{5, 10, 20}
	limit := []float64{physicalLimit(50, 5), physicalLimit(50, 10), physicalLimit(50, 20)}
	if limit[0] != 6 || limit[1] != 3 || limit[2] != 1.5 {
		t.Fatalf("p50 limits %v s, want half a slot: 6, 3 and 1.5 s", limit)
	}
	scaled := func(k float64) []float64 { return []float64{k * limit[0], k * limit[1], k * limit[2]} }
	c := frontierChart{
		upstream: `<script>alert("x")</script> & co`,
		rates:    rates,
		values: map[string][4][]float64{
			// relay: at the limit; eager twice it; naive four times.
			sysRelay: {scaled(1), {math.NaN(), 4, never}, scaled(1), scaled(1)},
			sysEager: {scaled(2), scaled(2), scaled(2), scaled(2)},
			sysNaive: {scaled(4), scaled(4), scaled(4), scaled(4)},
		},
		notes: []string{"a note </text><script>"},
	}
	var b bytes.Buffer
	if err := writeFrontier(&b, c); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "<script") {
		t.Fatalf("text from outside became markup:\n%s", b.String())
	}
	lines, frames, text := parseFrontier(t, b.Bytes())
	for _, want := range []string{`Detection latency by request rate, <script>alert("x")</script> & co`, "a note </text><script>",
		"relay: never", "requests a minute (log scale)", "seconds", "P2 end detection, p99",
		"P1 start detection, p50: relay 6.0 s, 3.0 s, 1.5 s; naive 24.0 s, 12.0 s, 6.0 s; eager 12.0 s, 6.0 s, 3.0 s; physical limit 6.0 s, 3.0 s, 1.5 s."} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in the chart's text:\n%s", want, text)
		}
	}
	if len(frames) != len(frontierPanels) {
		t.Fatalf("%d panels framed, want %d", len(frames), len(frontierPanels))
	}
	line := func(class, panel string) [][2]float64 {
		for _, l := range lines {
			if l.class == class && l.panel == panel {
				return l.points
			}
		}
		t.Fatalf("no line %s in panel %s", class, panel)
		return nil
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 0.5 }
	for k, panel := range frontierPanels {
		if panel.id == "p1-p99" {
			continue
		}
		zero := frames[k][0] + frames[k][1]
		relay, eager, naive := line("frontier-relay", panel.id), line("frontier-eager", panel.id), line("frontier-naive", panel.id)
		if len(relay) != 3 || len(eager) != 3 || len(naive) != 3 {
			t.Fatalf("panel %s: %d, %d, %d points, want 3 a system", panel.id, len(relay), len(eager), len(naive))
		}
		for i := range relay {
			h := zero - relay[i][1]
			if !near(zero-eager[i][1], 2*h) || !near(zero-naive[i][1], 4*h) {
				t.Errorf("panel %s, %d requests/min: heights relay %.1f, eager %.1f, naive %.1f; want 1 : 2 : 4",
					panel.id, rates[i], h, zero-eager[i][1], zero-naive[i][1])
			}
		}
		if h5, h20 := zero-relay[0][1], zero-relay[2][1]; !near(h5, 4*h20) {
			t.Errorf("panel %s: relay at 5/min %.1f high, at 20/min %.1f; want 4 times", panel.id, h5, h20)
		}
		if dx1, dx2 := relay[1][0]-relay[0][0], relay[2][0]-relay[1][0]; !near(dx1, dx2) || dx1 <= 0 {
			t.Errorf("panel %s: rates %v apart, want evenly spaced on a log scale", panel.id, []float64{dx1, dx2})
		}
	}
	// The limit of p50 runs through the relay's points, which equal it, in
	// the P1 p50 panel; in the p99 panels it lies at 0.99 slot.
	lim := line("frontier-limit", "p1-p50")
	relay := line("frontier-relay", "p1-p50")
	if first, last := lim[0], lim[len(lim)-1]; !near(first[0], relay[0][0]) || !near(first[1], relay[0][1]) ||
		!near(last[0], relay[2][0]) || !near(last[1], relay[2][1]) {
		t.Errorf("limit from %v to %v, relay's points %v: want the limit through them", first, last, relay)
	}
	if got := line("frontier-relay", "p1-p99"); len(got) != 1 {
		t.Errorf("P1 p99 relay line has %d points, want 1 (one not measured, one never)", len(got))
	}
	zero := frames[3][0] + frames[3][1]
	lim99, relay99 := line("frontier-limit", "p2-p99"), line("frontier-relay", "p2-p99")
	if h, want := zero-lim99[0][1], 1.98*(zero-relay99[0][1]); !near(h, want) {
		t.Errorf("P2 p99 limit at 5/min %.1f high, want %.1f (0.99 slot; the relay drawn at half a slot)", h, want)
	}
}

// TestFrontierReportShowsEveryPointAndTheLimit builds the report of two
// runs and checks the table's medians, per-run counts and limit rows, and
// that a violation in any run fails the phase.
func TestFrontierReportShowsEveryPointAndTheLimit(t *testing.T) {
	cfg := fullConfig()
	cfg.Phases = []string{phaseFrontier}
	cfg.FrontierRates, cfg.FrontierUpstreams = []int{10, 20}, []string{"clean"}
	run := func(relayP50 float64, violations int) runFigures {
		f := runFigures{Systems: map[string]*systemFigures{}}
		for _, sys := range systemNames {
			f.Systems[sys] = &systemFigures{}
		}
		for _, rate := range cfg.FrontierRates {
			pt := frontierPoint{Upstream: "clean", Rate: rate, Systems: map[string]*frontierFigures{}}
			for _, sys := range systemNames {
				pt.Systems[sys] = &frontierFigures{StartP50: 4, StartP99: 9, EndP50: 5, EndP99: num(never), MaxPerMinute: rate}
			}
			pt.Systems[sysRelay].StartP50 = num(relayP50)
			pt.Systems[sysEager].Violations, pt.Systems[sysEager].RealRateViolations = violations, violations/2
			f.Frontier = append(f.Frontier, pt)
		}
		return f
	}
	runs := []runFigures{run(2, 0), run(3, 2)}
	rep := buildReport(cfg, runs, "cmd", time.Now())
	var b bytes.Buffer
	if err := writeMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"| clean | 10 | physical limit | 3.0 s (0.50) | 5.9 s (0.99) | 3.0 s (0.50) | 5.9 s (0.99) | – | – | 10 |",
		"| clean | 20 | physical limit | 1.5 s (0.50) | 3.0 s (0.99) | 1.5 s (0.50) | 3.0 s (0.99) | – | – | 20 |",
		"| clean | 10 | relay | 2.5 s (0.42) | 9.0 s (1.50) | 5.0 s (0.83) | never | 0, 0 / 0, 0 | 0, 0 (0, 0) | 10 |",
		"| clean | 20 | eager | 4.0 s (1.33) | 9.0 s (3.00) | 5.0 s (1.67) | never | 0, 0 / 0, 0 | 0, 2 (0, 1) | 20 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in:\n%s", want, md)
		}
	}
	err := frontierViolations(runs)
	if err == nil || !strings.Contains(err.Error(), "run 2: eager at 10 requests/min on the clean upstream: 2 (1 at the real rate)") {
		t.Fatalf("frontierViolations = %v, want the eager baseline's violations of run 2 named", err)
	}
	if err := frontierViolations(runs[:1]); err != nil {
		t.Fatalf("frontierViolations without a violation = %v", err)
	}
	if charts := frontierCharts(rep); len(charts) != 1 || frontierFile(charts[0].upstream) != "frontier-clean.svg" ||
		charts[0].values[sysRelay][0][0] != 2.5 {
		t.Fatalf("charts %+v: want one, frontier-clean.svg, relay's P1 p50 at 10/min 2.5 s", charts)
	}
}

// TestFrontierPhaseRunsEverySystemAtEachRateWithinItsLimit runs the
// frontier at two rates on a short churn and checks that each simulator
// admitted its rate and refused nothing, that the eager baseline made one
// request a slot of that rate, that every start and end was detected, and
// that no percentile beats the physical limit of its rate: figures in the
// wrong unit or at the wrong rate would.
func TestFrontierPhaseRunsEverySystemAtEachRateWithinItsLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the churn at two rates for about 15 s")
	}
	if raceEnabled {
		t.Skip("measures latency on a scaled clock that the race detector's slowdown outruns: run it without -race (go test ./cmd/relaybench)")
	}
	env := startTestNATS(t)
	cfg := quickConfig()
	cfg.Phases = []string{phaseFrontier}
	cfg.ChurnSlots = 20
	cfg.Churn = churn{Ongoing: 60, StartsPerMinute: 6, MeanDuration: 2 * time.Minute, MeanMinutes: 2}
	cfg.FrontierRates, cfg.FrontierUpstreams = []int{10, 20}, []string{"clean"}
	var progress []string
	b := &bench{cfg: cfg, dir: t.TempDir(), log: slog.New(slog.DiscardHandler), nats: env, progress: func(f string, args ...any) {
		t.Logf(f, args...)
		progress = append(progress, f)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	figs := runFigures{Systems: map[string]*systemFigures{}}
	if err := b.frontierPhase(ctx, &figs); err != nil {
		t.Fatal(err)
	}
	if len(figs.Frontier) != 2 || len(progress) != 2 {
		t.Fatalf("%d points, %d progress lines; want 2 of each", len(figs.Frontier), len(progress))
	}
	for _, pt := range figs.Frontier {
		if want := frontierSpeed(cfg.Speed, pt.Rate); pt.Speed != want || pt.Upstream != "clean" {
			t.Errorf("%d/min: %s upstream at %g×, want clean at %g×", pt.Rate, pt.Upstream, pt.Speed, want)
		}
		for _, sys := range systemNames {
			f := pt.Systems[sys]
			t.Logf("%d/min %s: %+v", pt.Rate, sys, *f)
			if f.Violations != 0 || f.MaxPerMinute > pt.Rate {
				t.Errorf("%d/min %s: %d violations, %d requests in a minute; want none over the rate", pt.Rate, sys, f.Violations, f.MaxPerMinute)
			}
			if f.Starts == 0 || f.Ends == 0 || f.StartsMissing != 0 || f.EndsMissing != 0 {
				t.Errorf("%d/min %s: %d of %d starts and %d of %d ends never detected; want some of each, all detected",
					pt.Rate, sys, f.StartsMissing, f.Starts, f.EndsMissing, f.Ends)
			}
			for _, v := range []struct {
				name string
				got  num
				p    float64
			}{{"P1 p50", f.StartP50, 50}, {"P1 p99", f.StartP99, 99}, {"P2 p50", f.EndP50, 50}, {"P2 p99", f.EndP99, 99}} {
				if lim := physicalLimit(v.p, pt.Rate); !(float64(v.got) >= lim && float64(v.got) < 120) {
					t.Errorf("%d/min %s: %s %g s, want from the limit %g s to 2 min", pt.Rate, sys, v.name, float64(v.got), lim)
				}
			}
		}
		if got := pt.Systems[sysEager].MaxPerMinute; got < pt.Rate-1 {
			t.Errorf("%d/min: the eager baseline made at most %d requests in a minute, want one a slot (%d or %d)", pt.Rate, got, pt.Rate-1, pt.Rate)
		}
	}
}
