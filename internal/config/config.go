// Package config reads relay's configuration from the environment and the
// tenants file (docs/design.md §9). A missing or malformed variable stops
// start-up with one line that names it; secret values never appear in
// errors.
package config

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/redact"
)

// Config is every RELAY_ variable, with its default.
type Config struct {
	Upstream Upstream
	Poll     Poll
	Store    Store
	Rules    string `env:"RELAY_RULES, default=/etc/relay/rules.yaml"`
	NATS     NATS
	Slack    Slack
	Listen   string        `env:"RELAY_LISTEN, default=:9477"`
	LogLevel string        `env:"RELAY_LOG_LEVEL, default=info"`
	LogFmt   string        `env:"RELAY_LOG_FORMAT, default=json"`
	Grace    time.Duration `env:"RELAY_SHUTDOWN_GRACE, default=20s"`
	// AdminToken guards the administration endpoints of the ops listener
	// (dead letters, silences); empty turns them off.
	AdminToken string `env:"RELAY_ADMIN_TOKEN"`
	// ViewToken logs in to the operator console read only; empty with an
	// empty AdminToken turns the console off.
	ViewToken string `env:"RELAY_VIEW_TOKEN"`
	// Console is how browsers reach the operator console: its external
	// origin and the proxies in front of it.
	Console Console
	// TLS is the certificate the ops listener serves, and the one the
	// commands that call it trust.
	TLS TLS
	// TenantsFile is the tenants file; empty means one tenant, set by the
	// RELAY_BASE_URL, RELAY_APP_ID and RELAY_APP_SECRET of the environment.
	TenantsFile string `env:"RELAY_TENANTS_FILE"`
	// TenantID is the id of that one tenant when there is no tenants file.
	TenantID string `env:"RELAY_TENANT_ID, default=default"`
	Replica  Replica

	// tenants are the tenants of TenantsFile, as Load read them.
	tenants []Tenant
}

// Upstream is how to reach and authenticate to the Open Data Service.
type Upstream struct {
	BaseURL    string `env:"RELAY_BASE_URL"`
	AppID      string `env:"RELAY_APP_ID"`
	AppSecret  string `env:"RELAY_APP_SECRET"`
	GrantType  string `env:"RELAY_GRANT_TYPE, default=client_credentials"`
	AuthScheme string `env:"RELAY_AUTH_SCHEME"`
	RateLimit  int    `env:"RELAY_RATE_LIMIT, default=10"`
	TZ         string `env:"RELAY_UPSTREAM_TZ, default=UTC"`
	loc        *time.Location
}

// Location returns RELAY_UPSTREAM_TZ loaded, for the upstream's zone-less
// time strings; UTC when Load has not checked it.
func (u Upstream) Location() *time.Location {
	if u.loc == nil {
		return time.UTC
	}
	return u.loc
}

// Poll tunes the poller.
type Poll struct {
	Lookback       time.Duration `env:"RELAY_LOOKBACK, default=720h"`
	SweepOverlap   time.Duration `env:"RELAY_SWEEP_OVERLAP, default=2m"`
	ConfirmTimeout time.Duration `env:"RELAY_CONFIRM_TIMEOUT, default=10m"`
	MaxClockSkew   time.Duration `env:"RELAY_MAX_CLOCK_SKEW, default=24h"`
	LateHorizon    time.Duration `env:"RELAY_LATE_HORIZON, default=24h"`
}

// Store configures where the state lives.
type Store struct {
	Path      string        `env:"RELAY_STATE_PATH, default=/var/lib/relay/relay.db"`
	Bootstrap string        `env:"RELAY_BOOTSTRAP, default=notify"`
	Retention time.Duration `env:"RELAY_RETENTION, default=2160h"`
	// DeadLetterLimit is how many dead letters one sink holds at most:
	// past it, the oldest alarm's go (store.Options.DeadLetterLimit).
	DeadLetterLimit int `env:"RELAY_DEAD_LETTER_LIMIT, default=10000"`
	// Backend is BackendBBolt or BackendJetStream.
	Backend string `env:"RELAY_STATE_BACKEND, default=bbolt"`
	// Replicas is the replication factor of the JetStream streams and KV
	// buckets that hold the state, from 1 to 5.
	Replicas int `env:"RELAY_STATE_REPLICAS, default=1"`
	// Dir holds the tenants' state files (with a tenants file) or the local
	// caches of the jetstream backend; empty means the directory of Path.
	// Config.StateDir applies that default.
	Dir string `env:"RELAY_STATE_DIR"`
}

