package config

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/relay-energy/relay/internal/rulefile"
)

// Tenant is one upstream account that relay polls, with everything its
// poller needs. Config.Tenants lists them.
type Tenant struct {
	// ID names the tenant in NATS subjects, KV keys, file names and metric
	// labels: 1 to 63 of a-z, 0-9, _ and -, starting with a letter or digit.
	ID string
	// Upstream is how to reach and log in to the tenant's Open Data
	// Service, with its rate limit and time zone. AppSecret is a secret:
	// Config.AddSecrets adds it to the redaction set.
	Upstream Upstream
	// Rules is the path of the tenant's rules file.
	Rules string
	// StatePath is the tenant's bbolt state file, or with the jetstream
	// backend its local cache: <RELAY_STATE_DIR>/<ID>.db for a tenant of
	// the tenants file, RELAY_STATE_PATH for the one tenant without it.
	StatePath string
	// Bootstrap is what the first run on an empty state does with the
	// alarms already ongoing: "notify" or "record" (RELAY_BOOTSTRAP).
	Bootstrap string
	// Source says where the tenant is defined, for messages: the tenants
	// file and line ("tenants.yaml:12"), or "environment".
	Source string
	// SecretFrom names where the app secret was read, never the secret:
	// "app_secret_env ACME_SECRET", "app_secret_file /run/secrets/acme" or
	// "RELAY_APP_SECRET".
	SecretFrom string
}

// Tenants returns the tenants this process serves: those of the tenants
// file, in the file's order, or else the one tenant of the environment's
// RELAY_BASE_URL, RELAY_APP_ID and RELAY_APP_SECRET, with the id
// RELAY_TENANT_ID and the state file RELAY_STATE_PATH, so that a
// configuration without a tenants file keeps its state where it always was.
func (c Config) Tenants() []Tenant {
	if c.TenantsFile == "" {
		return []Tenant{{
			ID:         cmp.Or(c.TenantID, DefaultTenantID),
			Upstream:   c.Upstream,
			Rules:      c.Rules,
			StatePath:  c.Store.Path,
			Bootstrap:  c.Store.Bootstrap,
			Source:     "environment",
			SecretFrom: "RELAY_APP_SECRET",
		}}
	}
	out := slices.Clone(c.tenants)
	for i := range out {
		out[i].StatePath = filepath.Join(c.StateDir(), out[i].ID+".db")
	}
	return out
}

// Tenant returns the tenant of Tenants with the id, and whether there is
// one.
func (c Config) Tenant(id string) (Tenant, bool) {
	for _, t := range c.Tenants() {
		if t.ID == id {
			return t, true
		}
	}
	return Tenant{}, false
}

var tenantIDRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// tenantIDWant says what a tenant id may be, for errors.
const tenantIDWant = "want 1 to 63 of a-z, 0-9, _ and -, starting with a letter or digit: the id names NATS subjects, KV keys, files and metric labels"

// The tenants file's limits: its size, the YAML nodes a read visits (aliases
// expanded), and the size of a secret file.
const (
	maxTenantsFileSize = 1 << 20
	tenantsNodeBudget  = 200_000
	maxSecretFileSize  = 64 << 10
)

// The keys of the tenants file and of one tenant.
var (
	tenantsTopKeys = []string{"tenants"}
	tenantKeys     = []string{"id", "base_url", "app_id", "app_secret_env", "app_secret_file", "rate_limit", "rules",
		"grant_type", "auth_scheme", "upstream_tz", "bootstrap"}
)

// fileError is a problem of the tenants file at a line and field.
func fileError(e *rulefile.Error) error { return errors.New(e.Render("config: ")) }

// readTenants reads the tenants file with readFile, and each tenant's
// secret from the environment l or with readFile. A setting the file leaves
// out is the environment's. It returns the tenants read and every problem,
// each naming the file, the line and the field, never a secret.
func (c *Config) readTenants(l Lookuper, readFile func(string) ([]byte, error)) ([]Tenant, []error) {
	path := c.TenantsFile
	data, err := readFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, []error{fmt.Errorf("config: RELAY_TENANTS_FILE=%s: no such file: set RELAY_TENANTS_FILE to the path of your tenants file (tenants.example.yaml shows one)", path)}
	case errors.Is(err, fs.ErrPermission):
		return nil, []error{fmt.Errorf("config: RELAY_TENANTS_FILE=%s: permission denied: the tenants file must be readable by relay's user", path)}
	case err != nil:
		return nil, []error{fmt.Errorf("config: RELAY_TENANTS_FILE=%s: cannot read the tenants file: %s", path, readProblem(err))}
	case len(data) > maxTenantsFileSize:
		return nil, []error{fmt.Errorf("config: RELAY_TENANTS_FILE=%s: the file is larger than the %d bytes allowed", path, maxTenantsFileSize)}
	}
	tr := &tenantsReader{
		Reader:   rulefile.NewReader(path, nil, tenantsNodeBudget),
		cfg:      c,
		lookup:   l,
		readFile: readFile,
		dir:      filepath.Dir(path),
	}
	tenants := tr.file(data)
	var errs []error
	for _, e := range Problems(tr.Err()) {
		var fe *rulefile.Error
		if errors.As(e, &fe) {
			e = fileError(fe)
		}
		errs = append(errs, e)
	}
	return tenants, errs
}

