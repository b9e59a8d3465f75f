package isa

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

// now is the end of every test period: midnight UTC, so that days are whole.
var now = time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)

// at returns a time of the period.
func at(day int, clock string) time.Time {
	t, err := time.Parse("2006-01-02 15:04:05", fmt.Sprintf("2026-11-%02d %s", day, clock))
	if err != nil {
		panic(err)
	}
	return t
}

// alarm returns a journal entry of an alarm that started at t and ended an
// hour later.
func alarm(id, device, code string, level int, station string, t time.Time) store.JournalEntry {
	return store.JournalEntry{
		OriginID: id, TenantID: "t1", StationID: station, StationName: "Station " + station,
		DeviceSN: device, DeviceName: "PCS " + device, EventCode: code, EventDesc: "desc of " + code,
		Level: level, Status: event.StatusEnded, OccurredAt: t, DetectedAt: t.Add(5 * time.Second), RecoveredAt: t.Add(time.Hour),
	}
}

func ongoingAlarm(e store.JournalEntry) store.JournalEntry {
	e.Status, e.RecoveredAt = event.StatusOngoing, time.Time{}
	return e
}

const testRules = `sinks:
  - name: bus
    type: console
routes:
  - name: everything
    to: [bus]
    continue: true
  - name: urgent
    match: { levels: [urgent] }
    to: [bus]
  - name: station-b
    match: { station_ids: [B] }
    to: [bus]
  - name: closures
    match: { transitions: [end] }
    to: [bus]
`

// journalWithKnownAnswers is a journal of three UTC days, 18 to 20
// November 2026, whose figures are worked out by hand below.
func journalWithKnownAnswers() []store.JournalEntry {
	var j []store.JournalEntry
	// A flood: 11 starts 30 s apart from 19 Nov 10:00:00, on station A,
	// level 3. The 11th comes at 10:05:00; the first leaves the 10 minutes
	// at 10:10:00: 300 s in flood.
	for i := range 11 {
		j = append(j, alarm(fmt.Sprintf("f%02d", i), "D1", fmt.Sprintf("F%d", i), 3, "A", at(19, "10:00:00").Add(time.Duration(i)*30*time.Second)))
	}
	// Chattering: D2/C3 starts 3 times within 50 s; D3/C3 3 times, but 60 s
	// from the first to the third, which is not within 60 s. Level 1,
	// station B.
	for i, s := range []string{"12:00:00", "12:00:20", "12:00:50"} {
		j = append(j, alarm(fmt.Sprintf("c%d", i), "D2", "C3", 1, "B", at(20, s)))
	}
	for i, s := range []string{"12:00:00", "12:00:30", "12:01:00"} {
		j = append(j, alarm(fmt.Sprintf("d%d", i), "D3", "C3", 1, "B", at(20, s)))
	}
	// Urgent alarms on 18 Nov, one of them still ongoing, 48 h and a bit.
	j = append(j,
		alarm("u1", "D4", "U", 0, "A", at(18, "06:00:00")),
		ongoingAlarm(alarm("u2", "D4", "U", 0, "A", at(18, "07:00:00"))),
	)
	// Ongoing for exactly 24 h: not stale.
	j = append(j, ongoingAlarm(alarm("e24", "D5", "E", 2, "A", at(20, "00:00:00"))))
	// Ongoing since before the period (Read gives such alarms): stale, and
	// no start of the period.
	j = append(j, ongoingAlarm(alarm("old", "D6", "O", 2, "B", time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC))))
	// Ended after the period (a report on a past period): stale at its end.
	j = append(j, alarm("later", "D8", "L", 2, "B", time.Date(2026, 11, 19, 23, 0, 0, 0, time.UTC)))
	j[len(j)-1].RecoveredAt = now.Add(time.Hour)
	// Recorded silently at the first run: not counted, but stale.
	quiet := ongoingAlarm(alarm("quiet", "D7", "Q", 2, "A", at(18, "00:30:00")))
	quiet.Silent = true
	j = append(j, quiet)
	return j
}

