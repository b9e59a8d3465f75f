package config

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"
	"gopkg.in/yaml.v3"

	"github.com/relay-energy/relay/internal/redact"
	"github.com/relay-energy/relay/internal/rulefile"
)

// secret is in every secret value of these tests: no error may contain it.
const secret = "s3cr3t"

// files is a ReadFile over a map of paths, for LoadWith; a path that is not
// in it does not exist.
func files(m map[string]string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		if v, ok := m[name]; ok {
			return []byte(v), nil
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
}

// host is a Hostname that answers name.
func host(name string) func() (string, error) {
	return func() (string, error) { return name, nil }
}

// load loads env with a tenants file of text at /etc/relay/tenants.yaml and
// the secret files of more.
func load(t *testing.T, text string, env, more map[string]string) (Config, error) {
	t.Helper()
	fm := map[string]string{"/etc/relay/tenants.yaml": text}
	maps.Copy(fm, more)
	e := map[string]string{"RELAY_TENANTS_FILE": "/etc/relay/tenants.yaml"}
	maps.Copy(e, env)
	return LoadWith(context.Background(), envconfig.MapLookuper(e), Sources{ReadFile: files(fm), Hostname: host("relay-0")})
}

// noSecretIn fails when err's text holds a secret or spans lines other than
// one per problem.
func noSecretIn(t *testing.T, err error) {
	t.Helper()
	for _, p := range Problems(err) {
		if strings.Contains(p.Error(), secret) || strings.Contains(p.Error(), "\n") {
			t.Fatalf("problem %q echoes a secret or is not one line", p)
		}
	}
}

const twoTenants = `tenants:
  - id: acme-solar
    base_url: https://opendata.example.com
    app_id: acme
    app_secret_env: ACME_SECRET
  - id: northwind
    base_url: https://relay:s3cr3t-in-url@eu.opendata.example.com/api
    app_id: 1234
    app_secret_file: secrets/northwind
    rate_limit: 4
    rules: northwind.rules.yaml
    grant_type: password
    auth_scheme: bearer
    upstream_tz: Asia/Shanghai
    bootstrap: record
`

func TestTenantsFileGivesEachTenantItsSettingsAndTheRestFromTheEnvironment(t *testing.T) {
	c, err := load(t, twoTenants, map[string]string{
		"ACME_SECRET": secret + "-acme", "RELAY_RATE_LIMIT": "8", "RELAY_RULES": "/etc/relay/rules.yaml",
		"RELAY_STATE_DIR": "/var/lib/relay/tenants", "RELAY_AUTH_SCHEME": "Bearer", "RELAY_BOOTSTRAP": "notify",
	}, map[string]string{"/etc/relay/secrets/northwind": secret + "-northwind\n"})
	if err != nil {
		t.Fatal(err)
	}
	got := c.Tenants()
	if len(got) != 2 {
		t.Fatalf("%d tenants, want 2: %+v", len(got), got)
	}
	a, n := got[0], got[1]
	for _, tc := range []struct{ what, got, want string }{
		{"acme id", a.ID, "acme-solar"},
		{"acme base URL", a.Upstream.BaseURL, "https://opendata.example.com"},
		{"acme app id", a.Upstream.AppID, "acme"},
		{"acme secret", a.Upstream.AppSecret, secret + "-acme"},
		{"acme secret source", a.SecretFrom, "app_secret_env ACME_SECRET"},
		{"acme rules (RELAY_RULES)", a.Rules, "/etc/relay/rules.yaml"},
		{"acme state", a.StatePath, "/var/lib/relay/tenants/acme-solar.db"},
		{"acme grant type (default)", a.Upstream.GrantType, "client_credentials"},
		{"acme auth scheme (RELAY_AUTH_SCHEME)", a.Upstream.AuthScheme, "Bearer"},
		{"acme bootstrap (RELAY_BOOTSTRAP)", a.Bootstrap, "notify"},
		{"acme source", a.Source, "/etc/relay/tenants.yaml:2"},
		{"acme zone", a.Upstream.Location().String(), "UTC"},
		{"northwind app id written as a number", n.Upstream.AppID, "1234"},
		{"northwind secret, less its line break", n.Upstream.AppSecret, secret + "-northwind"},
		{"northwind secret source, relative to the file", n.SecretFrom, "app_secret_file /etc/relay/secrets/northwind"},
		{"northwind rules, relative to the file", n.Rules, "/etc/relay/northwind.rules.yaml"},
		{"northwind state", n.StatePath, "/var/lib/relay/tenants/northwind.db"},
		{"northwind grant type", n.Upstream.GrantType, "password"},
		{"northwind auth scheme", n.Upstream.AuthScheme, "Bearer"},
		{"northwind zone", n.Upstream.Location().String(), "Asia/Shanghai"},
		{"northwind bootstrap", n.Bootstrap, "record"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.what, tc.got, tc.want)
		}
	}
	if got, ok := c.Tenant("northwind"); !ok || got != n {
		t.Errorf("Tenant(northwind) = %+v, %t; want the second of Tenants", got, ok)
	}
	if _, ok := c.Tenant("default"); ok {
		t.Error("Tenant(default) found a tenant the file does not list")
	}
	if a.Upstream.RateLimit != 8 || n.Upstream.RateLimit != 4 {
		t.Errorf("rate limits %d and %d, want 8 (RELAY_RATE_LIMIT) and 4", a.Upstream.RateLimit, n.Upstream.RateLimit)
	}
	if err := c.RequireUpstream(); err != nil {
		t.Errorf("RequireUpstream with a tenants file: %v", err)
	}
}

