package route

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/registry"
	"github.com/relay-energy/relay/internal/redact"
	"github.com/relay-energy/relay/internal/rulefile"
)

// env is a lookup over a fixed map, standing in for the process environment.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// problems returns every *Error of a Parse error.
func problems(t *testing.T, err error) []*Error {
	t.Helper()
	if err == nil {
		t.Fatal("Parse succeeded, want an error")
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]*Error, 0, len(errs))
	for _, e := range errs {
		var re *Error
		if !errors.As(e, &re) {
			t.Fatalf("error %q is not a *route.Error", e)
		}
		out = append(out, re)
	}
	return out
}

// yamlText drops the newline that starts a raw string, so that line 1 of the
// file is the line after the backquote.
func yamlText(s string) []byte { return []byte(strings.TrimPrefix(s, "\n")) }

func TestMalformedFilesNameFileLineAndField(t *testing.T) {
	lookup := env(map[string]string{"EMPTY_SECRET": "", "GOOD_SECRET": "s3cr3t-value", "BAD_WHSEC": "whsec_%%%not-base64"})
	cases := []struct {
		name  string
		yaml  string
		line  int
		field string
		msg   string // a substring of the message
	}{
		{"unknown top-level key", `
version: 1
sinks:
  - {name: bus, type: nats}
routes:
  - {name: all, to: [bus]}
`, 1, "version", `unknown key "version" (want one of sinks, routes, time_intervals, maintenance, inhibit)`},
		{"unknown sink option", `
sinks:
  - name: bus
    type: nats
    jetstrem: true
routes:
  - {name: all, to: [bus]}
`, 4, "sinks[0].jetstrem", `unknown key "jetstrem" for a nats sink`},
		{"option of another sink type", `
sinks:
  - name: bus
    type: nats
    channel: C1
routes:
  - {name: all, to: [bus]}
`, 4, "sinks[0].channel", `unknown key "channel" for a nats sink`},
		{"unknown route key", `
sinks:
  - {name: bus, type: nats}
routes:
  - name: all
    to: [bus]
    contine: true
`, 6, "routes[0].contine", `unknown key "contine"`},
		{"unknown match key", `
sinks:
  - {name: bus, type: nats}
routes:
  - name: urgent
    match:
      level: [0]
    to: [bus]
`, 6, "routes[0].match.level", `unknown key "level"`},
		{"unknown sink in a route", `
sinks:
  - {name: bus, type: nats}
  - {name: oncall, type: slack, channel: C1}
routes:
  - name: all
    to: [bus]
    continue: true
  - name: urgent
    to:
      - bus
      - oncal
`, 11, "routes[1].to", `sink "oncal" is not defined`},
		{"duplicate sink name", `
sinks:
  - name: bus
    type: nats
  - name: bus
    type: console
routes:
  - {name: all, to: [bus]}
`, 4, "sinks[1].name", `sink "bus" is already defined at line 2`},
		{"route naming no sink", `
sinks:
  - {name: bus, type: nats}
routes:
  - name: all
    continue: true
`, 4, "routes[0].to", "the route names no sink"},
		{"route with an empty sink list", `
sinks:
  - {name: bus, type: nats}
routes:
  - name: all
    to: []
`, 5, "routes[0].to", "the route names no sink"},
		{"bad level", `
sinks:
  - {name: bus, type: nats}
routes:
  - name: all
    match: {levels: [0, 5]}
    to: [bus]
`, 5, "routes[0].match.levels", `"5" is not a level`},
		{"device type not of the spec", `
sinks:
  - {name: bus, type: nats}
routes:
  - name: all
    match:
      device_types: [BMS, pcs]
    to: [bus]
`, 6, "routes[0].match.device_types", `"pcs" is not a device type of the upstream (any letter case of: Inverter, ElectricMeter`},
		{"bad transition", `
sinks:
  - {name: bus, type: nats}
routes:
  - name: all
    match:
      transitions:
        - start
        - stopped
    to: [bus]
`, 8, "routes[0].match.transitions", `"stopped" is not a transition`},
		{"template naming an unknown field", `
sinks:
  - name: bus
    type: nats
    subject: "alarms.{{.Tenant}}"
routes:
  - {name: all, to: [bus]}
`, 4, "sinks[0].subject", `can't evaluate field Tenant`},
		{"template that does not parse", `
sinks:
  - name: bus
    type: nats
    subject: "alarms.{{.TenantID"
routes:
  - {name: all, to: [bus]}
`, 4, "sinks[0].subject", "bad template"},
		{"template rendering a wildcard", `
sinks:
  - name: bus
    type: nats
    subject: "alarms.{{.TenantID}}.>"
routes:
  - {name: all, to: [bus]}
`, 4, "sinks[0].subject", "wildcard subject"},
		{"template rendering an empty token", `
sinks:
  - name: bus
    type: nats
    subject: "alarms..{{.TenantID}}"
routes:
  - {name: all, to: [bus]}
`, 4, "sinks[0].subject", "empty token"},
		{"bad glob", `
sinks:
  - {name: bus, type: nats}
routes:
  - name: north
    match:
      station_names: ["North *", 'South\']
    to: [bus]
`, 6, "routes[0].match.station_names", `bad glob "South\\"`},
		{"bad glob escape", `
sinks:
  - {name: bus, type: nats}
routes:
  - name: north
    match:
      device_names: ['Rack \d']
    to: [bus]
`, 6, "routes[0].match.device_names", `bad glob`},
		{"unknown sink type", `
sinks:
  - name: fax
    type: fax
routes:
  - {name: all, to: [fax]}
`, 3, "sinks[0].type", `unknown sink type "fax"`},
		{"sink without type", `
sinks:
  - name: bus
routes:
  - {name: all, to: [bus]}
`, 2, "sinks[0].type", "missing"},
		{"secret env var unset", `
sinks:
  - name: ops
    type: webhook
    url: https://ops.example.com/alarms
    secret_env: OPS_WEBHOOK_SECRET
routes:
  - {name: all, to: [ops]}
`, 5, "sinks[0].secret_env", "OPS_WEBHOOK_SECRET is not set"},
		{"secret env var empty", `
sinks:
  - name: ops
    type: webhook
    url: https://ops.example.com/alarms
    secret_env: EMPTY_SECRET
routes:
  - {name: all, to: [ops]}
`, 5, "sinks[0].secret_env", "EMPTY_SECRET is set but empty"},
		{"whsec secret that is not base64", `
sinks:
  - name: ops
    type: webhook
    url: https://ops.example.com/alarms
    secret_env: BAD_WHSEC
routes:
  - {name: all, to: [ops]}
`, 5, "sinks[0].secret_env", "not a base64 key"},
		{"slack webhook url env var unset", `
sinks:
  - name: team
    type: slack
    webhook_url_env: SLACK_HOOK
routes:
  - {name: all, to: [team]}
`, 4, "sinks[0].webhook_url_env", "SLACK_HOOK is not set"},
		{"empty file", ``, 1, "", "the file is empty"},
		{"only comments", `
# nothing yet
`, 1, "", "the file is empty"},
		{"slack without channel or webhook", `
sinks:
  - name: team
    type: slack
    max_age: 1h
routes:
  - {name: all, to: [team]}
`, 2, "sinks[0].channel", "needs channel"},
		{"slack with channel and webhook", `
sinks:
  - name: team
    type: slack
    channel: C1
    webhook_url: https://hooks.slack.com/services/T/B/X
routes:
  - {name: all, to: [team]}
`, 5, "sinks[0].webhook_url", "not both"},
		{"webhook without url", `
sinks:
  - name: ops
    type: webhook
    timeout: 5s
routes:
  - {name: all, to: [ops]}
`, 2, "sinks[0].url", "needs url"},
		{"webhook with a non-http url", `
sinks:
  - name: ops
    type: webhook
    url: ftp://ops.example.com/alarms
routes:
  - {name: all, to: [ops]}
`, 4, "sinks[0].url", "want an http:// or https:// URL"},
		{"reserved webhook header", `
sinks:
  - name: ops
    type: webhook
    url: https://ops.example.com/alarms
    headers:
      X-Team: energy
      Webhook-Signature: forged
routes:
  - {name: all, to: [ops]}
`, 7, "sinks[0].headers.Webhook-Signature", "cannot be overridden"},
		{"duplicate route name", `
sinks:
  - {name: bus, type: nats}
routes:
  - name: all
    to: [bus]
    continue: true
  - name: all
    to: [bus]
`, 7, "routes[1].name", `route "all" is already defined at line 4`},
		{"route without name", `
sinks:
  - {name: bus, type: nats}
routes:
  - to: [bus]
`, 4, "routes[0].name", "missing"},
		{"no routes", `
sinks:
  - {name: bus, type: nats}
routes:
`, 3, "routes", "no routes"},
		{"routes key left out", `
sinks:
  - {name: bus, type: nats}
`, 1, "routes", "no routes"},
		{"repeated key", `
sinks:
  - name: bus
    type: nats
    jetstream: true
    jetstream: false
routes:
  - {name: all, to: [bus]}
`, 5, "sinks[0].jetstream", "repeated key: already set at line 4"},
		{"bad max_age", `
sinks:
  - name: bus
    type: nats
    max_age: 3 days
routes:
  - {name: all, to: [bus]}
`, 4, "sinks[0].max_age", "not a positive duration"},
		{"jetstream not a boolean", `
sinks:
  - name: bus
    type: nats
    jetstream: yes
routes:
  - {name: all, to: [bus]}
`, 4, "sinks[0].jetstream", "want true or false"},
		{"create_stream without jetstream", `
sinks:
  - name: bus
    type: nats
    create_stream: ALARMS
routes:
  - {name: all, to: [bus]}
`, 4, "sinks[0].create_stream", "needs jetstream: true"},
		{"create_stream with a subject starting with a field", `
sinks:
  - name: bus
    type: nats
    subject: "{{.TenantID}}.alarms"
    jetstream: true
    create_stream: ALARMS
routes:
  - {name: all, to: [bus]}
`, 6, "sinks[0].create_stream", "starts with a literal token"},
		{"sink name with a space", `
sinks:
  - name: on call
    type: console
routes:
  - {name: all, to: [on call]}
`, 2, "sinks[0].name", "not a valid name"},
		{"empty match list", `
sinks:
  - {name: bus, type: nats}
routes:
  - name: none
    match: {event_codes: []}
    to: [bus]
`, 5, "routes[0].match.event_codes", "empty list matches nothing"},
		{"sinks not a list", `
sinks:
  name: bus
  type: nats
routes:
  - {name: all, to: [bus]}
`, 2, "sinks", "want a list"},
		{"yaml syntax error", `
sinks:
  - name: bus
   type: nats
routes:
  - {name: all, to: [bus]}
`, 3, "", "invalid YAML: did not find expected '-' indicator"},
		{"control character", "sinks:\n  - {name: bus, type: console}\nroutes:\n  - {name: al\x07l, to: [bus]}\n", 4, "", "control characters are not allowed"},
		{"bad UTF-8", "sinks:\n  - {name: bus, type: console}\nroutes:\n\n  - {name: \xff\xfe, to: [bus]}\n", 5, "", "invalid leading UTF-8 octet"},
		{"unknown anchor", "sinks:\n  - {name: bus, type: console}\nroutes:\n  - {name: all, to: *nope}\n", 4, "", "unknown anchor 'nope'"},
		{"tab in indentation", "sinks:\n  - name: bus\n\ttype: console\nroutes: []\n", 3, "", "tab character"},
		{"mapping value in a scalar", "sinks:\n  - name: bus\n    type: console\nroutes:\n  - name: all\n     to: [bus]\n", 6, "", "mapping values are not allowed"},
		{"unclosed quote", "sinks:\n  - name: bus\n    type: console\nroutes:\n  - name: \"all\n", 5, "", "unexpected end of stream"},
		{"two documents", `
sinks:
  - {name: bus, type: nats}
routes:
  - {name: all, to: [bus]}
---
sinks: []
`, 5, "", "second YAML document"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("rules.yaml", yamlText(c.yaml), lookup)
			errs := problems(t, err)
			if len(errs) != 1 {
				t.Fatalf("got %d problems, want 1:\n%v", len(errs), err)
			}
			e := errs[0]
			if e.File != "rules.yaml" || e.Line != c.line || e.Field != c.field || !strings.Contains(e.Msg, c.msg) {
				t.Fatalf("got %s\nwant rules.yaml:%d: field %q, message containing %q", e, c.line, c.field, c.msg)
			}
			if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "not-base64") {
				t.Fatalf("error reveals a secret: %v", err)
			}
		})
	}
}

