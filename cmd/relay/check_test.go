package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/rulefile"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

const exampleRules = "../../rules.example.yaml"

// exampleEnv is every variable rules.example.yaml names: these with values
// that must never be printed, and any other with rulefile.Placeholder, so
// that a sink type added to the example needs no change here.
var exampleEnv = withExampleVariables(map[string]string{
	"RELAY_NATS_URL":     "nats://127.0.0.1:4222",
	"RELAY_SLACK_TOKEN":  "xoxb-s3cr3t-slack-token",
	"SLACK_WEBHOOK_URL":  "https://hooks.slack.com/services/T000/B000/s3cr3tHOOKPATH",
	"OPS_WEBHOOK_SECRET": "whsec_czNjcjN0LXdlYmhvb2sta2V5",
})

// withExampleVariables adds to env every other variable rules.example.yaml
// reads, as rulefile.Placeholder.
func withExampleVariables(env map[string]string) map[string]string {
	r, err := route.Load(exampleRules, func(string) (string, bool) { return rulefile.Placeholder, true })
	if err != nil {
		panic(err)
	}
	for _, name := range r.Variables {
		if _, ok := env[name]; !ok {
			env[name] = rulefile.Placeholder
		}
	}
	return env
}

// cleanEnv unsets every RELAY_ variable and those of exampleEnv for the
// test, then sets set; the originals come back when the test ends.
func cleanEnv(t *testing.T, set map[string]string) {
	t.Helper()
	for _, name := range append(config.Variables, "SLACK_WEBHOOK_URL", "OPS_WEBHOOK_SECRET") {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	for k, v := range set {
		t.Setenv(k, v)
	}
}

// withUpstream adds to env what relay run needs besides the rules: the
// upstream's variables and a state path in a directory that exists.
func withUpstream(t *testing.T, env map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{
		"RELAY_BASE_URL": "http://127.0.0.1:8090", "RELAY_APP_ID": "app", "RELAY_APP_SECRET": "s3cr3t-app-secret",
		"RELAY_STATE_PATH": filepath.Join(t.TempDir(), "relay.db"),
	}
	for k, v := range env {
		out[k] = v
	}
	return out
}

func runCmd(t *testing.T, cmd command, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cmd(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func noSecrets(t *testing.T, texts ...string) {
	t.Helper()
	for _, text := range texts {
		for _, secret := range []string{"s3cr3t", "czNjcjN0", "demo-secret"} {
			if strings.Contains(text, secret) {
				t.Fatalf("output reveals a secret (%s):\n%s", secret, text)
			}
		}
	}
}

func TestCheckAcceptsTheExampleAndPrintsTheRoutingTable(t *testing.T) {
	cleanEnv(t, withUpstream(t, exampleEnv))
	code, out, errOut := runCmd(t, cmdCheck, "--rules", exampleRules)
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// Columns widen with the longest name: compare with single spaces.
	flat := regexp.MustCompile(` +`).ReplaceAllString(out, " ")
	for _, want := range []string{
		"environment: ok",
		"upstream: http://127.0.0.1:8090 (RELAY_APP_ID set, RELAY_APP_SECRET set)",
		"bus nats energy.alarms.{{.TenantID}}.{{.StationID}}.{{.Level}}.{{.Transition}}",
		"jetstream, max_age 72h",
		"create_stream: RELAY_AUDIT",
		"channel C0123456789",
		"incoming webhook https://hooks.slack.com ",
		"webhook_url_env: SLACK_WEBHOOK_URL (set)",
		"secret_env: OPS_WEBHOOK_SECRET (set), headers: X-Relay-Source, timeout 5s, concurrency 16",
		"everything-to-bus any event",
		"urgent levels=0,1",
		"the-rest levels=2,3 ops, dashboard, tickets no",
		"\nok\n",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	noSecrets(t, out, errOut)
}

func TestCheckNamesEachMissingVariableOfTheExample(t *testing.T) {
	for name := range exampleEnv {
		t.Run(name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range exampleEnv {
				if k != name {
					env[k] = v
				}
			}
			cleanEnv(t, withUpstream(t, env))
			code, out, errOut := runCmd(t, cmdCheck, "--rules", exampleRules)
			if code != 1 {
				t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			if !strings.Contains(errOut, "route: "+exampleRules+":") || !strings.Contains(errOut, name+", which is not set") && !strings.Contains(errOut, name+" is not set") {
				t.Fatalf("stderr does not name %s with file and line:\n%s", name, errOut)
			}
			noSecrets(t, out, errOut)
		})
	}
}

func TestCheckListsEveryProblem(t *testing.T) {
	cleanEnv(t, map[string]string{"RELAY_RATE_LIMIT": "0"})
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(`sinks:
  - {name: bus, type: nats, subject: "a.{{.Nope}}"}
  - {name: ops, type: webhook, url: "ftp://x", secret_env: NOT_SET_ANYWHERE}
routes:
  - {name: all, to: [bus, oncal]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, cmdCheck, "--rules", rules)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"config: RELAY_RATE_LIMIT=0",
		rules + ":2: sinks[0].subject: bad template",
		rules + ":3: sinks[1].url: want an http:// or https:// URL",
		rules + ":3: sinks[1].secret_env: environment variable NOT_SET_ANYWHERE is not set",
		rules + `:5: routes[0].to: sink "oncal" is not defined`,
		"RELAY_BASE_URL is required and not set",
		"RELAY_STATE_PATH=/var/lib/relay/relay.db: directory /var/lib/relay does not exist",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if !strings.Contains(out, "relay check: 9 problems") {
		t.Errorf("stdout lacks the count of 9 problems:\n%s", out)
	}
}

func TestCheckReadsTheRulesPathFromTheEnvironment(t *testing.T) {
	cleanEnv(t, map[string]string{"RELAY_RULES": filepath.Join(t.TempDir(), "absent.yaml")})
	code, _, errOut := runCmd(t, cmdCheck)
	if code != 1 || !strings.Contains(errOut, "absent.yaml: no such file") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
}

func TestCheckOnlineLogsInUpstream(t *testing.T) {
	s := sim.StartTest(t, sim.Options{Seed: 1})
	appID, secret := s.Credentials()
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("sinks:\n  - {name: log, type: console}\nroutes:\n  - {name: all, to: log}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		env    map[string]string
		code   int
		stdout string
		stderr string
	}{
		{"good credentials", withUpstream(t, map[string]string{"RELAY_BASE_URL": s.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": secret}), 0, "upstream: logged in to " + s.URL(), ""},
		{"wrong secret", withUpstream(t, map[string]string{"RELAY_BASE_URL": s.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": "s3cr3t-wrong"}), 1, "", "upstream login"},
		{"no credentials", nil, 1, "", "RELAY_BASE_URL is required and not set"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cleanEnv(t, c.env)
			code, out, errOut := runCmd(t, cmdCheck, "--online", "--rules", rules)
			if code != c.code || !strings.Contains(out, c.stdout) || !strings.Contains(errOut, c.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", code, c.code, out, errOut)
			}
			noSecrets(t, out, errOut)
		})
	}
}

// TestCheckAcceptsExactlyWhatRunAccepts gives relay check and relay run the
// same environments: each problem makes both refuse, naming it, and check
// lists them all at once, one line each.
func TestCheckAcceptsExactlyWhatRunAccepts(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(good, []byte("sinks:\n  - {name: log, type: console}\nroutes:\n  - {name: all, to: log}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dollar := filepath.Join(dir, "dollar.yaml")
	if err := os.WriteFile(dollar, []byte("sinks:\n  - {name: bus, type: nats, subject: \"$JS.API.STREAM.DELETE.X\"}\nroutes:\n  - {name: all, to: bus}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(dir, "own.yaml")
	if err := os.WriteFile(own, []byte("sinks:\n  - name: ops\n    type: webhook\n    url: https://ops.example.com/alarms\n    secret_env: RELAY_APP_SECRET\nroutes:\n  - {name: all, to: ops}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"a sink reading relay's app secret", map[string]string{"RELAY_RULES": own},
			own + ":5: sinks[0].secret_env: RELAY_APP_SECRET is one of relay's own variables, which no file may name"},
		{"base URL without host", map[string]string{"RELAY_BASE_URL": "https://"}, `RELAY_BASE_URL="https://": no host`},
		{"listen port out of range", map[string]string{"RELAY_LISTEN": ":99999"}, `RELAY_LISTEN=":99999": port "99999"`},
		{"state directory missing", map[string]string{"RELAY_STATE_PATH": filepath.Join(dir, "missing", "relay.db")}, "directory " + filepath.Join(dir, "missing") + " does not exist"},
		{"rules file missing", map[string]string{"RELAY_RULES": filepath.Join(dir, "absent.yaml")}, "RELAY_RULES=" + filepath.Join(dir, "absent.yaml") + ": no such file: set RELAY_RULES"},
		{"subject on the JetStream API", map[string]string{"RELAY_RULES": dollar, "RELAY_NATS_URL": "nats://127.0.0.1:1"}, "sinks[0].subject"},
		{"app secret missing", map[string]string{"RELAY_APP_SECRET": ""}, "RELAY_APP_SECRET is required and not set"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := withUpstream(t, map[string]string{"RELAY_RULES": good, "RELAY_LISTEN": "127.0.0.1:0"})
			for k, v := range c.env {
				env[k] = v
			}
			cleanEnv(t, env)
			code, out, checkErr := runCmd(t, cmdCheck)
			if code != 1 || !strings.Contains(checkErr, c.want) || strings.Count(checkErr, "\n") != 1 {
				t.Errorf("check: exit %d, want 1 and one line naming %q\nstdout:\n%s\nstderr:\n%s", code, c.want, out, checkErr)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var runOut, runErr bytes.Buffer
			code = cmdRun(ctx, nil, &runOut, &runErr)
			if code != 1 || !strings.Contains(runErr.String(), c.want) || strings.Count(runErr.String(), "\n") != 1 {
				t.Errorf("run: exit %d, want 1 and the problem printed once\nstderr:\n%s", code, runErr.String())
			}
		})
	}
}

// TestCheckWithSixProblemsPrintsSixLines is the acceptance: six
// problems of the environment, six lines on stderr, exit 1.
func TestCheckWithSixProblemsPrintsSixLines(t *testing.T) {
	dir := t.TempDir()
	cleanEnv(t, map[string]string{
		"RELAY_BASE_URL":   "https://",
		"RELAY_LISTEN":     ":99999",
		"RELAY_STATE_PATH": filepath.Join(dir, "missing", "relay.db"),
		"RELAY_RULES":      filepath.Join(dir, "rules.yaml"),
	})
	code, out, errOut := runCmd(t, cmdCheck)
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	if code != 1 || len(lines) != 6 {
		t.Fatalf("exit %d, %d lines on stderr, want 1 and 6\nstdout:\n%s\nstderr:\n%s", code, len(lines), out, errOut)
	}
	for i, want := range []string{"RELAY_BASE_URL", "RELAY_LISTEN", "RELAY_APP_ID", "RELAY_APP_SECRET", "RELAY_STATE_PATH", "RELAY_RULES"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d %q does not name %s", i+1, lines[i], want)
		}
	}
	if !strings.Contains(out, "relay check: 6 problems") {
		t.Errorf("stdout lacks the count:\n%s", out)
	}
}

func TestCheckRulesOnlyNeedsNoEnvironment(t *testing.T) {
	cleanEnv(t, exampleEnv)
	code, out, errOut := runCmd(t, cmdCheck, "--rules-only", "--rules", exampleRules)
	if code != 0 || !regexp.MustCompile(`rules.example.yaml: \d+ sinks, \d+ routes`).MatchString(out) || strings.Contains(out, "environment: ok") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestCheckPrintsAlarmManagement shows the route and sink options of alarm
// management, each time interval with its next occurrences in its zone, and
// each maintenance window and inhibit rule on one line.
func TestCheckPrintsAlarmManagement(t *testing.T) {
	r, err := route.Parse("rules.yaml", []byte(`sinks:
  - {name: chat, type: console, digest: {threshold: 20, window: 5m}, daily_summary: "08:00 Asia/Shanghai"}
  - {name: bus, type: console, digest: false}
  - {name: log, type: console}
routes:
  - {name: all, to: [bus], suppress: false, continue: true}
  - {name: urgent, match: {levels: [urgent]}, to: [chat], hold: 2m, repeat: 4h, active_when: [business-hours], mute_when: [night]}
  - {name: rest, to: [log], mute_when: [always]}
time_intervals:
  - name: business-hours
    time_intervals:
      - {weekdays: ['monday:friday'], times: [{start_time: '09:00', end_time: '18:00'}], location: Asia/Shanghai}
  - name: night
    time_intervals:
      - {times: [{start_time: '22:00', end_time: '24:00'}, {start_time: '00:00', end_time: '06:00'}], location: Europe/Berlin}
  - name: late
    time_intervals:
      - {times: [{start_time: '22:00', end_time: '24:00'}]}
  - {name: always, time_intervals: [{}]}
  - {name: never, time_intervals: [{years: ['2020']}]}
maintenance:
  - {name: service, when: [late, never], match: {station_ids: [S1]}}
  - {name: fleet, when: [night]}
inhibit:
  - {name: mask, source: {event_codes: [DC_OFFLINE]}, target: {event_types: [communication]}}
  - {name: mask-system, source: {event_codes: [SYS_DOWN]}, target: {levels: [3]}, equal: system}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	// Monday 2026-11-23 12:00 UTC is 20:00 in Shanghai and 13:00 in Berlin.
	printRules(&out, r, time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	flat := regexp.MustCompile(` +`).ReplaceAllString(out.String(), " ")
	for _, want := range []string{
		"chat console stdout max_age 24h, max_retry_after 15m, digest 20 per 5m, daily_summary 08:00 Asia/Shanghai\n",
		"bus console stdout max_age 24h, max_retry_after 15m, digest off\n",
		"log console stdout max_age 24h, max_retry_after 15m\n",
		"ROUTE MATCH TO CONTINUE OPTIONS\n",
		"all any event bus yes suppress false\n",
		"urgent levels=0 chat no hold 2m, repeat 4h, active_when business-hours, mute_when night\n",
		"rest any event log no mute_when always\n",
		"\ntime intervals, next 3 occurrences:\n" +
			" business-hours: Tue 2026-11-24 09:00–18:00 Asia/Shanghai, Wed 2026-11-25 09:00–18:00 Asia/Shanghai, Thu 2026-11-26 09:00–18:00 Asia/Shanghai\n" +
			" night: Mon 2026-11-23 22:00–Tue 2026-11-24 06:00 Europe/Berlin, Tue 2026-11-24 22:00–Wed 2026-11-25 06:00 Europe/Berlin, Wed 2026-11-25 22:00–Thu 2026-11-26 06:00 Europe/Berlin\n" +
			" late: Mon 2026-11-23 22:00–24:00 UTC, Tue 2026-11-24 22:00–24:00 UTC, Wed 2026-11-25 22:00–24:00 UTC\n" +
			" always: from now throughout the year ahead UTC\n" +
			" never: none within a year\n",
		"\nmaintenance windows (alarms suppressed while one of the intervals is active):\n" +
			" service: station_ids=S1 during late, never\n" +
			" fleet: any event during night\n",
		"\ninhibit rules (alarms suppressed while a masking alarm is ongoing):\n" +
			" mask: event_codes=DC_OFFLINE masks event_types=communication on the same station\n" +
			" mask-system: event_codes=SYS_DOWN masks levels=3 on the same system\n",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for line := range strings.Lines(out.String()) {
		if strings.HasSuffix(strings.TrimSuffix(line, "\n"), " ") {
			t.Errorf("line %q ends in a space", line)
		}
	}
}

// TestCheckNamesTheBackendTheReplicaAndEachTenant: relay check prints where
// the state lives, this replica's id, lease TTL and egress group, and a row
// per tenant of the tenants file with where its secret comes from, never
// the secret.
func TestCheckNamesTheBackendTheReplicaAndEachTenant(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte("sinks:\n  - {name: log, type: console}\nroutes:\n  - {name: all, to: log}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "northwind.secret"), []byte("s3cr3t-northwind\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tenants := filepath.Join(dir, "tenants.yaml")
	if err := os.WriteFile(tenants, []byte(`tenants:
  - id: acme-solar
    base_url: https://opendata.example.com
    app_id: acme
    app_secret_env: ACME_SECRET
  - id: northwind
    base_url: https://relay:s3cr3t-url@eu.opendata.example.com
    app_id: northwind
    app_secret_file: northwind.secret
    rate_limit: 4
    rules: rules.yaml
`), 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{
		"RELAY_RULES": rules, "RELAY_STATE_PATH": filepath.Join(dir, "relay.db"), "RELAY_NATS_URL": "nats://127.0.0.1:4222",
		"RELAY_REPLICA_ID": "relay-1", "ACME_SECRET": "s3cr3t-acme",
	}
	with := func(more map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range []map[string]string{more, base} {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	cases := []struct {
		name       string
		env        map[string]string
		want, lack []string
	}{
		{"one tenant on bbolt", with(withUpstream(t, nil)), []string{
			"state: bbolt, " + filepath.Join(dir, "relay.db") + "\n",
			"upstream: http://127.0.0.1:8090 (RELAY_APP_ID set, RELAY_APP_SECRET set)\n",
		}, []string{"replica:", "tenants:"}},
		{"one tenant on bbolt in an egress group", with(withUpstream(t, map[string]string{"RELAY_EGRESS_GROUP": "eu-nat"})), []string{
			"replica: relay-1, egress group eu-nat\n",
		}, []string{"lease"}},
		{"tenants on jetstream", with(map[string]string{
			"RELAY_TENANTS_FILE": tenants, "RELAY_STATE_BACKEND": "jetstream", "RELAY_STATE_REPLICAS": "3",
			"RELAY_LEASE_TTL": "5s", "RELAY_EGRESS_GROUP": "eu-nat", "RELAY_STATE_DIR": filepath.Join(dir, "cache"),
		}), []string{
			"state: jetstream, 3 replicas of each stream and bucket; local caches in " + filepath.Join(dir, "cache") + "\n",
			"replica: relay-1, lease TTL 5s, egress group eu-nat\n",
			"tenants: 2 from " + tenants + "\n",
			"TENANT UPSTREAM APP SECRET RATE RULES STATE\n",
			"acme-solar https://opendata.example.com app_secret_env ACME_SECRET 10/min " + rules + " " + filepath.Join(dir, "cache", "acme-solar.db") + "\n",
			"northwind https://relay:xxxxx@eu.opendata.example.com app_secret_file " + filepath.Join(dir, "northwind.secret") + " 4/min " + rules + " " +
				filepath.Join(dir, "cache", "northwind.db") + "\n",
		}, []string{"upstream:"}},
		{"tenants on bbolt", with(map[string]string{"RELAY_TENANTS_FILE": tenants}), []string{
			"state: bbolt, one file per tenant in " + dir + "\n",
			"acme-solar https://opendata.example.com app_secret_env ACME_SECRET 10/min " + rules + " " + filepath.Join(dir, "acme-solar.db") + "\n",
		}, []string{"replica:", "upstream:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cleanEnv(t, c.env)
			code, out, errOut := runCmd(t, cmdCheck)
			if code != 0 {
				t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			flat := regexp.MustCompile(` +`).ReplaceAllString(out, " ")
			for _, want := range c.want {
				if !strings.Contains(flat, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
			for _, lack := range c.lack {
				if strings.Contains(out, lack) {
					t.Errorf("stdout has %q:\n%s", lack, out)
				}
			}
			noSecrets(t, out, errOut)
		})
	}
}

// TestCheckReportsTenantsFileProblemsWithTheirLines: every problem of the
// tenants file and of the variables beside it, one line each, no secret.
func TestCheckReportsTenantsFileProblemsWithTheirLines(t *testing.T) {
	dir := t.TempDir()
	tenants := filepath.Join(dir, "tenants.yaml")
	if err := os.WriteFile(tenants, []byte(`tenants:
  - id: acme-solar
    base_url: https://opendata.example.com
    app_id: acme
    app_secret_env: ACME_SECRET
    rate: 5
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cleanEnv(t, withUpstream(t, map[string]string{"RELAY_TENANTS_FILE": tenants, "RELAY_STATE_BACKEND": "jetstream"}))
	code, out, errOut := runCmd(t, cmdCheck, "--rules", exampleRules)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"config: RELAY_BASE_URL is set with RELAY_TENANTS_FILE: remove RELAY_BASE_URL",
		"config: RELAY_APP_ID is set with RELAY_TENANTS_FILE: remove RELAY_APP_ID",
		"config: RELAY_APP_SECRET is set with RELAY_TENANTS_FILE: remove RELAY_APP_SECRET",
		"config: RELAY_STATE_BACKEND=jetstream needs RELAY_NATS_URL",
		"config: " + tenants + ":5: tenants[0].app_secret_env: tenant acme-solar: environment variable ACME_SECRET is not set",
		"config: " + tenants + `:6: tenants[0].rate: unknown key "rate"`,
	} {
		if !strings.Contains(errOut, want+"") {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	noSecrets(t, out, errOut)
}

// TestCheckOnlineLogsInToEveryTenant: with a tenants file, --online logs in
// to each tenant's upstream and names the tenant whose login fails, without
// its secret.
func TestCheckOnlineLogsInToEveryTenant(t *testing.T) {
	a, b := sim.StartTest(t, sim.Options{Seed: 1}), sim.StartTest(t, sim.Options{Seed: 2})
	aID, aSecret := a.Credentials()
	bID, _ := b.Credentials()
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte("sinks:\n  - {name: log, type: console}\nroutes:\n  - {name: all, to: log}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tenants := filepath.Join(dir, "tenants.yaml")
	if err := os.WriteFile(tenants, []byte("tenants:\n"+
		"  - {id: acme, base_url: '"+a.URL()+"', app_id: '"+aID+"', app_secret_env: ACME_SECRET}\n"+
		"  - {id: northwind, base_url: '"+b.URL()+"', app_id: '"+bID+"', app_secret_env: NORTHWIND_SECRET}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cleanEnv(t, map[string]string{
		"RELAY_TENANTS_FILE": tenants, "RELAY_RULES": rules, "RELAY_STATE_PATH": filepath.Join(dir, "relay.db"),
		"ACME_SECRET": aSecret, "NORTHWIND_SECRET": "s3cr3t-wrong",
	})
	code, out, errOut := runCmd(t, cmdCheck, "--online")
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "tenant acme: upstream: logged in to "+a.URL()) {
		t.Errorf("stdout does not say acme logged in:\n%s", out)
	}
	if !strings.Contains(errOut, "tenant northwind: upstream login: ") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("stderr, want one line naming northwind's login:\n%s", errOut)
	}
	noSecrets(t, out, errOut)
}

// TestCheckOnlinePrintsTheHostEachSinkReaches: --online prints one line per
// sink with its name, type and the scheme and host it reaches, and never the
// token of a webhook's path or query, nor the credentials of RELAY_NATS_URL.
func TestCheckOnlinePrintsTheHostEachSinkReaches(t *testing.T) {
	s := sim.StartTest(t, sim.Options{Seed: 1})
	appID, secret := s.Credentials()
	ns := natstest.StartServer(t, natstest.Config{User: "relay", Password: "s3cr3t-nats-password"})
	hooks := httptest.NewServer(http.NotFoundHandler())
	defer hooks.Close()
	host := strings.TrimPrefix(hooks.URL, "http://")
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(`sinks:
  - {name: bus, type: nats}
  - {name: ops, type: webhook, url: "`+hooks.URL+`/alarms?token=s3cr3t-query"}
  - {name: robot, type: dingtalk, url_env: DING_URL}
  - {name: team, type: slack, webhook_url_env: SLACK_WEBHOOK_URL}
  - {name: log, type: console}
routes:
  - {name: all, to: [bus, ops, robot, team, log]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cleanEnv(t, withUpstream(t, map[string]string{
		"RELAY_BASE_URL": s.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": secret,
		"RELAY_NATS_URL":    strings.Replace(ns.URL(), "nats://", "nats://relay:s3cr3t-nats-password@", 1),
		"DING_URL":          hooks.URL + "/robot/send?access_token=s3cr3t-ding-token",
		"SLACK_WEBHOOK_URL": hooks.URL + "/services/T000/B000/s3cr3tHOOKPATH",
	}))
	code, out, errOut := runCmd(t, cmdCheck, "--online", "--rules", rules)
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"sink bus (nats) at " + ns.URL() + ": ",
		"sink ops (webhook) at http://" + host + ": " + host + " reachable; nothing was sent",
		"sink robot (dingtalk) at http://" + host + ": ",
		"sink team (slack) at http://" + host + ": ",
		"sink log (console) at stdout: ",
	} {
		if !strings.Contains(out, "\n"+want) {
			t.Errorf("stdout lacks a line starting %q:\n%s", want, out)
		}
	}
	noSecrets(t, out, errOut)
}

// TestCheckOnlineShowsTheUpstreamClockAndDeviceStamps: against an upstream
// whose clock is 15 minutes behind and a tenth of whose devices stamp local
// time of UTC+8 as UTC, --online says how far the upstream's clock is off,
// names the devices stamping ahead with the offset, and warns of a likely
// zone mistake, saying what to ask the vendor; the check still passes.
func TestCheckOnlineShowsTheUpstreamClockAndDeviceStamps(t *testing.T) {
	s := sim.StartTest(t, sim.Options{Seed: 1, Hostile: sim.Hostile{
		ClockOffset: -15 * time.Minute, DeviceClockSkew: 8 * time.Hour, DeviceClockSkewShare: 0.1,
	}})
	skewed := s.SkewedDevices()
	if len(skewed) == 0 {
		t.Fatal("no device stamps off")
	}
	// Alarms of the skewed devices, ongoing and over, and of the others.
	for i, d := range s.Fleet().Devices {
		id, err := s.StartAlarm(sim.AlarmSpec{DeviceSN: d.SN})
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := s.EndAlarm(id, time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	appID, secret := s.Credentials()
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("sinks:\n  - {name: log, type: console}\nroutes:\n  - {name: all, to: log}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cleanEnv(t, withUpstream(t, map[string]string{"RELAY_BASE_URL": s.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": secret}))
	code, out, errOut := runCmd(t, cmdCheck, "--online", "--rules", rules)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	stampLines(t, out, skewed, []string{" +7h5", " +8h"},
		"upstream clock: -15m0s off this machine's",
		fmt.Sprintf("device stamps: %d of %d devices stamp alarms ahead of the upstream's clock", len(skewed), len(s.Fleet().Devices)),
		"warning: device ",
		"look like local time of UTC+8 or a zone further east stamped as UTC (China's UTC+8 gives +8 h): ask the vendor whether occurrenceTime and recoveryTime are epoch milliseconds of UTC",
		"stamps behind the upstream's clock show only as new alarms are listed: the running relay measures them")
	if strings.Count(out, "warning: device ") != 1 {
		t.Errorf("want one zone warning:\n%s", out)
	}
	noSecrets(t, out, errOut)
}

// TestCheckOnlineShowsTheOffsetsTheRunningRelayLearnt: beside a running
// relay whose upstream has a tenth of its devices stamping 8 hours behind,
// --online asks it for the offsets it learnt from their fresh alarms, names
// the devices, and warns of local time of UTC-8 stamped as UTC.
func TestCheckOnlineShowsTheOffsetsTheRunningRelayLearnt(t *testing.T) {
	s := sim.StartTest(t, sim.Options{Seed: 1, RateLimit: -1, Hostile: sim.Hostile{
		DeviceClockSkew: -8 * time.Hour, DeviceClockSkewShare: 0.1,
	}})
	skewed := s.SkewedDevices()
	if len(skewed) == 0 {
		t.Fatal("no device stamps off")
	}
	dir := t.TempDir()
	addr, _ := startService(t, s, dir)
	// Two fresh alarms of each skewed device, once the relay has read a
	// complete snapshot, teach it their offset.
	time.Sleep(time.Second)
	for range 2 {
		for _, sn := range skewed {
			if _, err := s.StartAlarm(sim.AlarmSpec{DeviceSN: sn}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	appID, secret := s.Credentials()
	cleanEnv(t, withUpstream(t, map[string]string{"RELAY_BASE_URL": s.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": secret,
		"RELAY_LISTEN": addr, "RELAY_ADMIN_TOKEN": silenceAdminToken, "RELAY_RULES": filepath.Join(dir, "rules.yaml"),
		"RELAY_STATE_PATH": filepath.Join(t.TempDir(), "check.db")}))
	var out, errOut string
	deadline := time.Now().Add(20 * time.Second)
	for {
		var code int
		code, out, errOut = runCmd(t, cmdCheck, "--online")
		if code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		if strings.Contains(out, "warning: device ") || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	stampLines(t, out, skewed, []string{" -8h0m", " -7h59m"},
		"device stamps, as the running relay learnt them: ",
		fmt.Sprintf("%d more than a minute off the upstream's clock; offsets from -8h0m", len(skewed)),
		"look like local time of UTC-8 stamped as UTC: ask the vendor")
	noSecrets(t, out, errOut)
}

// stampLines fails t unless out holds every line of want and names each
// device of sns followed by one of the offsets.
func stampLines(t *testing.T, out string, sns, offsets []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("stdout lacks %q:\n%s", w, out)
		}
	}
	for _, sn := range sns {
		named := false
		for _, off := range offsets {
			named = named || strings.Contains(out, sn+off)
		}
		if !named {
			t.Errorf("stdout does not name %s with an offset of %v:\n%s", sn, offsets, out)
		}
	}
}

// A route that lists transitions: [start] was meant to send starts only,
// but an end goes wherever its start went: relay check warns, says so and
// names send_resolved, the sink option that keeps ends from a sink.
func TestCheckWarnsThatARouteOfStartsStillSendsEnds(t *testing.T) {
	cleanEnv(t, exampleEnv)
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	rules := "sinks:\n  - {name: tickets, type: console}\n  - {name: ops, type: console, send_resolved: false}\n" +
		"routes:\n  - name: open-tickets\n    match: {transitions: [start]}\n    to: [tickets]\n    continue: true\n  - name: ops\n    to: [ops]\n"
	if err := os.WriteFile(path, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, cmdCheck, "--rules-only", "--rules", path)
	want := `warning: ` + path + `:5: route "open-tickets" leaves end and invalid out of its transitions, but ends follow their starts: ` +
		`tickets still get the end and invalid of every alarm whose start the route sends them; to keep ends from a sink, say send_resolved: false on the sink`
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant the warning:\n%s", code, out, errOut, want)
	}
	if strings.Count(out, "warning:") != 1 {
		t.Fatalf("stdout:\n%s\nwant one warning: the ops route sends every transition", out)
	}
}
