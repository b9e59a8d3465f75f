package robot

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
)

// Options are the options every robot sink has, as decoded: where it posts,
// the secret it signs (or routes) with, and its message templates.
type Options struct {
	// URLEnv names the variable URL came from ("" when an option gave it).
	URLEnv, URL string
	// SecretEnv names the variable Secret came from.
	SecretEnv, Secret string
	// Message holds the title and text templates.
	Message *sinktype.Message
}

// Payload is the vendor's own part of one sink's options (what it decoded
// besides Options, such as mentions): it makes the message JSON the sink
// posts.
type Payload interface {
	// Body returns the JSON body of the message about ev, unsigned, from
	// o's templates; when a template fails on ev, the body holds the
	// default in its place and the error says which failed. A nil body is
	// a message that cannot be made at all. Send and Render both use it,
	// so that relay route --render shows exactly what is sent (o.Secret is
	// then "$" and the name of its variable).
	Body(ev *event.Event, o *Options) ([]byte, error)
}

// Digests is the Payload of a chat robot: its sinks remind and show storm
// digests as messages that stand on their own (see Chat).
type Digests interface {
	Payload
	// Digest returns the body of a digest's first message, and how many of
	// its alarms, from the first, it lists in full.
	Digest(dg *notify.Digest) (body []byte, listed int, err error)
	// List returns the body of a later message of dg: its counts as they
	// stand, then items, alarms that joined or ended.
	List(dg *notify.Digest, items []notify.DigestItem) ([]byte, error)
}

// Summarizer is a Payload that adds to relay check's table what its own
// options set, after the URL and the signing.
type Summarizer interface {
	Summary(o *Options) []string
}

// AckBreak separates the acknowledge line (sinktype.AckLine) from the text
// before it in a robot's message: a paragraph break, in the Markdown of
// DingTalk, WeCom, Teams and Feishu alike.
const AckBreak = "\n\n"

// WebhookURL parses raw, a robot's webhook URL, refusing one that is not an
// absolute http(s) URL without echoing it.
func WebhookURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("the webhook URL is not an absolute http(s) URL")
	}
	return u, nil
}

// QueryKey returns param of the query of raw, a robot's webhook URL, where
// it names the robot (an access token, a key); when there is none, the
// error says so and then hint, how to find the whole URL.
func QueryKey(raw, param, hint string) (string, error) {
	u, err := WebhookURL(raw)
	if err != nil {
		return "", err
	}
	key := u.Query().Get(param)
	if key == "" {
		return "", fmt.Errorf("the webhook URL has no %s: %s", param, hint)
	}
	return key, nil
}

// decode reads the options of one sink, with Decode or by default.
func (v *Vendor) decode(d *sinktype.Decoder) sinktype.Config {
	if v.Decode != nil {
		o, p := v.Decode(d)
		return &config{v: v, o: o, p: p}
	}
	var o Options
	v.decodeURL(d, &o)
	if v.Sign != nil {
		v.decodeSecret(d, &o)
	}
	p := v.Own(d)
	o.Message = d.MessageEscapes(v.TitleEscape, v.TextEscape)
	// A robot's message carries no buttons: a start people can acknowledge
	// ends with the command that does it.
	o.Message.EndWithAckLine(AckBreak)
	return &config{v: v, o: o, p: p}
}

// decodeURL reads url_env, the variable holding the robot's webhook URL:
// it is required, and Key and URLHint must take its value, which no
// problem echoes.
func (v *Vendor) decodeURL(d *sinktype.Decoder, o *Options) {
	if !d.Missing("url_env", fmt.Sprintf("a %s sink needs url_env, the variable holding the %s's webhook URL", v.Name, v.Robot)) {
		return
	}
	o.URLEnv, o.URL = d.URLEnv("url_env")
	if o.URL == "" || d.Placeholder(o.URL) {
		return
	}
	if _, err := v.Key(o.URL, ""); err != nil {
		d.Errorf("url_env", "environment variable %s: %v", o.URLEnv, err)
		o.URL = ""
		return
	}
	if hint := hint(v.URLHint, o.URL); hint != "" {
		d.Errorf("url_env", "environment variable %s %s", o.URLEnv, hint)
		o.URL = ""
	}
}