func TestErrorRendersFileLineFieldAndMessage(t *testing.T) {
	_, err := Parse("rules.yaml", yamlText(`
sinks:
  - {name: bus, type: nats}
  - {name: oncall, type: slack, channel: C1}
routes:
  - name: all
    to: [bus]
    continue: true
  - name: urgent
    match: {levels: [0]}
    to: [oncal]
`), nil)
	const want = `route: rules.yaml:10: routes[1].to: sink "oncal" is not defined`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

func TestEveryProblemIsReportedInLineOrder(t *testing.T) {
	_, err := Parse("rules.yaml", yamlText(`
sinks:
  - name: bus
    type: nats
    subject: "a.{{.Nope}}"
  - name: bus
    type: pager
routes:
  - name: one
    match: {levels: [7], transitions: [begin]}
    to: [bus, nowhere]
  - name: one
    to: [bus]
`), nil)
	type where struct {
		line  int
		field string
	}
	want := []where{
		{4, "sinks[0].subject"},
		{5, "sinks[1].name"},
		{6, "sinks[1].type"},
		{9, "routes[0].match.levels"},
		{9, "routes[0].match.transitions"},
		{10, "routes[0].to"},
		{11, "routes[1].name"},
	}
	errs := problems(t, err)
	if len(errs) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		if errs[i].Line != w.line || errs[i].Field != w.field {
			t.Errorf("problem %d: got %s, want line %d field %s", i, errs[i], w.line, w.field)
		}
	}
}

