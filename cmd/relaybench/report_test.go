package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

// figuresWith returns run figures in which every system has the given start
// latencies (both readings) and the relay the given pipeline rate.
func figuresWith(startSlots []float64, rate float64) runFigures {
	f := runFigures{Systems: map[string]*systemFigures{}, Pipeline: pipelineResult{EventsPerSec: rate}}
	for _, sys := range systemNames {
		l := latencies{Measured: summarize(startSlots), RealRate: summarize(startSlots)}
		f.Systems[sys] = &systemFigures{Start: l, End: l, StormLevel0: l, StormAll: l}
	}
	return f
}

// tableRow returns the Markdown table line whose figure column is what.
func tableRow(t *testing.T, md, what string) []string {
	t.Helper()
	for line := range strings.SplitSeq(md, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) == 7 && cells[1] == what {
			return cells
		}
	}
	t.Fatalf("no table row %q in:\n%s", what, md)
	return nil
}

func TestMarkdownShowsMediansVerdictsAndEveryTarget(t *testing.T) {
	runs := []runFigures{
		figuresWith([]float64{0.2, 0.4, 0.5}, 30000),
		figuresWith([]float64{0.3, 0.6, 0.7}, 10000),
		figuresWith([]float64{0.1, 0.2, never}, 12000),
	}
	rep := buildReport(fullConfig(), runs, "go run ./cmd/relaybench", time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC))
	rep.Notes = []string{"a note with a | pipe"}
	var b bytes.Buffer
	if err := writeMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	tests := []struct {
		name, what string
		want       []string // relay, naive, eager, verdict
	}{
		// p50 of the runs: 0.4, 0.6, 0.2: median 0.4.
		{"median of the runs, met", "start detection latency p50" + realLabel,
			[]string{"0.40 slots (2.4 s)", "0.40 slots (2.4 s)", "0.40 slots (2.4 s)", "met"}},
		// p99 of the runs: 0.5, 0.7, never: median 0.7.
		{"never in one run of three leaves the median finite", "start detection latency p99" + measuredLabel,
			[]string{"0.70 slots (4.2 s)", "0.70 slots (4.2 s)", "0.70 slots (4.2 s)", "met"}},
		{"relay-only rows leave the baselines empty", "pipeline throughput, store + route + JetStream",
			[]string{"12,000 events/s", "–", "–", "**NOT MET**"}},
		{"rows without a target give no verdict", "starts never detected",
			[]string{"0", "0", "0", "–"}},
		{"the baselines are reported", "naive and eager baselines measured in the same run, beside P1 to P4",
			[]string{"–", "reported", "reported", "met"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tableRow(t, md, tt.what)[3:]
			if strings.Join(got, " | ") != strings.Join(tt.want, " | ") {
				t.Fatalf("row %q = %q, want %q", tt.what, got, tt.want)
			}
		})
	}
	for _, id := range []string{"P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8"} {
		if !strings.Contains(md, "\n| "+id+" | ") {
			t.Fatalf("no row for %s in:\n%s", id, md)
		}
	}
	if !strings.Contains(md, "- a note with a | pipe\n") {
		t.Fatalf("note missing:\n%s", md)
	}
}

func TestMarkdownWritesNeverAndEscapesPipes(t *testing.T) {
	tests := []struct {
		u    unit
		v    num
		want string
	}{
		{unitSlots, num(never), "never"},
		{unitSlots, num(math.NaN()), "–"},
		{unitSlots, 1.5, "1.50 slots (9.0 s)"},
		{unitRate, 1234567.4, "1,234,567 events/s"},
		{unitMiB, 63.96, "64.0 MiB"},
		{unitCount, 0, "0"},
	}
	for _, tt := range tests {
		if got := formatValue(tt.u, tt.v); got != tt.want {
			t.Fatalf("formatValue(%s, %g) = %q, want %q", tt.u, float64(tt.v), got, tt.want)
		}
	}
	rep := report{Rows: []row{{ID: "P9", What: "a|b", Unit: unitCount, Values: map[string]num{sysRelay: 1}}}}
	var b bytes.Buffer
	if err := writeMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `| P9 | a\|b | – | 1 | – | – | – |`) {
		t.Fatalf("pipe not escaped:\n%s", b.String())
	}
}

