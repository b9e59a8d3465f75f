package service

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/console"
	"github.com/relay-energy/relay/internal/notify/notifytest"
)

// secretDir is a directory laid out as the kubelet mounts a Secret:
// tls.crt and tls.key are symlinks into ..data, itself a symlink to the
// directory of the current version, swapped in one rename on rotation.
type secretDir struct {
	t        *testing.T
	dir      string
	versions int
}

func newSecretDir(t *testing.T) *secretDir {
	d := &secretDir{t: t, dir: t.TempDir()}
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(d.dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func (d *secretDir) cert() string { return filepath.Join(d.dir, "tls.crt") }
func (d *secretDir) key() string  { return filepath.Join(d.dir, "tls.key") }

// rotate writes a new version with write (given the paths of its
// certificate and key) and swaps ..data to it, as the kubelet does.
func (d *secretDir) rotate(write func(cert, key string)) {
	d.t.Helper()
	d.versions++
	version := filepath.Join(d.dir, "..v"+big.NewInt(int64(d.versions)).String())
	if err := os.Mkdir(version, 0o755); err != nil {
		d.t.Fatal(err)
	}
	write(filepath.Join(version, "tls.crt"), filepath.Join(version, "tls.key"))
	tmp := filepath.Join(d.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(version), tmp); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.dir, "..data")); err != nil {
		d.t.Fatal(err)
	}
}

// The ops listener serves the console over TLS 1.2 or later from a
// certificate file and a key file mounted as a Kubernetes Secret. When the
// Secret is rotated, the next connection gets the new certificate without a
// restart; a rotation to a pair that does not load is logged and counted
// once, and the certificate before it is served on until a good pair comes.
func TestOpsListenerServesTLSAndReloadsARotatedCertificate(t *testing.T) {
	t.Parallel()
	ca := notifytest.NewTLSFiles(t)
	secret := newSecretDir(t)
	var first *x509.Certificate
	secret.rotate(func(c, k string) { first = ca.WriteServerPair(t, c, k) })

	var logs syncBuffer
	reg := prometheus.NewRegistry()
	certs, err := LoadCertFiles(secret.cert(), secret.key(), reg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	certs.every = 0 // look at the files at every handshake
	ops, err := ListenOps("127.0.0.1:0", reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	console.New(nil, console.Options{ViewToken: "view-token-0123456789"}).Register(ops)
	ops.UseTLS(certs)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ops.Serve(ctx) }()
	defer func() { cancel(); <-done }()

	pem, err := os.ReadFile(ca.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	client := func(maxVersion uint16) *http.Client {
		// No keep-alive: every request is a new connection, a new handshake.
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{RootCAs: roots, MaxVersion: maxVersion}}}
	}
	// served returns the serial number of the certificate the listener
	// presents, after checking that it serves the console's login page.
	served := func() *big.Int {
		t.Helper()
		resp, err := client(0).Get("https://" + ops.Addr() + "/console/login")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `name="token"`) {
			t.Fatalf("GET /console/login over TLS: %s, want the login form:\n%s", resp.Status, body)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber
	}
	reloads := func(result string) float64 { return testutil.ToFloat64(certs.reloads.WithLabelValues(result)) }

	if got := served(); got.Cmp(first.SerialNumber) != 0 {
		t.Fatalf("serves certificate %s, want %s", got, first.SerialNumber)
	}
	if _, err := client(tls.VersionTLS11).Get("https://" + ops.Addr() + "/healthz"); err == nil {
		t.Fatal("a TLS 1.1 client was served, want TLS 1.2 or later only")
	}
	if resp, err := http.Get("http://" + ops.Addr() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain HTTP: %s, want 400", resp.Status)
		}
	}

	var second *x509.Certificate
	secret.rotate(func(c, k string) { second = ca.WriteServerPair(t, c, k) })
	if got := served(); got.Cmp(second.SerialNumber) != 0 {
		t.Fatalf("after the rotation, serves certificate %s, want the new %s", got, second.SerialNumber)
	}
	if reloads("applied") != 1 || !strings.Contains(logs.String(), "certificate reloaded") ||
		!strings.Contains(logs.String(), "serial="+second.SerialNumber.String()) {
		t.Fatalf("relay_tls_reloads_total{result=applied} = %v, want 1, and a log line naming the new serial:\n%s", reloads("applied"), logs.String())
	}

	// A certificate with the key of another: the old pair stays.
	secret.rotate(func(c, k string) {
		ca.WriteServerPair(t, c, filepath.Join(t.TempDir(), "other.key"))
		ca.WriteServerPair(t, filepath.Join(t.TempDir(), "other.crt"), k)
	})
	for range 2 {
		if got := served(); got.Cmp(second.SerialNumber) != 0 {
			t.Fatalf("after a rotation to a broken pair, serves %s, want the previous %s", got, second.SerialNumber)
		}
	}
	if reloads("refused") != 1 || !strings.Contains(logs.String(), "do not load") ||
		!strings.Contains(logs.String(), "private key does not match public key") {
		t.Fatalf("relay_tls_reloads_total{result=refused} = %v, want 1 (logged once), and the reason logged:\n%s", reloads("refused"), logs.String())
	}

	// Fixed, the next handshake takes the good pair.
	var third *x509.Certificate
	secret.rotate(func(c, k string) { third = ca.WriteServerPair(t, c, k) })
	if got := served(); got.Cmp(third.SerialNumber) != 0 || reloads("applied") != 2 {
		t.Fatalf("after a good rotation, serves %s (%v reloads), want %s", got, reloads("applied"), third.SerialNumber)
	}
	if n := gatheredGauge(t, reg, "relay_tls_certificate_expiry_timestamp_seconds"); n != float64(third.NotAfter.Unix()) {
		t.Fatalf("relay_tls_certificate_expiry_timestamp_seconds = %v, want %d", n, third.NotAfter.Unix())
	}
}

