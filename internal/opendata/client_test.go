package opendata_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

func stations(h *harness) func() ([]opendata.Station, error) {
	return func() ([]opendata.Station, error) {
		return h.client.TenantStations(context.Background(), opendata.StationListQuery{})
	}
}

func TestOneLoginServesManyCalls(t *testing.T) {
	h := newHarness(t, sim.Options{Seed: 2}, nil)
	for i := range 25 {
		if _, err := stations(h)(); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		h.clk.Advance(5 * time.Minute) // 2 h in all, well inside the token's life
	}
	if got := h.logins(); got != 1 {
		t.Fatalf("%d logins for 25 calls in 2 h, want 1", got)
	}
	auth := h.wire.authHeaders()
	tokens := h.wire.issued()
	if len(auth) != 25 || len(tokens) != 1 {
		t.Fatalf("%d authorized requests, %d tokens; want 25, 1", len(auth), len(tokens))
	}
	for _, a := range auth {
		if a != tokens[0] {
			t.Fatalf("Authorization %q, want the bare token", a)
		}
	}
}

func TestBearerSchemePrefixesTheToken(t *testing.T) {
	h := newHarness(t, sim.Options{Seed: 2}, func(c *opendata.Config) { c.AuthScheme = "bearer" })
	if _, err := stations(h)(); err != nil {
		t.Fatal(err)
	}
	tok := h.wire.issued()[0]
	if got := h.wire.authHeaders(); len(got) != 1 || got[0] != "Bearer "+tok {
		t.Fatalf("Authorization = %q, want Bearer and the token", got)
	}
}

func TestTokenIsRenewedFiveMinutesBeforeExpiry(t *testing.T) {
	cases := []struct {
		name     string
		ttl      time.Duration // the simulator's token life, sent as expiresIn seconds
		lifetime time.Duration // what the client must assume
	}{
		{"expiresIn 4h is the default life", 4 * time.Hour, 4 * time.Hour},
		{"expiresIn under 4h is honoured", time.Hour, time.Hour},
		{"expiresIn over 4h is ignored", 6 * time.Hour, 4 * time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, sim.Options{Seed: 2, TokenTTL: tc.ttl}, nil)
			if _, err := stations(h)(); err != nil {
				t.Fatal(err)
			}
			h.clk.Advance(tc.lifetime - 5*time.Minute - time.Second)
			if _, err := stations(h)(); err != nil {
				t.Fatal(err)
			}
			if got := h.logins(); got != 1 {
				t.Fatalf("%d logins just before the renewal point, want 1", got)
			}
			h.clk.Advance(2 * time.Second)
			if _, err := stations(h)(); err != nil {
				t.Fatal(err)
			}
			if got := h.logins(); got != 2 {
				t.Fatalf("%d logins just after the renewal point, want 2", got)
			}
			if e := h.sim.Stats().Endpoints[sim.EndpointStationList]; e.Errors != 0 {
				t.Fatalf("%d token errors: the renewal was not proactive", e.Errors)
			}
		})
	}
}

func TestATinyExpiresInDoesNotMakeEveryOtherRequestALogin(t *testing.T) {
	h := newHarness(t, sim.Options{Seed: 2, TokenTTL: time.Minute}, nil)
	if _, err := stations(h)(); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(31 * time.Second)
	if _, err := stations(h)(); err != nil {
		t.Fatal(err)
	}
	if got := h.logins(); got != 1 {
		t.Fatalf("%d logins 31 s after an expiresIn of 60, want 1: it is not taken at its word", got)
	}
	// When such a token really expires, the reactive re-login still covers it.
	h.clk.Advance(time.Minute)
	if _, err := stations(h)(); err != nil {
		t.Fatal(err)
	}
	if got := h.logins(); got != 2 {
		t.Fatalf("%d logins after the token expired, want 2", got)
	}
}