func TestTenantSecretsJoinTheRedactionSet(t *testing.T) {
	c, err := load(t, twoTenants, map[string]string{"ACME_SECRET": "acme-" + secret},
		map[string]string{"/etc/relay/secrets/northwind": "northwind-" + secret})
	if err != nil {
		t.Fatal(err)
	}
	set := redact.New()
	c.AddSecrets(set)
	line := "login failed: acme-" + secret + " northwind-" + secret + " https://relay:s3cr3t-in-url@eu.opendata.example.com/api"
	if got := set.String(line); strings.Contains(got, secret) {
		t.Fatalf("redacted line still holds a secret: %q", got)
	}
}

func TestStateDirDefaultsToTheDirectoryOfTheStatePath(t *testing.T) {
	c, err := load(t, twoTenants, map[string]string{"ACME_SECRET": secret, "RELAY_STATE_PATH": "/data/relay/relay.db"},
		map[string]string{"/etc/relay/secrets/northwind": secret})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Tenants()[0].StatePath; got != "/data/relay/acme-solar.db" {
		t.Fatalf("state path %q, want /data/relay/acme-solar.db", got)
	}
}

func TestWithoutATenantsFileTheEnvironmentIsTheOneTenant(t *testing.T) {
	c, err := LoadWith(context.Background(), envconfig.MapLookuper(map[string]string{
		"RELAY_BASE_URL": "https://opendata.example.com", "RELAY_APP_ID": "app", "RELAY_APP_SECRET": secret,
		"RELAY_STATE_PATH": "/data/relay.db", "RELAY_RULES": "/data/rules.yaml", "RELAY_TENANT_ID": "acme-solar",
		"RELAY_STATE_DIR": "/elsewhere",
	}), Sources{Hostname: host("relay-0")})
	if err != nil {
		t.Fatal(err)
	}
	got := c.Tenants()
	want := Tenant{ID: "acme-solar", Upstream: c.Upstream, Rules: "/data/rules.yaml", StatePath: "/data/relay.db",
		Bootstrap: "notify", Source: "environment", SecretFrom: "RELAY_APP_SECRET"}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("Tenants() = %+v\nwant [%+v]", got, want)
	}
}

