package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

func TestInjectedFaultsAnswerOnceThenRecover(t *testing.T) {
	stations := map[string]any{}
	tests := []struct {
		name  string
		fault sim.Fault
		check func(t *testing.T, r reply)
	}{
		{"server error", sim.Fault{Kind: sim.FaultServerError}, func(t *testing.T, r reply) {
			if r.status != http.StatusServiceUnavailable {
				t.Errorf("status %d", r.status)
			}
		}},
		{"server error 502", sim.Fault{Kind: sim.FaultServerError, Status: 502}, func(t *testing.T, r reply) {
			if r.status != http.StatusBadGateway {
				t.Errorf("status %d", r.status)
			}
		}},
		{"envelope C0001", sim.Fault{Kind: sim.FaultEnvelope}, func(t *testing.T, r reply) {
			if r.status != http.StatusOK || r.code() != sim.CodeThirdParty {
				t.Errorf("status %d body %s", r.status, r.raw)
			}
		}},
		{"malformed JSON", sim.Fault{Kind: sim.FaultMalformedJSON}, func(t *testing.T, r reply) {
			if r.status != http.StatusOK || json.Valid(r.raw) {
				t.Errorf("status %d, valid JSON %s", r.status, r.raw)
			}
		}},
		{"truncated", sim.Fault{Kind: sim.FaultTruncated}, func(t *testing.T, r reply) {
			if json.Valid(r.raw) || !bytes.HasPrefix(r.raw, []byte(`{"code":"00000"`)) {
				t.Errorf("body %s", r.raw)
			}
			if n := r.header.Get("Content-Length"); n == "" || n == "0" {
				t.Errorf("Content-Length %q", n)
			}
		}},
		{"delay", sim.Fault{Kind: sim.FaultDelay, Delay: 30 * time.Millisecond}, func(t *testing.T, r reply) {
			if r.code() != sim.CodeSuccess {
				t.Errorf("body %s", r.raw)
			}
		}},
		{"rate limited", sim.Fault{Kind: sim.FaultRateLimited}, func(t *testing.T, r reply) {
			if r.code() != sim.CodeRateLimited || r.header.Get("Retry-After") == "" {
				t.Errorf("body %s, Retry-After %q", r.raw, r.header.Get("Retry-After"))
			}
		}},
		{"expired token", sim.Fault{Kind: sim.FaultExpiredToken}, func(t *testing.T, r reply) {
			if r.code() != sim.CodeTokenExpired {
				t.Errorf("body %s", r.raw)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, sim.Options{})
			if err := h.srv.InjectFault(sim.EndpointStationList, tt.fault); err != nil {
				t.Fatal(err)
			}
			if r := h.do(sim.EndpointSystemList, stations); r.code() != sim.CodeSuccess {
				t.Errorf("another endpoint was affected: %s", r.raw)
			}
			start := time.Now()
			tt.check(t, h.do(sim.EndpointStationList, stations))
			if tt.fault.Kind == sim.FaultDelay && time.Since(start) < tt.fault.Delay {
				t.Errorf("answered after %v", time.Since(start))
			}
			if r := h.do(sim.EndpointStationList, stations); r.code() != sim.CodeSuccess {
				t.Errorf("second request still faulty: %s", r.raw)
			}
			st := h.srv.Stats()
			if st.Faults != 1 || st.Endpoints[sim.EndpointStationList].Faults != 1 || st.Violations != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestFaultCountsQueuesAndAnyEndpoint(t *testing.T) {
	h := newHarness(t, sim.Options{})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(h.srv.InjectFault(sim.EndpointStationList, sim.Fault{Kind: sim.FaultServerError, Count: 2}))
	must(h.srv.InjectFault(sim.EndpointStationList, sim.Fault{Kind: sim.FaultEnvelope}))
	must(h.srv.InjectFault(sim.AnyEndpoint, sim.Fault{Kind: sim.FaultExpiredToken}))
	var got []string
	for range 5 {
		r := h.do(sim.EndpointStationList, map[string]any{})
		got = append(got, strings.TrimSpace(http.StatusText(r.status)+" "+r.code()))
	}
	want := []string{"Service Unavailable", "Service Unavailable", "OK C0001", "OK A0230", "OK 00000"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("answers %v, want %v", got, want)
	}
	must(h.srv.InjectFault(sim.EndpointSystemList, sim.Fault{Kind: sim.FaultServerError, Count: -1}))
	for range 3 {
		if r := h.do(sim.EndpointSystemList, map[string]any{}); r.status != http.StatusServiceUnavailable {
			t.Fatalf("a persistent fault stopped: %d", r.status)
		}
	}
	h.srv.ClearFaults()
	if r := h.do(sim.EndpointSystemList, map[string]any{}); r.code() != sim.CodeSuccess {
		t.Errorf("after ClearFaults: %s", r.raw)
	}
	for _, bad := range []struct {
		ep string
		f  sim.Fault
	}{
		{"getNothing", sim.Fault{Kind: sim.FaultEnvelope}},
		{sim.EndpointStationList, sim.Fault{Kind: sim.FaultDropAlarm}},
		{sim.EndpointStationList, sim.Fault{Kind: 99}},
		{sim.EndpointStationList, sim.Fault{Kind: sim.FaultServerError, Status: 404}},
	} {
		if err := h.srv.InjectFault(bad.ep, bad.f); err == nil {
			t.Errorf("InjectFault(%q, %+v) accepted", bad.ep, bad.f)
		}
	}
}

func TestDropAlarmFaultLosesOneRecordButKeepsTotal(t *testing.T) {
	h := newHarness(t, sim.Options{})
	h.srv.Storm(30)
	if err := h.srv.InjectFault(sim.EndpointAlarmList, sim.Fault{Kind: sim.FaultDropAlarm}); err != nil {
		t.Fatal(err)
	}
	if total, recs := h.alarms(map[string]any{"startTime": t0.Add(time.Hour).UnixMilli(), "endTime": t0.Add(2 * time.Hour).UnixMilli()}); total != 0 || len(recs) != 0 {
		t.Fatalf("empty page: %d %d", total, len(recs))
	}
	total, glitched := h.alarms(map[string]any{"size": 10})
	_, clean := h.alarms(map[string]any{"size": 10})
	if total != 30 || len(glitched) != 9 || len(clean) != 10 {
		t.Fatalf("total %d, glitched page %d, clean page %d", total, len(glitched), len(clean))
	}
	missing := 0
	for _, id := range originIDs(clean) {
		if !strings.Contains(strings.Join(originIDs(glitched), ","), id) {
			missing++
		}
	}
	if missing != 1 {
		t.Errorf("%d records missing", missing)
	}
}

func TestTruncatedBodyFailsARealClient(t *testing.T) {
	srv := sim.StartTest(t, sim.Options{Clock: clock.NewFake(t0)})
	id, secret := srv.Credentials()
	if err := srv.InjectFault(sim.EndpointLogin, sim.Fault{Kind: sim.FaultTruncated}); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"appId": id, "appSecret": secret})
	resp, err := http.Post(srv.URL()+"/api/openapi/v1/common/login", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("reading a truncated body: %v", err)
	}
}

func TestDelayIsCutShortByTheClient(t *testing.T) {
	srv := sim.StartTest(t, sim.Options{Clock: clock.NewFake(t0)})
	if err := srv.InjectFault(sim.EndpointLogin, sim.Fault{Kind: sim.FaultDelay, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/api/openapi/v1/common/login", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	if _, err := http.DefaultClient.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline", err)
	}
}

func TestStartServesUntilClosedAndLogsNoSecrets(t *testing.T) {
	var logs bytes.Buffer
	srv := sim.New(sim.Options{
		Clock: clock.NewFake(t0), AppSecret: "s3cret-value", RateLimit: 1,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start("127.0.0.1:0"); err == nil {
		t.Error("a second Start succeeded")
	}
	post := func() *http.Response {
		body := `{"appId":"demo-app","appSecret":"s3cret-value"}`
		resp, err := http.Post(srv.URL()+"/api/openapi/v1/common/login", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	tok := post().Header.Get("Token")
	post() // refused by the limit of 1, and logged
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Post(srv.URL()+"/api/openapi/v1/common/login", "application/json", strings.NewReader("{}")); err == nil {
		t.Error("still serving after Close")
	}
	if !strings.Contains(logs.String(), "rate limit") {
		t.Errorf("the refusal was not logged: %s", logs.String())
	}
	for _, secret := range []string{"s3cret-value", tok} {
		if tok == "" || strings.Contains(logs.String(), secret) {
			t.Errorf("logs contain a secret or no token was issued: %s", logs.String())
		}
	}
}

func TestListenAndServeStopsWithTheContext(t *testing.T) {
	srv := sim.New(sim.Options{Clock: clock.NewFake(t0)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx, "127.0.0.1:0") }()
	deadline := time.Now().Add(2 * time.Second)
	for srv.URL() == "" && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	resp, err := http.Post(srv.URL()+"/api/openapi/v1/service/getTenantStationList", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
}