func TestAuthErrorLogsInAgainOnce(t *testing.T) {
	cases := []struct {
		name       string
		httpErrors bool
		refusals   int  // how many requests in a row are refused for the token
		wantErr    bool // whether the call fails
	}{
		{"A0230 then success", false, 1, false},
		{"HTTP 401 then success", true, 1, false},
		{"refused twice", false, 2, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, sim.Options{Seed: 2, HTTPErrors: tc.httpErrors}, nil)
			if _, err := stations(h)(); err != nil {
				t.Fatal(err)
			}
			if err := h.sim.InjectFault(sim.EndpointStationList, sim.Fault{Kind: sim.FaultExpiredToken, Count: tc.refusals}); err != nil {
				t.Fatal(err)
			}
			_, err := stations(h)()
			if tc.wantErr {
				var e *opendata.Error
				if !errors.As(err, &e) || !errors.Is(err, opendata.ErrAuth) || e.Code != sim.CodeTokenExpired {
					t.Fatalf("err = %v, want an auth error A0230", err)
				}
			} else if err != nil {
				t.Fatalf("call after an expired token: %v", err)
			}
			if got := h.logins(); got != 2 {
				t.Fatalf("%d logins, want 2: one at first, one after the refusal, never more", got)
			}
			if got := h.requests(sim.EndpointStationList); got != 3 {
				t.Fatalf("%d station list requests, want 3", got)
			}
		})
	}
	t.Run("token expired upstream early", func(t *testing.T) {
		h := newHarness(t, sim.Options{Seed: 2}, nil)
		if _, err := stations(h)(); err != nil {
			t.Fatal(err)
		}
		h.sim.ExpireTokens()
		if _, err := stations(h)(); err != nil {
			t.Fatalf("call after the upstream expired the token: %v", err)
		}
		if got := h.logins(); got != 2 {
			t.Fatalf("%d logins, want 2", got)
		}
	})
}