// The state backends of RELAY_STATE_BACKEND.
const (
	// BackendBBolt keeps the state in bbolt files on a local disk: one
	// process at a time, the default.
	BackendBBolt = "bbolt"
	// BackendJetStream keeps the state in NATS JetStream, shared by
	// replicas that take each tenant in turn under a lease.
	BackendJetStream = "jetstream"
)

// Replica is this process among the replicas of a jetstream deployment.
type Replica struct {
	// ID names this process among the replicas, in leases and the members
	// bucket. Load sets it to the host name when RELAY_REPLICA_ID is unset.
	ID string `env:"RELAY_REPLICA_ID"`
	// LeaseTTL is how long a tenant's lease lasts without renewal, from 3s
	// to 5m: a replica that dies is replaced within twice that.
	LeaseTTL time.Duration `env:"RELAY_LEASE_TTL, default=15s"`
	// EgressGroup names the replicas that leave through one IP address and
	// so share one upstream budget; empty means none.
	EgressGroup string `env:"RELAY_EGRESS_GROUP"`
}

// StateDir is RELAY_STATE_DIR, or the directory of RELAY_STATE_PATH when it
// is unset.
func (c Config) StateDir() string {
	if c.Store.Dir != "" {
		return c.Store.Dir
	}
	return filepath.Dir(c.Store.Path)
}

// NATS is how to connect to NATS; empty URL means no NATS connection.
type NATS struct {
	URL      string `env:"RELAY_NATS_URL"`
	Creds    string `env:"RELAY_NATS_CREDS"`
	NKeySeed string `env:"RELAY_NATS_NKEY_SEED"`
	Token    string `env:"RELAY_NATS_TOKEN"`
	User     string `env:"RELAY_NATS_USER"`
	Password string `env:"RELAY_NATS_PASSWORD"`
	CA       string `env:"RELAY_NATS_CA"`
	Cert     string `env:"RELAY_NATS_CERT"`
	Key      string `env:"RELAY_NATS_KEY"`
}

// TLS is the certificate and key files the ops listener serves HTTPS with
// (both or neither: without them it speaks plain HTTP), and the CA file the
// commands that call the ops listener (relay ack, silence, deadletters,
// report) verify it with.
type TLS struct {
	CertFile string `env:"RELAY_TLS_CERT_FILE"`
	KeyFile  string `env:"RELAY_TLS_KEY_FILE"`
	CAFile   string `env:"RELAY_TLS_CA_FILE"`
}

// Console is how browsers reach the operator console.
type Console struct {
	// Origin is the console's external origin, scheme://host[:port] such
	// as https://relay.example.com; Load makes it lower case, without a
	// trailing slash. Empty: none.
	Origin string `env:"RELAY_CONSOLE_ORIGIN"`
	// TrustedProxies are CIDRs or addresses, comma separated, of the
	// proxies trusted to say the client's address, scheme and host.
	TrustedProxies string `env:"RELAY_TRUSTED_PROXIES"`
	// ForwardedHeader is which forwarding headers the trusted proxies
	// write: x-forwarded (X-Forwarded-For, -Proto, -Host) or forwarded
	// (RFC 7239 Forwarded). Only those are read: a proxy passes the other
	// family on as the client sent it.
	ForwardedHeader string `env:"RELAY_FORWARDED_HEADER, default=x-forwarded"`
	proxies         []netip.Prefix
}

// ForwardedOnly reports whether RELAY_FORWARDED_HEADER is forwarded: the
// trusted proxies write RFC 7239 Forwarded, and X-Forwarded-* are the
// client's.
func (c Console) ForwardedOnly() bool { return c.ForwardedHeader == "forwarded" }