// TestTenantsFileProblemsNameFileLineAndTenant is a table of every problem
// of a tenants file: each is reported with the file, the line and the field,
// names the tenant where it concerns one, and never echoes a secret.
func TestTenantsFileProblemsNameFileLineAndTenant(t *testing.T) {
	const file = "/etc/relay/tenants.yaml"
	tenant := func(extra string) string {
		return "tenants:\n  - id: acme\n    base_url: https://opendata.example.com\n    app_id: acme\n" + extra
	}
	secretEnv := "    app_secret_env: ACME_SECRET\n"
	cases := []struct {
		name  string
		text  string
		env   map[string]string
		files map[string]string
		want  string
	}{
		{"an empty file", "", nil, nil, file + ":1: the file is empty"},
		{"a syntax error at its line", tenant("    app_id: x\n   bad: y\n"), nil, nil, file + ":6: invalid YAML"},
		{"a second document", tenant(secretEnv) + "---\ntenants: []\n", nil, nil, "a second YAML document"},
		{"an unknown top-level key", "tenant:\n  - id: a\n", nil, nil, file + `:1: tenant: unknown key "tenant" (want one of tenants)`},
		{"no tenants", "tenants:\n", nil, nil, file + ":1: tenants: no tenants"},
		{"an empty list", "tenants: []\n", nil, nil, file + ":1: tenants: no tenants"},
		{"tenants not a list", "tenants: acme\n", nil, nil, file + ":1: tenants: want a list of tenants, got a string"},
		{"a tenant not a mapping", "tenants:\n  - acme\n", nil, nil, file + ":2: tenants[0]: want a tenant"},
		{"an unknown key", tenant(secretEnv + "    rate: 5\n"), nil, nil, file + `:6: tenants[0].rate: unknown key "rate"`},
		{"a repeated key", tenant(secretEnv + "    app_id: other\n"), nil, nil, file + ":6: tenants[0].app_id: repeated key: already set at line 4"},
		{"no id", "tenants:\n  - base_url: https://x.example.com\n    app_id: a\n    app_secret_env: ACME_SECRET\n", nil, nil, file + ":2: tenants[0]: no id"},
		{"no base URL", "tenants:\n  - id: acme\n    app_id: a\n    app_secret_env: ACME_SECRET\n", nil, nil, file + ":2: tenants[0]: tenant acme: no base_url"},
		{"no app id", "tenants:\n  - id: acme\n    base_url: https://x.example.com\n    app_secret_env: ACME_SECRET\n", nil, nil, "tenants[0]: tenant acme: no app_id"},
		{"no secret", tenant(""), nil, nil, file + ":2: tenants[0]: tenant acme: no app secret: set app_secret_env"},
		{"two secrets", tenant(secretEnv + "    app_secret_file: /s\n"), nil, map[string]string{"/s": secret}, file + ":6: tenants[0]: tenant acme: both app_secret_env and app_secret_file"},
		{"an upper-case id", "tenants:\n  - id: Acme\n", nil, nil, file + `:2: tenants[0].id: "Acme" is not a tenant id: want 1 to 63 of a-z`},
		{"an id with a dot", "tenants:\n  - id: acme.solar\n", nil, nil, `"acme.solar" is not a tenant id`},
		{"an id too long", "tenants:\n  - id: " + strings.Repeat("a", 64) + "\n", nil, nil, "is not a tenant id"},
		{"an id starting with -", "tenants:\n  - id: -acme\n", nil, nil, `"-acme" is not a tenant id`},
		{"an id that is a list", "tenants:\n  - id: [a]\n", nil, nil, file + ":2: tenants[0].id: want a string, got a list"},
		{"a repeated id", tenant(secretEnv) + "  - id: acme\n    base_url: https://y.example.com\n    app_id: b\n    app_secret_env: ACME_SECRET\n",
			nil, nil, file + `:6: tenants[1].id: "acme" is already the id of tenants[0] (line 2)`},
		{"one upstream account twice", tenant(secretEnv) + "  - id: acme-2\n    base_url: https://opendata.example.com/\n    app_id: acme\n    app_secret_env: ACME_SECRET\n",
			nil, nil, file + ":8: tenants[1].app_id: tenant acme-2 has the base_url and app_id of tenant acme"},
		{"a base URL without scheme", "tenants:\n  - id: acme\n    base_url: opendata.example.com\n", nil, nil, file + ":3: tenants[0].base_url: want an http:// or https:// URL"},
		{"a base URL with a query", "tenants:\n  - id: acme\n    base_url: https://x.example.com/?key=" + secret + "\n", nil, nil, "tenants[0].base_url: want no query or fragment"},
		{"an unparsable base URL", "tenants:\n  - id: acme\n    base_url: \"https://" + secret + "@[x\"\n", nil, nil, "tenants[0].base_url: not a URL"},
		{"a zero rate limit", tenant(secretEnv + "    rate_limit: 0\n"), nil, nil, file + `:6: tenants[0].rate_limit: "0": want a number of requests per minute from 1 to 600`},
		{"a rate limit in words", tenant(secretEnv + "    rate_limit: ten\n"), nil, nil, `tenants[0].rate_limit: "ten": want a number`},
		{"an unknown auth scheme", tenant(secretEnv + "    auth_scheme: Basic\n"), nil, nil, `:6: tenants[0].auth_scheme: "Basic": want empty or Bearer`},
		{"an unknown zone", tenant(secretEnv + "    upstream_tz: Mars/Olympus\n"), nil, nil, `:6: tenants[0].upstream_tz: "Mars/Olympus" is not a time zone name`},
		{"an unknown bootstrap", tenant(secretEnv + "    bootstrap: loud\n"), nil, nil, `:6: tenants[0].bootstrap: "loud": want notify or record`},
		{"an empty rules path", tenant(secretEnv + "    rules: \"\"\n"), nil, nil, ":6: tenants[0].rules: no value"},
		{"an empty grant type", tenant(secretEnv + "    grant_type:\n"), nil, nil, ":6: tenants[0].grant_type: no value"},
		{"a secret variable not set", tenant(secretEnv), map[string]string{}, nil, file + ":5: tenants[0].app_secret_env: tenant acme: environment variable ACME_SECRET is not set"},
		{"a secret variable set but empty", tenant(secretEnv), map[string]string{"ACME_SECRET": " "}, nil, "tenant acme: environment variable ACME_SECRET is set but empty"},
		{"relay's admin token as a secret", tenant("    app_secret_env: RELAY_ADMIN_TOKEN\n"), map[string]string{"RELAY_ADMIN_TOKEN": secret}, nil,
			file + ":5: tenants[0].app_secret_env: tenant acme: RELAY_ADMIN_TOKEN is one of relay's own variables, which no file may name"},
		{"relay's NATS password as a secret", tenant("    app_secret_env: RELAY_NATS_PASSWORD\n"), map[string]string{"RELAY_NATS_PASSWORD": secret}, nil,
			"give the tenant a variable of its own, such as ACME_SOLAR_APP_SECRET"},
		{"a secret variable with a bad name", tenant("    app_secret_env: ACME-SECRET\n"), nil, nil, `tenant acme: "ACME-SECRET" is not an environment variable name`},
		{"a secret file missing", tenant("    app_secret_file: /run/secrets/acme\n"), nil, nil, file + ":5: tenants[0].app_secret_file: tenant acme: /run/secrets/acme: no such file"},
		{"a secret file empty", tenant("    app_secret_file: /run/secrets/acme\n"), nil, map[string]string{"/run/secrets/acme": "\n"}, "tenant acme: /run/secrets/acme is empty"},
		{"a secret file too large", tenant("    app_secret_file: /run/secrets/acme\n"), nil, map[string]string{"/run/secrets/acme": strings.Repeat(secret, 20000)}, "tenant acme: /run/secrets/acme is larger than 65536 bytes"},
		{"the single-tenant variables beside the file", tenant(secretEnv), map[string]string{"ACME_SECRET": secret, "RELAY_BASE_URL": "https://x.example.com", "RELAY_APP_SECRET": secret},
			nil, "config: RELAY_BASE_URL is set with RELAY_TENANTS_FILE: remove RELAY_BASE_URL"},
		{"the app secret beside the file", tenant(secretEnv), map[string]string{"ACME_SECRET": secret, "RELAY_APP_SECRET": secret},
			nil, "config: RELAY_APP_SECRET is set with RELAY_TENANTS_FILE: remove RELAY_APP_SECRET"},
		{"a tenant id beside the file", tenant(secretEnv), map[string]string{"ACME_SECRET": secret, "RELAY_TENANT_ID": "acme"},
			nil, "config: RELAY_TENANT_ID is set with RELAY_TENANTS_FILE: remove RELAY_TENANT_ID"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if env == nil {
				env = map[string]string{"ACME_SECRET": secret}
			}
			_, err := load(t, tc.text, env, tc.files)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error\n%v\nlacks %q", err, tc.want)
			}
			noSecretIn(t, err)
		})
	}
}

