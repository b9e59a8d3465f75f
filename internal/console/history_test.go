package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/store"
)

// apply applies the records to the site's store as detected at, routing
// every event to sinks.
func (s *silenceSite) apply(at time.Time, sinks []string, recs ...event.Alarm) {
	s.t.Helper()
	route := func(*event.Event) []string { return sinks }
	if _, err := s.st.Apply(context.Background(), store.Batch{Observed: recs, DetectedAt: at}, route); err != nil {
		s.t.Fatal(err)
	}
}

// ended is rec ended (or invalidated, with status -1) at at.
func ended(rec event.Alarm, status int, at time.Time) event.Alarm {
	rec.Status, rec.RecoveredAt = status, at
	return rec
}

var historyRow = regexp.MustCompile(`<tr id="h-([^"]+)"`)

// historyIDs returns the ids of the History page's rows, in order.
func historyIDs(page string) []string {
	var out []string
	for _, m := range historyRow.FindAllStringSubmatch(page, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}

func TestHistoryListsTransitionsNewestFirstAndSearches(t *testing.T) {
	now := springForward
	const hostile = `<script>alert(1)</script>`
	s := newSilenceSite(t)
	old := alarmAt(now, "A-old", "S-OLD", "D0", "E0", 3, 2*24*60)
	a1 := alarmAt(now, "A1", "Plant "+hostile, "D1", "E1", 0, 30)
	a1.EventDesc = hostile
	a2 := alarmAt(now, "A2", "S2", "D2", "E2", 2, 180)
	a3 := alarmAt(now, "A3", "S3", "D3", "E3", 1, 5*24*60)
	s.apply(now.Add(-6*24*time.Hour), nil, a3)
	s.apply(now.Add(-3*24*time.Hour), nil, old)
	s.apply(now.Add(-4*time.Hour), nil, a2)
	s.apply(now.Add(-2*time.Hour), nil, ended(a2, event.StatusInvalid, now.Add(-2*time.Hour)))
	s.apply(now.Add(-time.Hour), nil, ended(old, event.StatusEnded, now.Add(-time.Hour)))
	s.apply(now, nil, a1)
	c := s.browser()
	s.login(c, viewToken, "")
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"A1-start", "A-old-end", "A2-invalid", "A2-start"}},
		{"?days=7", []string{"A1-start", "A-old-end", "A2-invalid", "A2-start", "A-old-start", "A3-start"}},
		{"?days=3&q=s2", []string{"A2-invalid", "A2-start"}},
		{"?q=OVERHEAT&transition=start", []string{"A2-start"}},
		{"?q=" + "%3Cscript", []string{"A1-start"}},
		{"?transition=end", []string{"A-old-end"}},
		{"?level=urgent&days=7", []string{"A1-start"}},
		{"?q=a-OLD&days=7", []string{"A-old-end", "A-old-start"}},
		{"?q=nothing", nil},
	} {
		t.Run(tc.query, func(t *testing.T) {
			resp, page := s.do(c, "GET", "/console/history"+tc.query, nil, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s:\n%s", resp.Status, page)
			}
			if got := historyIDs(page); !slices.Equal(got, tc.want) {
				t.Errorf("rows %v, want %v", got, tc.want)
			}
			if strings.Contains(page, "<script>") {
				t.Errorf("upstream text reached the page unescaped:\n%s", page)
			}
		})
	}
	_, page := s.do(c, "GET", "/console/history", nil, nil)
	row := rowOf(t, page, "h-A1-start")
	for _, want := range []string{"2026-03-28 11:30:00", "urgent", "Plant &lt;script&gt;", "E1: &lt;script&gt;", `href="/console/history/A1"`} {
		if !strings.Contains(row, want) {
			t.Errorf("A1's row lacks %q:\n%s", want, row)
		}
	}
}