// decodeSecret reads secret_env, the variable holding the robot's signing
// secret, which SecretHint checks; the sink signs nothing without it.
func (v *Vendor) decodeSecret(d *sinktype.Decoder, o *Options) {
	o.SecretEnv, o.Secret = d.Env("secret_env")
	if o.Secret == "" || d.Placeholder(o.Secret) {
		return
	}
	if hint := hint(v.SecretHint, o.Secret); hint != "" {
		d.Errorf("secret_env", "environment variable %s %s", o.SecretEnv, hint)
	}
}

// hint returns check of value, "" when check is nil.
func hint(check func(string) string, value string) string {
	if check == nil {
		return ""
	}
	return check(value)
}

// config is the sinktype.Config of every robot sink type.
type config struct {
	v *Vendor
	o Options
	p Payload
}

func (c *config) Target() string {
	if c.v.Target != nil {
		return c.v.Target(c.o.URL)
	}
	return sinktype.RedactURL(c.o.URL, true)
}

func (c *config) Host(sinktype.Env) string { return sinktype.RedactURL(c.o.URL, false) }

func (c *config) Summary() []string {
	var out []string
	if c.o.URLEnv != "" {
		out = append(out, "url_env: "+c.o.URLEnv)
	}
	switch {
	case c.v.Sign != nil && c.o.SecretEnv != "":
		out = append(out, "secret_env: "+c.o.SecretEnv+" (signed)")
	case c.v.Sign != nil:
		out = append(out, "unsigned")
	}
	if s, ok := c.p.(Summarizer); ok {
		out = append(out, s.Summary(&c.o)...)
	}
	if c.o.Message.Templated() {
		out = append(out, "templated")
	}
	paces := make([]string, len(c.v.Windows))
	for i, w := range c.v.Windows {
		paces[i] = fmt.Sprintf("%d per %s", w.N, w.Per)
	}
	return append(out, "paced "+strings.Join(paces, " and "))
}

func (c *config) AddSecrets(set *redact.Set) { c.v.secrets(set, c.o.URL, c.o.Secret) }

func (c *config) Destination() string { return "" }

// Build makes the sink, pacing it with the limiter of its robot, which
// every sink posting there shares: keyed by Key, which never leaves
// deps.Limits. A Payload that makes digests makes a Chat.
func (c *config) Build(_ context.Context, name string, deps sinktype.Deps) (notify.Sink, error) {
	deps = deps.Defaults()
	key, _ := c.v.Key(c.o.URL, c.o.Secret)
	s, err := c.v.newSink(name, c.o, c.p, deps, deps.Limits.Get(c.v.Name+":"+key, c.v.Windows...))
	if err != nil {
		return nil, err
	}
	if d, ok := c.p.(Digests); ok {
		return &Chat{Sink: *s, digests: d}, nil
	}
	return s, nil
}

// Probe dials the robot's host: none of these vendors has a call that
// checks a robot without posting to it.
func (c *config) Probe(ctx context.Context, _ sinktype.Deps) (string, error) {
	return sinktype.ProbeHost(ctx, c.o.URL)
}

// Render returns the one request Send makes for ev, with the secret
// replaced by the name of its variable, and without what signing adds to
// each attempt. When a template fails on ev, the request holds the default
// in its place, as Send would post it, and the error says which failed.
func (c *config) Render(ev *event.Event) ([]sinktype.Request, error) {
	o := c.o
	o.Secret = "$" + o.SecretEnv
	body, err := c.p.Body(ev, &o)
	if body == nil {
		return nil, err
	}
	return []sinktype.Request{{What: "POST " + c.Target(), Body: body}}, err
}
