package service

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/isa"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

var figuresT0 = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

// figuresStore is a store on a fake clock at figuresT0.
func figuresStore(t *testing.T) (*store.Store, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(figuresT0)
	s, err := store.Open(filepath.Join(t.TempDir(), "relay.db"), store.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, clk
}

// startAlarms applies ongoing alarms of device, code and level that
// occurred at each of times.
func startAlarms(t *testing.T, s *store.Store, prefix, device, code string, level int, times ...time.Time) {
	t.Helper()
	var b store.Batch
	for i, at := range times {
		b.Observed = append(b.Observed, event.Alarm{
			OriginID: fmt.Sprintf("%s%d", prefix, i), Status: event.StatusOngoing, Level: level, EventCode: code,
			TenantID: "t1", StationID: "s1", DeviceSN: device, OccurredAt: at,
		})
	}
	if _, err := s.Apply(context.Background(), b, nil); err != nil {
		t.Fatal(err)
	}
}

func every(from time.Time, n int, gap time.Duration) []time.Time {
	var ts []time.Time
	for i := range n {
		ts = append(ts, from.Add(time.Duration(i)*gap))
	}
	return ts
}

// TestAlarmFiguresMetrics: the gauges follow the journal and the flood
// counter adds the seconds in flood of each interval once.
func TestAlarmFiguresMetrics(t *testing.T) {
	s, clk := figuresStore(t)
	m := newAlarmFigures(prometheus.NewRegistry(), s, clk, slog.New(slog.DiscardHandler))
	// 11 starts 30 s apart from 07:52: the 11th at 07:57; the first leaves
	// the 10 minutes at 08:02. In flood from 07:57 to 08:02.
	startAlarms(t, s, "f", "D1", "F", 3, every(figuresT0.Add(-8*time.Minute), 11, 30*time.Second)...)
	// Chattering: D2/C three times in 20 s, 40 minutes ago.
	startAlarms(t, s, "c", "D2", "C", 1, every(figuresT0.Add(-40*time.Minute), 3, 10*time.Second)...)
	// Stale: ongoing for 25 h; and one for 23 h.
	startAlarms(t, s, "s", "D3", "S", 2, figuresT0.Add(-25*time.Hour), figuresT0.Add(-23*time.Hour))

	// The first update counts from when the metrics began, figuresT0.
	if err := m.update(figuresT0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	check := func(started, flood, stale, chattering float64) {
		t.Helper()
		got := []float64{testutil.ToFloat64(m.started), testutil.ToFloat64(m.flood), testutil.ToFloat64(m.stale), testutil.ToFloat64(m.chattering)}
		want := []float64{started, flood, stale, chattering}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("started_10m, flood_seconds_total, stale, chattering = %v, want %v", got, want)
		}
	}
	// At 08:01 the 10 minutes before hold the 11 starts from 07:52 (the
	// stale ones occurred long before); 60 s in flood since 08:00.
	check(11, 60, 1, 1)
	if err := m.update(figuresT0.Add(5 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	// At 08:05: starts from 07:55 on: 07:55:00 ... 07:57:00 (5); flood
	// ended at 08:02, one more minute.
	check(5, 120, 1, 1)
	// An hour later: nothing recent, the 23 h alarm is stale too.
	if err := m.update(figuresT0.Add(65 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	check(0, 120, 2, 0)
}

// TestAlarmFiguresRunOnTheClock: the metrics are brought up to date every
// interval of the service's clock.
func TestAlarmFiguresRunOnTheClock(t *testing.T) {
	s, clk := figuresStore(t)
	m := newAlarmFigures(prometheus.NewRegistry(), s, clk, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.run(ctx, alarmFiguresEvery); close(done) }()
	defer func() { cancel(); <-done }()
	startAlarms(t, s, "a", "D1", "E", 0, figuresT0.Add(-time.Minute), figuresT0.Add(-2*time.Minute))
	if !clk.BlockUntil(1, 5*time.Second) {
		t.Fatal("the metrics loop set no timer")
	}
	if got := testutil.ToFloat64(m.started); got != 0 {
		t.Fatalf("started before the first interval = %g, want 0", got)
	}
	clk.Advance(alarmFiguresEvery)
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(m.started) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("relay_alarms_started_10m = %g after an interval, want 2", testutil.ToFloat64(m.started))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestReportEndpoint(t *testing.T) {
	s, clk := figuresStore(t)
	startAlarms(t, s, "a", "D1", "E", 0, every(figuresT0.Add(-3*time.Hour), 4, time.Minute)...)
	startAlarms(t, s, "b", "D2", "E", 2, figuresT0.Add(-2*time.Hour))
	rules, err := route.Parse("rules.yaml", []byte(otherRules), nil)
	if err != nil {
		t.Fatal(err)
	}
	api := &reportAPI{store: s, rules: func() *route.Rules { return rules }, token: "s3cret-admin-token", clock: clk,
		log: slog.New(slog.DiscardHandler)}
	get := func(api *reportAPI, query, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/report"+query, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		api.handler().ServeHTTP(rec, req)
		return rec
	}
	off := *api
	off.token = ""
	for _, tt := range []struct {
		name   string
		api    *reportAPI
		query  string
		token  string
		status int
		body   string
	}{
		{"no token configured", &off, "", "s3cret-admin-token", http.StatusForbidden, "RELAY_ADMIN_TOKEN"},
		{"no token sent", api, "", "", http.StatusUnauthorized, "Bearer"},
		{"a wrong token", api, "", "wrong", http.StatusUnauthorized, "Bearer"},
		{"a bad since", api, "?since=week", "s3cret-admin-token", http.StatusBadRequest, "7d, 36h or 90m"},
		{"a bad until", api, "?until=yesterday", "s3cret-admin-token", http.StatusBadRequest, "RFC 3339"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := get(tt.api, tt.query, tt.token)
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.body) {
				t.Fatalf("HTTP %d %q, want %d with %q", rec.Code, rec.Body.String(), tt.status, tt.body)
			}
			if strings.Contains(rec.Body.String(), "s3cret") {
				t.Fatal("the answer holds the token")
			}
		})
	}
	for _, tt := range []struct {
		query  string
		alarms int
		since  time.Duration
	}{{"", 5, 7 * 24 * time.Hour}, {"?since=150m", 1, 150 * time.Minute}, {"?since=1d&until=2026-11-21T05:02:00Z", 2, 24 * time.Hour}} {
		rec := get(api, tt.query, "s3cret-admin-token")
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s: HTTP %d %s", tt.query, rec.Code, rec.Body.String())
		}
		var rep isa.Report
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Overall.Alarms != tt.alarms || rep.To.Sub(rep.From) != tt.since || len(rep.Routes) != 2 {
			t.Fatalf("%s: %d alarms over %s, %d routes; want %d over %s, 2 routes", tt.query, rep.Overall.Alarms,
				rep.To.Sub(rep.From), len(rep.Routes), tt.alarms, tt.since)
		}
	}
}