func TestSixtyCallsStayWithinTenPerMinute(t *testing.T) {
	h := newHarness(t, sim.Options{Seed: 4, RateLimit: 10}, func(c *opendata.Config) { c.RateLimit = 10 })
	fleet := h.sim.Fleet()
	ctx := context.Background()
	calls := []func() error{
		func() error { _, err := h.client.TenantStations(ctx, opendata.StationListQuery{}); return err },
		func() error {
			_, err := h.client.AlarmPage(opendata.WithPriority(ctx, opendata.PriorityAlarm), opendata.AlarmQuery{Start: epoch.Add(-time.Hour)})
			return err
		},
		func() error { _, err := h.client.StationDetail(ctx, fleet.Stations[0].ID); return err },
		func() error { _, err := h.client.DeviceRealTime(ctx, nodeIDs(fleet)[:3]); return err },
	}
	// Three goroutines share the client, as the poller and an inventory
	// refresh would. The clock moves only while every running goroutine
	// waits for the budget, so that no request is in flight when it jumps.
	var running atomic.Int32
	running.Store(3)
	ready := func() bool { return h.client.Budget().Waiting() == int(running.Load()) }
	_, err := driveWhen(h, ready, func() (struct{}, error) {
		var wg sync.WaitGroup
		errs := make(chan error, 60)
		for g := range 3 {
			wg.Go(func() {
				defer running.Add(-1)
				for i := range 20 {
					errs <- calls[(g+i)%len(calls)]()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return struct{}{}, err
			}
		}
		return struct{}{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st := h.sim.Stats()
	if st.Violations != 0 {
		t.Fatalf("simulator saw %d rate-limit violations, want 0", st.Violations)
	}
	if st.Requests != 61 {
		t.Fatalf("%d requests, want 61 (60 calls and one login)", st.Requests)
	}
	if got := h.sim.MaxArrivals(time.Minute); got > 10 {
		t.Fatalf("%d requests arrived within one minute, want at most 10", got)
	}
	// 61 starts at 10 per 61 s need six full windows.
	if elapsed := h.clk.Now().Sub(epoch); elapsed < 6*time.Minute {
		t.Fatalf("61 requests took %s of simulated time, want at least 6 windows", elapsed)
	}
}

func TestRateLimitSignalHalvesTheRate(t *testing.T) {
	for _, httpErrors := range []bool{false, true} {
		t.Run(fmt.Sprintf("http status %v", httpErrors), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := opendata.NewMetrics(reg)
			h := newHarness(t, sim.Options{Seed: 2, HTTPErrors: httpErrors},
				func(c *opendata.Config) { c.RateLimit = 10; c.Metrics = m })
			if _, err := stations(h)(); err != nil {
				t.Fatal(err)
			}
			if err := h.sim.InjectFault(sim.EndpointStationList, sim.Fault{Kind: sim.FaultRateLimited}); err != nil {
				t.Fatal(err)
			}
			_, err := stations(h)()
			var e *opendata.Error
			if !errors.As(err, &e) || !errors.Is(err, opendata.ErrRateLimited) || e.RetryAfter != time.Minute {
				t.Fatalf("err = %v, want rate limited with Retry-After 60s", err)
			}
			if httpErrors && e.HTTPStatus != http.StatusTooManyRequests {
				t.Fatalf("HTTP status %d, want 429", e.HTTPStatus)
			}
			if got := h.client.Budget().Limit(); got != 5 {
				t.Fatalf("limit after A0501 = %d, want 5", got)
			}
			if got, want := h.client.Budget().NextFree(), h.clk.Now().Add(time.Minute); got.Before(want) {
				t.Fatalf("NextFree = %s, want not before %s (Retry-After)", got, want)
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP relay_upstream_budget_limit Effective limit of requests per 60 s, after halving on rate-limit signals.
# TYPE relay_upstream_budget_limit gauge
relay_upstream_budget_limit 5
# HELP relay_upstream_budget_in_use Requests started in the last 60 s.
# TYPE relay_upstream_budget_in_use gauge
relay_upstream_budget_in_use 3
# HELP relay_upstream_budget_waiting Requests waiting for a slot of the rate budget.
# TYPE relay_upstream_budget_waiting gauge
relay_upstream_budget_waiting 0
# HELP relay_upstream_rate_limit_signals_total Answers of the Open Data Service that said the rate limit was exceeded.
# TYPE relay_upstream_rate_limit_signals_total counter
relay_upstream_rate_limit_signals_total 1
# HELP relay_upstream_requests_total Requests sent to the Open Data Service, by endpoint and outcome (ok, auth, rate_limited, bad_request, transient, canceled).
# TYPE relay_upstream_requests_total counter
relay_upstream_requests_total{endpoint="getTenantStationList",outcome="ok"} 1
relay_upstream_requests_total{endpoint="getTenantStationList",outcome="rate_limited"} 1
relay_upstream_requests_total{endpoint="login",outcome="ok"} 1
`), "relay_upstream_budget_limit", "relay_upstream_budget_in_use", "relay_upstream_budget_waiting",
				"relay_upstream_rate_limit_signals_total", "relay_upstream_requests_total"); err != nil {
				t.Fatal(err)
			}
			for want := 6; want <= 10; want++ {
				h.clk.Advance(time.Minute)
				if got := h.client.Budget().Limit(); got != want {
					t.Fatalf("limit %d windows after the signal = %d, want %d", want-5, got, want)
				}
			}
		})
	}
}

func TestHistoryIsSplitAndMerged(t *testing.T) {
	h := newHarness(t, sim.Options{Seed: 9, Stations: 12, SystemsPerStation: 2, DevicesPerSystem: 6, SharedStations: -1}, nil)
	ctx := context.Background()
	nodes := nodeIDs(h.sim.Fleet())
	if len(nodes) < 120 {
		t.Fatalf("fleet has %d devices with point data, want at least 120", len(nodes))
	}
	nodes = nodes[:120]

	got, err := h.client.DeviceHistory(ctx, opendata.HistoryQuery{
		IDs: nodes, Dimension: opendata.DimensionDay, StartDate: "2026-08-01", EndDate: "2026-10-29",
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := h.requests(sim.EndpointDeviceHistory); n != 9 {
		t.Fatalf("%d calls, want 9: 3 chunks of ids by 3 chunks of dates", n)
	}
	if len(got) != 120 {
		t.Fatalf("%d devices, want 120", len(got))
	}
	first := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	for i, it := range got {
		if it.NodeID != nodes[i] {
			t.Fatalf("device %d is node %s, want %s: devices keep the order asked", i, it.NodeID, nodes[i])
		}
		if len(it.Points) != 90 {
			t.Fatalf("node %s: %d days, want 90", it.NodeID, len(it.Points))
		}
		for d, p := range it.Points {
			if want := first.AddDate(0, 0, d).Format("2006-01-02"); p.Date != want {
				t.Fatalf("node %s day %d = %s, want %s", it.NodeID, d, p.Date, want)
			}
		}
		var raw struct{ DataList []json.RawMessage }
		if err := json.Unmarshal(it.Raw, &raw); err != nil || len(raw.DataList) != 90 {
			t.Fatalf("node %s: merged Raw holds %d points (%v), want 90", it.NodeID, len(raw.DataList), err)
		}
	}

	sys := h.sim.Fleet().Systems
	months, err := h.client.SystemHistory(ctx, opendata.HistoryQuery{
		IDs: []string{sys[0].ID, sys[1].ID}, Dimension: opendata.DimensionMonth, StartDate: "2025-03-15", EndDate: "2026-10-02",
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := h.requests(sim.EndpointSystemHistory); n != 2 {
		t.Fatalf("%d calls for 20 months, want 2", n)
	}
	for _, it := range months {
		if len(it.Points) != 20 || it.Points[0].Date != "2025-03" || it.Points[19].Date != "2026-10" || it.Points[10].Date != "2026-01" {
			t.Fatalf("system %s: %d months from %s", it.ThingID, len(it.Points), it.Points[0].Date)
		}
	}
}

func TestFailuresAreClassified(t *testing.T) {
	cases := []struct {
		name       string
		opts       sim.Options
		fault      sim.Fault
		call       func(h *harness) error
		kind       opendata.Kind
		code       string
		httpStatus int
	}{
		{name: "HTTP 503", fault: sim.Fault{Kind: sim.FaultServerError}, kind: opendata.KindTransient, httpStatus: 503},
		{name: "code C0001", fault: sim.Fault{Kind: sim.FaultEnvelope}, kind: opendata.KindTransient, code: sim.CodeThirdParty, httpStatus: 200},
		{name: "malformed JSON", fault: sim.Fault{Kind: sim.FaultMalformedJSON}, kind: opendata.KindTransient, httpStatus: 200},
		{name: "truncated body", fault: sim.Fault{Kind: sim.FaultTruncated}, kind: opendata.KindTransient},
		{name: "slow answer", fault: sim.Fault{Kind: sim.FaultDelay, Delay: 400 * time.Millisecond}, kind: opendata.KindTransient},
		{name: "parameter out of range", call: func(h *harness) error {
			_, err := h.client.StationDetail(context.Background(), "404")
			return err
		}, kind: opendata.KindBadRequest, code: sim.CodeOutOfRange, httpStatus: 200},
		{name: "parameter out of range, HTTP 400", opts: sim.Options{HTTPErrors: true}, call: func(h *harness) error {
			_, err := h.client.StationDetail(context.Background(), "404")
			return err
		}, kind: opendata.KindBadRequest, code: sim.CodeOutOfRange, httpStatus: 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Seed = 2
			h := newHarness(t, tc.opts, func(c *opendata.Config) { c.Timeout = 100 * time.Millisecond })
			if _, err := h.client.Login(context.Background()); err != nil {
				t.Fatal(err)
			}
			call := tc.call
			if call == nil {
				if err := h.sim.InjectFault(sim.EndpointStationList, tc.fault); err != nil {
					t.Fatal(err)
				}
				call = func(h *harness) error { _, err := stations(h)(); return err }
			}
			err := call(h)
			var e *opendata.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *opendata.Error", err)
			}
			if e.Kind != tc.kind || e.Code != tc.code || (tc.httpStatus != 0 && e.HTTPStatus != tc.httpStatus) {
				t.Fatalf("err = %v: kind %s, code %q, status %d; want %s, %q, %d", err, e.Kind, e.Code, e.HTTPStatus, tc.kind, tc.code, tc.httpStatus)
			}
			for _, k := range []struct {
				kind     opendata.Kind
				sentinel error
			}{{opendata.KindAuth, opendata.ErrAuth}, {opendata.KindRateLimited, opendata.ErrRateLimited},
				{opendata.KindBadRequest, opendata.ErrBadRequest}, {opendata.KindTransient, opendata.ErrTransient}} {
				if errors.Is(err, k.sentinel) != (k.kind == tc.kind) {
					t.Fatalf("errors.Is(err, %v) = %v for kind %s", k.sentinel, !(k.kind == tc.kind), tc.kind)
				}
			}
			if !strings.Contains(err.Error(), e.Endpoint) || e.Endpoint == "" {
				t.Fatalf("error %q does not name the endpoint", err)
			}
			if got := h.logins(); got != 1 {
				t.Fatalf("%d logins: only an auth error may cause a new login", got)
			}
		})
	}
	t.Run("HTTP 404 from a wrong base URL", func(t *testing.T) {
		h := newHarness(t, sim.Options{Seed: 2}, func(c *opendata.Config) { c.BaseURL += "/wrong" })
		_, err := h.client.Login(context.Background())
		var e *opendata.Error
		if !errors.As(err, &e) || e.Kind != opendata.KindBadRequest || e.HTTPStatus != http.StatusNotFound {
			t.Fatalf("err = %v, want a bad request with HTTP 404", err)
		}
		if !strings.Contains(err.Error(), "HTTP 404") {
			t.Fatalf("error %q does not say HTTP 404", err)
		}
	})
	t.Run("wrong credentials", func(t *testing.T) {
		h := newHarness(t, sim.Options{Seed: 2}, func(c *opendata.Config) { c.AppSecret = "not-the-secret" })
		_, err := stations(h)()
		var e *opendata.Error
		if !errors.As(err, &e) || e.Endpoint != "login" || e.Code != sim.CodeThirdParty || e.ErrorKey != "be_ErrorCode_C0001" || e.ErrorMsg == "" {
			t.Fatalf("err = %v, want the login's C0001 with errorMsg and errorKey", err)
		}
		mustNotContain(t, "error", err.Error(), "not-the-secret")
	})
}

func TestSecretsNeverInErrorsOrLogs(t *testing.T) {
	h := newHarness(t, sim.Options{Seed: 2, HTTPErrors: true}, func(c *opendata.Config) { c.RateLimit = 10 })
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	_, err := drive(h, func() (struct{}, error) {
		for _, f := range []sim.Fault{
			{Kind: sim.FaultExpiredToken, Count: 2},
			{Kind: sim.FaultRateLimited},
			{Kind: sim.FaultServerError},
			{Kind: sim.FaultMalformedJSON},
			{Kind: sim.FaultTruncated},
			{Kind: sim.FaultEnvelope},
		} {
			if err := h.sim.InjectFault(sim.EndpointStationList, f); err != nil {
				return struct{}{}, err
			}
			_, err := stations(h)()
			note(err)
		}
		h.sim.ExpireTokens()
		_, err := stations(h)()
		note(err)
		_, err = h.client.StationDetail(context.Background(), "404")
		note(err)
		return struct{}{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) < 6 {
		t.Fatalf("only %d calls failed; the faults did not apply", len(errs))
	}
	secrets := append([]string{h.secret}, h.wire.issued()...)
	if len(secrets) < 3 {
		t.Fatalf("%d tokens issued, want several", len(secrets)-1)
	}
	for _, err := range errs {
		mustNotContain(t, "error", err.Error(), secrets...)
		mustNotContain(t, "error", fmt.Sprintf("%+v", err), secrets...)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "upstream login") || !strings.Contains(logs, "rate limit") {
		t.Fatalf("expected login and rate-limit log lines, got:\n%s", logs)
	}
	mustNotContain(t, "log", logs, secrets...)
}