func TestSecretsAreResolvedAndNeverPrinted(t *testing.T) {
	const secret = "whsec_c2VjcmV0LWtleS1ieXRlcw=="
	const hook = "https://hooks.slack.com/services/T000/B000/XXXXSECRET"
	r, err := Parse("rules.yaml", yamlText(`
sinks:
  - name: ops
    type: webhook
    url: https://user:pw@ops.example.com/alarms?token=abc
    secret_env: OPS_WEBHOOK_SECRET
  - name: team
    type: slack
    webhook_url_env: SLACK_HOOK
routes:
  - {name: all, to: [ops, team]}
`), env(map[string]string{"OPS_WEBHOOK_SECRET": secret, "SLACK_HOOK": hook}))
	if err != nil {
		t.Fatal(err)
	}
	ops, _ := r.Sink("ops")
	team, _ := r.Sink("team")
	set := redact.New()
	ops.AddSecrets(set)
	team.AddSecrets(set)
	if got := set.String(secret + " " + hook); strings.Contains(got, "XXXXSECRET") || strings.Contains(got, "c2VjcmV0") {
		t.Fatalf("secrets not resolved: %s", got)
	}
	if got := strings.Join(ops.Config.Summary(), ", "); !strings.Contains(got, "secret_env: OPS_WEBHOOK_SECRET (set)") {
		t.Fatalf("webhook summary %q", got)
	}
	if got := ops.Target(); got != "https://ops.example.com/…?…" {
		t.Fatalf("webhook target %q shows credentials, path or query", got)
	}
	if got := team.Target(); got != "incoming webhook https://hooks.slack.com" {
		t.Fatalf("slack target %q shows the webhook path", got)
	}
}

