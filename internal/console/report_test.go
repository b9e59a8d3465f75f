package console_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/console"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/isa"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

var reportT0 = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

// reportRules has two operator positions: the urgent alarms, and all.
const reportRules = "sinks:\n  - name: bus\n    type: nats\n    subject: alarms\nroutes:\n" +
	"  - name: pager\n    match: { levels: [0] }\n    to: [bus]\n    continue: true\n  - name: everyone\n    to: [bus]\n"

const hostileDevice, hostileCode = `<script>alert(1)</script>`, `"><img src=x onerror=alert(2)>`

// reportStore is a store on a fake clock at reportT0 with known alarms of
// the last day, two of three days before, and three acknowledgements,
// after 4, 4 and 6 minutes; with its rules and clock.
func reportStore(t testing.TB) (*store.Store, *route.Rules, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(reportT0)
	st, err := store.Open(filepath.Join(t.TempDir(), "relay.db"), store.Options{Clock: clk, LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rules, err := route.Parse("rules.yaml", []byte(reportRules), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var b store.Batch
	add := func(prefix, device, code string, level int, times ...time.Time) {
		for i, at := range times {
			b.Observed = append(b.Observed, event.Alarm{OriginID: fmt.Sprintf("%s%d", prefix, i), Status: event.StatusOngoing,
				Level: level, EventCode: code, TenantID: "t1", StationID: "s1", DeviceSN: device, OccurredAt: at, Raw: []byte(`{}`)})
		}
	}
	var flood, minor []time.Time
	for i := range 12 {
		flood = append(flood, reportT0.Add(-3*time.Hour+time.Duration(i)*20*time.Second))
	}
	for i := range 5 {
		minor = append(minor, reportT0.Add(-20*time.Hour+time.Duration(i)*time.Hour))
	}
	add("f", "D1", "E1", 0, flood...)
	add("m", "D2", "E2", 1, reportT0.Add(-10*time.Hour), reportT0.Add(-9*time.Hour), reportT0.Add(-8*time.Hour))
	add("l", "D3", "E3", 3, minor...)
	add("x", hostileDevice, hostileCode, 2, reportT0.Add(-5*time.Hour))
	add("old", "D4", "E4", 3, reportT0.Add(-72*time.Hour), reportT0.Add(-71*time.Hour))
	if _, err := st.Apply(context.Background(), b, nil); err != nil {
		t.Fatal(err)
	}
	mgr, err := manage.New(manage.Options{Store: st, Rules: func() *route.Rules { return rules }, Clock: clk,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		after  time.Duration
		alarms []string
	}{{4 * time.Minute, []string{"f0", "f1"}}, {2 * time.Minute, []string{"m0"}}} {
		clk.Advance(step.after)
		res, err := mgr.Act(context.Background(), notify.Action{Kind: notify.Acknowledge, Alarms: step.alarms,
			Actor: notify.Actor{Via: "api", ID: "ana"}})
		if err != nil || len(res.Applied) != len(step.alarms) {
			t.Fatalf("acknowledge %v: %+v, %v", step.alarms, res, err)
		}
	}
	return st, rules, clk
}

func newReportSite(t *testing.T) (*site, *store.Store, *route.Rules, *clock.Fake) {
	t.Helper()
	st, rules, clk := reportStore(t)
	s := newSite(t, console.Options{AdminToken: adminToken, ViewToken: viewToken, Store: st, Now: clk.Now,
		Sessions: console.NewSessions(nil), Rules: func() *route.Rules { return rules }}, false)
	return s, st, rules, clk
}

var (
	barRect   = regexp.MustCompile(`<rect x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)" fill="#1f6feb"/>`)
	floodLine = regexp.MustCompile(`<line x1="[\d.]+" y1="([\d.]+)" x2="[\d.]+" y2="([\d.]+)" stroke="[^"]+" class="flood-line"[^>]*><title>([^<]*)</title></line>`)
)

// section returns the part of page from the element with id on to the end
// of its section.
func section(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no element %q on the page:\n%s", id, page)
	}
	j := strings.Index(page[i:], "</section>")
	return page[i : i+j]
}

// TestConsoleReportShowsTheKnownFigures: the page of the last day shows
// what isa computes of the known alarms: 21 alarms, the flood of 12 in 4
// minutes with the flood line at 60 an hour on the bars' scale, the
// priority mix 12/3/6 as isa's shares against 5/15/80, the bad actors most
// frequent first, the acknowledgements (3, median 4m); the 7-day page adds
// the alarms of three days ago.
func TestConsoleReportShowsTheKnownFigures(t *testing.T) {
	s, st, rules, clk := newReportSite(t)
	c := s.browser()
	s.login(c, adminToken, "")
	resp, page := s.do(c, "GET", "/console/report", nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /console/report: %s\n%s", resp.Status, page)
	}
	acks, err := manage.FirstAcks(st)
	if err != nil {
		t.Fatal(err)
	}
	want, err := isa.FromStore(st, rules, clk.Now(), 24*time.Hour, acks)
	if err != nil {
		t.Fatal(err)
	}
	if f := want.Overall; f.Alarms != 21 || f.Peak10m != 12 || f.Acknowledged != 3 || f.MedianTimeToAckSeconds != 240 {
		t.Fatalf("isa's figures of the known alarms: %d alarms, peak %d, %d acknowledged, median %g s; want 21, 12, 3, 240",
			f.Alarms, f.Peak10m, f.Acknowledged, f.MedianTimeToAckSeconds)
	}

	summary := section(t, page, "summary")
	for _, row := range []string{
		`<th scope="row">all alarms</th><td>21</td><td>21.0</td><td>12</td><td>` + isa.Percent(want.Overall.FloodShare) + `</td><td>57.1%</td><td>14.3%</td><td>28.6%</td>`,
		`<td>3</td><td>4m</td><td>0</td></tr>`,
		`<th scope="row">pager</th><td>12</td>`,
		`<th scope="row">everyone</th><td>21</td>`,
	} {
		if !strings.Contains(summary, row) {
			t.Errorf("the summary has no %q:\n%s", row, summary)
		}
	}

	hourly := section(t, page, "chart-hourly")
	fl := floodLine.FindStringSubmatch(hourly)
	if fl == nil || !strings.Contains(fl[3], "flood") || fl[1] != fl[2] {
		t.Fatalf("no horizontal flood line with a title saying flood in the chart:\n%s", hourly)
	}
	tallest, bottom := 0.0, 0.0
	for _, m := range barRect.FindAllStringSubmatch(hourly, -1) {
		y, _ := strconv.ParseFloat(m[1], 64)
		h, _ := strconv.ParseFloat(m[2], 64)
		if h > tallest {
			tallest, bottom = h, y+h
		}
	}
	floodY, _ := strconv.ParseFloat(fl[1], 64)
	// The busiest hour has the 12 alarms of the flood: the line at 60 an
	// hour stands 5 times as high above the axis.
	if ratio := (bottom - floodY) / tallest; tallest == 0 || ratio < 4.95 || ratio > 5.05 {
		t.Errorf("the flood line is %.2f times the height of the 12-alarm bar, want 5 (60 an hour)", ratio)
	}
	if !strings.Contains(hourly, `role="img"`) || !strings.Contains(hourly, "<title>Alarms started per hour") || !strings.Contains(hourly, "<desc>") {
		t.Errorf("the chart has no accessible name and description:\n%s", hourly)
	}
	if !strings.Contains(hourly, "<td>2026-11-21 05:00</td><td>12</td>") {
		t.Errorf("the table of the hours has no row of the flood's hour:\n%s", hourly)
	}

	mix := section(t, page, "chart-priority")
	for i, name := range []string{"high", "medium", "low"} {
		p := want.Overall.Priority[i]
		row := fmt.Sprintf(`<th scope="row">%s</th><td>%s</td><td>%d</td><td>%s</td><td>%s</td>`, name, p.Levels, p.Alarms, isa.Percent(p.Share), isa.Percent(p.Target))
		if !strings.Contains(mix, row) {
			t.Errorf("the priority mix has no row %q:\n%s", row, mix)
		}
	}
	if n := strings.Count(mix, `class="target"`); n != 3 {
		t.Errorf("the priority chart has %d target marks, want 3 (5/15/80)", n)
	}

	actors := section(t, page, "bad-actors")
	last := -1
	for _, d := range []string{"<td>D1</td><td>E1</td>", "<td>D3</td><td>E3</td>", "<td>D2</td><td>E2</td>"} {
		i := strings.Index(actors, d)
		if i < last {
			t.Errorf("bad actor %q is missing or out of order:\n%s", d, actors)
		}
		last = i
	}
	if strings.Contains(actors, "D4") {
		t.Errorf("the last day's bad actors hold an alarm of three days ago:\n%s", actors)
	}
	if ack := section(t, page, "chart-ack"); !strings.Contains(ack, "4m median, 3 of 21 acknowledged") {
		t.Errorf("the time to acknowledge chart does not say the median:\n%s", ack)
	}

	for days, label := range map[int]string{1: "1 day", 7: "7 days", 30: "30 days"} {
		link := fmt.Sprintf(`href="/console/report?days=%d"`, days)
		if !regexp.MustCompile(regexp.QuoteMeta(link) + `[^>]*>` + label + `</a>`).MatchString(page) {
			t.Errorf("no link %q to the %s report", label, label)
		}
	}
	_, week := s.do(c, "GET", "/console/report?days=7", nil, nil)
	if !strings.Contains(section(t, week, "bad-actors"), "<td>D4</td>") || !strings.Contains(section(t, week, "summary"), "<td>23</td>") {
		t.Errorf("the 7-day report does not count the alarms of three days ago:\n%s", week)
	}
	if resp, body := s.do(c, "GET", "/console/report?days=2", nil, nil); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "want 1, 7 or 30") {
		t.Errorf("?days=2: %s %q, want 400 naming the choices", resp.Status, body)
	}
}

// TestConsoleReportEscapesUpstreamTextForAViewer: a viewer reads the
// report, whose tables and charts show the hostile device and code escaped.
func TestConsoleReportEscapesUpstreamTextForAViewer(t *testing.T) {
	s, _, _, _ := newReportSite(t)
	c := s.browser()
	s.login(c, viewToken, "")
	for _, days := range []string{"1", "30"} {
		resp, page := s.do(c, "GET", "/console/report?days="+days, nil, nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, `class="flood-line"`) {
			t.Fatalf("a viewer's report of %s days: %s\n%s", days, resp.Status, page)
		}
		if strings.Contains(page, "<script>") || strings.Contains(page, "<img") {
			t.Errorf("upstream text reached the report unescaped:\n%s", page)
		}
		if n := strings.Count(page, "&lt;script&gt;alert(1)&lt;/script&gt;"); n < 2 {
			t.Errorf("the hostile device is shown escaped %d times, want in the table and the chart:\n%s", n, page)
		}
	}
}

// BenchmarkConsoleReport30Days renders the 30-day report of a store whose
// journal holds 50,000 alarms of the 30 days, one in a hundred still
// ongoing (stale), with two routes.
func BenchmarkConsoleReport30Days(b *testing.B) {
	clk := clock.NewFake(reportT0)
	st, err := store.Open(filepath.Join(b.TempDir(), "relay.db"), store.Options{Clock: clk, LockTimeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	rules, err := route.Parse("rules.yaml", []byte(reportRules), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	const n, per = 50_000, 2_000
	step := 30 * 24 * time.Hour / n
	for i := 0; i < n; i += per {
		var batch store.Batch
		for j := i; j < i+per; j++ {
			a := event.Alarm{OriginID: fmt.Sprintf("a%d", j), Status: event.StatusEnded,
				Level: j % 4, EventCode: fmt.Sprintf("E%d", j%37), TenantID: "t1", StationID: fmt.Sprintf("s%d", j%50),
				DeviceSN: fmt.Sprintf("D%d", j%500), OccurredAt: reportT0.Add(-30*24*time.Hour + time.Duration(j)*step), Raw: []byte(`{}`)}
			a.RecoveredAt = a.OccurredAt.Add(20 * time.Minute)
			if j%100 == 0 { // one in a hundred still ongoing, and stale
				a.Status, a.RecoveredAt = event.StatusOngoing, time.Time{}
			}
			batch.Observed = append(batch.Observed, a)
		}
		if _, err := st.Apply(context.Background(), batch, nil); err != nil {
			b.Fatal(err)
		}
	}
	h := console.New(nil, console.Options{AdminToken: adminToken, Store: st, Now: clk.Now, Sessions: console.NewSessions(nil),
		Rules: func() *route.Rules { return rules }, Logger: slog.New(slog.DiscardHandler)})
	login := httpRecorder(h, "POST", "/console/login", "token="+adminToken, nil)
	cookie := login.Result().Cookies()[0]
	b.ResetTimer()
	var size int
	for b.Loop() {
		rec := httpRecorder(h, "GET", "/console/report?days=30", "", cookie)
		if rec.Code != http.StatusOK {
			b.Fatalf("GET /console/report?days=30: %d %s", rec.Code, rec.Body.String())
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size)/1024, "KiB/page")
}

// httpRecorder sends h a request with a form body (when not empty) and a
// cookie (when not nil), and returns the answer.
func httpRecorder(h http.Handler, method, path, form string, cookie *http.Cookie) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(form))
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