// gatheredGauge returns the value of the gauge name gathered from reg.
func gatheredGauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
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
	t.Fatalf("no gauge %s", name)
	return 0
}

// A certificate or key file that does not load stops start-up with a
// problem naming the variable and the file.
func TestCertFilesThatDoNotLoadStopStartUpNamingTheFile(t *testing.T) {
	t.Parallel()
	ca := notifytest.NewTLSFiles(t)
	dir := t.TempDir()
	good, goodKey := filepath.Join(dir, "good.crt"), filepath.Join(dir, "good.key")
	ca.WriteServerPair(t, good, goodKey)
	other, otherKey := filepath.Join(dir, "other.crt"), filepath.Join(dir, "other.key")
	ca.WriteServerPair(t, other, otherKey)
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a PEM file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, cert, key string
		want            []string
	}{
		{"no certificate file", filepath.Join(dir, "missing.crt"), goodKey, []string{"RELAY_TLS_CERT_FILE=" + filepath.Join(dir, "missing.crt"), "no such file"}},
		{"no key file", good, filepath.Join(dir, "missing.key"), []string{"RELAY_TLS_KEY_FILE=" + filepath.Join(dir, "missing.key"), "no such file"}},
		{"a key of another certificate", good, otherKey, []string{"RELAY_TLS_CERT_FILE=" + good, "RELAY_TLS_KEY_FILE=" + otherKey, "private key does not match"}},
		{"not PEM", garbage, goodKey, []string{"RELAY_TLS_CERT_FILE=" + garbage, "PEM"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadCertFiles(tc.cert, tc.key, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
			if err == nil {
				t.Fatal("loaded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// relay run and relay check refuse a certificate and key that do not make a
// pair before anything starts, naming both files, beside the other problems.
func TestRunAndCheckRefuseCertFilesThatDoNotLoad(t *testing.T) {
	t.Parallel()
	ca := notifytest.NewTLSFiles(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.WriteServerPair(t, cert, filepath.Join(dir, "other.key"))
	ca.WriteServerPair(t, filepath.Join(dir, "other.crt"), key)
	cfg, err := config.Load(t.Context(), envconfig.MapLookuper(map[string]string{
		"RELAY_BASE_URL": "http://127.0.0.1:1", "RELAY_APP_ID": "app", "RELAY_APP_SECRET": "secret",
		"RELAY_STATE_PATH": filepath.Join(dir, "relay.db"), "RELAY_RULES": filepath.Join(dir, "rules.yaml"),
		"RELAY_LISTEN": "127.0.0.1:0", "RELAY_TLS_CERT_FILE": cert, "RELAY_TLS_KEY_FILE": key,
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := "RELAY_TLS_CERT_FILE=" + cert + " and RELAY_TLS_KEY_FILE=" + key + " do not make a certificate and its key"
	err = Run(t.Context(), Options{Config: cfg})
	var se *StartError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "RELAY_RULES=") {
		t.Fatalf("Run: %v, want a start error naming the pair's files beside the missing rules file", err)
	}
	_, problems := Preflight(cfg, cfg.Rules, "RELAY_RULES", nil)
	if !strings.Contains(errors.Join(problems...).Error(), want) {
		t.Fatalf("Preflight: %v, want a problem naming the pair's files", problems)
	}
}
