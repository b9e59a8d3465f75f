package email

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/mail"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
	"github.com/relay-energy/relay/internal/termtext"
)

// Type is the email sink type.
var Type = sinktype.Type{
	Name: "email",
	Doc:  "sends each event as a mail over SMTP (plain text and HTML); the end of an alarm replies to its start's mail",
	Options: append([]sinktype.Option{
		{Key: "smtp", Doc: "the SMTP server's host:port, such as smtp.example.com:587 (required)"},
		{Key: "tls", Doc: "starttls (default: upgrade, refuse a server without it), tls (implicit TLS, port 465) or none (in clear: a relay on the same host or network only)"},
		{Key: "ca_file", Doc: "PEM file of the authorities trusted for the server's certificate instead of the system's (a private relay)"},
		{Key: "username_env", Doc: "variable holding the AUTH user name (with password_env)"},
		{Key: "password_env", Doc: "variable holding the AUTH password (with username_env)"},
		{Key: "from", Doc: `sender address, such as "Relay <alarms@example.com>" (required)`},
		{Key: "to", Doc: "recipient addresses, a list (required)"},
		{Key: "cc", Doc: "copy recipient addresses, a list"},
	}, sinktype.MessageOptions("subject", "plain-text body (the HTML body shows it above the alarm's facts)")...),
	Decode: decode,
}

type options struct {
	addr                     string
	tls                      string
	caFile                   string
	roots                    *x509.CertPool
	usernameEnv, passwordEnv string
	username, password       string
	from                     *mail.Address
	to, cc                   []*mail.Address
	message                  *sinktype.Message
}

func decode(d *sinktype.Decoder) sinktype.Config {
	o := &options{tls: d.Enum("tls", STARTTLS, STARTTLS, ImplicitTLS, NoTLS)}
	if d.Missing("smtp", "an email sink needs smtp, the server's host:port") {
		o.addr = smtpAddr(d, o.tls)
	}
	if path := d.String("ca_file"); path != "" {
		o.caFile = path
		o.roots = caPool(d, path)
		if o.tls == NoTLS {
			d.Errorf("ca_file", "ca_file is for TLS, and tls is none: set tls to starttls or tls, or leave ca_file out")
		}
	}
	o.usernameEnv, o.username = d.Env("username_env")
	o.passwordEnv, o.password = d.Env("password_env")
	switch {
	case d.Has("username_env") && !d.Has("password_env"):
		d.Errorf("password_env", "missing: username_env is set, so AUTH needs password_env too")
	case d.Has("password_env") && !d.Has("username_env"):
		d.Errorf("username_env", "missing: password_env is set, so AUTH needs username_env too")
	case d.Has("username_env") && o.tls == NoTLS:
		d.Errorf("tls", "AUTH over a connection in clear would send the password as it is: set tls to starttls or tls, or leave out username_env and password_env")
	}
	if d.Missing("from", "an email sink needs from, the sender's address") {
		if as := addresses(d, "from", []string{d.String("from")}); len(as) == 1 {
			o.from = as[0]
		}
	}
	if d.Missing("to", "an email sink needs to, a list of recipient addresses") {
		o.to = addresses(d, "to", d.Strings("to"))
	}
	o.cc = addresses(d, "cc", d.Strings("cc"))
	seen := map[string]bool{}
	for _, a := range slices.Concat(o.to, o.cc) {
		key := strings.ToLower(a.Address)
		if seen[key] {
			d.Errorf("cc", "%s is listed twice in to and cc: list each recipient once", a.Address)
		}
		seen[key] = true
	}
	o.message = d.Message(nil)
	return o
}

// smtpAddr reads smtp, a host:port, and refuses a port whose usual TLS
// mode is the other one.
func smtpAddr(d *sinktype.Decoder, mode string) string {
	s := d.String("smtp")
	if s == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(s)
	n, perr := strconv.Atoi(port)
	switch {
	case strings.Contains(s, "://"):
		d.Errorf("smtp", "want host:port without a scheme, such as smtp.example.com:587")
		return ""
	case err != nil || host == "" || perr != nil || n < 1 || n > 65535:
		d.Errorf("smtp", "want host:port, such as smtp.example.com:587 (STARTTLS) or smtp.example.com:465 (tls: tls)")
		return ""
	case n == 465 && mode != ImplicitTLS:
		d.Errorf("smtp", "port 465 speaks TLS from the first byte (RFC 8314): set tls: tls")
	case (n == 587 || n == 25) && mode == ImplicitTLS:
		d.Errorf("tls", "port %d starts in clear and upgrades with STARTTLS: set tls: starttls (or use port 465)", n)
	}
	return s
}

func caPool(d *sinktype.Decoder, path string) *x509.CertPool {
	pem, err := os.ReadFile(path)
	if err != nil {
		d.Errorf("ca_file", "cannot read %s: %v", path, err)
		return nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		d.Errorf("ca_file", "%s holds no PEM certificate", path)
		return nil
	}
	return pool
}