// Proxies returns RELAY_TRUSTED_PROXIES as Load read it; nil when unset or
// not loaded.
func (c Console) Proxies() []netip.Prefix { return c.proxies }

// check reads the console's variables and returns their problems.
func (c *Console) check() []error {
	var errs []error
	if c.Origin != "" {
		u, err := url.Parse(c.Origin)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "":
			errs = append(errs, fmt.Errorf("RELAY_CONSOLE_ORIGIN=%q: want the scheme and host the browser uses, such as https://relay.example.com", c.Origin))
		case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
			errs = append(errs, fmt.Errorf("RELAY_CONSOLE_ORIGIN=%q: want an origin, scheme://host[:port], without a path, query or credentials", RedactURL(c.Origin)))
		default:
			c.Origin = strings.ToLower(u.Scheme + "://" + u.Host)
		}
	}
	switch c.ForwardedHeader = strings.ToLower(strings.TrimSpace(c.ForwardedHeader)); c.ForwardedHeader {
	case "x-forwarded", "forwarded":
	case "":
		c.ForwardedHeader = "x-forwarded"
	default:
		errs = append(errs, fmt.Errorf("RELAY_FORWARDED_HEADER=%q: want x-forwarded (the proxies write X-Forwarded-For, -Proto and -Host; most ingresses do) or forwarded (they write RFC 7239 Forwarded)", c.ForwardedHeader))
	}
	for f := range strings.SplitSeq(c.TrustedProxies, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			c.proxies = append(c.proxies, p.Masked())
		} else if a, err := netip.ParseAddr(f); err == nil {
			c.proxies = append(c.proxies, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		} else {
			errs = append(errs, fmt.Errorf("RELAY_TRUSTED_PROXIES: %q is not a CIDR or an IP address: want a comma-separated list such as 10.0.0.0/8, 192.168.1.7", f))
		}
	}
	return errs
}

// Slack is how to reach Slack's Web API.
type Slack struct {
	Token  string `env:"RELAY_SLACK_TOKEN"`
	APIURL string `env:"RELAY_SLACK_API_URL"`
	// AppToken is the app-level token (xapp-...) of the Slack app, with
	// the scope connections:write: with it, relay opens a Socket Mode
	// connection and its messages carry buttons.
	AppToken string `env:"RELAY_SLACK_APP_TOKEN"`
}

// Lookuper finds an environment variable; envconfig.OsLookuper() reads the
// process environment and envconfig.MapLookuper a map (tests).
type Lookuper = envconfig.Lookuper

// Load reads and checks the whole configuration and reports every problem
// at once: the error joins one error per problem, each naming its variable
// or its line of the tenants file (Problems splits them). The Config it
// returns holds the defaults in place of the malformed values, so that
// callers can go on checking the rest. It does not require the upstream
// credentials: commands that call upstream check them with RequireUpstream.
// Load reads the files the variables name from the local disk, and takes
// the host name from the system.
func Load(ctx context.Context, l Lookuper) (Config, error) {
	return LoadWith(ctx, l, Sources{})
}

// Sources are where LoadWith reads what the environment does not hold.
type Sources struct {
	// ReadFile reads the tenants file and the tenants' secret files; nil
	// reads the local disk.
	ReadFile func(name string) ([]byte, error)
	// Hostname returns the host name, the default of RELAY_REPLICA_ID; nil
	// asks the system.
	Hostname func() (string, error)
}

// LoadWith is Load with the files and the host name read from s: the
// Kubernetes manifests' test reads them from ConfigMaps and Secrets.
func LoadWith(ctx context.Context, l Lookuper, s Sources) (Config, error) {
	if s.ReadFile == nil {
		s.ReadFile = os.ReadFile
	}
	if s.Hostname == nil {
		s.Hostname = os.Hostname
	}
	var (
		c    Config
		errs []error
		bad  = map[string]bool{}
	)
	// go-envconfig stops at the first value it cannot parse: each such
	// variable is reported, then hidden so that its default is taken and the
	// next one is found.
	for range len(Variables) + 1 {
		c = Config{}
		err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: &c, Lookuper: hiding{l, bad}})
		if err == nil {
			break
		}
		name, msg := cleanErr(err)
		errs = append(errs, fmt.Errorf("config: %s", msg))
		if name == "" || bad[name] {
			return Config{}, errors.Join(errs...)
		}
		bad[name] = true
	}
	for _, err := range c.check() {
		errs = append(errs, fmt.Errorf("config: %w", err))
	}
	if err := c.replicaID(s.Hostname); err != nil {
		errs = append(errs, fmt.Errorf("config: %w", err))
	}
	if c.TenantsFile != "" {
		var terrs []error
		c.tenants, terrs = c.readTenants(l, s.ReadFile)
		errs = append(errs, terrs...)
	}
	return c, errors.Join(errs...)
}

