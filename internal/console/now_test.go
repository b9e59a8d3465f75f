package console_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
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
		if k.Name == console.SessionCookieName(false, s.srv.Listener.Addr().String()) {
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

// routed applies alarms to the site's store, every start routed to sinks.
func (s *site) routed(sinks []string, alarms ...event.Alarm) {
	s.t.Helper()
	route := func(*event.Event) []string { return sinks }
	if _, err := s.st.Apply(context.Background(), store.Batch{Observed: alarms}, route); err != nil {
		s.t.Fatal(err)
	}
}

// row returns the <tr> of alarm id in page, or fails.
func row(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, `id="alarm-`+id+`"`)
	if i < 0 {
		t.Fatalf("no row of %s in the page:\n%s", id, page)
	}
	j := strings.Index(page[i:], "</tr>")
	return page[i : i+j]
}

func TestNowShowsWhereEachStartWentAndWhatBecameOfIt(t *testing.T) {
	s := newSite(t, console.Options{AdminToken: adminToken}, false)
	// The bus says send_resolved: false: its column says no end will come.
	s.st.SetResolvedOff([]string{"bus"})
	s.routed([]string{"chat"}, record("SENT", 0, "S1", "D1", 5), record("WAIT", 0, "S1", "D2", 5),
		record("DEAD", 0, "S1", "D3", 5), record("QUIET", 0, "S1", "D4", 5))
	s.routed([]string{"chat", "bus"}, record("TWO", 1, "S2", "D5", 5))
	es, err := s.st.Pending("chat", 100)
	if err != nil {
		t.Fatal(err)
	}
	entry := map[string]store.Entry{}
	for _, e := range es {
		entry[e.OriginID] = e
	}
	if err := s.st.Settle([]store.Delivery{
		{Entry: entry["SENT"], Memory: map[string]string{"ts": "1700.1"}},
		{Entry: entry["TWO"]},
		{Entry: entry["QUIET"], Suppressed: "maintenance",
			Memory: map[string]string{store.MemorySuppressed: "maintenance", store.MemoryWhy: "night-works"}},
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.st.DeadLetter(entry["DEAD"], "slack: channel_not_found (HTTP 404)"); err != nil {
		t.Fatal(err)
	}
	page := s.login(s.browser(), adminToken, "")
	for id, want := range map[string][]string{
		"SENT":  {`sent-delivered">chat: delivered</span>`},
		"WAIT":  {`sent-pending">chat: pending</span>`, "waiting since"},
		"DEAD":  {`sent-dead">chat: dead</span>`, "slack: channel_not_found (HTTP 404)"},
		"QUIET": {`sent-withheld">chat: withheld</span>`, "maintenance: night-works"},
		"TWO":   {`sent-delivered">chat: delivered</span>`, `sent-pending">bus: pending, no end</span>`, "its end will not be sent (send_resolved: false)"},
	} {
		r := row(t, page, id)
		for _, w := range want {
			if !strings.Contains(r, w) {
				t.Errorf("the row of %s lacks %q:\n%s", id, w, r)
			}
		}
	}
}

func TestNowFiltersByDeviceType(t *testing.T) {
	inv, pcs := record("INV", 0, "S1", "D1", 5), record("PCS", 0, "S1", "D2", 5)
	inv.DeviceTemplateCode, pcs.DeviceTemplateCode = "Inverter", "Store_PCS"
	s := newSite(t, console.Options{ViewToken: viewToken}, false, inv, pcs)
	c := s.browser()
	page := s.login(c, viewToken, "")
	if !strings.Contains(row(t, page, "INV"), `<span class="devtype">Inverter</span>`) {
		t.Errorf("the row of INV does not show its device type:\n%s", row(t, page, "INV"))
	}
	for _, q := range []string{"Inverter", "inverter"} {
		_, page = s.do(c, "GET", "/console/?type="+q, nil, nil)
		if !strings.Contains(page, `id="alarm-INV"`) || strings.Contains(page, `id="alarm-PCS"`) {
			t.Errorf("?type=%s does not show INV alone:\n%s", q, page)
		}
		if !strings.Contains(page, `<option value="Inverter" selected>`) {
			t.Errorf("?type=%s: Inverter is not the selected type", q)
		}
	}
	_, page = s.do(c, "GET", "/console/?type=AntiFire", nil, nil)
	if strings.Contains(page, `id="alarm-`) || !strings.Contains(page, "matches the filters") {
		t.Errorf("?type=AntiFire shows alarms:\n%s", page)
	}
}

func TestNowRowsEscapeUpstreamTextAndOfferViewersNoButtons(t *testing.T) {
	hostile := record(`"><img src=x onerror=alert(3)>`, 0, `<script>alert(1)</script>`, `"><img src=x onerror=alert(1)>`, 5)
	hostile.DeviceTemplateCode = `<script>alert(2)</script>`
	s := newSite(t, console.Options{AdminToken: adminToken, ViewToken: viewToken}, false, hostile)
	admin, viewer := s.browser(), s.browser()
	s.login(admin, adminToken, "")
	s.login(viewer, viewToken, "")
	for name, c := range map[string]*http.Client{"admin": admin, "viewer": viewer} {
		resp, rows := s.do(c, "GET", "/console/rows", nil, nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(rows, `<tbody id="alarms">`) || !strings.Contains(rows, `<p class="count" id="count">`) {
			t.Fatalf("%s: GET /console/rows: %s, want the table body and the count:\n%s", name, resp.Status, rows)
		}
		if strings.Contains(rows, "<script") || strings.Contains(rows, "<img") {
			t.Errorf("%s: upstream text reached the rows unescaped:\n%s", name, rows)
		}
		if !strings.Contains(rows, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s: the hostile station is not shown escaped:\n%s", name, rows)
		}
		buttons := strings.Contains(rows, "<button") || strings.Contains(rows, ">Silence</a>")
		if buttons != (name == "admin") {
			t.Errorf("%s: buttons and the Silence link shown = %v:\n%s", name, buttons, rows)
		}
	}
	_, page := s.do(admin, "GET", "/console/", nil, nil)
	if !strings.Contains(page, `href="/console/silences/new?alarm=%22%3e%3cimg%20src%3dx%20onerror%3dalert%283%29%3e">Silence</a>`) {
		t.Errorf("no Silence link with the alarm's id escaped:\n%s", page)
	}
	if resp, _ := s.do(s.browser(), "GET", "/console/rows", nil, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET /console/rows without a session: %s, want 403", resp.Status)
	}
}

// events opens the live-update stream of c and returns the ids of the
// "alarms" events it receives, in order; the stream ends with ctx.
func (s *site) events(ctx context.Context, c *http.Client) (*http.Response, <-chan uint64) {
	s.t.Helper()
	resp := s.stream(ctx, c)
	ids := make(chan uint64, 1000)
	go func() {
		defer close(ids)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var id uint64
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id, _ = strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
			case line == "event: alarms":
				ids <- id
			}
		}
	}()
	return resp, ids
}

// next returns the next event's id, or fails after a generous while.
func next(t *testing.T, ids <-chan uint64, after string) uint64 {
	t.Helper()
	select {
	case id, ok := <-ids:
		if !ok {
			t.Fatalf("the event stream ended, want an event after %s", after)
		}
		return id
	case <-time.After(10 * time.Second):
		t.Fatalf("no event within 10s after %s", after)
	}
	return 0
}

func TestNowLiveUpdateSaysWhenAlarmsOrAcknowledgementsChanged(t *testing.T) {
	s := newSite(t, console.Options{AdminToken: adminToken, LiveEvery: time.Millisecond}, false, record("A1", 0, "S1", "D1", 5))
	c := s.browser()
	page := s.login(c, adminToken, "")
	if !strings.Contains(page, `<script src="static/live.js" defer></script>`) ||
		!strings.Contains(page, `data-events="/console/events"`) || !strings.Contains(page, `data-rows="/console/rows"`) {
		t.Fatalf("the page does not load live.js with the stream's and the rows' addresses:\n%s", page)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, ids := s.events(ctx, c)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("GET /console/events: %s %q, want 200 text/event-stream", resp.Status, ct)
	}
	s.routed(nil, record("A2", 1, "S1", "D2", 1))
	gen, _ := s.st.Changes()
	if id := next(t, ids, "a poll with a new alarm"); id != gen {
		t.Errorf("event id %d after the poll, want the store's generation %d", id, gen)
	}
	resp, _ = s.do(c, "POST", "/console/alarms/A1/ack", url.Values{"csrf": {csrf(t, page)}}, map[string]string{"Origin": s.srv.URL})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("acknowledge: %s", resp.Status)
	}
	gen, _ = s.st.Changes()
	for id := next(t, ids, "an acknowledgement"); id < gen; id = next(t, ids, "an acknowledgement") {
	}
	_, rows := s.do(c, "GET", "/console/rows", nil, nil)
	if !strings.Contains(row(t, rows, "A1"), "acknowledged") || !strings.Contains(rows, "2 of 2 ongoing alarms") {
		t.Errorf("the rows after the events do not show A2 and A1 acknowledged:\n%s", rows)
	}
}