// addresses parses one address per item, as RFC 5322 writes them
// ("alarms@example.com" or "Relay <alarms@example.com>").
func addresses(d *sinktype.Decoder, key string, items []string) []*mail.Address {
	var out []*mail.Address
	for _, s := range items {
		a, err := mail.ParseAddress(s)
		switch {
		case err != nil:
			d.Errorf(key, "%q is not an email address (%v): write name@example.com or \"Name <name@example.com>\"", s, err)
		case !strings.Contains(a.Address, "@") || strings.HasSuffix(a.Address, "@"):
			d.Errorf(key, "%q has no domain: write name@example.com", s)
		default:
			out = append(out, a)
		}
	}
	return out
}

func (o *options) Target() string {
	return fmt.Sprintf("smtp %s to %s", o.addr, addrList(slices.Concat(o.to, o.cc)))
}

// Host is smtps:// for a server spoken to in TLS from the first byte, and
// smtp:// otherwise (STARTTLS or in clear).
func (o *options) Host(sinktype.Env) string {
	if o.tls == ImplicitTLS {
		return "smtps://" + o.addr
	}
	return "smtp://" + o.addr
}

func (o *options) Summary() []string {
	var out []string
	switch o.tls {
	case NoTLS:
		out = append(out, "tls: none — WARNING: mails cross the network in clear; only for a relay on the same host or network")
	default:
		out = append(out, "tls: "+o.tls)
	}
	if o.caFile != "" {
		out = append(out, "ca_file: "+o.caFile)
	}
	if o.usernameEnv != "" {
		out = append(out, "auth: username_env "+o.usernameEnv+", password_env "+o.passwordEnv+" (set)")
	} else {
		out = append(out, "no auth")
	}
	if o.from != nil {
		out = append(out, "from "+o.from.Address)
	}
	if o.message.Templated() {
		out = append(out, "templated")
	}
	return append(out, fmt.Sprintf("paced %d per %s per server and sender", PerWindow, termtext.Duration(Window)))
}

func (o *options) AddSecrets(set *redact.Set) { set.Add(o.password) }

// Destination is the sender and the recipients: the memory of an alarm (the
// start's Message-ID) belongs in their mailboxes, so that a sink renamed
// with the same addresses keeps its threads.
func (o *options) Destination() string {
	var rcpts []string
	for _, a := range slices.Concat(o.to, o.cc) {
		rcpts = append(rcpts, strings.ToLower(a.Address))
	}
	slices.Sort(rcpts)
	from := ""
	if o.from != nil {
		from = strings.ToLower(o.from.Address)
	}
	return "email:" + from + ">" + strings.Join(rcpts, ",")
}

func (o *options) config(name string, deps sinktype.Deps) Config {
	deps = deps.Defaults()
	return Config{Name: name, Addr: o.addr, TLS: o.tls, RootCAs: o.roots,
		Username: o.username, Password: o.password, UsernameEnv: o.usernameEnv, PasswordEnv: o.passwordEnv,
		From: o.from, To: o.to, Cc: o.cc, Message: o.message, Clock: deps.Clock, Logger: deps.Logger,
		Limiter: o.limiter(deps.Limits), Fence: deps.Fence, TemplateFailed: deps.TemplateFailed}
}

// limiter is the pace of the server and account, shared by every email
// sink sending there: servers count per logged-in mailbox (two sinks that
// send as different addresses through one account share its limit), and
// per sender where there is no login.
func (o *options) limiter(l *notify.Limits) *notify.Limiter {
	account := "from " + strings.ToLower(o.from.Address)
	if o.username != "" {
		account = "user " + o.username
	}
	return l.Get("email:"+strings.ToLower(o.addr)+" "+account, notify.Window{N: PerWindow, Per: Window})
}

func (o *options) Build(_ context.Context, name string, deps sinktype.Deps) (notify.Sink, error) {
	return New(o.config(name, deps))
}

func (o *options) Probe(ctx context.Context, deps sinktype.Deps) (string, error) {
	s, err := New(o.config("probe", deps))
	if err != nil {
		return "", err
	}
	return s.Probe(ctx)
}

// Render returns the mail about ev, dated by the event's time and, for an
// end, replying to its start. Its body is a readable form of the message
// (the headers that matter, then the plain-text and the HTML body), not the
// MIME text itself: go-mail draws the part boundaries at random and encodes
// the bodies quoted-printable. What is the SMTP envelope.
func (o *options) Render(ev *event.Event) ([]sinktype.Request, error) {
	c := newComposer(o.from, o.to, o.cc, o.message)
	parent := ""
	if ev.Data.Transition != event.Start {
		parent = c.messageID(ev.Data.OriginID, event.Start)
	}
	date, _ := time.Parse(time.RFC3339Nano, ev.Time)
	m, err := c.compose(ev, parent, date.UTC())
	var rcpts []string
	for _, a := range slices.Concat(o.to, o.cc) {
		rcpts = append(rcpts, "<"+a.Address+">")
	}
	what := fmt.Sprintf("SMTP %s MAIL FROM <%s> RCPT TO %s", o.addr, o.from.Address, strings.Join(rcpts, " "))
	return []sinktype.Request{{What: what, Body: c.readable(m)}}, err
}