// hiding is a Lookuper that does not see the variables in hide.
type hiding struct {
	Lookuper
	hide map[string]bool
}

func (h hiding) Lookup(key string) (string, bool) {
	if h.hide[key] {
		return "", false
	}
	return h.Lookuper.Lookup(key)
}

// Problems splits an error of Load, RequireUpstream or any errors.Join into
// its problems, one per line of output.
func Problems(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, Problems(e)...)
		}
		return out
	}
	return []error{err}
}

// RequireUpstream reports every upstream variable that running needs and is
// missing or empty, joined. With a tenants file there is none: Load has
// checked every tenant's upstream settings, and a command that calls one
// upstream takes it from Tenant or Tenants rather than from Upstream.
func (c Config) RequireUpstream() error {
	if c.TenantsFile != "" {
		return nil
	}
	var errs []error
	for _, v := range []struct{ name, value string }{
		{"RELAY_BASE_URL", c.Upstream.BaseURL},
		{"RELAY_APP_ID", c.Upstream.AppID},
		{"RELAY_APP_SECRET", c.Upstream.AppSecret},
	} {
		if strings.TrimSpace(v.value) == "" {
			errs = append(errs, fmt.Errorf("config: %s is required and not set", v.name))
		}
	}
	return errors.Join(errs...)
}

// AddSecrets adds to set every secret value of the configuration: the app
// secret of every tenant, the NATS password, token and seed, the Slack
// bot and app tokens, the admin and view tokens, and the credentials of every tenant's base URL and
// of RELAY_NATS_URL.
func (c Config) AddSecrets(set *redact.Set) {
	set.Add(c.Upstream.AppSecret, c.NATS.Password, c.NATS.Token, c.NATS.NKeySeed, c.Slack.Token, c.Slack.AppToken, c.AdminToken, c.ViewToken)
	set.AddURL(c.Upstream.BaseURL, false)
	for _, t := range c.tenants {
		set.Add(t.Upstream.AppSecret)
		set.AddURL(t.Upstream.BaseURL, false)
	}
	for _, u := range strings.Split(c.NATS.URL, ",") {
		set.AddURL(strings.TrimSpace(u), false)
	}
}

// RedactURL returns raw with the password of its userinfo replaced by
// "xxxxx" and its query values by "…", for logs and messages; an unparsable
// value gives "(unparsable URL)".
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User == nil && u.RawQuery == "" {
		return raw
	}
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	return u.Redacted()
}

// checkBaseURL reports what makes RELAY_BASE_URL unusable, without echoing
// its credentials.
func checkBaseURL(raw string) error {
	problem := baseURLProblem(raw)
	switch {
	case problem == "":
		return nil
	}
	if _, err := url.Parse(raw); err != nil {
		return fmt.Errorf("RELAY_BASE_URL is %s", problem)
	}
	return fmt.Errorf("RELAY_BASE_URL=%q: %s", RedactURL(raw), problem)
}

// baseURLProblem says what makes raw unusable as the base address of the
// Open Data Service, or "" when nothing does. It never echoes raw.
func baseURLProblem(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "not a URL: want one such as https://opendata.example.com"
	case u.Scheme != "http" && u.Scheme != "https":
		return "want an http:// or https:// URL"
	case u.Host == "" || u.Hostname() == "":
		return "no host: want one such as https://opendata.example.com"
	case u.RawQuery != "" || u.Fragment != "":
		return "want no query or fragment: the endpoint paths are appended to it"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("port %s is not from 1 to 65535", p)
		}
	}
	return ""
}

