package main

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/service"
	"github.com/relay-energy/relay/internal/silence"
)

const silenceAdminToken = "admin-s3cr3t-0123456789"

// startService runs the relay in process on the state file in dir, against
// upstream, until the test ends or stop is called, and returns its ops
// listener's address.
func startService(t *testing.T, upstream *sim.Server, dir string) (addr string, stop func()) {
	t.Helper()
	return startServiceWith(t, upstream, dir, nil)
}

// startServiceWith is startService with the variables of extra set too.
func startServiceWith(t *testing.T, upstream *sim.Server, dir string, extra map[string]string) (addr string, stop func()) {
	t.Helper()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte("sinks:\n  - name: out\n    type: console\nroutes:\n  - name: all\n    to: [out]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	appID, secret := upstream.Credentials()
	env := map[string]string{
		"RELAY_BASE_URL": upstream.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": secret,
		"RELAY_RATE_LIMIT": "600", "RELAY_STATE_PATH": filepath.Join(dir, "relay.db"), "RELAY_RULES": rules,
		"RELAY_LISTEN": "127.0.0.1:0", "RELAY_SHUTDOWN_GRACE": "1s", "RELAY_ADMIN_TOKEN": silenceAdminToken,
	}
	maps.Copy(env, extra)
	cfg, err := config.Load(context.Background(), envconfig.MapLookuper(env))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- service.Run(ctx, service.Options{Config: cfg, Console: io.Discard, Ready: func(a string) { ready <- a }})
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}
	t.Cleanup(stop)
	select {
	case addr = <-ready:
	case err := <-done:
		stopped = true
		t.Fatalf("the relay did not start: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the relay's ops listener never came up")
	}
	return addr, stop
}

var silenceID = regexp.MustCompile(`silence ([a-z2-7]{16}) added`)

func TestSilenceAddListExpireThroughTheRunningRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service")
	}
	upstream := sim.StartTest(t, sim.Options{RateLimit: 600})
	dir := t.TempDir()
	addr, stop := startService(t, upstream, dir)
	cleanEnv(t, map[string]string{"RELAY_ADMIN_TOKEN": silenceAdminToken, "RELAY_LISTEN": addr, "USER": "ana"})

	code, out, errs := runCmd(t, cmdSilence, "add", "--match", "{station_ids: [S1], levels: [urgent]}", "--for", "2h",
		"--comment", "replacing inverter 3", "--notify-on-expire")
	if code != 0 {
		t.Fatalf("add: exit %d\n%s%s", code, out, errs)
	}
	m := silenceID.FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "(active): levels=0 station_ids=S1") || !strings.Contains(out, "(2h), by ana") {
		t.Fatalf("add printed %q", out)
	}
	first := m[1]
	starts := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	code, out, errs = runCmd(t, cmdSilence, "add", "--all", "--starts", starts.Format(time.RFC3339),
		"--until", starts.Add(8*time.Hour).Format(time.RFC3339), "--author", "bo\x1b[2J", "--comment", "night works on\nthe substation")
	if code != 0 || !strings.Contains(out, "(pending): every alarm") || !strings.Contains(out, `(8h), by bo\x1b[2J`) {
		t.Fatalf("add --all: exit %d\n%s%s", code, out, errs)
	}
	second := silenceID.FindStringSubmatch(out)[1]

	code, out, errs = runCmd(t, cmdSilence, "list")
	if code != 0 {
		t.Fatalf("list: exit %d\n%s%s", code, out, errs)
	}
	if strings.Contains(out, "\x1b") {
		t.Fatalf("list printed an escape sequence of an author:\n%q", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ID ") || lines[3] != "2 silences listed" {
		t.Fatalf("list printed:\n%s", out)
	}
	for i, want := range [][]string{
		{first, "active", "levels=0 station_ids=S1", "ana", "replacing inverter 3"},
		{second, "pending", starts.Format(time.RFC3339), "every alarm", `bo\x1b[2J`, "night works on the substation"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("list line %d lacks %q:\n%s", i+1, w, out)
			}
		}
	}

	code, out, errs = runCmd(t, cmdSilence, "expire", first)
	if code != 0 || !strings.Contains(out, "silence "+first+" expired at ") {
		t.Fatalf("expire: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCmd(t, cmdSilence, "expire", first)
	if code != 1 || !strings.Contains(errs, "already ended") {
		t.Fatalf("expire twice: exit %d\n%s%s", code, out, errs)
	}
	if code, out, _ = runCmd(t, cmdSilence, "list"); code != 0 || strings.Contains(out, first) || !strings.Contains(out, "1 silence listed") {
		t.Fatalf("list after expire:\n%s", out)
	}
	if code, out, _ = runCmd(t, cmdSilence, "list", "--all"); code != 0 || !regexp.MustCompile(first+` +ended .* \(expired\) +levels=0`).MatchString(out) {
		t.Fatalf("list --all after expire:\n%s", out)
	}

	// The silences are in the state file: a restarted relay has them.
	stop()
	addr, _ = startService(t, upstream, dir)
	t.Setenv("RELAY_LISTEN", addr)
	code, out, errs = runCmd(t, cmdSilence, "list", "--all", "--json")
	if code != 0 {
		t.Fatalf("list --all --json: exit %d\n%s%s", code, out, errs)
	}
	var ans service.SilencesAnswer
	if err := json.Unmarshal([]byte(out), &ans); err != nil {
		t.Fatalf("list --json printed %q: %v", out, err)
	}
	if ans.Count != 2 || ans.Silences[0].ID != first || ans.Silences[0].State != silence.Ended || !ans.Silences[0].NotifyOnExpire ||
		ans.Silences[1].ID != second || ans.Silences[1].State != silence.Pending || !ans.Silences[1].All {
		t.Fatalf("after a restart: %s", out)
	}
}

func TestSilenceRefusesBadInputBeforeSendingIt(t *testing.T) {
	// No relay listens: each of these must fail before any request.
	cleanEnv(t, map[string]string{"RELAY_ADMIN_TOKEN": silenceAdminToken, "RELAY_LISTEN": "127.0.0.1:1", "USER": ""})
	cases := []struct {
		args []string
		says []string
	}{
		{[]string{"add", "--match", "{levels: [loud], colour: red}", "--for", "2h", "--author", "a", "--comment", "c"},
			[]string{`--match: levels: "loud" is not a level`, `--match: colour: unknown key`}},
		{[]string{"add", "--match", "{station_ids: [S1]", "--for", "2h", "--author", "a", "--comment", "c"}, []string{"--match: "}},
		{[]string{"add", "--match", "{}", "--for", "2h", "--author", "a", "--comment", "c"}, []string{"no condition", "--all"}},
		{[]string{"add", "--match", "{levels: [0]}", "--all", "--for", "2h", "--author", "a", "--comment", "c"}, []string{"not both"}},
		{[]string{"add", "--for", "2h", "--author", "a", "--comment", "c"}, []string{"--match is missing"}},
		{[]string{"add", "--all", "--author", "a", "--comment", "c"}, []string{"--for 2h", "--until"}},
		{[]string{"add", "--all", "--for", "2h", "--until", "2026-11-24T08:00:00Z", "--author", "a", "--comment", "c"}, []string{"--for or --until, not both"}},
		{[]string{"add", "--all", "--for", "soon", "--author", "a", "--comment", "c"}, []string{`--for "soon" is not a duration`}},
		{[]string{"add", "--all", "--until", "tomorrow", "--starts", "now", "--author", "a", "--comment", "c"},
			[]string{`--until "tomorrow"`, `--starts "now"`}},
		{[]string{"add", "--all", "--for", "2h", "--comment", "c"}, []string{"--author is missing (USER is not set either)"}},
		{[]string{"add", "--all", "--for", "2h", "--author", "a"}, []string{"--comment is missing"}},
		{[]string{"expire"}, []string{"give the ID"}},
		{[]string{"expire", "a", "b"}, []string{`unexpected argument "b"`}},
		{[]string{"list", "--match", "{}"}, []string{"flag provided but not defined: -match"}},
		{[]string{"mute"}, []string{`unknown action "mute"`}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, errs := runCmd(t, cmdSilence, c.args...)
			if code != 2 || out != "" {
				t.Fatalf("exit %d, stdout %q; want 2 and nothing", code, out)
			}
			for _, s := range c.says {
				if !strings.Contains(errs, s) {
					t.Fatalf("stderr lacks %q:\n%s", s, errs)
				}
			}
			if strings.Contains(errs, "does not answer") {
				t.Fatalf("a request was sent:\n%s", errs)
			}
		})
	}
}

func TestSilenceShowsTheRelaysRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service")
	}
	upstream := sim.StartTest(t, sim.Options{RateLimit: 600})
	addr, _ := startService(t, upstream, t.TempDir())
	cleanEnv(t, map[string]string{"RELAY_ADMIN_TOKEN": silenceAdminToken, "RELAY_LISTEN": addr, "USER": "ana"})

	// What only the relay can check: its clock.
	code, out, errs := runCmd(t, cmdSilence, "add", "--all", "--until", "2020-01-01T00:00:00Z", "--comment", "c")
	if code != 1 || !strings.Contains(errs, "relay silence add: ends_at: 2020-01-01T00:00:00Z is not in the future") {
		t.Fatalf("an end in the past: exit %d\n%s%s", code, out, errs)
	}
	code, _, errs = runCmd(t, cmdSilence, "expire", "nosuchsilence000")
	if code != 1 || !strings.Contains(errs, `silence "nosuchsilence000": no such silence`) {
		t.Fatalf("expire of an unknown ID: exit %d\n%s", code, errs)
	}
	// --tenant names the tenant of a relay that serves a tenants file; the
	// one tenant of the environment is "default".
	if code, out, errs := runCmd(t, cmdSilence, "list", "--tenant", "default"); code != 0 {
		t.Fatalf("list --tenant default: exit %d\n%s%s", code, out, errs)
	}
	code, _, errs = runCmd(t, cmdSilence, "list", "--tenant", "initech")
	if code != 1 || !strings.Contains(errs, `tenant "initech" is not served by this process`) {
		t.Fatalf("list --tenant of a tenant the relay does not serve: exit %d\n%s", code, errs)
	}
	t.Setenv("RELAY_ADMIN_TOKEN", "admin-wrong-0123456789")
	code, _, errs = runCmd(t, cmdSilence, "list")
	if code != 1 || !strings.Contains(errs, "HTTP 401") || !strings.Contains(errs, "wrong or missing token") {
		t.Fatalf("a wrong token: exit %d\n%s", code, errs)
	}
	os.Unsetenv("RELAY_ADMIN_TOKEN")
	code, _, errs = runCmd(t, cmdSilence, "list")
	if code != 1 || !strings.Contains(errs, "RELAY_ADMIN_TOKEN is not set") {
		t.Fatalf("no token: exit %d\n%s", code, errs)
	}
	noSecrets(t, errs)
}
