package console_test

import (
	"context"
	"errors"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/console"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/store"
)

// maintenanceRules have two maintenance windows: a night in Berlin, which
// changes to summer time on 2026-03-29, and a morning in Shanghai, which
// has no summer time.
const maintenanceRules = `sinks:
  - {name: bus, type: nats, subject: alarms}
routes:
  - {name: all, to: [bus]}
maintenance:
  - {name: berlin-night, when: [berlin-night], match: {station_ids: [S-BER]}}
  - {name: shanghai-morning, when: [shanghai-morning], match: {levels: [minor]}}
time_intervals:
  - name: berlin-night
    time_intervals: [{times: [{start_time: '01:00', end_time: '04:00'}], location: Europe/Berlin}]
  - name: shanghai-morning
    time_intervals: [{times: [{start_time: '06:00', end_time: '08:00'}], location: Asia/Shanghai}]
`

// springForward is noon UTC the day before Berlin's clocks go forward.
var springForward = time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)

// silenceSite is a console with real silences and real rules on a real
// store, on a fake clock at springForward.
type silenceSite struct {
	*site
	st       *store.Store
	silences *silence.Silences
	clk      *clock.Fake
}

// alarmAt is an ongoing alarm that occurred minutesAgo before the site's
// time.
func alarmAt(now time.Time, id, station, device, code string, level, minutesAgo int) event.Alarm {
	return event.Alarm{OriginID: id, Status: event.StatusOngoing, Level: level, EventCode: code, EventDesc: "overheating",
		StationID: station, DeviceSN: device, OccurredAt: now.Add(-time.Duration(minutesAgo) * time.Minute), Raw: []byte(`{}`)}
}

