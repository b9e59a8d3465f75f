package config

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
)

// Variable is one variable of the configuration, as the reference documents
// it. Its default is not here: it is the default= of the env tag of the
// Config field that reads it (Defaults).
type Variable struct {
	// Name is the variable, such as RELAY_LOOKBACK.
	Name string
	// Doc says what the variable sets, in Markdown, for the reference.
	Doc string
	// Unset says what an unset variable means when its field has no
	// default, such as "the host name"; empty means an empty value.
	Unset string
	// Secret marks a value that must never be seen: AddSecrets adds it to
	// the redaction set, and the Kubernetes manifests take it from a Secret.
	Secret bool
}

// Reference lists every variable Config reads and what it means, in the
// order of docs/design.md §9. Variables, the configuration reference and the
// checks of docs/configure.md, the design and the Kubernetes manifests read it.
var Reference = []Variable{
	{Name: "RELAY_BASE_URL", Unset: "required to run, unless `RELAY_TENANTS_FILE` is set",
		Doc: "base address of the Open Data Service, `https://...`; credentials in it are never logged"},
	{Name: "RELAY_APP_ID", Unset: "required to run, unless `RELAY_TENANTS_FILE` is set",
		Doc: "client id for the login"},
	{Name: "RELAY_APP_SECRET", Unset: "required to run, unless `RELAY_TENANTS_FILE` is set", Secret: true,
		Doc: "client secret for the login"},
	{Name: "RELAY_GRANT_TYPE", Doc: "`grantType` sent at login"},
	{Name: "RELAY_AUTH_SCHEME",
		Doc: "empty sends `Authorization: <token>`; `Bearer` sends `Authorization: Bearer <token>`"},
	{Name: "RELAY_RATE_LIMIT", Doc: "upstream requests per minute for this process, login included (1 to 600)"},
	{Name: "RELAY_LOOKBACK", Doc: "window of the current-alarm query; alarms that started earlier are out of sight"},
	{Name: "RELAY_SWEEP_OVERLAP", Doc: "how far each recovered-alarm sweep reaches back before the previous one"},
	{Name: "RELAY_CONFIRM_TIMEOUT",
		Doc: "how long a vanished alarm is looked for among recovered alarms before its end is inferred"},
	{Name: "RELAY_MAX_CLOCK_SKEW",
		Doc: "how far past the upstream's now every query window reaches, for device clocks that run ahead (or stamp local time as UTC)"},
	{Name: "RELAY_LATE_HORIZON",
		Doc: "how far back reconciliation looks for alarms the upstream lists late, already over (at most `RELAY_LOOKBACK`)"},
	{Name: "RELAY_BOOTSTRAP",
		Doc: "first run on an empty store: `notify` sends a start for every ongoing alarm, `record` stores them silently"},
	{Name: "RELAY_RETENTION", Doc: "how long ended alarms are remembered (never shorter than `RELAY_LOOKBACK`)"},
	{Name: "RELAY_DEAD_LETTER_LIMIT",
		Doc: "how many dead letters one sink holds at most; past it the oldest alarm's dead letters are discarded together, " +
			"logged, counted in `relay_dropped_total{reason=\"dead-letter-limit\"}` and listed in the sink's suppressed log"},
	{Name: "RELAY_STATE_PATH", Doc: "the bbolt state file (one writer at a time)"},
	{Name: "RELAY_RULES", Doc: "the rules file; reloaded on SIGHUP and when its contents change"},
	{Name: "RELAY_UPSTREAM_TZ",
		Doc: "zone of the upstream's zone-less `yyyy-MM-dd HH:mm:ss` strings (used only when epoch times are missing)"},
	{Name: "RELAY_NATS_URL",
		Doc: "NATS server URL(s), comma separated; needed by `nats` sinks and the `jetstream` state backend; credentials in it are never logged"},
	{Name: "RELAY_NATS_CREDS", Doc: "path of a NATS `.creds` file (JWT and seed)"},
	{Name: "RELAY_NATS_NKEY_SEED", Secret: true, Doc: "path of an NKey seed file"},
	{Name: "RELAY_NATS_TOKEN", Secret: true, Doc: "NATS token"},
	{Name: "RELAY_NATS_USER", Doc: "NATS user (with `RELAY_NATS_PASSWORD`)"},
	{Name: "RELAY_NATS_PASSWORD", Secret: true, Doc: "NATS password (with `RELAY_NATS_USER`)"},
	{Name: "RELAY_NATS_CA", Doc: "path of a CA bundle to verify the NATS server"},
	{Name: "RELAY_NATS_CERT", Doc: "path of a client certificate for mutual TLS (with `RELAY_NATS_KEY`)"},
	{Name: "RELAY_NATS_KEY", Doc: "path of the client certificate's key (with `RELAY_NATS_CERT`)"},
	{Name: "RELAY_SLACK_TOKEN", Secret: true,
		Doc: "Slack bot token (`xoxb-...`), needed by `slack` sinks with a `channel`"},
	{Name: "RELAY_SLACK_APP_TOKEN", Secret: true, Unset: "no buttons",
		Doc: "Slack app-level token (`xapp-...`, scope `connections:write`): Slack messages carry Acknowledge and Shelve buttons, read through Socket Mode"},
	{Name: "RELAY_SLACK_API_URL", Unset: "Slack's own", Doc: "base URL of the Slack Web API (tests and proxies)"},
	{Name: "RELAY_LISTEN", Doc: "address of `/healthz`, `/readyz`, `/metrics` and the administration endpoints"},
	{Name: "RELAY_LOG_LEVEL", Doc: "`debug`, `info`, `warn` or `error`"},
	{Name: "RELAY_LOG_FORMAT", Doc: "`json` or `text`"},
	{Name: "RELAY_SHUTDOWN_GRACE", Doc: "on SIGTERM, how long pending deliveries may still drain"},
	{Name: "RELAY_ADMIN_TOKEN", Unset: "none: the administration endpoints are off", Secret: true,
		Doc: "bearer token of the administration endpoints of the ops listener (`relay deadletters`, `relay silence`, " +
			"`relay report`, and the device stamp offsets `relay check --online` shows) and the operator console's login with actions, at least 16 characters"},
	{Name: "RELAY_VIEW_TOKEN", Unset: "none: the operator console is off unless `RELAY_ADMIN_TOKEN` is set", Secret: true,
		Doc: "token that logs in to the operator console (`/console/` on the ops listener) read only; " +
			"`RELAY_ADMIN_TOKEN` logs in with actions; at least 16 characters, not the admin token"},
	{Name: "RELAY_CONSOLE_ORIGIN", Unset: "none: the console is reached at localhost, an IP address or the host of `RELAY_LISTEN`",
		Doc: "the operator console's address as the browser sees it, `scheme://host[:port]` such as `https://relay.example.com` " +
			"(behind an ingress or a proxy): its forms are accepted from that origin, its host passes the Host check, and an `https` one makes the session cookie `__Host-relay_console_<port>`, `Secure`"},
	{Name: "RELAY_TRUSTED_PROXIES", Unset: "none: forwarding headers are ignored",
		Doc: "CIDRs or addresses, comma separated, of the proxies whose forwarding headers (`RELAY_FORWARDED_HEADER`) " +
			"are believed: the client's address (login throttling) and the scheme and host the browser used"},
	{Name: "RELAY_FORWARDED_HEADER",
		Doc: "which forwarding headers the trusted proxies write, the only ones read: `x-forwarded` (`X-Forwarded-For`, `X-Forwarded-Proto`, `X-Forwarded-Host`; most ingresses) " +
			"or `forwarded` (RFC 7239 `Forwarded`); a proxy passes the other family on as the client sent it"},
	{Name: "RELAY_TLS_CERT_FILE", Unset: "none: the ops listener speaks plain HTTP",
		Doc: "path of the certificate (PEM, its chain after it) the ops listener serves HTTPS with, TLS 1.2 or later (with `RELAY_TLS_KEY_FILE`); " +
			"loaded again, without a restart, when the files change (a Kubernetes Secret's rotation included)"},
	{Name: "RELAY_TLS_KEY_FILE", Unset: "none: the ops listener speaks plain HTTP",
		Doc: "path of that certificate's private key (PEM; with `RELAY_TLS_CERT_FILE`)"},
	{Name: "RELAY_TLS_CA_FILE", Unset: "the system's roots, and `RELAY_TLS_CERT_FILE` when set",
		Doc: "path of a CA bundle (PEM) that the commands calling the ops listener (`relay ack`, `relay silence`, `relay deadletters`, `relay report`, " +
			"`relay check --online`) trust, such as a self-signed certificate's; set, they call it over HTTPS"},
	{Name: "RELAY_TENANTS_FILE", Unset: "none: one tenant, from `RELAY_BASE_URL`, `RELAY_APP_ID` and `RELAY_APP_SECRET`",
		Doc: "the tenants file, for several upstream accounts in one process (`tenants.example.yaml` shows one); " +
			"with it, `RELAY_BASE_URL`, `RELAY_APP_ID`, `RELAY_APP_SECRET` and `RELAY_TENANT_ID` must be unset"},
	{Name: "RELAY_TENANT_ID", Doc: "the id of the one tenant without a tenants file (in subjects, keys, metrics)"},
	{Name: "RELAY_STATE_BACKEND",
		Doc: "`bbolt` keeps the state in a local file, one process at a time; `jetstream` keeps it in NATS JetStream " +
			"(`RELAY_NATS_URL`), shared by replicas"},
	{Name: "RELAY_STATE_REPLICAS",
		Doc: "replicas of the JetStream streams and KV buckets of the state, 1 to 5 (3 survives the loss of a server); jetstream only"},
	{Name: "RELAY_STATE_DIR", Unset: "the directory of `RELAY_STATE_PATH`",
		Doc: "with a tenants file, where each tenant's state file `<id>.db` lives; with jetstream, where the disposable local caches live"},
	{Name: "RELAY_REPLICA_ID", Unset: "the host name",
		Doc: "this process's name among the replicas (letters, digits, `_` and `-`), unique per replica; in Kubernetes, the pod's name"},
	{Name: "RELAY_LEASE_TTL",
		Doc: "how long a replica's hold on a tenant lasts without renewal, 3s to 5m: a dead replica's tenants are taken over within twice that; jetstream only"},
	{Name: "RELAY_EGRESS_GROUP", Unset: "none",
		Doc: "replicas with the same group leave through one IP address and share one upstream budget, kept in NATS (needs `RELAY_NATS_URL`)"},
}

