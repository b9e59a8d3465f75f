package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/console"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/store"
)

// manyAlarms returns n ongoing alarms at 500 stations, of every level and
// device type, their raw records the size of the upstream's.
func manyAlarms(n int) []event.Alarm {
	now := time.Now().UTC().Truncate(time.Second)
	out := make([]event.Alarm, n)
	for i := range out {
		id := fmt.Sprintf("A%07d", i)
		out[i] = event.Alarm{OriginID: id, Status: event.StatusOngoing, Level: i % 4, EventCode: fmt.Sprintf("E%03d", i%300),
			EventDesc: "DC insulation resistance abnormal", StationID: fmt.Sprintf("ST%04d", i%500),
			StationName: fmt.Sprintf("Station %d", i%500), DeviceSN: fmt.Sprintf("SN%08d", i%20000),
			DeviceName: fmt.Sprintf("PCS-%d", i%20000), DeviceTemplateCode: event.DeviceTypes[i%len(event.DeviceTypes)],
			OccurredAt: now.Add(-time.Duration(i) * time.Second)}
		out[i].Raw = []byte(fmt.Sprintf(`{"originId":%q,"stationId":%q,"deviceSn":%q,"eventDesc":%q,"payload":"%s"}`,
			id, out[i].StationID, out[i].DeviceSN, out[i].EventDesc, strings.Repeat("x", 600)))
	}
	return out
}

// bigSite is a console whose store tracks n ongoing alarms, each routed to
// the sinks bus and chat, which delivered all but the last 1,000 starts,
// acked of them acknowledged, and the handler and session cookie of an
// administrator.
func bigSite(tb testing.TB, n, acked int) (*site, http.Handler, *http.Cookie) {
	tb.Helper()
	s := newSite(tb, console.Options{AdminToken: adminToken, ViewToken: viewToken}, false)
	alarms := manyAlarms(n)
	route := func(*event.Event) []string { return []string{"bus", "chat"} }
	for i := 0; i < n; i += 25_000 {
		if _, err := s.st.Apply(context.Background(), store.Batch{Observed: alarms[i:min(n, i+25_000)]}, route); err != nil {
			tb.Fatal(err)
		}
	}
	// The sinks caught up with all but the last 1,000 starts each.
	for _, sink := range []string{"bus", "chat"} {
		for {
			es, err := s.st.Pending(sink, 10_000)
			if err != nil {
				tb.Fatal(err)
			}
			keep := max(0, len(es)-1000)
			if keep == 0 {
				break
			}
			ds := make([]store.Delivery, keep)
			for i := range ds {
				ds[i].Entry = es[i]
			}
			if err := s.st.DeliveredBatch(ds); err != nil {
				tb.Fatal(err)
			}
			if len(es) < 10_000 {
				break
			}
		}
	}
	var ids []string
	for i := range acked {
		ids = append(ids, alarms[i*(n/max(acked, 1))].OriginID)
	}
	if len(ids) > 0 {
		a := notify.Action{Kind: notify.Acknowledge, Alarms: ids, Actor: notify.Actor{Via: "api", ID: "bench"}, Ref: "bench"}
		if _, err := s.mgr.Act(context.Background(), a); err != nil {
			tb.Fatal(err)
		}
	}
	c := s.browser()
	s.login(c, adminToken, "ana")
	var ck *http.Cookie
	for _, k := range c.Jar.Cookies(mustURL(tb, s.srv.URL+"/console/")) {
		if k.Name == console.CookieName {
			ck = k
		}
	}
	if ck == nil {
		tb.Fatal("no session cookie after login")
	}
	return s, s.srv.Config.Handler, ck
}

// serve answers GET path with h, as the session of ck, and returns the
// status and body.
func serve(h http.Handler, ck *http.Cookie, path string) (int, string) {
	req := httptest.NewRequest("GET", path, nil)
	req.AddCookie(ck)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// BenchmarkNowPage100k serves the Now page with its default filters while
// the store tracks 100,000 ongoing alarms, 1,000 acknowledged, sent to two
// sinks with 1,000 starts still waiting in each outbox: the server time of
// a page, and its size.
func BenchmarkNowPage100k(b *testing.B) {
	_, h, ck := bigSite(b, 100_000, 1000)
	var body string
	b.ResetTimer()
	for b.Loop() {
		var code int
		if code, body = serve(h, ck, "/console/"); code != http.StatusOK {
			b.Fatalf("GET /console/: %d", code)
		}
	}
	b.ReportMetric(float64(len(body)), "bytes/page")
}

var rowID = regexp.MustCompile(`<tr [^>]*id="alarm-`)

// TestNowPageSizeFollowsTheRowsShownNotTheAlarmsTracked: with more ongoing
// alarms than a page shows, the page shows DefaultRows of them (the first
// by the page's order), says how many there are, and links to more; its
// size depends on the rows shown alone, and with ten times more alarms
// than rows it stays far under a megabyte. (BenchmarkNowPage100k reports
// the size at 100,000.)
func TestNowPageSizeFollowsTheRowsShownNotTheAlarmsTracked(t *testing.T) {
	_, h, ck := bigSite(t, 2000, 10)
	code, page := serve(h, ck, "/console/")
	if code != http.StatusOK {
		t.Fatalf("GET /console/: %d", code)
	}
	if n := len(rowID.FindAllString(page, -1)); n != console.DefaultRows {
		t.Fatalf("%d rows shown, want %d", n, console.DefaultRows)
	}
	if !strings.Contains(page, "Showing the first 200 of 2000 matching alarms (2000 ongoing)") ||
		!strings.Contains(page, `href="/console/?limit=1000">show up to 1000</a>`) {
		t.Errorf("the page does not say it shows 200 of 2000 with a link to more:\n%s", page[:min(len(page), 4000)])
	}
	// A row is at most about 2 kB with its ledger and buttons: the page of
	// MaxRows rows is the largest, whatever the alarms tracked.
	if perRow := len(page) / console.DefaultRows; len(page) > 1<<20 || perRow*console.MaxRows > 4<<20 {
		t.Errorf("the page is %d bytes (%d a row), want under 1 MB", len(page), perRow)
	}
	_, more := serve(h, ck, "/console/?limit=100000")
	if n := len(rowID.FindAllString(more, -1)); n != console.MaxRows {
		t.Errorf("?limit=100000 shows %d rows, want the cap %d", n, console.MaxRows)
	}
}
