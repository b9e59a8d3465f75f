package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// The commands that call the ops listener work against one serving HTTPS:
// with RELAY_TLS_CA_FILE beside RELAY_LISTEN, with an https:// --addr, and
// beside the relay with its own RELAY_TLS_CERT_FILE. Without a CA that
// signed the certificate, or over plain HTTP, they fail and say what to set.
func TestCommandsCallAnOpsListenerServingTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service")
	}
	ca := notifytest.NewTLSFiles(t)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.WriteServerPair(t, cert, key)
	upstream := sim.StartTest(t, sim.Options{RateLimit: 600})
	addr, _ := startServiceWith(t, upstream, dir, map[string]string{"RELAY_TLS_CERT_FILE": cert, "RELAY_TLS_KEY_FILE": key})

	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"RELAY_TLS_CA_FILE", map[string]string{"RELAY_LISTEN": addr, "RELAY_TLS_CA_FILE": ca.CA}, nil},
		{"an https address", map[string]string{"RELAY_TLS_CA_FILE": ca.CA}, []string{"--addr", "https://" + addr}},
		{"beside the relay", map[string]string{"RELAY_LISTEN": addr, "RELAY_TLS_CERT_FILE": cert, "RELAY_TLS_KEY_FILE": key}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.env["RELAY_ADMIN_TOKEN"] = silenceAdminToken
			cleanEnv(t, tc.env)
			if code, out, errs := runCmd(t, cmdSilence, append([]string{"list"}, tc.args...)...); code != 0 {
				t.Fatalf("relay silence list: exit %d\n%s%s", code, out, errs)
			}
			if code, out, errs := runCmd(t, cmdAck, append([]string{"--list"}, tc.args...)...); code != 0 {
				t.Fatalf("relay ack --list: exit %d\n%s%s", code, out, errs)
			}
		})
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no CA", []string{"--addr", "https://" + addr}, "its certificate is not trusted"},
		{"plain HTTP", []string{"--addr", addr}, "serves HTTPS: set RELAY_TLS_CA_FILE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cleanEnv(t, map[string]string{"RELAY_ADMIN_TOKEN": silenceAdminToken})
			code, out, errs := runCmd(t, cmdSilence, append([]string{"list"}, tc.args...)...)
			if code == 0 || !strings.Contains(errs, tc.want) {
				t.Fatalf("relay silence list: exit %d, want a failure saying %q\n%s%s", code, tc.want, out, errs)
			}
		})
	}
}
