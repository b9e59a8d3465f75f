package poller

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/store"
)

// secretFixer plays the operator who fixes the app secret: until fixed, the
// login carries the wrong secret; once fixed, the right one. It records when
// each login was sent.
type secretFixer struct {
	base         http.RoundTripper
	wrong, right string
	fixed        atomic.Bool
	mu           sync.Mutex
	logins       []time.Time
	now          func() time.Time
}

func (f *secretFixer) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/common/login") {
		f.mu.Lock()
		f.logins = append(f.logins, f.now())
		f.mu.Unlock()
		if f.fixed.Load() {
			body, _ := io.ReadAll(req.Body)
			body = bytes.ReplaceAll(body, []byte(f.wrong), []byte(f.right))
			req = req.Clone(req.Context())
			req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
	}
	return f.base.RoundTrip(req)
}

// TestWrongCredentialsAreAnErrorRetriedWithGrowingBackOff: the upstream
// answers a wrong app secret as the spec's sample does (C0001, "authentication
// failed"). The relay says so, in the log, in /readyz's check and in a
// metric, and tries again after 12 s, 24 s, ... up to 5 min, instead of
// taking it for a passing failure at every 6 s slot; once the secret is
// fixed, it polls again within 5 minutes.
func TestWrongCredentialsAreAnErrorRetriedWithGrowingBackOff(t *testing.T) {
	h := newHarness(t)
	st, err := store.Open(h.path, store.Options{Bootstrap: store.BootstrapNotify, Clock: h.clk, LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	id, secret := h.sim.Credentials()
	fixer := &secretFixer{base: http.DefaultTransport, wrong: "s3cr3t-wrong", right: secret, now: h.clk.Now}
	reg := prometheus.NewRegistry()
	h.client, err = opendata.New(opendata.Config{
		BaseURL: h.sim.URL(), AppID: id, AppSecret: fixer.wrong, RateLimit: h.rate, Clock: h.clk,
		HTTPClient: &http.Client{Transport: fixer}, Logger: h.log, Metrics: opendata.NewMetrics(reg),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.p, err = New(Config{Client: h.client, Store: st, RateLimit: h.rate, Lookback: h.lookback,
		Clock: h.clk, Logger: h.log, Metrics: NewMetrics(reg), OnEvents: h.record})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.p.load(); err != nil {
		t.Fatal(err)
	}

	end := h.clk.Now().Add(time.Hour)
	for h.clk.Now().Before(end) {
		h.step()
	}
	fixer.mu.Lock()
	logins := append([]time.Time(nil), fixer.logins...)
	fixer.mu.Unlock()
	// Back-off from a 6 s slot: 12 s, 24 s, 48 s, 96 s, 192 s, then 300 s.
	if len(logins) < 10 || len(logins) > 20 {
		t.Fatalf("%d logins in an hour of refusals, want 10 to 20 (one per 6 s slot would be 600)", len(logins))
	}
	for i := 2; i < len(logins); i++ {
		gap, prev := logins[i].Sub(logins[i-1]), logins[i-1].Sub(logins[i-2])
		if gap < prev || gap > maxCredentialsWait+time.Second {
			t.Fatalf("login gaps %s then %s: want growing gaps up to %s", prev, gap, maxCredentialsWait)
		}
	}
	if last := logins[len(logins)-1].Sub(logins[len(logins)-2]); last != maxCredentialsWait {
		t.Errorf("last gap %s, want the cap %s", last, maxCredentialsWait)
	}
	problem := h.p.UpstreamProblem()
	if problem == nil || !strings.Contains(problem.Error(), "login refused: check RELAY_APP_ID and RELAY_APP_SECRET") {
		t.Errorf("readiness problem %v, want one naming the credentials", problem)
	}
	if v := gaugeValue(t, reg, "relay_upstream_credentials_refused"); v != 1 {
		t.Errorf("relay_upstream_credentials_refused = %v, want 1", v)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "upstream login refused: check RELAY_APP_ID and RELAY_APP_SECRET") || strings.Contains(logs, "(transient)") {
		t.Errorf("log does not say the credentials were refused, or calls it transient:\n%s", logs)
	}
	if strings.Contains(logs, fixer.wrong) {
		t.Error("the log shows the app secret")
	}

	fixer.fixed.Store(true)
	fixedAt := h.clk.Now()
	h.until("polling again after the secret is fixed", 100, func() bool { return h.p.Ready() })
	if took := h.clk.Now().Sub(fixedAt); took > maxCredentialsWait+h.p.slot() {
		t.Errorf("polling resumed %s after the fix, want within %s", took, maxCredentialsWait)
	}
	if h.p.UpstreamProblem() != nil || gaugeValue(t, reg, "relay_upstream_credentials_refused") != 0 {
		t.Errorf("after the fix: problem %v, gauge not 0", h.p.UpstreamProblem())
	}
}

// gaugeValue reads the one gauge called name from reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
