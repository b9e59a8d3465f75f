package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// Two tenants of a tenants file in one process: each polls its own
// upstream, keeps its own state file, delivers by its own rules, counts its
// own metrics, and has its own ops API.
func TestTwoTenantsOfATenantsFileRunSideBySide(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for a few seconds")
	}
	dir := t.TempDir()
	type tenant struct {
		id    string
		up    *sim.Server
		hook  *notifytest.Receiver
		alarm string
	}
	var tenants []*tenant
	var file strings.Builder
	file.WriteString("tenants:\n")
	env := map[string]string{"RELAY_LISTEN": "127.0.0.1:0", "RELAY_SHUTDOWN_GRACE": "1s", "RELAY_STATE_DIR": dir, "RELAY_ADMIN_TOKEN": "admin-token-0123456789"}
	for _, id := range []string{"acme", "globex"} {
		tn := &tenant{id: id, up: sim.StartTest(t, sim.Options{RateLimit: 600}), hook: notifytest.NewReceiver(t, "")}
		var err error
		if tn.alarm, err = tn.up.StartAlarm(sim.AlarmSpec{Level: 1}); err != nil {
			t.Fatal(err)
		}
		rules := filepath.Join(dir, id+".rules.yaml")
		writeFile(t, rules, fmt.Sprintf("sinks:\n  - name: ops\n    type: webhook\n    url: %s\nroutes:\n  - name: all\n    to: [ops]\n", tn.hook.URL()))
		appID, secret := tn.up.Credentials()
		env["SECRET_"+strings.ToUpper(id)] = secret
		fmt.Fprintf(&file, "  - id: %s\n    base_url: %s\n    app_id: %s\n    app_secret_env: SECRET_%s\n    rate_limit: 600\n    rules: %s\n",
			id, tn.up.URL(), appID, strings.ToUpper(id), rules)
		tenants = append(tenants, tn)
	}
	tenantsFile := filepath.Join(dir, "tenants.yaml")
	writeFile(t, tenantsFile, file.String())
	env["RELAY_TENANTS_FILE"] = tenantsFile
	cfg, err := config.Load(context.Background(), envconfig.MapLookuper(env))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	addr, _ := startRun(t, Options{Config: cfg, Lookup: lookup, Registry: reg})

	for _, tn := range tenants {
		deadline := time.Now().Add(30 * time.Second)
		for {
			var got []string
			for _, b := range tn.hook.Accepted() {
				var ev struct {
					Data struct {
						Alarm struct {
							OriginID string `json:"originId"`
						} `json:"alarm"`
					} `json:"data"`
				}
				if err := json.Unmarshal(b, &ev); err != nil {
					t.Fatal(err)
				}
				got = append(got, ev.Data.Alarm.OriginID)
			}
			if len(got) == 1 && got[0] == tn.alarm {
				break
			}
			if len(got) > 1 || time.Now().After(deadline) {
				t.Fatalf("tenant %s's webhook got %v, want only the start of its own alarm %s", tn.id, got, tn.alarm)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if _, err := os.Stat(filepath.Join(dir, tn.id+".db")); err != nil {
			t.Fatalf("tenant %s's state file: %v", tn.id, err)
		}
	}

	// Metrics carry the tenant.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() == "relay_tenant_served" {
			for _, m := range mf.GetMetric() {
				if m.GetGauge().GetValue() != 1 {
					t.Errorf("relay_tenant_served %v = %v, want 1", m.GetLabel(), m.GetGauge().GetValue())
				}
			}
		}
		if mf.GetName() != "relay_deliveries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tenant" {
					seen[l.GetValue()] = true
				}
			}
		}
	}
	if !seen["acme"] || !seen["globex"] {
		t.Fatalf("relay_deliveries_total by tenant: %v, want acme and globex", seen)
	}

	// Each tenant's API under /tenants/<id>/, and the plain path names
	// what to do instead.
	get := func(path string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer admin-token-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/tenants/acme/silences"); code != http.StatusOK {
		t.Fatalf("/tenants/acme/silences: %d %s", code, body)
	}
	if code, body := get("/tenants/initech/silences"); code != http.StatusServiceUnavailable || !strings.Contains(body, "initech") {
		t.Fatalf("/tenants/initech/silences: %d %s, want 503 naming the tenant", code, body)
	}
	if code, body := get("/silences"); code != http.StatusBadRequest || !strings.Contains(body, "/tenants/<id>/silences") {
		t.Fatalf("/silences: %d %s, want 400 saying how to name a tenant", code, body)
	}
	// The operator console: /console/ picks a tenant after a login, and
	// shows not even the tenants' ids before; each tenant's console is under
	// its path, and the one login opens them all.
	if code, body := get("/console/"); code != http.StatusOK || !strings.Contains(body, `action="/console/login"`) ||
		strings.Contains(body, "acme") || strings.Contains(body, "globex") {
		t.Fatalf("/console/ without a session: %d %s, want the login form and no tenant", code, body)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	form := url.Values{"token": {"admin-token-0123456789"}}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/console/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+addr)
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `href="/tenants/acme/console/"`) ||
		!strings.Contains(string(body), `href="/tenants/globex/console/"`) {
		t.Fatalf("/console/ after a login: %d %s, want links to each tenant's console", resp.StatusCode, body)
	}
	resp, err = browser.Get("http://" + addr + "/tenants/globex/console/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<h1>relay</h1>") || !strings.Contains(string(body), "administrator") {
		t.Fatalf("/tenants/globex/console/ with the picker's session: %d %s, want globex's Now page", resp.StatusCode, body)
	}
	if code, body := get("/tenants/globex/console/login"); code != http.StatusOK || !strings.Contains(body, `action="/tenants/globex/console/login"`) {
		t.Fatalf("/tenants/globex/console/login: %d %s, want globex's login form", code, body)
	}
}

