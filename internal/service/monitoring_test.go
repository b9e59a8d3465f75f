package service

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/deploy/monitoring"
	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Every metric deploy/monitoring's alerts and dashboard name is one a
// running relay registers (TLS on, so that the certificate's metrics are
// there), and those it has a series of after its first polls are in the
// scrape of its /metrics: a renamed metric fails here, not as an alert that
// never fires.
func TestTheMonitoringNamesMetricsARunningRelayHas(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service")
	}
	upstream := sim.StartTest(t, sim.Options{RateLimit: 600})
	if _, err := upstream.StartAlarm(sim.AlarmSpec{Level: 0}); err != nil {
		t.Fatal(err)
	}
	ca := notifytest.NewTLSFiles(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.WriteServerPair(t, certFile, keyFile)
	rulesPath := filepath.Join(dir, "rules.yaml")
	writeFile(t, rulesPath, "sinks:\n  - name: out\n    type: console\nroutes:\n  - name: all\n    to: [out]\n")
	appID, secret := upstream.Credentials()
	cfg, err := config.Load(context.Background(), envconfig.MapLookuper(map[string]string{
		"RELAY_BASE_URL": upstream.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": secret,
		"RELAY_RATE_LIMIT": "600", "RELAY_STATE_PATH": filepath.Join(dir, "relay.db"), "RELAY_RULES": rulesPath,
		"RELAY_LISTEN": "127.0.0.1:0", "RELAY_SHUTDOWN_GRACE": "1s",
		"RELAY_TLS_CERT_FILE": certFile, "RELAY_TLS_KEY_FILE": keyFile,
	}))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var console syncBuffer
	addr, _ := startRun(t, Options{Config: cfg, Console: &console, Registry: reg})

	pem, err := os.ReadFile(ca.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	scrape := func() string {
		t.Helper()
		resp, err := client.Get("https://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(scrape(), `relay_poller_polls_total{outcome="ok"`) && !strings.Contains(scrape(), `outcome="ok",query=`) {
		if time.Now().After(deadline) {
			t.Fatalf("no successful poll in 20 s; metrics:\n%s", scrape())
		}
		time.Sleep(50 * time.Millisecond)
	}
	text := scrape()

	descs := make(chan *prometheus.Desc, 1000)
	go func() { reg.Describe(descs); close(descs) }()
	var registered []string
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			registered = append(registered, m[1])
		}
	}
	var scraped, waiting []string
	for _, name := range monitoring.MetricNames() {
		switch {
		case !slices.Contains(registered, name):
			t.Errorf("deploy/monitoring names %s, which the running relay does not register", name)
		case regexp.MustCompile(`(?m)^` + name + `(_bucket|_sum|_count)?[{ ]`).MatchString(text):
			scraped = append(scraped, name)
		default:
			waiting = append(waiting, name) // a vector with no series yet
		}
	}
	t.Logf("%d metrics named, %d in the scrape; registered without a series yet: %v", len(scraped)+len(waiting), len(scraped), waiting)
}