// checkListen reports what makes RELAY_LISTEN unusable for net.Listen.
func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("RELAY_LISTEN=%q: want host:port or :port, such as :9477", addr)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("RELAY_LISTEN=%q: port %q is not a port number from 0 to 65535", addr, port)
	}
	return nil
}

// check returns every problem of the loaded values.
func (c *Config) check() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	u := &c.Upstream
	if u.RateLimit < minRate || u.RateLimit > maxRate {
		bad("RELAY_RATE_LIMIT=%d: want a number of requests per minute from %d to %d", u.RateLimit, minRate, maxRate)
	}
	if u.BaseURL != "" {
		if err := checkBaseURL(u.BaseURL); err != nil {
			errs = append(errs, err)
		}
	}
	if scheme, ok := authScheme(u.AuthScheme); ok {
		u.AuthScheme = scheme
	} else {
		bad("RELAY_AUTH_SCHEME=%q: want empty or Bearer", u.AuthScheme)
	}
	if loc, err := time.LoadLocation(u.TZ); err != nil {
		bad("RELAY_UPSTREAM_TZ=%q: not a time zone name", u.TZ)
	} else {
		u.loc = loc
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"RELAY_LOOKBACK", c.Poll.Lookback},
		{"RELAY_SWEEP_OVERLAP", c.Poll.SweepOverlap},
		{"RELAY_CONFIRM_TIMEOUT", c.Poll.ConfirmTimeout},
		{"RELAY_MAX_CLOCK_SKEW", c.Poll.MaxClockSkew},
		{"RELAY_LATE_HORIZON", c.Poll.LateHorizon},
		{"RELAY_RETENTION", c.Store.Retention},
		{"RELAY_SHUTDOWN_GRACE", c.Grace},
	} {
		if d.v <= 0 {
			bad("%s=%s: want a positive duration such as 10m", d.name, d.v)
		}
	}
	if c.Poll.LateHorizon > c.Poll.Lookback {
		bad("RELAY_LATE_HORIZON=%s: must not be longer than RELAY_LOOKBACK=%s", c.Poll.LateHorizon, c.Poll.Lookback)
	}
	if c.Store.Retention < c.Poll.Lookback {
		bad("RELAY_RETENTION=%s: must not be shorter than RELAY_LOOKBACK=%s", c.Store.Retention, c.Poll.Lookback)
	}
	if c.Store.DeadLetterLimit < 1 {
		bad("RELAY_DEAD_LETTER_LIMIT=%d: want a number of dead letters per sink of at least 1, such as 10000", c.Store.DeadLetterLimit)
	}
	if !validBootstrap(c.Store.Bootstrap) {
		bad("RELAY_BOOTSTRAP=%q: want notify or record", c.Store.Bootstrap)
	}
	for _, v := range []struct{ name, value, want string }{
		{"RELAY_STATE_PATH", c.Store.Path, "the path of the state file"},
		{"RELAY_RULES", c.Rules, "the path of the rules file"},
		{"RELAY_LISTEN", c.Listen, "an address such as :9477"},
		{"RELAY_GRANT_TYPE", c.Upstream.GrantType, "client_credentials, or leave it unset"},
	} {
		if strings.TrimSpace(v.value) == "" {
			bad("%s is set but empty: want %s", v.name, v.want)
		}
	}
	if strings.TrimSpace(c.Listen) != "" {
		if err := checkListen(c.Listen); err != nil {
			errs = append(errs, err)
		}
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		bad("RELAY_LOG_LEVEL=%q: want debug, info, warn or error", c.LogLevel)
	}
	switch c.LogFmt {
	case "json", "text":
	default:
		bad("RELAY_LOG_FORMAT=%q: want json or text", c.LogFmt)
	}
	if (c.NATS.Cert == "") != (c.NATS.Key == "") {
		bad("RELAY_NATS_CERT and RELAY_NATS_KEY must be set together")
	}
	switch t := c.TLS; {
	case t.CertFile != "" && t.KeyFile == "":
		bad("RELAY_TLS_CERT_FILE is set and RELAY_TLS_KEY_FILE is not: set RELAY_TLS_KEY_FILE to the path of the certificate's private key, or unset both for plain HTTP")
	case t.CertFile == "" && t.KeyFile != "":
		bad("RELAY_TLS_KEY_FILE is set and RELAY_TLS_CERT_FILE is not: set RELAY_TLS_CERT_FILE to the path of the certificate (PEM), or unset both for plain HTTP")
	}
	if (c.NATS.User == "") != (c.NATS.Password == "") {
		bad("RELAY_NATS_USER and RELAY_NATS_PASSWORD must be set together")
	}
	if c.AdminToken != "" && len(c.AdminToken) < 16 {
		bad("RELAY_ADMIN_TOKEN is shorter than 16 characters: use a random one, such as the output of openssl rand -hex 24")
	}
	if c.ViewToken != "" && len(c.ViewToken) < 16 {
		bad("RELAY_VIEW_TOKEN is shorter than 16 characters: use a random one, such as the output of openssl rand -hex 24")
	}
	if c.ViewToken != "" && c.ViewToken == c.AdminToken {
		bad("RELAY_VIEW_TOKEN is RELAY_ADMIN_TOKEN: a viewer would log in as an administrator; give it a token of its own")
	}
	errs = append(errs, c.Console.check()...)
	return append(errs, c.checkScaling()...)
}