func TestMarkdownReportsAWriteFailure(t *testing.T) {
	rep := buildReport(fullConfig(), []runFigures{figuresWith([]float64{1}, 1)}, "cmd", time.Now())
	if err := writeMarkdown(failingWriter{}, rep); err == nil {
		t.Fatal("writeMarkdown to a failing writer returned nil")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestJSONWritesNeverAndNotMeasured(t *testing.T) {
	b, err := json.Marshal(map[string]num{"a": 1.5, "b": num(never), "c": num(math.NaN())})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"a":1.5,"b":"never","c":null}`; got != want {
		t.Fatalf("json = %s, want %s", got, want)
	}
	rep := buildReport(fullConfig(), []runFigures{figuresWith([]float64{1, never}, 1)}, "cmd", time.Now())
	var out bytes.Buffer
	if err := writeJSON(&out, rep); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatalf("results.json does not parse: %v", err)
	}
}

func TestCDFPlotIsWellFormedSVGWithOneCurvePerSeries(t *testing.T) {
	rep := buildReport(fullConfig(), []runFigures{figuresWith([]float64{0.2, 0.9, 3, never}, 1)}, "cmd", time.Now())
	var b bytes.Buffer
	if err := writeCDF(&b, plotSeries(rep), plotNote(rep)); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&b)
	polylines := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("plot is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			polylines++
		}
	}
	if want := 2 * len(systemNames); polylines != want {
		t.Fatalf("plot has %d curves, want %d", polylines, want)
	}
}

func TestReportSaysNotRunForTheFiguresOfSkippedPhases(t *testing.T) {
	cfg := fullConfig()
	cfg.Phases = []string{phaseWebhook}
	f := runFigures{Systems: map[string]*systemFigures{}, Webhook: pipelineResult{EventsPerSec: 1000}}
	for _, sys := range systemNames {
		f.Systems[sys] = &systemFigures{}
	}
	rep := buildReport(cfg, []runFigures{f}, "cmd", time.Now())
	var b bytes.Buffer
	if err := writeMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	tests := []struct {
		what string
		want []string // relay, naive, eager, verdict
	}{
		{"start detection latency p50" + realLabel, []string{notRun, notRun, notRun, notRun}},
		{"rate-limit violations counted by the simulators", []string{notRun, notRun, notRun, notRun}},
		{"naive and eager baselines measured in the same run, beside P1 to P4", []string{notRun, notRun, notRun, notRun}},
		{"pipeline throughput, store + route + JetStream", []string{notRun, "–", "–", notRun}},
		{"resident memory, 100,000 tracked alarms (VmRSS after GC)", []string{notRun, "–", "–", notRun}},
		{webhookWhat, []string{"1,000 events/s", "–", "–", "–"}},
	}
	for _, tt := range tests {
		if got := tableRow(t, md, tt.what)[3:]; strings.Join(got, " | ") != strings.Join(tt.want, " | ") {
			t.Fatalf("row %q = %q, want %q", tt.what, got, tt.want)
		}
	}
	if strings.Contains(md, "NaN") || strings.Contains(md, "against skewed") {
		t.Fatalf("the report shows figures of phases that did not run:\n%s", md)
	}
	var out bytes.Buffer
	if err := writeJSON(&out, rep); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Rows []struct {
			What   string         `json:"what"`
			NotRun bool           `json:"not_run"`
			Values map[string]any `json:"values"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, rw := range back.Rows {
		if rw.NotRun != (rw.What != webhookWhat) {
			t.Fatalf("row %q: not_run = %v", rw.What, rw.NotRun)
		}
		for sys, v := range rw.Values {
			if rw.NotRun && v != nil {
				t.Fatalf("row %q, %s = %v, want null for a figure not run", rw.What, sys, v)
			}
		}
	}
}

func TestReportPutsAlertmanagerBesideTheWebhookFigure(t *testing.T) {
	cfg := fullConfig()
	cfg.Phases = []string{phasePipeline, phaseWebhook}
	run := func(relay, am float64) runFigures {
		f := runFigures{Systems: map[string]*systemFigures{}, Webhook: pipelineResult{EventsPerSec: relay}}
		for _, sys := range systemNames {
			f.Systems[sys] = &systemFigures{}
		}
		if am > 0 {
			f.Alertmanager = &amResult{Version: "0.34.2", PerSec: am, PeakRSS: 500 * mib}
		}
		return f
	}
	tests := []struct {
		name string
		runs []runFigures
		want []string
	}{
		{"measured in the same run: the median of the runs' ratios", []runFigures{run(1000, 2000), run(3000, 3000), run(1200, 4000)},
			[]string{"Alertmanager measured in this run",
				"| relay: store + route + alarm management + signed webhook sink | 1,200 events/s | 0.50× |",
				"| Alertmanager 0.34.2 | 3,000 notifications/s, peak 500 MiB VmHWM | 1.00× |"}},
		{"without --alertmanager: the anchor of docs/performance.md, dated", []runFigures{run(1422, 0)},
			[]string{"the anchor of docs/performance.md of " + amAnchor.Date + " (20,000 alerts), not this run",
				fmt.Sprintf("| 1,422 events/s | %.2f× |", 1422/amAnchor.PerSec),
				"| Alertmanager " + amAnchor.Version + " | " + groupThousands(int64(amAnchor.PerSec)) + " notifications/s | 1.00× |"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeMarkdown(&b, buildReport(cfg, tt.runs, "cmd", time.Now())); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Fatalf("no %q in:\n%s", w, b.String())
				}
			}
		})
	}
	cfg.Phases = []string{phasePipeline}
	if rep := buildReport(cfg, []runFigures{run(1000, 0)}, "cmd", time.Now()); rep.Alertmanager != nil {
		t.Fatalf("without the webhook phase the report has an Alertmanager reference: %+v", rep.Alertmanager)
	}
}