// tenantsReader reads one tenants file.
type tenantsReader struct {
	*rulefile.Reader
	cfg      *Config
	lookup   Lookuper
	readFile func(string) ([]byte, error)
	// dir is the tenants file's directory: relative paths in the file are
	// relative to it.
	dir string
}

// file reads the whole file.
func (r *tenantsReader) file(data []byte) []Tenant {
	root := r.Document(data, "the file is empty: want a list of tenants under tenants:")
	if root == nil {
		return nil
	}
	pairs, ok := r.Mapping(root, "", tenantsTopKeys)
	if !ok {
		return nil
	}
	kv, found := rulefile.Find(pairs, "tenants")
	if !found || rulefile.IsNull(kv.Val) || (kv.Val.Kind == yaml.SequenceNode && len(kv.Val.Content) == 0) {
		line := root.Line
		if found {
			line = kv.Line
		}
		r.Errorf(line, "tenants", "no tenants: want a list of at least one tenant")
		return nil
	}
	if kv.Val.Kind != yaml.SequenceNode {
		r.Errorf(kv.Val.Line, "tenants", "want a list of tenants, got %s", rulefile.Describe(kv.Val))
		return nil
	}
	items, ok := r.Sequence(kv.Val, "tenants")
	if !ok {
		return nil
	}
	var (
		out      []Tenant
		ids      = map[string]string{} // id: where it was first defined
		accounts = map[string]string{} // base URL and app id: the tenant that has them
	)
	for i, item := range items {
		field := fmt.Sprintf("tenants[%d]", i)
		t, lines, ok := r.tenant(item, field)
		if !ok {
			continue
		}
		if first, dup := ids[t.ID]; dup {
			r.Errorf(lines["id"], field+".id", "%q is already the id of %s", t.ID, first)
			continue
		}
		ids[t.ID] = fmt.Sprintf("%s (line %d)", field, lines["id"])
		account := strings.TrimRight(t.Upstream.BaseURL, "/") + "\x00" + t.Upstream.AppID
		if other, dup := accounts[account]; dup {
			r.Errorf(lines["app_id"], field+".app_id", "tenant %s has the base_url and app_id of tenant %s: two pollers of one upstream account would announce every alarm twice", t.ID, other)
			continue
		}
		accounts[account] = t.ID
		out = append(out, t)
	}
	return out
}

// tenant reads one tenant. It returns the line of each key read, and false
// when the tenant has a problem.
func (r *tenantsReader) tenant(n *yaml.Node, field string) (Tenant, map[string]int, bool) {
	c := r.cfg
	t := Tenant{
		Upstream: Upstream{
			GrantType:  c.Upstream.GrantType,
			AuthScheme: c.Upstream.AuthScheme,
			RateLimit:  c.Upstream.RateLimit,
			TZ:         c.Upstream.TZ,
			loc:        c.Upstream.loc,
		},
		Rules:     c.Rules,
		Bootstrap: c.Store.Bootstrap,
		Source:    fmt.Sprintf("%s:%d", r.File, n.Line),
	}
	lines := map[string]int{}
	if n.Kind != yaml.MappingNode {
		r.Errorf(n.Line, field, "want a tenant (a mapping with id, base_url, app_id and an app secret), got %s", rulefile.Describe(n))
		return t, lines, false
	}
	failed := len(Problems(r.Err()))
	pairs, ok := r.Mapping(n, field, tenantKeys)
	if !ok {
		return t, lines, false
	}
	for _, kv := range pairs {
		lines[kv.Key] = kv.Line
	}
	// The id first, so that every later problem can name the tenant.
	var who string
	if kv, ok := rulefile.Find(pairs, "id"); ok {
		if id, ok := r.Str(kv.Val, field+".id"); ok {
			if tenantIDRE.MatchString(id) {
				t.ID, who = id, "tenant "+id+": "
			} else {
				r.Errorf(kv.Line, field+".id", "%q is not a tenant id: %s", id, tenantIDWant)
			}
		}
	}
	for _, key := range []string{"id", "base_url", "app_id"} {
		if _, ok := lines[key]; !ok {
			r.Errorf(n.Line, field, "%sno %s", who, key)
		}
	}
	_, byEnv := lines["app_secret_env"]
	_, byFile := lines["app_secret_file"]
	switch {
	case !byEnv && !byFile:
		r.Errorf(n.Line, field, "%sno app secret: set app_secret_env to the environment variable that holds it, or app_secret_file to a file", who)
	case byEnv && byFile:
		r.Errorf(lines["app_secret_file"], field, "%sboth app_secret_env and app_secret_file: keep one", who)
	}
	for _, kv := range pairs {
		f := field + "." + kv.Key
		switch kv.Key {
		case "base_url":
			if v, ok := r.Str(kv.Val, f); ok {
				if p := baseURLProblem(v); p != "" {
					r.Errorf(kv.Line, f, "%s", p)
				}
				t.Upstream.BaseURL = v
			}
		case "app_id":
			if v, ok := r.Str(kv.Val, f); ok {
				t.Upstream.AppID = v
			}
		case "app_secret_env":
			if byFile {
				continue
			}
			if v, ok := r.Str(kv.Val, f); ok {
				t.Upstream.AppSecret = r.secretFromEnv(kv.Line, f, who, v)
				t.SecretFrom = "app_secret_env " + v
			}
		case "app_secret_file":
			if v, ok := r.Str(kv.Val, f); ok {
				p := r.path(v)
				t.Upstream.AppSecret = r.secretFromFile(kv.Line, f, who, p)
				t.SecretFrom = "app_secret_file " + p
			}
		case "rate_limit":
			if v, ok := r.Str(kv.Val, f); ok {
				rate, err := strconv.Atoi(v)
				if err != nil || rate < minRate || rate > maxRate {
					r.Errorf(kv.Line, f, "%q: want a number of requests per minute from %d to %d", v, minRate, maxRate)
				}
				t.Upstream.RateLimit = rate
			}
		case "rules":
			if v, ok := r.Str(kv.Val, f); ok {
				t.Rules = r.path(v)
			}
		case "grant_type":
			if v, ok := r.Str(kv.Val, f); ok {
				t.Upstream.GrantType = v
			}
		case "auth_scheme":
			if kv.Val.Kind == yaml.ScalarNode && (rulefile.IsNull(kv.Val) || kv.Val.Value == "") {
				t.Upstream.AuthScheme = ""
				continue
			}
			if v, ok := r.Str(kv.Val, f); ok {
				if s, ok := authScheme(v); ok {
					t.Upstream.AuthScheme = s
				} else {
					r.Errorf(kv.Line, f, "%q: want empty or Bearer", v)
				}
			}
		case "upstream_tz":
			if v, ok := r.Str(kv.Val, f); ok {
				if loc, err := time.LoadLocation(v); err != nil {
					r.Errorf(kv.Line, f, "%q is not a time zone name", v)
				} else {
					t.Upstream.TZ, t.Upstream.loc = v, loc
				}
			}
		case "bootstrap":
			if v, ok := r.Str(kv.Val, f); ok {
				if !validBootstrap(v) {
					r.Errorf(kv.Line, f, "%q: want notify or record", v)
				}
				t.Bootstrap = v
			}
		}
	}
	return t, lines, len(Problems(r.Err())) == failed
}

