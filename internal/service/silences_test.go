package service

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/store"
)

const testAdminToken = "admin-0123456789abcdef"

var silenceT0 = time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)

// silenceServer serves the silence endpoints of a real store on the fake
// clock, guarded by token.
func silenceServer(t *testing.T, token string) (*httptest.Server, *silence.Silences, *clock.Fake, *bytes.Buffer) {
	t.Helper()
	clk := clock.NewFake(silenceT0)
	st, err := store.Open(filepath.Join(t.TempDir(), "relay.db"), store.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sils, err := silence.Open(st, clk)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	mux := http.NewServeMux()
	(&silenceAPI{silences: sils, token: token, clock: clk, log: slog.New(slog.NewTextHandler(&logs, nil))}).register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, sils, clk, &logs
}

// call sends method path with body (nil: none) and the token (empty: no
// header), and returns the status and answer.
func call(t *testing.T, srv *httptest.Server, token, method, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func decodeAs[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return v
}

func TestSilenceEndpointsAddListShowAndExpire(t *testing.T) {
	srv, sils, clk, logs := silenceServer(t, testAdminToken)
	code, b := call(t, srv, testAdminToken, "POST", "/silences",
		`{"match": {"station_ids": ["S1"], "levels": ["urgent"]}, "duration": "2h", "author": "ana", "comment": "replacing inverter 3", "notify_on_expire": true}`)
	if code != http.StatusCreated {
		t.Fatalf("add: %d %s", code, b)
	}
	added := decodeAs[SilencesAnswer](t, b)
	if added.Action != "add" || added.Count != 1 {
		t.Fatalf("add answered %s", b)
	}
	a := added.Silences[0]
	if a.State != silence.Active || !a.EndsAt.Equal(silenceT0.Add(2*time.Hour)) || a.Match.String() != "levels=0 station_ids=S1" || !a.NotifyOnExpire {
		t.Fatalf("added %+v", a)
	}
	if _, ok := sils.Matching(&event.Event{Data: event.Data{StationID: "S1", Level: 0, Transition: event.Start}}, clk.Now()); !ok {
		t.Fatal("the silence added over HTTP does not act")
	}
	if !strings.Contains(logs.String(), "silence added") || !strings.Contains(logs.String(), a.ID) {
		t.Fatalf("no log line names the silence added:\n%s", logs)
	}

	// A pending one, from an end time.
	code, b = call(t, srv, testAdminToken, "POST", "/silences",
		`{"all": true, "starts_at": "2026-11-23T22:00:00Z", "ends_at": "2026-11-24T14:00:00+08:00", "author": "bo", "comment": "night works"}`)
	if code != http.StatusCreated {
		t.Fatalf("add: %d %s", code, b)
	}
	p := decodeAs[SilencesAnswer](t, b).Silences[0]
	if p.State != silence.Pending || !p.All || !p.EndsAt.Equal(time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("added %+v", p)
	}

	code, b = call(t, srv, testAdminToken, "GET", "/silences", "")
	if l := decodeAs[SilencesAnswer](t, b); code != http.StatusOK || l.Count != 2 || l.Silences[0].ID != a.ID || l.Silences[1].ID != p.ID {
		t.Fatalf("list: %d %s", code, b)
	}
	code, b = call(t, srv, testAdminToken, "GET", "/silences/"+p.ID, "")
	if s := decodeAs[SilencesAnswer](t, b); code != http.StatusOK || s.Action != "show" || s.Silences[0].Comment != "night works" {
		t.Fatalf("show: %d %s", code, b)
	}
	clk.Advance(time.Minute)
	code, b = call(t, srv, testAdminToken, "DELETE", "/silences/"+a.ID, "")
	if x := decodeAs[SilencesAnswer](t, b); code != http.StatusOK || x.Silences[0].State != silence.Ended || !x.Silences[0].ExpiredAt.Equal(clk.Now()) {
		t.Fatalf("expire: %d %s", code, b)
	}
	code, b = call(t, srv, testAdminToken, "DELETE", "/silences/"+a.ID, "")
	if e := decodeAs[ErrorAnswer](t, b); code != http.StatusConflict || !strings.Contains(e.Error, "already ended") {
		t.Fatalf("expire twice: %d %s", code, b)
	}
	code, b = call(t, srv, testAdminToken, "GET", "/silences", "")
	if l := decodeAs[SilencesAnswer](t, b); code != http.StatusOK || l.Count != 1 || l.Silences[0].ID != p.ID {
		t.Fatalf("list after expire: %d %s", code, b)
	}
	code, b = call(t, srv, testAdminToken, "GET", "/silences?all=true", "")
	if l := decodeAs[SilencesAnswer](t, b); code != http.StatusOK || l.Count != 2 {
		t.Fatalf("list all: %d %s", code, b)
	}
	for _, m := range []string{"GET", "DELETE"} {
		code, b = call(t, srv, testAdminToken, m, "/silences/nosuchsilence000", "")
		if e := decodeAs[ErrorAnswer](t, b); code != http.StatusNotFound || !strings.Contains(e.Error, "nosuchsilence000") {
			t.Fatalf("%s of an unknown silence: %d %s", m, code, b)
		}
	}
}

func TestSilenceEndpointsRefuseWithoutTheToken(t *testing.T) {
	reqs := [][2]string{{"GET", "/silences"}, {"POST", "/silences"}, {"GET", "/silences/x"}, {"DELETE", "/silences/x"}}
	srv, _, _, _ := silenceServer(t, testAdminToken)
	for _, token := range []string{"", "admin-wrong-token-0000", testAdminToken + "x", strings.ToUpper(testAdminToken)} {
		for _, r := range reqs {
			code, b := call(t, srv, token, r[0], r[1], `{}`)
			if code != http.StatusUnauthorized || !strings.Contains(string(b), "RELAY_ADMIN_TOKEN") {
				t.Errorf("%s %s with token %q: %d %s; want 401", r[0], r[1], token, code, b)
			}
			if strings.Contains(string(b), testAdminToken) {
				t.Errorf("%s %s: the answer shows the token: %s", r[0], r[1], b)
			}
		}
	}
	// The scheme must be Bearer.
	req, _ := http.NewRequest("GET", srv.URL+"/silences", nil)
	req.Header.Set("Authorization", testAdminToken)
	if resp, err := srv.Client().Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a token without Bearer: %v %v", resp.StatusCode, err)
	}

	off, _, _, _ := silenceServer(t, "")
	for _, r := range reqs {
		code, b := call(t, off, testAdminToken, r[0], r[1], `{}`)
		if code != http.StatusForbidden || !strings.Contains(string(b), "set RELAY_ADMIN_TOKEN") {
			t.Errorf("%s %s without a configured token: %d %s; want 403", r[0], r[1], code, b)
		}
	}
}

func TestSilenceEndpointsAnswerBadInputWith400NamingTheField(t *testing.T) {
	srv, sils, _, _ := silenceServer(t, testAdminToken)
	const rest = `"author": "ana", "comment": "works"`
	cases := []struct {
		name, body, field, says string
	}{
		{"not JSON", `{match`, "body", "JSON object"},
		{"an unknown field", `{"matchers": {"station_ids": ["S1"]}, "duration": "2h", ` + rest + `}`, "body", `unknown field "matchers"`},
		{"two objects", `{"all": true, "duration": "2h", ` + rest + `} {}`, "body", "one object"},
		{"a body too large", `{"comment": "` + strings.Repeat("x", maxSilenceBody) + `"}`, "body", "larger than"},
		{"an unknown match key", `{"match": {"colour": ["red"]}, "duration": "2h", ` + rest + `}`, "match.colour", "unknown key"},
		{"a bad level", `{"match": {"levels": ["loud"]}, "duration": "2h", ` + rest + `}`, "match.levels", `"loud" is not a level`},
		{"an empty list", `{"match": {"station_ids": []}, "duration": "2h", ` + rest + `}`, "match.station_ids", "empty list"},
		{"no match and not all", `{"duration": "2h", ` + rest + `}`, "match", `"all": true`},
		{"an empty match", `{"match": {}, "duration": "2h", ` + rest + `}`, "match", `"all": true`},
		{"all and a match", `{"all": true, "match": {"levels": [0]}, "duration": "2h", ` + rest + `}`, "all", "one or the other"},
		{"a bad start", `{"all": true, "starts_at": "tonight", "duration": "2h", ` + rest + `}`, "starts_at", "RFC 3339"},
		{"a bad end", `{"all": true, "ends_at": "2026-11-24", ` + rest + `}`, "ends_at", "RFC 3339"},
		{"a bad duration", `{"all": true, "duration": "a while", ` + rest + `}`, "duration", "3d"},
		{"both end and duration", `{"all": true, "duration": "2h", "ends_at": "2026-11-24T08:00:00Z", ` + rest + `}`, "duration", "give one"},
		{"neither end nor duration", `{"all": true, ` + rest + `}`, "ends_at", "--for"},
		{"an end in the past", `{"all": true, "ends_at": "2026-11-23T07:00:00Z", ` + rest + `}`, "ends_at", "not in the future"},
		{"too long", `{"all": true, "duration": "91d", ` + rest + `}`, "ends_at", "90 days"},
		{"no author", `{"all": true, "duration": "2h", "comment": "works"}`, "author", "--author"},
		{"no comment", `{"all": true, "duration": "2h", "author": "ana"}`, "comment", "--comment"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, b := call(t, srv, testAdminToken, "POST", "/silences", c.body)
			if code != http.StatusBadRequest {
				t.Fatalf("%d %s; want 400", code, b)
			}
			e := decodeAs[ErrorAnswer](t, b)
			if len(e.Problems) == 0 || e.Problems[0].Field != c.field || !strings.Contains(e.Problems[0].Message, c.says) {
				t.Fatalf("problems %+v; want field %s saying %q", e.Problems, c.field, c.says)
			}
		})
	}
	if code, b := call(t, srv, testAdminToken, "GET", "/silences?all=yes", ""); code != http.StatusBadRequest || !strings.Contains(string(b), `"field":"all"`) {
		t.Fatalf("list with all=yes: %d %s", code, b)
	}
	if n := len(sils.List(true)); n != 0 {
		t.Fatalf("%d silences kept from bad requests", n)
	}
}