// TestRulesMayNotSendRelaysOwnVariablesToASink: a rules file whose *_env
// option names one of relay's own variables (the app secret, the admin token,
// the NATS credentials) is refused at that line and field, with how to fix
// it, and the variable is never read; every *_env option of every sink type
// is tried.
func TestRulesMayNotSendRelaysOwnVariablesToASink(t *testing.T) {
	relayEnv := map[string]string{
		"RELAY_APP_SECRET": "s3cr3t-app", "RELAY_ADMIN_TOKEN": "s3cr3t-admin", "RELAY_NATS_PASSWORD": "s3cr3t-nats",
		"RELAY_NATS_TOKEN": "s3cr3t-nats-token", "RELAY_NATS_NKEY_SEED": "SUAs3cr3t",
	}
	var read []string
	lookup := func(name string) (string, bool) {
		read = append(read, name)
		v, ok := relayEnv[name]
		return v, ok
	}

	t.Run("a real rules file", func(t *testing.T) {
		read = nil
		_, err := Parse("rules.yaml", yamlText(`
sinks:
  - name: ops
    type: webhook
    url: https://ops.example.com/alarms
    secret_env: RELAY_ADMIN_TOKEN
  - name: oncall
    type: pagerduty
    routing_key_env: RELAY_NATS_PASSWORD
    url: https://collector.example.com/v2/enqueue
routes:
  - {name: all, to: [ops, oncall]}
`), lookup)
		want := []string{
			"route: rules.yaml:5: sinks[0].secret_env: RELAY_ADMIN_TOKEN is one of relay's own variables, which no file may name " +
				"(every RELAY_ variable is kept for relay: its app secret, admin token and NATS credentials among them): " +
				"give the sink a variable of its own, such as OPS_WEBHOOK_SECRET, and set that in relay's environment",
			"route: rules.yaml:8: sinks[1].routing_key_env: RELAY_NATS_PASSWORD is one of relay's own variables",
		}
		errs := problems(t, err)
		if len(errs) != len(want) {
			t.Fatalf("got %d problems, want %d:\n%v", len(errs), len(want), err)
		}
		for i, w := range want {
			if !strings.HasPrefix(errs[i].Error(), w) {
				t.Errorf("problem %d:\n got %s\nwant %s", i, errs[i], w)
			}
		}
		if len(read) != 0 {
			t.Errorf("the parser read %v", read)
		}
	})

	for _, typ := range registry.Types() {
		for _, key := range typ.Keys() {
			if !strings.HasSuffix(key, "_env") {
				continue
			}
			for _, name := range []string{"RELAY_APP_SECRET", "RELAY_NATS_TOKEN", "relay_nats_nkey_seed"} {
				t.Run(typ.Name+"."+key+"="+name, func(t *testing.T) {
					read = nil
					text := fmt.Sprintf("sinks:\n  - name: s\n    type: %s\n    %s: %s\nroutes:\n  - {name: all, to: [s]}\n", typ.Name, key, name)
					_, err := Parse("rules.yaml", []byte(text), lookup)
					var found bool
					for _, e := range problems(t, err) {
						if e.Line == 4 && e.Field == "sinks[0]."+key && strings.HasPrefix(e.Msg, name+" is one of relay's own variables") {
							found = true
						}
						if strings.Contains(e.Error(), "s3cr3t") {
							t.Errorf("a problem holds a secret: %s", e)
						}
					}
					if !found {
						t.Errorf("no problem refuses %s at line 4, field sinks[0].%s:\n%v", name, key, err)
					}
					if slices.Contains(read, name) {
						t.Errorf("the parser read %s", name)
					}
				})
			}
		}
	}
}