// startRun runs the service with o until the test ends, and returns the
// address of its ops listener once it listens, and stop, which stops it and
// returns what Run returned (the cleanup then checks nothing more).
func startRun(t *testing.T, o Options) (addr string, stop func() error) {
	t.Helper()
	ready := make(chan string, 1)
	o.Ready = func(a string) { ready <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("run: %v", err)
		}
	})
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("run returned early: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the ops server never came up")
	}
	return addr, stop
}

// A tenant whose state cannot be opened stops the start with an error that
// names the tenant, and the process does not crash on what it had opened
// for it (its rules, its metrics).
func TestATenantWhoseStateCannotBeOpenedStopsTheStartWithItsName(t *testing.T) {
	dir := t.TempDir()
	up := sim.StartTest(t, sim.Options{})
	rules := filepath.Join(dir, "rules.yaml")
	writeFile(t, rules, "sinks:\n  - name: out\n    type: console\nroutes:\n  - name: all\n    to: [out]\n")
	appID, secret := up.Credentials()
	tenantsFile := filepath.Join(dir, "tenants.yaml")
	writeFile(t, tenantsFile, fmt.Sprintf("tenants:\n  - id: acme\n    base_url: %s\n    app_id: %s\n    app_secret_env: SECRET_ACME\n    rules: %s\n",
		up.URL(), appID, rules))
	// Not a bbolt file: opening it fails after the rules were loaded.
	writeFile(t, filepath.Join(dir, "acme.db"), strings.Repeat("not a state file\n", 512))
	env := map[string]string{"RELAY_LISTEN": "127.0.0.1:0", "RELAY_STATE_DIR": dir, "RELAY_TENANTS_FILE": tenantsFile, "SECRET_ACME": secret}
	cfg, err := config.Load(context.Background(), envconfig.MapLookuper(env))
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	err = Run(context.Background(), Options{Config: cfg, Lookup: lookup, Console: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "tenant acme") {
		t.Fatalf("Run = %v, want an error naming tenant acme", err)
	}
}
