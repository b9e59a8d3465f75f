package config

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"
)

func TestDefaultsFollowTheDesign(t *testing.T) {
	c, err := Load(context.Background(), envconfig.MapLookuper(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Upstream.RateLimit != 10 || c.Poll.Lookback != 720*time.Hour || c.Poll.SweepOverlap != 2*time.Minute ||
		c.Poll.ConfirmTimeout != 10*time.Minute || c.Store.Bootstrap != "notify" || c.Store.Retention != 2160*time.Hour ||
		c.Store.Path != "/var/lib/relay/relay.db" || c.Rules != "/etc/relay/rules.yaml" || c.Listen != ":9477" ||
		c.LogLevel != "info" || c.LogFmt != "json" || c.Grace != 20*time.Second || c.Upstream.GrantType != "client_credentials" ||
		c.Upstream.Location() != time.UTC {
		t.Fatalf("defaults differ from docs/design.md §9: %+v", c)
	}
}

func TestBadVariablesAreNamedAndSecretsAreNotEchoed(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"rate not a number", map[string]string{"RELAY_RATE_LIMIT": "ten"}, "RELAY_RATE_LIMIT"},
		{"rate zero", map[string]string{"RELAY_RATE_LIMIT": "0"}, "RELAY_RATE_LIMIT"},
		{"bad duration", map[string]string{"RELAY_LOOKBACK": "a month"}, "RELAY_LOOKBACK"},
		{"bad bootstrap", map[string]string{"RELAY_BOOTSTRAP": "loud"}, "RELAY_BOOTSTRAP"},
		{"bad zone", map[string]string{"RELAY_UPSTREAM_TZ": "Mars/Olympus"}, "RELAY_UPSTREAM_TZ"},
		{"retention under lookback", map[string]string{"RELAY_RETENTION": "1h"}, "RELAY_RETENTION"},
		{"no dead letters", map[string]string{"RELAY_DEAD_LETTER_LIMIT": "0"}, "RELAY_DEAD_LETTER_LIMIT=0: want a number"},
		{"dead letters not a number", map[string]string{"RELAY_DEAD_LETTER_LIMIT": "lots"}, "RELAY_DEAD_LETTER_LIMIT"},
		{"bad scheme", map[string]string{"RELAY_AUTH_SCHEME": "Basic"}, "RELAY_AUTH_SCHEME"},
		{"bad url", map[string]string{"RELAY_BASE_URL": "ftp://x"}, "RELAY_BASE_URL"},
		{"cert without key", map[string]string{"RELAY_NATS_CERT": "/c.pem"}, "RELAY_NATS_KEY"},
		{"TLS certificate without key", map[string]string{"RELAY_TLS_CERT_FILE": "/tls/tls.crt"}, "RELAY_TLS_KEY_FILE is not"},
		{"TLS key without certificate", map[string]string{"RELAY_TLS_KEY_FILE": "/tls/tls.key"}, "RELAY_TLS_CERT_FILE is not"},
		{"bad log format", map[string]string{"RELAY_LOG_FORMAT": "xml"}, "RELAY_LOG_FORMAT"},
		{"empty listen", map[string]string{"RELAY_LISTEN": ""}, "RELAY_LISTEN"},
		{"empty rules", map[string]string{"RELAY_RULES": " "}, "RELAY_RULES"},
		{"empty grant type", map[string]string{"RELAY_GRANT_TYPE": ""}, "RELAY_GRANT_TYPE"},
		{"malformed grace", map[string]string{"RELAY_SHUTDOWN_GRACE": "s3cr3t-value"}, "RELAY_SHUTDOWN_GRACE"},
		{"short view token", map[string]string{"RELAY_VIEW_TOKEN": "s3cr3t-view"}, "RELAY_VIEW_TOKEN"},
		{"view token is the admin token", map[string]string{"RELAY_VIEW_TOKEN": "s3cr3t-0123456789abc", "RELAY_ADMIN_TOKEN": "s3cr3t-0123456789abc"}, "RELAY_VIEW_TOKEN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(context.Background(), envconfig.MapLookuper(tc.env))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") || strings.Count(err.Error(), "\n") > 0 {
				t.Fatalf("error %q echoes the value or is not one line", err)
			}
		})
	}
}

func TestRequireUpstreamNamesTheFirstMissingVariable(t *testing.T) {
	c, err := Load(context.Background(), envconfig.MapLookuper(map[string]string{
		"RELAY_BASE_URL": "http://127.0.0.1:8090", "RELAY_APP_ID": "app", "RELAY_APP_SECRET": " ",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RequireUpstream(); err == nil || !strings.Contains(err.Error(), "RELAY_APP_SECRET") {
		t.Fatalf("err = %v, want one naming RELAY_APP_SECRET", err)
	}
}

func TestVariablesListsEveryTaggedField(t *testing.T) {
	tagged := map[string]bool{}
	for _, name := range fieldVars(reflect.TypeOf(Config{}), "") {
		tagged[name] = true
	}
	if len(tagged) != len(Variables) {
		t.Fatalf("%d tagged fields, %d in Variables", len(tagged), len(Variables))
	}
	for _, v := range Variables {
		if !tagged[v] {
			t.Errorf("%s is in Variables but no field reads it", v)
		}
	}
}

func TestRedactURLHidesCredentialsOnly(t *testing.T) {
	for in, want := range map[string]string{
		"https://":                                  "https://",
		"https://opendata.example.com/base":         "https://opendata.example.com/base",
		"https://relay:s3cr3t@opendata.example.com": "https://relay:xxxxx@opendata.example.com",
		"https://opendata.example.com/?key=s3cr3t":  "https://opendata.example.com/?…",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