func TestDefaultsAreApplied(t *testing.T) {
	r, err := Parse("rules.yaml", yamlText(`
sinks:
  - {name: bus, type: nats}
  - {name: ops, type: webhook, url: "http://127.0.0.1:8080/hook"}
  - {name: log, type: console, max_age: 90m}
routes:
  - {name: all, to: bus, continue: true}
  - {name: rest, to: [ops, log]}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	bus, ok := r.Sink("bus")
	if !ok || bus.Target() != "energy.alarms.{{.TenantID}}.{{.StationID}}.{{.Level}}.{{.Transition}}" ||
		strings.Join(bus.Config.Summary(), ",") != "core NATS" || bus.MaxAge != notify.DefaultMaxAge {
		t.Fatalf("nats defaults: %+v", bus)
	}
	ops, _ := r.Sink("ops")
	if got := strings.Join(ops.Config.Summary(), ", "); got != "unsigned, timeout 10s, concurrency 8" {
		t.Fatalf("webhook defaults: %q", got)
	}
	log, _ := r.Sink("log")
	if log.MaxAge != 90*time.Minute {
		t.Fatalf("max_age = %v, want 90m", log.MaxAge)
	}
	if _, ok := r.Sink("nope"); ok {
		t.Fatal("Sink found an undefined name")
	}
	if got := r.Routes[0].To; len(got) != 1 || got[0] != "bus" {
		t.Fatalf("a scalar to = %v, want [bus]", got)
	}
}

// exampleEnv is every variable rules.example.yaml names: these with values
// of their form, any other with rulefile.Placeholder, so that a sink type
// added to the example needs no change here.
var exampleEnv = withExampleVariables(map[string]string{
	"OPS_WEBHOOK_SECRET": "whsec_c2VjcmV0LWtleS1ieXRlcw==",
	"SLACK_WEBHOOK_URL":  "https://hooks.slack.com/services/T000/B000/XXXX",
})

// withExampleVariables adds to env every other variable rules.example.yaml
// reads, as rulefile.Placeholder.
func withExampleVariables(env map[string]string) map[string]string {
	r, err := Load("../../rules.example.yaml", func(string) (string, bool) { return rulefile.Placeholder, true })
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

func TestExampleRulesFileIsValid(t *testing.T) {
	r, err := Load("../../rules.example.yaml", env(exampleEnv))
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]bool{}
	for _, s := range r.Sinks {
		types[s.Type] = true
	}
	for _, typ := range registry.Names() {
		if !types[typ] {
			t.Errorf("the example has no %s sink", typ)
		}
	}
	for name := range exampleEnv {
		if !strings.Contains(readExample(t), "#   "+name+" ") {
			t.Errorf("the example's header does not list %s", name)
		}
	}
	seen := map[string]bool{}
	for _, rt := range r.Routes {
		for _, k := range strings.Fields(rt.Match.String()) {
			seen[strings.SplitN(k, "=", 2)[0]] = true
		}
		if rt.Continue {
			seen["continue"] = true
		}
	}
	for _, k := range append(matchKeys, "continue") {
		if !seen[k] {
			t.Errorf("the example does not show %s", k)
		}
	}
	for _, rt := range r.Routes {
		if rt.Hold > 0 {
			seen["hold"] = true
		}
		if rt.Repeat > 0 {
			seen["repeat"] = true
		}
		if rt.Suppress != nil {
			seen["suppress"] = true
		}
		if len(rt.ActiveWhen) > 0 {
			seen["active_when"] = true
		}
		if len(rt.MuteWhen) > 0 {
			seen["mute_when"] = true
		}
	}
	for _, s := range r.Sinks {
		if s.DailySummary != nil {
			seen["daily_summary"] = true
		}
	}
	// The example writes out the default digest: look for the key.
	seen["digest"] = strings.Contains(readExample(t), "\n    digest: ")
	seen["time_intervals"] = len(r.Intervals) > 0
	seen["maintenance"] = len(r.Maintenance) > 0
	seen["inhibit"] = len(r.Inhibits) > 0
	for _, k := range []string{"hold", "repeat", "suppress", "active_when", "mute_when", "digest", "daily_summary", "time_intervals", "maintenance", "inhibit"} {
		if !seen[k] {
			t.Errorf("the example does not show %s", k)
		}
	}
	if w := r.Warnings(); len(w) != 0 {
		t.Errorf("the example has warnings: %v", w)
	}
	for name, v := range exampleEnv {
		if _, err := Load("../../rules.example.yaml", env(map[string]string{name: v})); err == nil || !strings.Contains(err.Error(), "is not set") {
			t.Errorf("with only %s set, Load = %v, want a variable not set", name, err)
		}
	}
}

func TestLoadRefusesMissingAndOversizedFiles(t *testing.T) {
	if _, err := Load("testdata/does-not-exist.yaml", nil); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	big := t.TempDir() + "/big.yaml"
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", MaxFileSize)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(big, nil)
	var re *Error
	if !errors.As(err, &re) || !strings.Contains(re.Msg, "larger than") {
		t.Fatalf("oversized file: %v", err)
	}
}

func TestWarningsNameUnusedSinksAndUnreachableRoutes(t *testing.T) {
	r, err := Parse("rules.yaml", yamlText(`
sinks:
  - {name: bus, type: nats}
  - {name: spare, type: console}
routes:
  - {name: all, to: [bus]}
  - {name: never, match: {levels: [0]}, to: [bus]}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	w := r.Warnings()
	if len(w) != 2 || !strings.Contains(w[0], `sink "spare" is not named by any route`) || !strings.Contains(w[1], `route "never" is never reached`) {
		t.Fatalf("warnings = %q", w)
	}
}

func readExample(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../rules.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