// TestEveryRelayVariableIsRefusedAsASecretOfAFile: the rules file and the
// tenants file refuse every variable relay reads for itself (the app secret,
// the admin token, the NATS credentials), so that a file cannot send them to
// a sink or an upstream of its choice.
func TestEveryRelayVariableIsRefusedAsASecretOfAFile(t *testing.T) {
	for _, name := range Variables {
		if rulefile.OwnVariable(name, "the sink", "OPS_WEBHOOK_SECRET") == "" {
			t.Errorf("%s is relay's own variable, but a file may name it", name)
		}
	}
	for _, name := range []string{"OPS_WEBHOOK_SECRET", "ACME_SECRET", "NATS_PASSWORD", "MY_RELAY_TOKEN"} {
		if p := rulefile.OwnVariable(name, "the sink", "OPS_WEBHOOK_SECRET"); p != "" {
			t.Errorf("%s is refused: %s", name, p)
		}
	}
}

func TestTenantsFileThatCannotBeReadIsNamed(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"missing", fs.ErrNotExist, "RELAY_TENANTS_FILE=/etc/relay/tenants.yaml: no such file: set RELAY_TENANTS_FILE"},
		{"unreadable", fs.ErrPermission, "RELAY_TENANTS_FILE=/etc/relay/tenants.yaml: permission denied"},
		{"a directory", errors.New("is a directory"), "RELAY_TENANTS_FILE=/etc/relay/tenants.yaml: cannot read the tenants file: is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := func(string) ([]byte, error) {
				return nil, &fs.PathError{Op: "open", Path: "/etc/relay/tenants.yaml", Err: tc.err}
			}
			_, err := LoadWith(context.Background(), envconfig.MapLookuper(map[string]string{"RELAY_TENANTS_FILE": "/etc/relay/tenants.yaml"}),
				Sources{ReadFile: read, Hostname: host("relay-0")})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	_, err := load(t, strings.Repeat("#", maxTenantsFileSize+1), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "larger than the 1048576 bytes allowed") {
		t.Fatalf("a file of over 1 MiB: error %v", err)
	}
}