func TestNowLiveUpdateCoalescesAStorm(t *testing.T) {
	const every = 50 * time.Millisecond
	s := newSite(t, console.Options{ViewToken: viewToken, LiveEvery: every}, false)
	c := s.browser()
	s.login(c, viewToken, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, ids := s.events(ctx, c)
	const storm = 100
	began := time.Now()
	for i := range storm {
		s.routed(nil, record(fmt.Sprintf("S%03d", i), i%4, "S1", "D1", 1))
	}
	took := time.Since(began)
	last, _ := s.st.Changes()
	events := 0
	for id := uint64(0); id < last; events++ {
		id = next(t, ids, "the storm")
	}
	t.Logf("%d events for a storm of %d polls in %s", events, storm, took)
	// One event at once, then at most one per LiveEvery, and one for the
	// changes of the last pause.
	if limit := 2 + int(took/every); events > limit || events >= storm/2 {
		t.Errorf("%d events for a storm of %d polls in %s, want at most %d", events, storm, took, limit)
	}
}

func TestNowLiveUpdateRefusesStrangersAndEnds(t *testing.T) {
	s := newSite(t, console.Options{ViewToken: viewToken, LiveEvery: time.Millisecond}, false)
	resp, body := s.do(s.browser(), "GET", "/console/events", nil, nil)
	if resp.StatusCode != http.StatusForbidden || strings.Contains(resp.Header.Get("Content-Type"), "event-stream") {
		t.Errorf("GET /console/events without a session: %s %q, want 403: %s", resp.Status, resp.Header.Get("Content-Type"), body)
	}

	// The stream ends when the browser goes: the request's context ends.
	c := console.New(s.mgr, console.Options{ViewToken: viewToken, Store: s.st, Sessions: console.NewSessions(nil)})
	mux := http.NewServeMux()
	c.Register(mux)
	login := httptest.NewRequest("POST", "/console/login", strings.NewReader(url.Values{"token": {viewToken}}.Encode()))
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, login)
	cookies := rec.Result().Cookies()
	if len(cookies) == 0 {
		t.Fatalf("login: %d, no cookie", rec.Code)
	}
	for _, stop := range []string{"the browser goes", "Close"} {
		ctx, cancel := context.WithCancel(context.Background())
		req := httptest.NewRequest("GET", "/console/events", nil).WithContext(ctx)
		req.AddCookie(cookies[0])
		done := make(chan struct{})
		go func() { mux.ServeHTTP(httptest.NewRecorder(), req); close(done) }()
		if stop == "Close" {
			c.Close()
		} else {
			cancel()
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("the event stream is still open 10s after %s", stop)
		}
		cancel()
	}
}