func TestComputeGivesTheKnownAnswers(t *testing.T) {
	rules, err := route.Parse("rules.yaml", []byte(testRules), nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := Compute(journalWithKnownAnswers(), rules, now, 3*24*time.Hour, nil)
	o := rep.Overall
	// 11 + 3 + 3 + 2 + 1 + 1 started in the period; old and quiet did
	// not count.
	if o.Alarms != 21 || rep.Silent != 1 {
		t.Fatalf("alarms %d, silent %d; want 21, 1", o.Alarms, rep.Silent)
	}
	if o.AveragePerDay != 21.0/3 {
		t.Errorf("average per day %g, want %g", o.AveragePerDay, 21.0/3)
	}
	wantDays := []Day{{"2026-11-18", 24, 2}, {"2026-11-19", 24, 12}, {"2026-11-20", 24, 7}}
	if !slices.Equal(o.PerDay, wantDays) {
		t.Errorf("per day %+v, want %+v", o.PerDay, wantDays)
	}
	if len(o.PerHour) != 72 || o.PerHour[24+10].Alarms != 11 || o.PerHour[48+12].Alarms != 6 || o.PerHour[6].Alarms != 1 {
		t.Errorf("per hour: %d hours, 19 Nov 10:00 %d, 20 Nov 12:00 %d, 18 Nov 06:00 %d; want 72, 11, 6, 1",
			len(o.PerHour), o.PerHour[24+10].Alarms, o.PerHour[48+12].Alarms, o.PerHour[6].Alarms)
	}
	if o.Peak10m != 11 || !o.Peak10mAt.Equal(at(19, "10:00:00")) {
		t.Errorf("peak 10 min %d at %s, want 11 at 19 Nov 10:00", o.Peak10m, o.Peak10mAt)
	}
	if o.FloodSeconds != 300 || o.FloodShare != 300.0/(3*86400) {
		t.Errorf("flood %g s (%g), want 300 s", o.FloodSeconds, o.FloodShare)
	}
	if len(o.Chattering) != 1 || o.Chattering[0].DeviceSN != "D2" || o.Chattering[0].MostIn60s != 3 ||
		!o.Chattering[0].At.Equal(at(20, "12:00:00")) {
		t.Errorf("chattering %+v, want D2/C3 alone, 3 in 60 s from 20 Nov 12:00", o.Chattering)
	}
	var stale []string
	for _, s := range o.Stale {
		stale = append(stale, s.OriginID)
	}
	if !slices.Equal(stale, []string{"old", "quiet", "u2", "later"}) {
		t.Errorf("stale %v, want [old quiet u2 later], oldest first", stale)
	}
	if h := o.Stale[2].ActiveHours; h != 65 {
		t.Errorf("u2 active %g h, want 65", h)
	}
	// Priorities: 2 urgent, 6 severe, 13 major or minor.
	for i, want := range []int{2, 6, 13} {
		if p := o.Priority[i]; p.Alarms != want || p.Share != float64(want)/21 {
			t.Errorf("priority %s: %d (%g), want %d", p.Name, p.Alarms, p.Share, want)
		}
	}
	// Bad actors: D2/C3, D3/C3 and D4/U with 3, 3, 2, then seven of the
	// flood's pairs with one each, by device and code.
	var actors []string
	top := 0
	for _, b := range o.BadActors {
		actors = append(actors, fmt.Sprintf("%s/%s=%d", b.DeviceSN, b.EventCode, b.Alarms))
		top += b.Alarms
	}
	want := []string{"D2/C3=3", "D3/C3=3", "D4/U=2", "D1/F0=1", "D1/F1=1", "D1/F10=1", "D1/F2=1", "D1/F3=1", "D1/F4=1", "D1/F5=1"}
	if !slices.Equal(actors, want) || o.BadActorShare != float64(top)/21 || top != 15 {
		t.Errorf("bad actors %v (%g), want %v (15 of 21)", actors, o.BadActorShare, want)
	}

	byRoute := map[string]Figures{}
	var names []string
	for _, f := range rep.Routes {
		byRoute[f.Route] = f
		names = append(names, f.Route)
	}
	if !slices.Equal(names, []string{"everything", "urgent", "station-b", "closures"}) {
		t.Fatalf("routes %v, want the rules' four in file order", names)
	}
	if !reflect.DeepEqual(withoutRoute(byRoute["everything"]), o) {
		t.Errorf("route everything differs from the overall figures")
	}
	if f := byRoute["urgent"]; f.Alarms != 2 || len(f.Stale) != 1 || f.Peak10m != 1 || f.FloodSeconds != 0 || f.Priority[0].Share != 1 {
		t.Errorf("route urgent: %d alarms, %d stale, peak %d, flood %g, high %g; want 2, 1, 1, 0, 1",
			f.Alarms, len(f.Stale), f.Peak10m, f.FloodSeconds, f.Priority[0].Share)
	}
	// urgent does not continue: its alarms never reach station-b, which
	// has the chattering alarms and old.
	if f := byRoute["station-b"]; f.Alarms != 7 || len(f.Chattering) != 1 || len(f.Stale) != 2 || f.Stale[0].OriginID != "old" {
		t.Errorf("route station-b: %d alarms, %d chattering, stale %+v; want 7, 1, old and later", f.Alarms, len(f.Chattering), f.Stale)
	}
	if f := byRoute["closures"]; f.Alarms != 0 || len(f.Stale) != 0 || f.AveragePerDay != 0 || f.Priority[0].Share != 0 {
		t.Errorf("route closures (ends only): %+v; want nothing", f)
	}
}

func withoutRoute(f Figures) Figures {
	f.Route = ""
	return f
}

// TestComputeCountsThePeriodOnly: starts before the period or at its end
// do not count, nor toward the peak or the flood.
func TestComputeCountsThePeriodOnly(t *testing.T) {
	var j []store.JournalEntry
	// 11 starts a second apart, the first 5 s before the period.
	for i := range 11 {
		j = append(j, alarm(fmt.Sprint(i), "D", "E", 2, "A", at(20, "00:00:00").Add(time.Duration(i-5)*time.Second)))
	}
	j = append(j, alarm("end", "D", "E", 2, "A", now))
	rep := Compute(j, nil, now, 24*time.Hour, nil)
	if o := rep.Overall; o.Alarms != 6 || o.Peak10m != 6 || o.FloodSeconds != 0 || len(rep.Routes) != 0 || rep.Rules != "" {
		t.Fatalf("alarms %d, peak %d, flood %g, %d routes; want 6, 6, 0, none", o.Alarms, o.Peak10m, o.FloodSeconds, len(rep.Routes))
	}
	if got := rep.Overall.PerDay; len(got) != 1 || got[0].Hours != 24 {
		t.Fatalf("per day %+v, want one whole day", got)
	}
}

func TestFloodSeconds(t *testing.T) {
	base := at(20, "08:00:00")
	every := func(n int, gap time.Duration) []time.Time {
		var ts []time.Time
		for i := range n {
			ts = append(ts, base.Add(time.Duration(i)*gap))
		}
		return ts
	}
	day := base.Add(24 * time.Hour)
	tests := []struct {
		name     string
		times    []time.Time
		from, to time.Time
		want     float64
	}{
		{"ten in ten minutes is no flood", every(10, time.Second), base, day, 0},
		{"eleven at once: ten minutes", every(11, 0), base, day, 600},
		{"eleven a minute apart: from the 11th until the 1st leaves", every(11, time.Minute), base, day, 0},
		{"eleven 30 s apart", every(11, 30*time.Second), base, day, 300},
		{"twelve 30 s apart", every(12, 30*time.Second), base, day, 330},
		{"clipped to the interval", every(11, 0), base.Add(4 * time.Minute), base.Add(6 * time.Minute), 120},
		{"starts before the interval count", every(11, 0), base.Add(9 * time.Minute), day, 60},
		{"nothing", nil, base, day, 0},
	}
	// Twelve 30 s apart: 11 from 5:00 (the 11th) until the 1st leaves at
	// 10:00, then 11 again from 5:30 (12th) ... the 2nd leaves at 10:30:
	// in flood from 5:00 to 10:30, 330 s.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FloodSeconds(tt.times, tt.from, tt.to); got != tt.want {
				t.Fatalf("FloodSeconds = %g, want %g", got, tt.want)
			}
		})
	}
}