// TestTenantSecretFileErrorsNameThePathNotTheContent reads a secret file
// that is a directory from the disk, and one that relay's user may not read.
func TestTenantSecretFileErrorsNameThePathNotTheContent(t *testing.T) {
	dir := t.TempDir()
	tenants := filepath.Join(dir, "tenants.yaml")
	if err := os.WriteFile(tenants, []byte("tenants:\n  - id: acme\n    base_url: https://x.example.com\n    app_id: a\n    app_secret_file: secrets\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	env := envconfig.MapLookuper(map[string]string{"RELAY_TENANTS_FILE": tenants})
	_, err := Load(context.Background(), env)
	want := "tenant acme: " + filepath.Join(dir, "secrets") + ": cannot read the secret file: is a directory"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
	_, err = LoadWith(context.Background(), env, Sources{ReadFile: func(name string) ([]byte, error) {
		if name == tenants {
			return os.ReadFile(name)
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}})
	want = "tenant acme: " + filepath.Join(dir, "secrets") + ": permission denied: the secret file must be readable by relay's user"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}

// TestEveryTenantProblemIsReported: a file with a problem in each of three
// tenants reports three, in line order.
func TestEveryTenantProblemIsReported(t *testing.T) {
	_, err := load(t, `tenants:
  - id: a
    base_url: ftp://x
    app_id: a
    app_secret_env: A
  - id: b
    base_url: https://b.example.com
    app_id: b
    app_secret_env: B
    rate_limit: 0
  - id: C
    base_url: https://c.example.com
    app_id: c
    app_secret_env: C
`, map[string]string{"A": secret, "B": secret, "C": secret}, nil)
	ps := Problems(err)
	if len(ps) != 3 {
		t.Fatalf("%d problems, want 3:\n%v", len(ps), err)
	}
	for i, want := range []string{":3: tenants[0].base_url", ":10: tenants[1].rate_limit", ":11: tenants[2].id"} {
		if !strings.Contains(ps[i].Error(), want) {
			t.Errorf("problem %d %q lacks %q", i+1, ps[i], want)
		}
	}
}

func TestScalingVariables(t *testing.T) {
	nats := map[string]string{"RELAY_NATS_URL": "nats://nats:4222"}
	with := func(m map[string]string, more ...map[string]string) map[string]string {
		out := maps.Clone(m)
		for _, x := range more {
			maps.Copy(out, x)
		}
		return out
	}
	cases := []struct {
		name string
		env  map[string]string
		host string
		want string // "" for no problem
	}{
		{"bbolt by default", nil, "relay-0", ""},
		{"jetstream with NATS", with(nats, map[string]string{"RELAY_STATE_BACKEND": "jetstream", "RELAY_STATE_REPLICAS": "3", "RELAY_LEASE_TTL": "3s"}), "relay-0", ""},
		{"an unknown backend", map[string]string{"RELAY_STATE_BACKEND": "etcd"}, "relay-0", `RELAY_STATE_BACKEND="etcd": want bbolt (a local file, the default) or jetstream`},
		{"jetstream without NATS", map[string]string{"RELAY_STATE_BACKEND": "jetstream"}, "relay-0", "RELAY_STATE_BACKEND=jetstream needs RELAY_NATS_URL"},
		{"no replicas", with(nats, map[string]string{"RELAY_STATE_BACKEND": "jetstream", "RELAY_STATE_REPLICAS": "0"}), "relay-0", "RELAY_STATE_REPLICAS=0: want a replication factor from 1 to 5"},
		{"six replicas", with(nats, map[string]string{"RELAY_STATE_BACKEND": "jetstream", "RELAY_STATE_REPLICAS": "6"}), "relay-0", "RELAY_STATE_REPLICAS=6"},
		{"replicas in words", with(nats, map[string]string{"RELAY_STATE_BACKEND": "jetstream", "RELAY_STATE_REPLICAS": "three"}), "relay-0", "RELAY_STATE_REPLICAS is malformed: want a whole number"},
		{"replicas with bbolt", map[string]string{"RELAY_STATE_REPLICAS": "3"}, "relay-0", "RELAY_STATE_REPLICAS=3: only the jetstream backend replicates state: set RELAY_STATE_BACKEND=jetstream, or remove RELAY_STATE_REPLICAS"},
		{"a lease TTL with bbolt", map[string]string{"RELAY_LEASE_TTL": "30s"}, "relay-0", "RELAY_LEASE_TTL=30s: only the jetstream backend takes leases"},
		{"a lease TTL too short", with(nats, map[string]string{"RELAY_STATE_BACKEND": "jetstream", "RELAY_LEASE_TTL": "2s"}), "relay-0", "RELAY_LEASE_TTL=2s: want a duration from 3s to 5m0s"},
		{"a lease TTL too long", with(nats, map[string]string{"RELAY_STATE_BACKEND": "jetstream", "RELAY_LEASE_TTL": "6m"}), "relay-0", "RELAY_LEASE_TTL=6m0s"},
		{"a malformed lease TTL", with(nats, map[string]string{"RELAY_STATE_BACKEND": "jetstream", "RELAY_LEASE_TTL": "15"}), "relay-0", "RELAY_LEASE_TTL is malformed: want a duration"},
		{"a replica id with a dot", map[string]string{"RELAY_REPLICA_ID": "relay.0"}, "relay-0", `RELAY_REPLICA_ID="relay.0": want letters, digits, _ and - only: it is a NATS KV key token`},
		{"an egress group with a space", with(nats, map[string]string{"RELAY_EGRESS_GROUP": "eu west"}), "relay-0", `RELAY_EGRESS_GROUP="eu west": want letters, digits, _ and - only`},
		{"an egress group without NATS", map[string]string{"RELAY_EGRESS_GROUP": "eu-west"}, "relay-0", "RELAY_EGRESS_GROUP needs RELAY_NATS_URL"},
		{"a host name with dots and jetstream", with(nats, map[string]string{"RELAY_STATE_BACKEND": "jetstream"}), "relay.example.com",
			`RELAY_REPLICA_ID is not set and the host name "relay.example.com" is not a replica id (letters, digits, _ and - only: it is a NATS KV key token): set RELAY_REPLICA_ID`},
		{"a host name with dots and an egress group", with(nats, map[string]string{"RELAY_EGRESS_GROUP": "eu"}), "relay.example.com", "the host name \"relay.example.com\" is not a replica id"},
		{"a host name with dots and bbolt", nil, "mac.local", ""},
		{"a host name with dots and a replica id", with(nats, map[string]string{"RELAY_STATE_BACKEND": "jetstream", "RELAY_REPLICA_ID": "relay-0"}), "relay.example.com", ""},
		{"an upper-case tenant id", map[string]string{"RELAY_TENANT_ID": "Acme"}, "relay-0", `RELAY_TENANT_ID="Acme": want 1 to 63 of a-z`},
		{"an empty tenant id", map[string]string{"RELAY_TENANT_ID": ""}, "relay-0", `RELAY_TENANT_ID="": want`},
		{"a blank state directory", map[string]string{"RELAY_STATE_DIR": " "}, "relay-0", "RELAY_STATE_DIR is set but blank"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadWith(context.Background(), envconfig.MapLookuper(tc.env), Sources{Hostname: host(tc.host)})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want == "":
				return
			case err == nil:
				t.Fatalf("no error, want one containing %q", tc.want)
			case len(Problems(err)) != 1 || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error\n%v\nwant exactly one problem, containing %q", err, tc.want)
			}
		})
	}
}

func TestReplicaIDDefaultsToTheHostName(t *testing.T) {
	c, err := LoadWith(context.Background(), envconfig.MapLookuper(map[string]string{
		"RELAY_STATE_BACKEND": "jetstream", "RELAY_NATS_URL": "nats://nats:4222",
	}), Sources{Hostname: host("relay-7d9f8b-x2x7q")})
	if err != nil {
		t.Fatal(err)
	}
	if c.Replica.ID != "relay-7d9f8b-x2x7q" {
		t.Fatalf("replica id %q, want the host name", c.Replica.ID)
	}
	_, err = LoadWith(context.Background(), envconfig.MapLookuper(map[string]string{
		"RELAY_STATE_BACKEND": "jetstream", "RELAY_NATS_URL": "nats://nats:4222",
	}), Sources{Hostname: func() (string, error) { return "", errors.New("uname failed") }})
	if err == nil || !strings.Contains(err.Error(), "RELAY_REPLICA_ID is not set and the host name is unknown (uname failed): set RELAY_REPLICA_ID") {
		t.Fatalf("error %v, want one saying the host name is unknown", err)
	}
}

func TestScalingDefaultsFollowTheDesign(t *testing.T) {
	c, err := LoadWith(context.Background(), envconfig.MapLookuper(nil), Sources{Hostname: host("relay-0")})
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Backend != BackendBBolt || c.Store.Replicas != 1 || c.Replica.LeaseTTL != 15*time.Second ||
		c.Replica.ID != "relay-0" || c.Replica.EgressGroup != "" || c.TenantsFile != "" || c.TenantID != DefaultTenantID ||
		c.StateDir() != "/var/lib/relay" {
		t.Fatalf("defaults differ from docs/design.md §9: %+v (state dir %s)", c, c.StateDir())
	}
	if ts := c.Tenants(); len(ts) != 1 || ts[0].ID != "default" || ts[0].StatePath != "/var/lib/relay/relay.db" {
		t.Fatalf("the implicit tenant: %+v", ts)
	}
}

// TestTheTenantsExampleLoads loads tenants.example.yaml from the
// repository's root, with every variable and file it names set.
func TestTheTenantsExampleLoads(t *testing.T) {
	path := filepath.Join(repoRoot, "tenants.example.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tenants []struct {
			Env string `yaml:"app_secret_env"`
		} `yaml:"tenants"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"RELAY_TENANTS_FILE": path}
	for _, tn := range doc.Tenants {
		if tn.Env != "" {
			env[tn.Env] = "secret-of-" + tn.Env
		}
	}
	c, err := LoadWith(context.Background(), envconfig.MapLookuper(env), Sources{
		ReadFile: func(name string) ([]byte, error) {
			if name == path {
				return data, nil
			}
			return []byte("secret-of-" + name + "\n"), nil
		},
		Hostname: host("relay-0"),
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := c.Tenants()
	sources := map[string]bool{}
	for _, tn := range ts {
		kind, from, _ := strings.Cut(tn.SecretFrom, " ")
		sources[kind] = true
		if tn.Upstream.AppSecret != "secret-of-"+from {
			t.Errorf("tenant %s: secret %q, want the one of %s", tn.ID, tn.Upstream.AppSecret, tn.SecretFrom)
		}
	}
	if len(ts) < 2 || !sources["app_secret_env"] || !sources["app_secret_file"] {
		t.Fatalf("the example has %d tenants with secrets from %v: want at least 2, showing app_secret_env and app_secret_file", len(ts), sources)
	}
}
