package webhook

import (
	"context"
	"encoding/base64"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
	"github.com/relay-energy/relay/internal/rulefile"
	"github.com/relay-energy/relay/internal/termtext"
)

// Shown is a webhook URL as relay shows it (relay check, route --render,
// errors, dead letters, pages): its scheme and host, "/…" for its path and
// "?…" for its query, never their text. A webhook's path may be its
// credential (Discord's /api/webhooks/<id>/<token>, Zapier's and IFTTT's
// hook ids), and relay cannot tell which are.
func Shown(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(invalid URL)"
	}
	out := u.Scheme + "://" + u.Host
	if strings.Trim(u.Path, "/") != "" {
		out += "/…"
	}
	if u.RawQuery != "" {
		out += "?…"
	}
	return out
}

// AddURLSecrets adds to set the secret parts of a webhook URL: its
// password and query values (redact.Set.AddURL), and what of its path
// looks like a credential (Shown): the whole path when it has 8 characters
// or more, and each segment of 16 or more (the length of a token), or of 6
// or more with letters and digits (Zapier's hook ids). Redaction replaces
// text wherever it appears, so a short path of words (/alerts, /hook) is
// left out: every "webhook" in a log line would lose its "hook".
func AddURLSecrets(set *redact.Set, raw string) {
	set.AddURL(raw, false)
	u, err := url.Parse(raw)
	if err != nil {
		return
	}
	if p := strings.Trim(u.Path, "/"); len(p) >= 8 {
		set.Add(p, strings.Trim(u.EscapedPath(), "/"))
	}
	for seg := range strings.SplitSeq(u.Path, "/") {
		if len(seg) >= 16 || (len(seg) >= 6 && strings.ContainsAny(seg, "0123456789") && strings.IndexFunc(seg, unicode.IsLetter) >= 0) {
			set.Add(seg)
		}
	}
}

// DefaultTimeout bounds one attempt when the rules set no timeout.
const DefaultTimeout = 10 * time.Second

// reserved are the headers the sink sets itself.
var reserved = []string{"content-type", "content-length", "host", HeaderID, HeaderTimestamp, HeaderSignature}

// Type is the webhook sink type.
var Type = sinktype.Type{
	Name: "webhook",
	Doc:  "POSTs each event as a CloudEvent, signed by the Standard Webhooks scheme when a secret is set",
	Options: []sinktype.Option{
		{Key: "url", Doc: "where to POST (required)"},
		{Key: "headers", Doc: "extra HTTP headers, such as Authorization; their values are secrets"},
		{Key: "secret_env", Doc: "variable holding the signing secret (whsec_<base64> or any string)"},
		{Key: "timeout", Doc: "bound of one attempt (default 10s)"},
		{Key: "concurrency", Doc: "most requests in flight at once, 1 to 64 (default 8); 1 sends one at a time"},
	},
	Decode: decode,
}

type options struct {
	url         string
	headers     map[string]string
	secretEnv   string
	secret      string
	timeout     time.Duration
	concurrency int
}

func decode(d *sinktype.Decoder) sinktype.Config {
	o := &options{url: d.URL("url"), timeout: d.Duration("timeout", DefaultTimeout), concurrency: concurrency(d)}
	d.Missing("url", "a webhook sink needs url")
	if n, ok := d.Node("headers"); ok {
		o.headers = headers(d, n)
	}
	o.secretEnv, o.secret = d.Env("secret_env")
	if rest, ok := strings.CutPrefix(o.secret, "whsec_"); ok {
		if key, err := base64.StdEncoding.DecodeString(rest); err != nil || len(key) == 0 {
			d.Errorf("secret_env", "environment variable %s starts with whsec_ but the rest is not a base64 key", o.secretEnv)
		}
	}
	return o
}