func TestPeakAndChattering(t *testing.T) {
	base := at(20, "08:00:00")
	ts := []time.Time{base, base.Add(59 * time.Second), base.Add(119 * time.Second), base.Add(120 * time.Second)}
	if n, from := Peak(ts, time.Minute); n != 2 || !from.Equal(base) {
		t.Fatalf("Peak = %d from %s, want 2 from %s", n, from, base)
	}
	if n, _ := Peak(ts, 2*time.Minute); n != 3 {
		t.Fatalf("Peak over 2 min = %d, want 3", n)
	}
	j := []store.JournalEntry{
		alarm("1", "D1", "E", 2, "A", base), alarm("2", "D1", "E", 2, "A", base.Add(10*time.Second)),
		alarm("3", "D1", "E", 2, "A", base.Add(20*time.Second)),                                   // D1/E chatters
		alarm("4", "D1", "F", 2, "A", base), alarm("5", "D1", "F", 2, "A", base.Add(time.Second)), // two only
		alarm("6", "D2", "E", 2, "A", base), alarm("7", "D2", "E", 2, "A", base.Add(time.Second)),
	}
	silent := alarm("8", "D2", "E", 2, "A", base.Add(2*time.Second))
	silent.Silent = true
	if n := Chattering(append(j, silent)); n != 1 {
		t.Fatalf("Chattering = %d, want 1 (a silent start does not count)", n)
	}
}

func TestParseSince(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"7d", 7 * 24 * time.Hour, ""},
		{"36h", 36 * time.Hour, ""},
		{"90m", 90 * time.Minute, ""},
		{"1d12h", 36 * time.Hour, ""},
		{"366d", MaxSince, ""},
		{"367d", 0, "want a duration"},
		{"400d", 0, "want a duration"},
		{"9000h", 0, "at most 366d"},
		{"30s", 0, "at least a minute"},
		{"", 0, "want a duration"},
		{"d", 0, "want a duration"},
		{"7 days", 0, "want a duration"},
		{"-1h", 0, "want a duration"},
	} {
		got, err := ParseSince(tt.in)
		if tt.err == "" && (err != nil || got != tt.want) {
			t.Errorf("ParseSince(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
		if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.in))) {
			t.Errorf("ParseSince(%q) = %s, %v; want an error naming it and saying %q", tt.in, got, err, tt.err)
		}
	}
}

