package sim_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

var t0 = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

// harness drives a Server through its handler, from one IP, on a fake clock.
type harness struct {
	t     testing.TB
	srv   *sim.Server
	clk   *clock.Fake
	ip    string
	token string
	// via, when set, is the handler requests go through instead of srv (a
	// Host in front of it).
	via http.Handler
}

// newHarness returns a logged-in harness. The rate limit is off unless opts
// sets one.
func newHarness(t testing.TB, opts sim.Options) *harness {
	t.Helper()
	clk := clock.NewFake(t0)
	opts.Clock = clk
	if opts.RateLimit == 0 {
		opts.RateLimit = -1
	}
	h := &harness{t: t, srv: sim.New(opts), clk: clk, ip: "10.0.0.1"}
	h.token = h.login()
	return h
}

// reply is a decoded answer.
type reply struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// get reads a response header whatever the case of its name, as a client
// reading from the wire would: the recorder keeps "TOKEN" as written.
func (r reply) get(name string) string {
	for k, vs := range r.header {
		if strings.EqualFold(k, name) && len(vs) > 0 {
			return vs[0]
		}
	}
	return ""
}

func (r reply) code() string {
	c, _ := r.body["code"].(string)
	return c
}

// do sends a POST with body (a JSON-encodable value, or []byte as is).
func (h *harness) do(endpoint string, body any) reply {
	h.t.Helper()
	return h.request(http.MethodPost, endpoint, body, func(*http.Request) {})
}

func (h *harness) request(method, endpoint string, body any, edit func(*http.Request)) reply {
	h.t.Helper()
	raw, ok := body.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			h.t.Fatal(err)
		}
	}
	path := "/api/openapi/v1/service/" + endpoint
	if endpoint == sim.EndpointLogin {
		path = "/api/openapi/v1/common/login"
	}
	req := httptest.NewRequest(method, path, bytes.NewReader(raw))
	req.RemoteAddr = h.ip + ":40000"
	req.Header.Set("Content-Type", "application/json")
	if h.token != "" {
		req.Header.Set("Authorization", h.token)
	}
	edit(req)
	rec := httptest.NewRecorder()
	if h.via != nil {
		h.via.ServeHTTP(rec, req)
	} else {
		h.srv.ServeHTTP(rec, req)
	}
	r := reply{status: rec.Code, header: rec.Header(), raw: rec.Body.Bytes()}
	dec := json.NewDecoder(bytes.NewReader(r.raw))
	dec.UseNumber()
	_ = dec.Decode(&r.body)
	return r
}

// data calls endpoint and returns data, failing unless the answer succeeded.
func (h *harness) data(endpoint string, body any) any {
	h.t.Helper()
	r := h.do(endpoint, body)
	if r.status != http.StatusOK || r.code() != sim.CodeSuccess {
		h.t.Fatalf("%s: status %d, body %s", endpoint, r.status, r.raw)
	}
	return r.body["data"]
}

// list returns data.dataList (or data itself when it is an array).
func (h *harness) list(endpoint string, body any) []map[string]any {
	h.t.Helper()
	d := h.data(endpoint, body)
	var items []any
	switch v := d.(type) {
	case []any:
		items = v
	case map[string]any:
		items, _ = v["dataList"].([]any)
	}
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i] = it.(map[string]any)
	}
	return out
}

func (h *harness) login() string {
	h.t.Helper()
	id, secret := h.srv.Credentials()
	saved := h.token
	h.token = ""
	r := h.do(sim.EndpointLogin, map[string]any{"grantType": "client_credentials", "appId": id, "appSecret": secret})
	h.token = saved
	if r.code() != sim.CodeSuccess {
		h.t.Fatalf("login: %s", r.raw)
	}
	return r.get("TOKEN")
}

// alarms queries getAlarmList and returns total and the records.
func (h *harness) alarms(body map[string]any) (int, []map[string]any) {
	h.t.Helper()
	q := map[string]any{"current": 1, "size": 500, "startTime": 0, "endTime": h.clk.Now().UnixMilli()}
	for k, v := range body {
		q[k] = v
	}
	d := h.data(sim.EndpointAlarmList, q).(map[string]any)
	n, err := d["total"].(json.Number).Int64()
	if err != nil {
		h.t.Fatal(err)
	}
	var out []map[string]any
	for _, it := range d["dataList"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return int(n), out
}

// str reads a string-or-number field as a string.
func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	}
	return ""
}

func originIDs(records []map[string]any) []string {
	out := make([]string, len(records))
	for i, r := range records {
		out[i] = str(r["originId"])
	}
	return out
}

func mustStart(t testing.TB, s *sim.Server, spec sim.AlarmSpec) string {
	t.Helper()
	id, err := s.StartAlarm(spec)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