func TestPhasesFlag(t *testing.T) {
	got, err := parsePhases("memory, webhook,pipeline,webhook")
	if err != nil || strings.Join(got, ",") != "pipeline,webhook,memory" {
		t.Fatalf("parsePhases = %q, %v; want pipeline,webhook,memory in suite order", got, err)
	}
	got, err = parsePhases("takeover,tenants,memory")
	if err != nil || strings.Join(got, ",") != "memory,tenants,takeover" {
		t.Fatalf("parsePhases = %q, %v; want memory,tenants,takeover in suite order", got, err)
	}
	for _, cfg := range []config{fullConfig(), quickConfig()} {
		if cfg.runs(phaseTenants) || cfg.runs(phaseTakeover) {
			t.Fatalf("the default suite runs %q: the tenants and takeover phases take longer than its six minutes", cfg.Phases)
		}
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--phases", "pipeline,webhok"}, `unknown phase "webhok"`},
		{[]string{"--phases", ""}, `unknown phase ""`},
		{[]string{"--phases", "pipeline", "--alertmanager", "/bin/alertmanager"}, "add webhook to --phases"},
		{[]string{"--phases", "memory", "--keep-state", "/tmp/x"}, "add churn to --phases"},
		{[]string{"--tenants", "20"}, "add tenants to --phases"},
		{[]string{"--phases", "tenants", "--tenants", "1"}, "want 2 or more"},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		if code := run(context.Background(), tt.args, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Fatalf("run %q = %d, %q; want 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}