// TestWriteEveryFormatFromJSON: what a client reads back from the JSON
// writes the same text and Markdown as the report computed here, so that
// relay report prints the same from the ops listener as from a state file.
func TestWriteEveryFormatFromJSON(t *testing.T) {
	rules, err := route.Parse("rules.yaml", []byte(testRules), nil)
	if err != nil {
		t.Fatal(err)
	}
	j := journalWithKnownAnswers()
	j[0].DeviceName = "PCS \x1b[31m|red"
	rep := Compute(j, rules, now, 3*24*time.Hour, nil)
	var js bytes.Buffer
	if err := rep.Write(&js, "json"); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"text", "markdown"} {
		var a, b bytes.Buffer
		if err := rep.Write(&a, format); err != nil {
			t.Fatal(err)
		}
		if err := back.Write(&b, format); err != nil {
			t.Fatal(err)
		}
		if a.String() != b.String() {
			t.Fatalf("%s from the JSON differs:\n%s\n---\n%s", format, b.String(), a.String())
		}
		out := a.String()
		for _, want := range []string{"2026-11-18 00:00 to 2026-11-21 00:00 UTC (3d)", "everything", "station-b",
			"D2", "11 alarms, from 2026-11-19 10:00:00 UTC", "5m, 0.1% of the period", "(ISA-18.2 target)", "2026-11-19"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s has no %q:\n%s", format, want, out)
			}
		}
		if strings.Contains(out, "\x1b") {
			t.Errorf("%s holds an escape character from the upstream", format)
		}
	}
	if err := rep.Write(io.Discard, "yaml"); err == nil || !strings.Contains(err.Error(), "text, markdown, json") {
		t.Fatalf("Write(yaml) = %v, want an error naming the formats", err)
	}
}

func TestSVGHasABarPerBusyHourAndTheFloodLine(t *testing.T) {
	rep := Compute(journalWithKnownAnswers(), nil, now, 3*24*time.Hour, nil)
	var b bytes.Buffer
	if err := rep.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	bars, texts := 0, []string{}
	var inText bool
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed SVG: %v\n%s", err, b.String())
		}
		switch el := tok.(type) {
		case xml.StartElement:
			inText = el.Name.Local == "text"
			for _, a := range el.Attr {
				if el.Name.Local == "rect" && a.Name.Local == "fill" && a.Value == barColor {
					bars++
				}
			}
		case xml.CharData:
			if inText {
				texts = append(texts, string(el))
			}
		case xml.EndElement:
			inText = false
		}
	}
	busy := 0
	for _, h := range rep.Overall.PerHour {
		if h.Alarms > 0 {
			busy++
		}
	}
	if bars != busy || busy != 6 {
		t.Fatalf("%d bars, want one per hour with alarms (%d)", bars, busy)
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{"flood threshold: 60 an hour", "alarms started", "hour of occurrence (UTC)", "Nov 19", "Alarms started per hour"} {
		if !strings.Contains(all, want) {
			t.Errorf("the chart has no text %q: %q", want, texts)
		}
	}
	if strings.Contains(b.String(), "@import") || strings.Contains(b.String(), "url(") {
		t.Error("the chart loads something from outside")
	}
}

// TestAcknowledgementFigures: the alarms acknowledged by the end of the
// period, the median time from detection to the first acknowledgement, and
// the alarms that cleared before anyone acknowledged them; an
// acknowledgement after the period's end does not count yet.
func TestAcknowledgementFigures(t *testing.T) {
	var j []store.JournalEntry
	for i := range 5 {
		j = append(j, alarm(fmt.Sprint(i), "D", fmt.Sprint("E", i), 0, "A", at(20, "10:00:00")))
	}
	j[3] = ongoingAlarm(j[3])
	acks := Acks{
		"0": j[0].DetectedAt.Add(2 * time.Minute),
		"1": j[1].DetectedAt.Add(4 * time.Minute),
		"2": j[2].DetectedAt.Add(9 * time.Minute),
		"3": now.Add(time.Minute), // after the period
	}
	f := Compute(j, nil, now, 24*time.Hour, acks).Overall
	if f.Acknowledged != 3 || f.MedianTimeToAckSeconds != 240 || f.ClearedUnacknowledged != 1 {
		t.Fatalf("acknowledged %d, median %g s, cleared unacknowledged %d; want 3, 240, 1 (alarm 4)",
			f.Acknowledged, f.MedianTimeToAckSeconds, f.ClearedUnacknowledged)
	}
}