// The bounds of RELAY_RATE_LIMIT and of a tenant's rate_limit, in requests
// per minute.
const (
	minRate = 1
	maxRate = 600
)

// authScheme returns the canonical spelling of an authorization scheme:
// empty or Bearer.
func authScheme(s string) (string, bool) {
	switch strings.ToLower(s) {
	case "":
		return "", true
	case "bearer":
		return "Bearer", true
	}
	return "", false
}

// validBootstrap reports whether s is a value of RELAY_BOOTSTRAP.
func validBootstrap(s string) bool { return s == "notify" || s == "record" }

// The bounds of RELAY_STATE_REPLICAS and RELAY_LEASE_TTL, and their
// defaults.
const (
	maxStateReplicas = 5
	minLeaseTTL      = 3 * time.Second
	maxLeaseTTL      = 5 * time.Minute
	defaultLeaseTTL  = 15 * time.Second
)

// DefaultTenantID is the id of the one tenant of a configuration without a
// tenants file, unless RELAY_TENANT_ID names another.
const DefaultTenantID = "default"

// tokenRE is what a NATS KV key token may hold: the replica id and the
// egress group are parts of keys.
var tokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// checkScaling returns every problem of the variables of replicated state,
// tenants, leases and egress groups.
func (c *Config) checkScaling() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	st := &c.Store
	switch st.Backend {
	case BackendBBolt:
		if st.Replicas != 1 {
			bad("RELAY_STATE_REPLICAS=%d: only the jetstream backend replicates state: set RELAY_STATE_BACKEND=jetstream, or remove RELAY_STATE_REPLICAS", st.Replicas)
		}
		if c.Replica.LeaseTTL != defaultLeaseTTL {
			bad("RELAY_LEASE_TTL=%s: only the jetstream backend takes leases: set RELAY_STATE_BACKEND=jetstream, or remove RELAY_LEASE_TTL", c.Replica.LeaseTTL)
		}
	case BackendJetStream:
		if c.NATS.URL == "" {
			bad("RELAY_STATE_BACKEND=jetstream needs RELAY_NATS_URL: set it to your NATS servers, such as nats://nats:4222")
		}
		if st.Replicas < 1 || st.Replicas > maxStateReplicas {
			bad("RELAY_STATE_REPLICAS=%d: want a replication factor from 1 to %d (3 survives the loss of one JetStream server)", st.Replicas, maxStateReplicas)
		}
		if lt := c.Replica.LeaseTTL; lt < minLeaseTTL || lt > maxLeaseTTL {
			bad("RELAY_LEASE_TTL=%s: want a duration from %s to %s", lt, minLeaseTTL, maxLeaseTTL)
		}
	default:
		bad("RELAY_STATE_BACKEND=%q: want %s (a local file, the default) or %s (NATS JetStream, for replicas)", st.Backend, BackendBBolt, BackendJetStream)
	}
	if g := c.Replica.EgressGroup; g != "" {
		if !tokenRE.MatchString(g) {
			bad("RELAY_EGRESS_GROUP=%q: want letters, digits, _ and - only: it is part of a NATS KV key", g)
		}
		if c.NATS.URL == "" {
			bad("RELAY_EGRESS_GROUP needs RELAY_NATS_URL: the group's budget is kept in NATS JetStream")
		}
	}
	if id := c.Replica.ID; id != "" && !tokenRE.MatchString(id) {
		bad("RELAY_REPLICA_ID=%q: want letters, digits, _ and - only: it is a NATS KV key token", id)
	}
	if st.Dir != "" && strings.TrimSpace(st.Dir) == "" {
		bad("RELAY_STATE_DIR is set but blank: want a directory, or leave it unset for the directory of RELAY_STATE_PATH")
	}
	if c.TenantsFile == "" {
		if !tenantIDRE.MatchString(c.TenantID) {
			bad("RELAY_TENANT_ID=%q: %s", c.TenantID, tenantIDWant)
		}
		return errs
	}
	for _, v := range []struct{ name, value string }{
		{"RELAY_BASE_URL", c.Upstream.BaseURL},
		{"RELAY_APP_ID", c.Upstream.AppID},
		{"RELAY_APP_SECRET", c.Upstream.AppSecret},
	} {
		if v.value != "" {
			bad("%s is set with RELAY_TENANTS_FILE: remove %s, each tenant's upstream is in the tenants file", v.name, v.name)
		}
	}
	if c.TenantID != "" && c.TenantID != DefaultTenantID {
		bad("RELAY_TENANT_ID is set with RELAY_TENANTS_FILE: remove RELAY_TENANT_ID, each tenant's id is in the tenants file")
	}
	return errs
}