func newSilenceSite(t *testing.T, alarms ...event.Alarm) *silenceSite {
	t.Helper()
	clk := clock.NewFake(springForward)
	st, err := store.Open(filepath.Join(t.TempDir(), "relay.db"), store.Options{LockTimeout: time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if len(alarms) > 0 {
		if _, err := st.Apply(context.Background(), store.Batch{Observed: alarms, DetectedAt: clk.Now()}, nil); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := route.Parse("rules.yaml", []byte(maintenanceRules), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	sils, err := silence.Open(st, clk)
	if err != nil {
		t.Fatal(err)
	}
	rules := func() *route.Rules { return rs }
	mgr, err := manage.New(manage.Options{Store: st, Rules: rules, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	// Sessions on the wall clock: the cookie jar expires cookies by it.
	console.New(mgr, console.Options{AdminToken: adminToken, ViewToken: viewToken, Store: st, Silences: sils, Rules: rules,
		Sessions: console.NewSessions(nil),
		Now:      clk.Now, Logger: slog.New(slog.DiscardHandler)}).Register(mux)
	s := &silenceSite{site: &site{t: t, mgr: mgr}, st: st, silences: sils, clk: clk}
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

var inputValue = regexp.MustCompile(`<input id="f-([a-z_]+)" name="[a-z_]+" type="text" value="([^"]*)"`)

// formFields returns the text fields of the silence form with their values,
// and its comment, as a browser would send them.
func formFields(t *testing.T, page string) url.Values {
	t.Helper()
	v := url.Values{}
	for _, m := range inputValue.FindAllStringSubmatch(page, -1) {
		v.Set(m[1], html.UnescapeString(m[2]))
	}
	if m := regexp.MustCompile(`(?s)<textarea id="f-comment" name="comment"[^>]*>(.*?)</textarea>`).FindStringSubmatch(page); m != nil {
		v.Set("comment", html.UnescapeString(m[1]))
	}
	if a := regexp.MustCompile(`name="alarm" value="([^"]*)"`).FindStringSubmatch(page); a != nil {
		v.Set("alarm", html.UnescapeString(a[1]))
	}
	v.Set("csrf", csrf(t, page))
	return v
}

func TestSilencesAddFromAnAlarmSilencesItsPointThenExpire(t *testing.T) {
	s := newSilenceSite(t, alarmAt(springForward, "A1", "S1", "D1", "E1", 1, 30), alarmAt(springForward, "A2", "S1", "D2", "E1", 1, 30))
	c := s.browser()
	s.login(c, adminToken, "li.wei")
	resp, form := s.do(c, "GET", "/console/silences/new?alarm=A1", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(form, `<button type="submit">Add silence</button>`) {
		t.Fatalf("the form from A1: %s, want 200 with an Add silence button:\n%s", resp.Status, form)
	}
	fields := formFields(t, form)
	for k, want := range map[string]string{"station_ids": "S1", "device_sns": "D1", "event_codes": "E1", "duration": "2h", "alarm": "A1"} {
		if got := fields.Get(k); got != want {
			t.Errorf("field %s filled with %q, want %q", k, got, want)
		}
	}
	if !strings.Contains(fields.Get("comment"), "A1") {
		t.Errorf("the comment %q does not name the alarm", fields.Get("comment"))
	}

	resp, body := s.do(c, "POST", "/console/silences", fields, map[string]string{"Origin": s.srv.URL})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/silences" {
		t.Fatalf("add: %s to %q, want 303 to the list:\n%s", resp.Status, resp.Header.Get("Location"), body)
	}
	open := s.silences.List(false)
	if len(open) != 1 {
		t.Fatalf("silences after the click: %+v, want one", open)
	}
	sil := open[0]
	if sil.Author != "li.wei" || !sil.EndsAt.Equal(springForward.Add(2*time.Hour)) {
		t.Errorf("the silence %+v: want by li.wei until 2h from now", sil)
	}
	// The next start of A1's point is withheld; one of another device is not.
	next := event.New(alarmAt(springForward, "A1-again", "S1", "D1", "E1", 0, 0), event.Start, springForward, false)
	other := event.New(alarmAt(springForward, "A2", "S1", "D2", "E1", 1, 30), event.Start, springForward, false)
	if !sil.Matches(&next) {
		t.Error("the silence does not match the next start of the alarm's point")
	}
	if id, ok := s.silences.Silencing(&next, s.clk.Now().Add(time.Minute)); !ok || id != sil.ID {
		t.Errorf("Silencing(next start) = %q, %v; want %s", id, ok, sil.ID)
	}
	if sil.Matches(&other) {
		t.Error("the silence matches an alarm of another device")
	}

	_, list := s.do(c, "GET", "/console/silences", nil, nil)
	row := rowOf(t, list, "silence-"+sil.ID)
	for _, want := range []string{"active", "S1", "D1", "E1", "li.wei", "2026-03-28 12:00 UTC", "2026-03-28 14:00 UTC", ">Expire</button>"} {
		if !strings.Contains(row, want) {
			t.Errorf("the silence's row lacks %q:\n%s", want, row)
		}
	}
	if !strings.Contains(list, "silence "+sil.ID+" added") {
		t.Errorf("the list does not say the silence was added:\n%s", list)
	}

	s.clk.Advance(10 * time.Minute)
	resp, _ = s.do(c, "POST", "/console/silences/"+sil.ID+"/expire", url.Values{"csrf": {csrf(t, list)}}, map[string]string{"Origin": s.srv.URL})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("expire: %s, want 303", resp.Status)
	}
	got, _ := s.silences.Get(sil.ID)
	if got.State(s.clk.Now()) != silence.Ended {
		t.Fatalf("after Expire the silence is %s", got.State(s.clk.Now()))
	}
	_, list = s.do(c, "GET", "/console/silences", nil, nil)
	row = rowOf(t, list, "silence-"+sil.ID)
	if !strings.Contains(row, "ended") || !strings.Contains(row, "(expired)") || strings.Contains(row, "Expire</button>") {
		t.Errorf("the expired silence's row:\n%s", row)
	}
	if !strings.Contains(list, "silence "+sil.ID+" expired") {
		t.Errorf("the list does not say the silence was expired:\n%s", list)
	}
}

// rowOf returns the table row with id, failing when there is none.
func rowOf(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, `<tr id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no row %s in the page:\n%s", id, page)
	}
	j := strings.Index(page[i:], "</tr>")
	return page[i : i+j]
}

func TestSilencesFormNamesEachProblemAsTheAPIDoes(t *testing.T) {
	s := newSilenceSite(t)
	c := s.browser()
	page := s.login(c, adminToken, "li.wei")
	token := csrf(t, page)
	for _, tc := range []struct {
		name string
		form url.Values
		req  silence.Request
	}{
		{"no condition, no comment, a bad duration",
			url.Values{"duration": {"soon"}},
			silence.Request{Duration: "soon", Author: "li.wei"}},
		{"a level that is not one, an end and a duration",
			url.Values{"levels": {"7"}, "duration": {"2h"}, "ends_at": {"2026-03-29T00:00:00Z"}, "comment": {"x"}},
			silence.Request{Match: []byte(`{"levels":["7"]}`), Duration: "2h", EndsAt: "2026-03-29T00:00:00Z", Author: "li.wei", Comment: "x"}},
		{"an end in the past and a bad start",
			url.Values{"station_ids": {"S1"}, "ends_at": {"2026-03-01T00:00:00Z"}, "starts_at": {"later"}, "comment": {"x"}},
			silence.Request{Match: []byte(`{"station_ids":["S1"]}`), EndsAt: "2026-03-01T00:00:00Z", StartsAt: "later", Author: "li.wei", Comment: "x"}},
		{"every alarm and a match",
			url.Values{"station_ids": {"S1"}, "all": {"true"}, "duration": {"2h"}, "comment": {"x"}},
			silence.Request{Match: []byte(`{"station_ids":["S1"]}`), All: true, Duration: "2h", Author: "li.wei", Comment: "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// What the API's reading and Add say of the same request.
			var want []silence.Problem
			sil, err := tc.req.Silence(s.clk.Now())
			if err == nil {
				_, err = s.silences.Add(sil)
			}
			var inv *silence.InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("the API's reading: %v, want problems", err)
			}
			want = inv.Problems
			tc.form.Set("csrf", token)
			resp, body := s.do(c, "POST", "/console/silences", tc.form, nil)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("%s, want 400:\n%s", resp.Status, body)
			}
			for _, p := range want {
				field := strings.TrimPrefix(p.Field, "match.")
				msg := html.EscapeString(p.Message)
				if !strings.Contains(body, msg) {
					t.Errorf("the form does not say %s: %q:\n%s", p.Field, p.Message, body)
				}
				if field != "match" && field != "levels" && field != "all" && !strings.Contains(body, `id="f-`+field+`"`) {
					t.Errorf("no field %s in the form", field)
				}
			}
			if !strings.Contains(body, `<button type="submit">Add silence</button>`) {
				t.Errorf("the form is not shown again:\n%s", body)
			}
			if got := s.silences.List(true); len(got) != 0 {
				t.Fatalf("bad input created %+v", got)
			}
		})
	}
}

func TestSilencesViewerSeesNoButtonsAndForgedChangesAreRefused(t *testing.T) {
	s := newSilenceSite(t, alarmAt(springForward, "A1", "S1", "D1", "E1", 1, 30))
	sil, err := s.silences.Add(silence.Silence{Match: route.Match{StationIDs: []string{"S1"}}, EndsAt: springForward.Add(time.Hour),
		Author: "ana", Comment: "inverter swap"})
	if err != nil {
		t.Fatal(err)
	}
	viewer := s.browser()
	s.login(viewer, viewToken, "")
	_, page := s.do(viewer, "GET", "/console/silences", nil, nil)
	row := rowOf(t, page, "silence-"+sil.ID)
	if strings.Contains(page, "Expire</button>") || strings.Contains(page, "silences/new") || !strings.Contains(row, "inverter swap") {
		t.Errorf("a viewer's page offers actions, or lacks the silence:\n%s", page)
	}
	admin := s.browser()
	adminToken := csrf(t, s.login(admin, adminToken, "li.wei"))
	add := url.Values{"station_ids": {"S2"}, "duration": {"1h"}, "comment": {"x"}}
	with := func(v url.Values, token string) url.Values {
		v = url.Values(cloneValues(v))
		if token != "" {
			v.Set("csrf", token)
		}
		return v
	}
	for _, tc := range []struct {
		name   string
		client *http.Client
		form   url.Values
		header map[string]string
	}{
		{"a viewer", viewer, with(add, csrf(t, page)), nil},
		{"without a CSRF token", admin, with(add, ""), nil},
		{"from another origin", admin, with(add, adminToken), map[string]string{"Origin": "http://evil.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/console/silences", "/console/silences/" + sil.ID + "/expire"} {
				resp, body := s.do(tc.client, "POST", path, tc.form, tc.header)
				if resp.StatusCode != http.StatusForbidden {
					t.Errorf("POST %s: %s, want 403: %s", path, resp.Status, body)
				}
			}
			if got := s.silences.List(false); len(got) != 1 || got[0].ID != sil.ID {
				t.Errorf("the silences changed: %+v", got)
			}
		})
	}
}

func cloneValues(v url.Values) map[string][]string {
	out := make(map[string][]string, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

func TestSilencesPageShowsMaintenanceNextOccurrencesInTheirZone(t *testing.T) {
	s := newSilenceSite(t)
	c := s.browser()
	s.login(c, viewToken, "")
	_, page := s.do(c, "GET", "/console/silences", nil, nil)
	berlin := html.UnescapeString(rowOf(t, page, "maintenance-berlin-night"))
	for _, want := range []string{
		"Europe/Berlin", "station_ids",
		// The night the clocks go forward lasts two hours.
		"Sun 2026-03-29 01:00 UTC+01:00 – Sun 2026-03-29 04:00 UTC+02:00",
		"Mon 2026-03-30 01:00 UTC+02:00 – Mon 2026-03-30 04:00 UTC+02:00",
		"Tue 2026-03-31 01:00 UTC+02:00 – Tue 2026-03-31 04:00 UTC+02:00",
	} {
		if !strings.Contains(berlin, want) {
			t.Errorf("the Berlin window lacks %q:\n%s", want, berlin)
		}
	}
	shanghai := html.UnescapeString(rowOf(t, page, "maintenance-shanghai-morning"))
	for _, want := range []string{
		"Asia/Shanghai",
		"Sun 2026-03-29 06:00 UTC+08:00 – Sun 2026-03-29 08:00 UTC+08:00",
		"Tue 2026-03-31 06:00 UTC+08:00 – Tue 2026-03-31 08:00 UTC+08:00",
	} {
		if !strings.Contains(shanghai, want) {
			t.Errorf("the Shanghai window lacks %q:\n%s", want, shanghai)
		}
	}
}

func TestSilencesFormEscapesAnAlarmsHostileText(t *testing.T) {
	const hostile = `<script>alert(1)</script>`
	s := newSilenceSite(t, alarmAt(springForward, "A1", hostile, `"><img src=x>`, "E1", 0, 5))
	c := s.browser()
	s.login(c, adminToken, "")
	resp, form := s.do(c, "GET", "/console/silences/new?alarm=A1", nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s:\n%s", resp.Status, form)
	}
	if strings.Contains(form, "<script>") || strings.Contains(form, "<img") {
		t.Errorf("the alarm's text reached the form unescaped:\n%s", form)
	}
	if got := formFields(t, form).Get("station_ids"); got != hostile {
		t.Errorf("station_ids filled with %q, want %q", got, hostile)
	}
	resp, form = s.do(c, "GET", "/console/silences/new?alarm=nope", nil, nil)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(form, "relay knows no alarm nope") {
		t.Errorf("the form from an unknown alarm: %s:\n%s", resp.Status, form)
	}
}
