// Package config reads relay's configuration from the environment
// (docs/design.md §9). A missing or malformed variable stops start-up with
// one line that names it; secret values never appear in errors.
package config

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/sethvargo/go-envconfig"
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

// Store configures the state file.
type Store struct {
	Path      string        `env:"RELAY_STATE_PATH, default=/var/lib/relay/relay.db"`
	Bootstrap string        `env:"RELAY_BOOTSTRAP, default=notify"`
	Retention time.Duration `env:"RELAY_RETENTION, default=2160h"`
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

// Slack is how to reach Slack's Web API.
type Slack struct {
	Token  string `env:"RELAY_SLACK_TOKEN"`
	APIURL string `env:"RELAY_SLACK_API_URL"`
}

// Variables lists every variable Config reads, in the order of docs/design.md §9.
// The README, the design and the Kubernetes manifests are checked against it.
var Variables = []string{
	"RELAY_BASE_URL", "RELAY_APP_ID", "RELAY_APP_SECRET", "RELAY_GRANT_TYPE", "RELAY_AUTH_SCHEME",
	"RELAY_RATE_LIMIT", "RELAY_LOOKBACK", "RELAY_SWEEP_OVERLAP", "RELAY_CONFIRM_TIMEOUT",
	"RELAY_MAX_CLOCK_SKEW", "RELAY_LATE_HORIZON", "RELAY_BOOTSTRAP", "RELAY_RETENTION", "RELAY_STATE_PATH", "RELAY_RULES", "RELAY_UPSTREAM_TZ",
	"RELAY_NATS_URL", "RELAY_NATS_CREDS", "RELAY_NATS_NKEY_SEED", "RELAY_NATS_TOKEN",
	"RELAY_NATS_USER", "RELAY_NATS_PASSWORD", "RELAY_NATS_CA", "RELAY_NATS_CERT", "RELAY_NATS_KEY",
	"RELAY_SLACK_TOKEN", "RELAY_SLACK_API_URL", "RELAY_LISTEN", "RELAY_LOG_LEVEL",
	"RELAY_LOG_FORMAT", "RELAY_SHUTDOWN_GRACE",
}

// Lookuper finds an environment variable; envconfig.OsLookuper() reads the
// process environment and envconfig.MapLookuper a map (tests).
type Lookuper = envconfig.Lookuper

// Load reads and checks the whole configuration. It does not require the
// upstream credentials: commands that call upstream check them with
// RequireUpstream.
func Load(ctx context.Context, l Lookuper) (Config, error) {
	var c Config
	if err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: &c, Lookuper: l}); err != nil {
		return Config{}, fmt.Errorf("config: %s", cleanErr(err))
	}
	if err := c.check(); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// RequireUpstream reports the first upstream variable that running needs
// and is missing or empty.
func (c Config) RequireUpstream() error {
	for _, v := range []struct{ name, value string }{
		{"RELAY_BASE_URL", c.Upstream.BaseURL},
		{"RELAY_APP_ID", c.Upstream.AppID},
		{"RELAY_APP_SECRET", c.Upstream.AppSecret},
	} {
		if strings.TrimSpace(v.value) == "" {
			return fmt.Errorf("config: %s is required and not set", v.name)
		}
	}
	return nil
}

func (c *Config) check() error {
	u := &c.Upstream
	if u.RateLimit < 1 || u.RateLimit > 600 {
		return fmt.Errorf("RELAY_RATE_LIMIT=%d: want a number of requests per minute from 1 to 600", u.RateLimit)
	}
	if u.BaseURL != "" && !strings.HasPrefix(u.BaseURL, "http://") && !strings.HasPrefix(u.BaseURL, "https://") {
		return fmt.Errorf("RELAY_BASE_URL=%q: want an http:// or https:// URL", u.BaseURL)
	}
	switch strings.ToLower(u.AuthScheme) {
	case "":
	case "bearer":
		u.AuthScheme = "Bearer"
	default:
		return fmt.Errorf("RELAY_AUTH_SCHEME=%q: want empty or Bearer", u.AuthScheme)
	}
	loc, err := time.LoadLocation(u.TZ)
	if err != nil {
		return fmt.Errorf("RELAY_UPSTREAM_TZ=%q: not a time zone name", u.TZ)
	}
	u.loc = loc
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
			return fmt.Errorf("%s=%s: want a positive duration such as 10m", d.name, d.v)
		}
	}
	if c.Poll.LateHorizon > c.Poll.Lookback {
		return fmt.Errorf("RELAY_LATE_HORIZON=%s: must not be longer than RELAY_LOOKBACK=%s", c.Poll.LateHorizon, c.Poll.Lookback)
	}
	if c.Store.Retention < c.Poll.Lookback {
		return fmt.Errorf("RELAY_RETENTION=%s: must not be shorter than RELAY_LOOKBACK=%s", c.Store.Retention, c.Poll.Lookback)
	}
	switch c.Store.Bootstrap {
	case "notify", "record":
	default:
		return fmt.Errorf("RELAY_BOOTSTRAP=%q: want notify or record", c.Store.Bootstrap)
	}
	for _, v := range []struct{ name, value, want string }{
		{"RELAY_STATE_PATH", c.Store.Path, "the path of the state file"},
		{"RELAY_RULES", c.Rules, "the path of the rules file"},
		{"RELAY_LISTEN", c.Listen, "an address such as :9477"},
		{"RELAY_GRANT_TYPE", c.Upstream.GrantType, "client_credentials, or leave it unset"},
	} {
		if strings.TrimSpace(v.value) == "" {
			return fmt.Errorf("%s is set but empty: want %s", v.name, v.want)
		}
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("RELAY_LOG_LEVEL=%q: want debug, info, warn or error", c.LogLevel)
	}
	switch c.LogFmt {
	case "json", "text":
	default:
		return fmt.Errorf("RELAY_LOG_FORMAT=%q: want json or text", c.LogFmt)
	}
	if (c.NATS.Cert == "") != (c.NATS.Key == "") {
		return errors.New("RELAY_NATS_CERT and RELAY_NATS_KEY must be set together")
	}
	if (c.NATS.User == "") != (c.NATS.Password == "") {
		return errors.New("RELAY_NATS_USER and RELAY_NATS_PASSWORD must be set together")
	}
	return nil
}

// cleanErr rewrites go-envconfig's error, which names Go fields ("Poll:
// Lookback: ..."), to name the variable, and drops the value it could not
// parse, which may be a secret.
func cleanErr(err error) string {
	msg := err.Error()
	for path, name := range fieldVars(reflect.TypeOf(Config{}), "") {
		if strings.HasPrefix(msg, path+": ") {
			if errors.Is(err, envconfig.ErrMissingRequired) {
				return name + " is required and not set"
			}
			return name + " is malformed: " + parseReason(msg)
		}
	}
	return msg
}

// fieldVars maps the field paths go-envconfig writes in its errors to the
// variable names in the env tags.
func fieldVars(t reflect.Type, prefix string) map[string]string {
	out := map[string]string{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		path := prefix + f.Name
		if tag := f.Tag.Get("env"); tag != "" {
			out[path] = strings.TrimSpace(strings.SplitN(tag, ",", 2)[0])
			continue
		}
		if f.Type.Kind() == reflect.Struct {
			for k, v := range fieldVars(f.Type, path+": ") {
				out[k] = v
			}
		}
	}
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