// replicaID sets the replica id to the host name when RELAY_REPLICA_ID is
// unset, and reports a host name that cannot be one when a replica id is
// needed: with the jetstream backend or an egress group.
func (c *Config) replicaID(hostname func() (string, error)) error {
	if c.Replica.ID != "" {
		return nil
	}
	needed := c.Store.Backend == BackendJetStream || c.Replica.EgressGroup != ""
	name, err := hostname()
	switch {
	case err != nil && needed:
		return fmt.Errorf("RELAY_REPLICA_ID is not set and the host name is unknown (%v): set RELAY_REPLICA_ID to a name unique among the replicas", err)
	case err != nil:
		return nil
	case !tokenRE.MatchString(name) && needed:
		return fmt.Errorf("RELAY_REPLICA_ID is not set and the host name %q is not a replica id (letters, digits, _ and - only: it is a NATS KV key token): set RELAY_REPLICA_ID", name)
	}
	c.Replica.ID = name
	return nil
}

// cleanErr rewrites go-envconfig's error, which names Go fields ("Poll:
// Lookback: ..."), to name the variable, and drops the value it could not
// parse, which may be a secret. It returns the variable's name too, or ""
// when the error names none.
func cleanErr(err error) (name, msg string) {
	msg = err.Error()
	for path, name := range fieldVars(reflect.TypeOf(Config{}), "") {
		if strings.HasPrefix(msg, path+": ") {
			if errors.Is(err, envconfig.ErrMissingRequired) {
				return name, name + " is required and not set"
			}
			return name, name + " is malformed: " + parseReason(msg)
		}
	}
	return "", msg
}

// fieldVars maps the field paths go-envconfig writes in its errors to the
// variable names in the env tags.
func fieldVars(t reflect.Type, prefix string) map[string]string {
	out := map[string]string{}
	envTags(t, prefix, func(path, name, _ string) { out[path] = name })
	return out
}

func parseReason(msg string) string {
	switch {
	case strings.Contains(msg, "time: "):
		return "want a duration such as 30s, 10m or 720h"
	case strings.Contains(msg, "strconv"):
		return "want a whole number"
	}
	return "cannot parse the value"
}