// Variables lists every variable Config reads, in the order of docs/design.md
// §9: the names of Reference.
var Variables = func() []string {
	names := make([]string, len(Reference))
	for i, v := range Reference {
		names[i] = v.Name
	}
	return names
}()

// Defaults returns the default of every variable that has one, as the env
// tags of Config write it, by name.
func Defaults() map[string]string {
	out := map[string]string{}
	envTags(reflect.TypeOf(Config{}), "", func(_, name, opts string) {
		// default= comes last and swallows commas.
		if _, def, ok := strings.Cut(opts, "default="); ok {
			out[name] = def
		}
	})
	return out
}

// ReferencePath is where the configuration reference is committed, relative
// to the repository's root.
const ReferencePath = "docs/reference/configuration.md"

// ReferenceMarkdown returns the configuration reference: a table of every
// variable of Reference with its default and meaning.
func ReferenceMarkdown() []byte {
	defaults := Defaults()
	var b bytes.Buffer
	b.WriteString("# Configuration reference\n\n")
	b.WriteString("<!-- Generated by `go generate ./cmd/relay` from internal/config (the Reference table, and the " +
		"defaults of the env tags of Config). Do not edit: a test fails when this file differs from what the code generates. -->\n\n")
	b.WriteString("relay is configured by these environment variables, in the order of docs/design.md §9. " +
		"A missing or malformed variable stops start-up with one line naming it; values are never echoed. " +
		"`relay check` reports every problem without starting anything. A secret is never logged, and the Kubernetes " +
		"manifests take it from a Secret.\n\n")
	b.WriteString("| variable | default | secret | meaning |\n|---|---|---|---|\n")
	for _, v := range Reference {
		def := "empty"
		switch d, ok := defaults[v.Name]; {
		case ok:
			def = "`" + d + "`"
		case v.Unset != "":
			def = v.Unset
		}
		secret := ""
		if v.Secret {
			secret = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.Name, def, secret, v.Doc)
	}
	return b.Bytes()
}

// envTags calls visit with the field path go-envconfig writes in its errors
// ("Poll: Lookback"), the variable's name and the rest of the tag, for every
// field of t with an env tag, nested structs included.
func envTags(t reflect.Type, prefix string, visit func(path, name, opts string)) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		path := prefix + f.Name
		if tag := f.Tag.Get("env"); tag != "" {
			name, opts, _ := strings.Cut(tag, ",")
			visit(path, strings.TrimSpace(name), opts)
			continue
		}
		if f.Type.Kind() == reflect.Struct {
			envTags(f.Type, path+": ", visit)
		}
	}
}