// concurrency reads the concurrency option, DefaultConcurrency when absent.
func concurrency(d *sinktype.Decoder) int {
	n, ok := d.Node("concurrency")
	if !ok {
		return DefaultConcurrency
	}
	var v int
	switch {
	case n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&v) != nil:
		d.Errorf("concurrency", "want a whole number from 1 (one request at a time) to %d, got %s", MaxConcurrency, rulefile.Describe(n))
	case v < 1 || v > MaxConcurrency:
		d.Errorf("concurrency", "%d is out of range: want 1 (one request at a time) to %d requests in flight at once", v, MaxConcurrency)
	default:
		return v
	}
	return DefaultConcurrency
}

func headers(d *sinktype.Decoder, n *yaml.Node) map[string]string {
	r, field := d.Reader(), d.Field("headers")
	pairs, ok := r.Mapping(n, field, nil)
	if !ok {
		return nil
	}
	if len(pairs) == 0 {
		d.Errorf("headers", "no headers: leave the key out or name at least one")
		return nil
	}
	out := make(map[string]string, len(pairs))
	lower := make(map[string]string, len(pairs))
	for _, kv := range pairs {
		sub := rulefile.Join(field, kv.Key)
		switch {
		case !validHeaderName(kv.Key):
			r.Errorf(kv.Line, sub, "%q is not a valid header name", kv.Key)
		case slices.Contains(reserved, strings.ToLower(kv.Key)):
			r.Errorf(kv.Line, sub, "header %s is set by relay and cannot be overridden", kv.Key)
		case lower[strings.ToLower(kv.Key)] != "":
			r.Errorf(kv.Line, sub, "header %s is already set as %s: header names ignore case", kv.Key, lower[strings.ToLower(kv.Key)])
		case kv.Val.Kind != yaml.ScalarNode || rulefile.IsNull(kv.Val):
			r.Errorf(kv.Val.Line, sub, "want a string value, got %s", rulefile.Describe(kv.Val))
		case strings.ContainsAny(kv.Val.Value, "\r\n\x00"):
			r.Errorf(kv.Val.Line, sub, "the value contains a line break or NUL")
		default:
			out[kv.Key] = kv.Val.Value
			lower[strings.ToLower(kv.Key)] = kv.Key
		}
	}
	return out
}

func (o *options) Target() string { return Shown(o.url) }

func (o *options) Host(sinktype.Env) string { return sinktype.RedactURL(o.url, false) }

func (o *options) Summary() []string {
	var out []string
	if o.secretEnv != "" {
		out = append(out, "secret_env: "+o.secretEnv+" (set)")
	} else {
		out = append(out, "unsigned")
	}
	if len(o.headers) > 0 {
		names := make([]string, 0, len(o.headers))
		for k := range o.headers {
			names = append(names, k)
		}
		slices.Sort(names)
		out = append(out, "headers: "+strings.Join(names, " "))
	}
	return append(out, "timeout "+termtext.Duration(o.timeout), "concurrency "+strconv.Itoa(o.concurrency))
}

func (o *options) AddSecrets(set *redact.Set) {
	set.Add(o.secret, strings.TrimPrefix(o.secret, "whsec_"))
	for _, v := range o.headers {
		set.AddHeader(v)
	}
	AddURLSecrets(set, o.url)
}

func (o *options) Destination() string { return "" }

func (o *options) Build(_ context.Context, name string, deps sinktype.Deps) (notify.Sink, error) {
	return New(Config{Name: name, URL: o.url, Headers: o.headers, Secret: o.secret, Timeout: o.timeout,
		Concurrency: o.concurrency, HTTPClient: deps.HTTP, Clock: deps.Clock})
}

func (o *options) Probe(ctx context.Context, _ sinktype.Deps) (string, error) {
	return sinktype.ProbeHost(ctx, o.url)
}

func (o *options) Render(ev *event.Event) ([]sinktype.Request, error) {
	body, err := ev.Marshal()
	if err != nil {
		return nil, err
	}
	return []sinktype.Request{{What: "POST " + o.Target(), Body: body}}, nil
}