// path resolves a path of the tenants file: a relative one is relative to
// the file's directory.
func (r *tenantsReader) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(r.dir, p)
}

// secretFromEnv reads a tenant's app secret from the environment variable
// v; who prefixes each problem with the tenant. No problem holds the value.
// One of relay's own variables is refused, as in the rules file: with a
// tenants file RELAY_APP_SECRET must be unset, so no RELAY_ variable can
// rightly hold a tenant's secret, and one named by mistake would send relay's
// admin token or NATS credentials to the tenant's base_url.
func (r *tenantsReader) secretFromEnv(line int, field, who, v string) string {
	if !envNameRE.MatchString(v) {
		r.Errorf(line, field, "%s%q is not an environment variable name", who, v)
		return ""
	}
	if p := rulefile.OwnVariable(v, "the tenant", "ACME_SOLAR_APP_SECRET"); p != "" {
		r.Errorf(line, field, "%s%s", who, p)
		return ""
	}
	value, set := r.lookup.Lookup(v)
	switch {
	case !set:
		r.Errorf(line, field, "%senvironment variable %s is not set: set it to the tenant's app secret", who, v)
		return ""
	case strings.TrimSpace(value) == "":
		r.Errorf(line, field, "%senvironment variable %s is set but empty: set it to the tenant's app secret", who, v)
		return ""
	}
	return value
}

// secretFromFile reads a tenant's app secret from the file at p, less a
// trailing line break; who prefixes each problem with the tenant. No
// problem holds the file's content.
func (r *tenantsReader) secretFromFile(line int, field, who, p string) string {
	data, err := r.readFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.Errorf(line, field, "%s%s: no such file: mount the tenant's app secret there", who, p)
		return ""
	case errors.Is(err, fs.ErrPermission):
		r.Errorf(line, field, "%s%s: permission denied: the secret file must be readable by relay's user", who, p)
		return ""
	case err != nil:
		r.Errorf(line, field, "%s%s: cannot read the secret file: %s", who, p, readProblem(err))
		return ""
	case len(data) > maxSecretFileSize:
		r.Errorf(line, field, "%s%s is larger than %d bytes: is it the app secret?", who, p, maxSecretFileSize)
		return ""
	}
	secret := strings.TrimRight(string(data), "\r\n")
	if strings.TrimSpace(secret) == "" {
		r.Errorf(line, field, "%s%s is empty: write the tenant's app secret in it", who, p)
		return ""
	}
	return secret
}

// readProblem says why a file could not be read, without the path, which
// the caller names.
func readProblem(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// envNameRE is what an environment variable's name may be.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