func TestHistoryStaysBoundedOnAStormDay(t *testing.T) {
	now := springForward
	s := newSilenceSite(t)
	const storm = 3000
	recs := make([]event.Alarm, storm)
	for i := range recs {
		recs[i] = alarmAt(now, "S"+strings.Repeat("0", 4-len(itoa(i)))+itoa(i), "ST1", "D"+itoa(i%50), "E1", i%4, 0)
		recs[i].OccurredAt = now.Add(-time.Duration(i+1) * 20 * time.Second)
	}
	s.apply(now, nil, recs...)
	c := s.browser()
	s.login(c, viewToken, "")
	var all []string
	next := "/console/history"
	for pages := 0; next != ""; pages++ {
		if pages > storm/500 {
			t.Fatalf("more than %d pages", storm/500)
		}
		resp, page := s.do(c, "GET", next, nil, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", next, resp.Status)
		}
		ids := historyIDs(page)
		if len(ids) > 500 || len(page) > 400<<10 {
			t.Fatalf("%s: %d rows in %d bytes, want at most 500 rows in 400 KB", next, len(ids), len(page))
		}
		if pages == 0 && !strings.Contains(page, "Showing 500 of 3000 transitions") {
			t.Errorf("the first page does not say it shows 500 of 3000:\n%s", page[:min(len(page), 3000)])
		}
		// A next page reads the journal up to its cursor only, and counts
		// the newer transitions from its link.
		if want := "Showing 500 of 3000 transitions (after the " + itoa(pages*500) + " newer ones)"; pages > 0 && !strings.Contains(page, want) {
			t.Errorf("page %d does not say %q:\n%s", pages+1, want, page[:min(len(page), 3000)])
		}
		all = append(all, ids...)
		next = ""
		if m := regexp.MustCompile(`<a href="(/console/history\?[^"]+)">next \(older\) transitions</a>`).FindStringSubmatch(page); m != nil {
			next = html.UnescapeString(m[1])
		}
	}
	if len(all) != storm {
		t.Fatalf("the pages showed %d transitions, want %d", len(all), storm)
	}
	for i, id := range all {
		// S0000 is the newest, 20 s before now.
		if want := "S" + strings.Repeat("0", 4-len(itoa(i))) + itoa(i) + "-start"; id != want {
			t.Fatalf("row %d is %s, want %s: newest first without gaps or repeats across pages", i, id, want)
		}
	}
}

// TestHistorySearchTextIsBounded: a search text longer than 200 bytes is
// answered 400 with what to do, before the journal is read; 200 bytes is a
// search like any other.
func TestHistorySearchTextIsBounded(t *testing.T) {
	s := newSilenceSite(t)
	c := s.browser()
	s.login(c, viewToken, "")
	resp, page := s.do(c, "GET", "/console/history?q="+strings.Repeat("x", 201), nil, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "201 characters long: search with at most 200") {
		t.Fatalf("a 201-character search: %s %s, want 400 saying at most 200", resp.Status, page)
	}
	resp, page = s.do(c, "GET", "/console/history?q="+url.QueryEscape(strings.Repeat("光", 200)), nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "0 transitions") {
		t.Fatalf("a search of 200 characters (600 bytes): %s, want 200 and no transition:\n%s", resp.Status, page)
	}
	if !strings.Contains(page, `maxlength="200"`) {
		t.Errorf("the search box does not say the bound (maxlength=\"200\"):\n%s", page)
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func TestHistoryAlarmShowsItsEventJSON(t *testing.T) {
	now := springForward
	const hostile = `<script>alert(1)</script>`
	s := newSilenceSite(t)
	a1 := alarmAt(now, "A1", hostile, "D1", "E1", 0, 30)
	s.apply(now.Add(-20*time.Minute), []string{"hook"}, a1)
	s.apply(now, []string{"hook"}, ended(a1, event.StatusEnded, now.Add(-5*time.Minute)))
	pending, err := s.st.Pending("hook", 10)
	if err != nil || len(pending) != 2 {
		t.Fatalf("pending %v, %v; want A1's start and end", pending, err)
	}
	if err := s.st.DeadLetter(pending[0], "HTTP 500 from the receiver"); err != nil {
		t.Fatal(err)
	}
	c := s.browser()
	s.login(c, adminToken, "")
	resp, page := s.do(c, "GET", "/console/history/A1", nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s:\n%s", resp.Status, page)
	}
	if strings.Contains(page, "<script>") {
		t.Errorf("upstream text reached the page unescaped:\n%s", page)
	}
	text := html.UnescapeString(page)
	var exact bytes.Buffer
	if err := json.Indent(&exact, pending[0].Body, "", "  "); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, `<pre tabindex="0">`+exact.String()+"</pre>") {
		t.Errorf("the dead letter's exact bytes, pretty-printed, are not shown:\n%s\nwant\n%s", text, exact.String())
	}
	if !strings.Contains(text, "dead letter of sink hook") || !strings.Contains(text, "HTTP 500 from the receiver") {
		t.Errorf("the held event does not say where it is and why:\n%s", text)
	}
	for _, want := range []string{`"id": "A1:start"`, `"id": "A1:end"`, `"transition": "end"`, `"stationId": "\u003cscript\u003ealert(1)\u003c/script\u003e"`,
		`href="/console/silences/new?alarm=A1"`} {
		if !strings.Contains(text, want) {
			t.Errorf("the alarm's page lacks %s:\n%s", want, text)
		}
	}
	if resp, _ := s.do(c, "GET", "/console/history/nope", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown alarm: %s, want 404", resp.Status)
	}
}
