// Package email is the email sink type: each event is a mail sent over
// SMTP (STARTTLS, implicit TLS or, when asked, none; AUTH from the
// environment) with github.com/wneessen/go-mail, with a plain-text and an
// HTML body. The end of an alarm replies to its start, so that mail clients
// show the two as one thread.
package email

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/mail"
	"net/textproto"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
)

// TLS modes of the connection to the SMTP server.
const (
	// STARTTLS upgrades a plain connection (port 587, RFC 3207) and refuses
	// to go on when the server does not offer it.
	STARTTLS = "starttls"
	// ImplicitTLS speaks TLS from the first byte (port 465, RFC 8314).
	ImplicitTLS = "tls"
	// NoTLS sends in clear: for a relay on the same host or network only.
	NoTLS = "none"
)

// MemoryMessageID is the key of the start's Message-ID in the memory of an
// alarm.
const MemoryMessageID = "message_id"

// Pacing: at most PerWindow mails per Window to one SMTP server from one
// sender, shared by every email sink sending there. SMTP sets no limit of
// its own; Microsoft 365 (Exchange Online) documents 30 messages a minute
// per mailbox over SMTP submission and rejects the excess, so the window is
// a second longer for a margin. It is far above any alarm rate an operator
// wants to read; other services allow more.
const (
	PerWindow = 30
	Window    = 61 * time.Second
)

// DefaultTimeout bounds each step of one attempt (connecting, each SMTP
// command, the message).
const DefaultTimeout = 30 * time.Second

// Config configures an email sink.
type Config struct {
	// Name is the sink's name from the rules file.
	Name string
	// Addr is the SMTP server's host:port.
	Addr string
	// TLS is STARTTLS, ImplicitTLS or NoTLS (default STARTTLS).
	TLS string
	// RootCAs, when set, are the only authorities trusted for the
	// server's certificate (the system's otherwise).
	RootCAs *x509.CertPool
	// Username and Password, when set, authenticate with AUTH (PLAIN,
	// LOGIN or SCRAM, whichever the server offers first in that order).
	// UsernameEnv and PasswordEnv name the variables they come from, for
	// errors.
	Username, Password       string
	UsernameEnv, PasswordEnv string
	// From is the sender, also the envelope's.
	From *mail.Address
	// To and Cc are the recipients.
	To, Cc []*mail.Address
	// Message holds the subject and body templates (nil: the defaults).
	Message *sinktype.Message
	// Timeout bounds each step of an attempt (default DefaultTimeout).
	Timeout time.Duration
	// Clock dates the mails (default the real clock).
	Clock clock.Clock
	// Limiter paces the mails (nil: unpaced).
	Limiter *notify.Limiter
	// Fence is asked before each SMTP session that sends, after the pace
	// allowed it; a refusal sends nothing (nil: never refuses).
	Fence notify.Fence
	// Logger receives a line for each mail the server accepted.
	Logger *slog.Logger
	// TemplateFailed is told when a template failed on an event and the
	// default was sent instead.
	TemplateFailed func(sink string, ev *event.Event, err error)
}

// Sink sends each event as one mail. The start of an alarm carries a
// Message-ID computed from the alarm (see composer.messageID), kept as the
// alarm's memory; its end and invalid carry In-Reply-To and References
// naming it, taken from the memory or, when there is none, computed the same
// way, so that they thread under the start after a restart, a rename or a
// lost memory alike.
//
// Each attempt is one SMTP session: connect, EHLO, STARTTLS, AUTH, MAIL,
// RCPT for each recipient, DATA, QUIT. Replies 4xx (421, 450, 451, 452,
// 454) and network failures, timeouts included, are retried; 5xx replies,
// a refused AUTH (535), a certificate that does not verify and a server
// without STARTTLS dead-letter the event with what to fix. Recipients
// refused for good (a mailbox gone) while others are not are left out: the
// same mail goes to the others in a second session, and a warning names
// who was left out.
type Sink struct {
	cfg      Config
	host     string
	port     int
	composer *composer
	secrets  *redact.Set
}

// New returns an email sink.
func New(cfg Config) (*Sink, error) {
	host, portText, err := net.SplitHostPort(cfg.Addr)
	port, perr := strconv.Atoi(portText)
	if err != nil || host == "" || perr != nil || port < 1 || port > 65535 {
		return nil, fmt.Errorf("email sink %q: smtp %q is not host:port", cfg.Name, cfg.Addr)
	}
	switch cfg.TLS {
	case "":
		cfg.TLS = STARTTLS
	case STARTTLS, ImplicitTLS, NoTLS:
	default:
		return nil, fmt.Errorf("email sink %q: tls %q is not starttls, tls or none", cfg.Name, cfg.TLS)
	}
	if cfg.From == nil || len(cfg.To) == 0 {
		return nil, fmt.Errorf("email sink %q: needs from and to", cfg.Name)
	}
	if (cfg.Username == "") != (cfg.Password == "") {
		return nil, fmt.Errorf("email sink %q: set both username and password, or neither", cfg.Name)
	}
	if cfg.Username != "" && cfg.TLS == NoTLS {
		return nil, fmt.Errorf("email sink %q: AUTH without TLS would send the password in clear", cfg.Name)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TemplateFailed == nil {
		cfg.TemplateFailed = func(string, *event.Event, error) {}
	}
	secrets := redact.New(cfg.Password)
	return &Sink{cfg: cfg, host: host, port: port, composer: newComposer(cfg.From, cfg.To, cfg.Cc, cfg.Message), secrets: secrets}, nil
}

// Name returns the sink's name.
func (s *Sink) Name() string { return s.cfg.Name }

// Send sends one mail about d's event.
func (s *Sink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	res, err := s.send(ctx, d)
	return res, s.secrets.Error(err)
}

func (s *Sink) send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	ev := d.Event
	what := fmt.Sprintf("email sink %q: mail of %s to %s via %s", s.cfg.Name, ev.ID, addrList(slices.Concat(s.cfg.To, s.cfg.Cc)), s.cfg.Addr)
	var m message
	res, err := s.mail(ctx, what, func(now time.Time) message {
		var tmplErr error
		m, tmplErr = s.composer.compose(ev, s.parent(ev, d.Memory), now)
		if tmplErr != nil {
			s.cfg.TemplateFailed(s.cfg.Name, ev, tmplErr)
		}
		return m
	}, "event_id", ev.ID)
	if err != nil {
		return res, err
	}
	if ev.Data.Transition == event.Start {
		return notify.Result{Memory: map[string]string{MemoryMessageID: m.ID}}, nil
	}
	return notify.Result{}, nil
}

// Remind mails, in reply to the start's mail (In-Reply-To and References
// its Message-ID, from the memory; the subject the start's after "Re: "),
// that the alarm is still ongoing, the note (such as "Reminder, ongoing for
// 4h") leading its text. Its Message-ID is derived from the alarm and the
// note, so that a reminder sent twice after a lost answer is one message to
// the clients. An alarm whose start left no Message-ID gets no reminder.
// Like Send, it makes one attempt.
func (s *Sink) Remind(ctx context.Context, ev *event.Event, memory map[string]string) (notify.Result, error) {
	parent := memory[MemoryMessageID]
	if !validID(parent) {
		return notify.Result{}, nil
	}
	what := fmt.Sprintf("email sink %q: reminder of %s to %s via %s", s.cfg.Name, ev.Data.OriginID, addrList(slices.Concat(s.cfg.To, s.cfg.Cc)), s.cfg.Addr)
	res, err := s.mail(ctx, what, func(now time.Time) message {
		m, tmplErr := s.composer.reminder(ev, parent, now)
		if tmplErr != nil {
			s.cfg.TemplateFailed(s.cfg.Name, ev, tmplErr)
		}
		return m
	}, "alarm", ev.Data.OriginID)
	return res, s.secrets.Error(err)
}

// mail sends the message compose returns, composed at the time it is sent
// once the server's pace allows it, in one SMTP session (two when
// recipients refused for good are left out), and classifies a failure.
// about names what the mail is about in log lines.
func (s *Sink) mail(ctx context.Context, what string, compose func(now time.Time) message, about ...any) (notify.Result, error) {
	if s.cfg.Limiter != nil {
		if err := s.cfg.Limiter.Wait(ctx); err != nil {
			return notify.WaitResult(err), fmt.Errorf("%s: waiting for the server's pace: %w", what, err)
		}
	}
	logArgs := func(more ...any) []any { return slices.Concat([]any{"sink", s.cfg.Name}, about, more) }
	m := compose(s.cfg.Clock.Now())
	msg, err := s.mime(m, nil)
	if err != nil {
		return notify.Result{}, fmt.Errorf("%s: cannot write the message: %v", what, err)
	}
	if err := s.cfg.Fence.Check(); err != nil {
		return notify.Result{Retry: true}, fmt.Errorf("%s: not sent: %w", what, err)
	}
	err = s.session(ctx, func(ctx context.Context, c *gomail.Client) error {
		return c.DialAndSendWithContext(ctx, msg)
	})
	if refused := refusedForGood(err); len(refused) > 0 && !msg.IsDelivered() && len(refused) < len(s.cfg.To)+len(s.cfg.Cc) {
		// Some recipients were refused for good (a mailbox gone) and the
		// server reset the transaction: the others get the mail, the same
		// mail, without them, and the log says who was left out.
		if rest, merr := s.mime(m, refused); merr == nil && len(s.cfg.To) > countIn(s.cfg.To, refused) {
			first := s.secrets.String(err.Error())
			if s.cfg.Limiter != nil {
				if werr := s.cfg.Limiter.Wait(ctx); werr != nil {
					return notify.WaitResult(werr), fmt.Errorf("%s: %s; waiting for the server's pace to send to the others: %w", what, first, werr)
				}
			}
			if ferr := s.cfg.Fence.Check(); ferr != nil {
				return notify.Result{Retry: true}, fmt.Errorf("%s: %s; not sent to the others: %w", what, first, ferr)
			}
			err = s.session(ctx, func(ctx context.Context, c *gomail.Client) error {
				return c.DialAndSendWithContext(ctx, rest)
			})
			if err == nil {
				s.cfg.Logger.Warn("recipients refused for good were left out; the others got the mail",
					logArgs("left_out", strings.Join(slices.Sorted(maps.Keys(refused)), ", "), "answer", first)...)
			}
			msg = rest
		}
	}
	switch {
	case err != nil && msg.IsDelivered():
		// The server took the mail; only QUIT or RSET after it failed. A
		// retry would send it twice.
		s.cfg.Logger.Debug("email accepted, the session then failed", logArgs("error", s.secrets.String(err.Error()))...)
	case err != nil:
		retry, text := s.classify(err)
		return notify.Result{Retry: retry}, fmt.Errorf("%s: %s", what, text)
	}
	s.cfg.Logger.Debug("email accepted", logArgs("message_id", m.ID, "answer", msg.ServerResponse())...)
	return notify.Result{}, nil
}

// Probe connects to the server, says EHLO, upgrades with STARTTLS and
// authenticates as the sink does, then QUITs without sending anything. It
// returns what the server called itself and how the session went.
func (s *Sink) Probe(ctx context.Context) (string, error) {
	var line string
	err := s.session(ctx, func(ctx context.Context, c *gomail.Client) error {
		sc, err := c.DialToSMTPClientWithContext(ctx)
		if err != nil {
			return err
		}
		steps := []string{"EHLO " + strconv.Quote(sinktype.PlainLine(sc.HelloResponse()))}
		if st, err := sc.GetTLSConnectionState(); err == nil && st.HandshakeComplete {
			mode := "STARTTLS"
			if s.cfg.TLS == ImplicitTLS {
				mode = "implicit TLS"
			}
			steps = append(steps, mode+" "+tls.VersionName(st.Version)+", certificate verified")
		} else {
			steps = append(steps, "no TLS (tls: none)")
		}
		if s.cfg.Username != "" {
			steps = append(steps, "AUTH as $"+s.cfg.UsernameEnv+" accepted")
		}
		line = s.cfg.Addr + ": " + strings.Join(steps, ", ") + "; QUIT, nothing was sent"
		return c.CloseWithSMTPClient(sc)
	})
	if err != nil {
		_, text := s.classify(err)
		return "", s.secrets.Error(fmt.Errorf("email sink %q: %s: %s", s.cfg.Name, s.cfg.Addr, text))
	}
	return line, nil
}

// parent returns the Message-ID an end or an invalid replies to: the
// start's from memory, or the one its start had or would have had.
func (s *Sink) parent(ev *event.Event, memory map[string]string) string {
	if ev.Data.Transition == event.Start {
		return ""
	}
	if id := memory[MemoryMessageID]; validID(id) {
		return id
	}
	return s.composer.messageID(ev.Data.OriginID, event.Start)
}

// mime returns m as go-mail writes it, to every recipient but those of
// skip (lower-case addresses).
func (s *Sink) mime(m message, skip map[string]bool) (*gomail.Msg, error) {
	msg := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	msg.FromMailAddress(s.cfg.From)
	msg.ToMailAddress(without(s.cfg.To, skip)...)
	if cc := without(s.cfg.Cc, skip); len(cc) > 0 {
		msg.CcMailAddress(cc...)
	}
	msg.Subject(m.Subject)
	msg.SetMessageIDWithValue(strings.TrimSuffix(strings.TrimPrefix(m.ID, "<"), ">"))
	msg.SetDateWithValue(m.Date)
	if m.Parent != "" {
		msg.SetGenHeader(gomail.HeaderInReplyTo, m.Parent)
		msg.SetGenHeader(gomail.HeaderReferences, m.Parent)
	}
	// RFC 3834: automatic responders must not answer it.
	msg.SetGenHeader(gomail.Header("Auto-Submitted"), "auto-generated")
	msg.SetUserAgent("relay")
	msg.SetBodyString(gomail.TypeTextPlain, m.Plain)
	msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	if _, err := msg.GetRecipients(); err != nil {
		return nil, err
	}
	return msg, nil
}

// session runs f with a client of the server. Every connection the client
// opens is closed when f returns or ctx ends: go-mail leaves a connection
// open when the greeting, EHLO, STARTTLS or AUTH fails.
func (s *Sink) session(ctx context.Context, f func(context.Context, *gomail.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, 3*s.cfg.Timeout)
	defer cancel()
	d := &dialer{implicit: s.cfg.TLS == ImplicitTLS, tls: s.tlsConfig(), fence: s.cfg.Fence}
	defer d.closeAll()
	stop := context.AfterFunc(ctx, d.closeAll)
	defer stop()
	opts := []gomail.Option{
		gomail.WithPort(s.port), gomail.WithTimeout(s.cfg.Timeout), gomail.WithTLSConfig(d.tls),
		gomail.WithDialContextFunc(d.dial), gomail.WithoutNoop(),
	}
	switch s.cfg.TLS {
	case STARTTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	case ImplicitTLS:
		opts = append(opts, gomail.WithSSL())
	case NoTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	}
	if s.cfg.Username != "" {
		opts = append(opts, gomail.WithUsername(s.cfg.Username), gomail.WithPassword(s.cfg.Password),
			gomail.WithOpportunisticSMTPAuth(gomail.SMTPAuthPlain, gomail.SMTPAuthLogin,
				gomail.SMTPAuthSCRAMSHA256PLUS, gomail.SMTPAuthSCRAMSHA256))
	}
	c, err := gomail.NewClient(s.host, opts...)
	if err != nil {
		return err
	}
	return f(ctx, c)
}

func (s *Sink) tlsConfig() *tls.Config {
	return &tls.Config{ServerName: s.host, RootCAs: s.cfg.RootCAs, MinVersion: tls.VersionTLS12}
}

// dialer opens the connections of one session and closes them all at its
// end. With implicit TLS it makes the TLS connection itself, as go-mail does
// not when it is given a dial function, over the fenced socket. It asks the
// fence before it dials, and its connections ask before each write (TLS
// records included; notify.FencedDial): a session that passed the sink's
// check and then waited (a slow dial, the greeting, a pause of the process
// past its lease) sends no more once the fence refuses, and a mail cut
// short before the end of its DATA is not taken.
type dialer struct {
	implicit bool
	tls      *tls.Config
	fence    notify.Fence
	mu       sync.Mutex
	conns    []net.Conn
	closed   bool
}

func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := notify.FencedDial(d.fence, (&net.Dialer{}).DialContext)(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	// TLS over the fenced socket: go-mail must still see a *tls.Conn to
	// know the session is encrypted (AUTH PLAIN, LOGIN).
	if d.implicit {
		tc := tls.Client(conn, d.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		conn.Close()
		return nil, context.Canceled
	}
	d.conns = append(d.conns, conn)
	return conn, nil
}

func (d *dialer) closeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for _, c := range d.conns {
		c.Close()
	}
	d.conns = nil
}

// classify says whether a failed session is worth retrying, and words it
// with what to fix.
func (s *Sink) classify(err error) (retry bool, text string) {
	var se *gomail.SendError
	if errors.As(err, &se) {
		return s.classifySend(se)
	}
	var te *textproto.Error
	if errors.As(err, &te) {
		answer := strconv.Itoa(te.Code) + " " + sinktype.PlainLine(te.Msg)
		auth := strings.Contains(err.Error(), "SMTP AUTH failed")
		switch {
		case te.Code >= 400 && te.Code < 500:
			return true, "the server answered " + answer + " (temporary), will retry"
		case auth:
			return false, fmt.Sprintf("AUTH refused with %s: check the user in %s and the password in %s", answer, s.cfg.UsernameEnv, s.cfg.PasswordEnv)
		case te.Code == 530 || te.Code == 538:
			return false, "the server answered " + answer + ": it wants TLS or AUTH first: check tls, username_env and password_env"
		}
		return false, "the server answered " + answer
	}
	if msg, ok := tlsProblem(err); ok {
		return false, msg
	}
	switch {
	case errors.Is(err, gomail.ErrNoSupportedAuthDiscovered), strings.Contains(err.Error(), "does not support SMTP AUTH"),
		errors.Is(err, gomail.ErrPlainAuthNotSupported), errors.Is(err, gomail.ErrLoginAuthNotSupported):
		return false, fmt.Sprintf("the server offers no AUTH mechanism relay speaks (PLAIN, LOGIN, SCRAM-SHA-256): check smtp, or leave out %s and %s if it needs none", s.cfg.UsernameEnv, s.cfg.PasswordEnv)
	case strings.Contains(err.Error(), "does not support STARTTLS"):
		return false, "the server does not offer STARTTLS: set tls: tls if it speaks TLS from the start (port 465), or tls: none for a relay that takes mail in clear"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return true, "timed out, will retry"
	}
	return true, "cannot talk to the server: " + sinktype.PlainLine(strings.TrimPrefix(err.Error(), "dial failed: ")) + ", will retry"
}

func (s *Sink) classifySend(se *gomail.SendError) (bool, string) {
	code := se.ErrorCode()
	answer := sendAnswer(se)
	if code == 0 {
		switch se.Reason {
		case gomail.ErrGetSender, gomail.ErrGetRcpts, gomail.ErrNoUnencoded:
			return false, answer
		}
		// No reply code: the connection failed mid-session.
		return true, "the session broke: " + answer + ", will retry"
	}
	// go-mail keeps whether the last refused recipient was refused for now;
	// one refused for good makes the mail fail for good, whatever the order.
	if se.IsTemp() && !(se.Reason == gomail.ErrSMTPRcptTo && permanentReply.MatchString(se.Error())) {
		return true, "the server answered " + answer + " (temporary), will retry"
	}
	switch se.Reason {
	case gomail.ErrSMTPMailFrom:
		return false, fmt.Sprintf("the server refused the sender %s: %s: check from, and that the account in %s may send as it",
			s.cfg.From.Address, answer, s.cfg.UsernameEnv)
	case gomail.ErrSMTPRcptTo:
		return false, "the server refused a recipient: " + answer + ": check to and cc"
	case gomail.ErrSMTPData, gomail.ErrSMTPDataClose:
		return false, "the server refused the message: " + answer
	}
	return false, "the server answered " + answer
}

// refusedForGood returns the recipients of a failed RCPT step when every
// one of them was refused for good (5xx), as lower-case addresses; nil
// otherwise, and when some refusal is temporary: then the whole mail is
// retried.
func refusedForGood(err error) map[string]bool {
	se, ok := errors.AsType[*gomail.SendError](err)
	if !ok || se.Reason != gomail.ErrSMTPRcptTo {
		return nil
	}
	text := se.Error()
	if !permanentReply.MatchString(text) || temporaryReply.MatchString(text) {
		return nil
	}
	_, list, ok := strings.Cut(text, ", affected recipient(s): ")
	if !ok {
		return nil
	}
	list, _, _ = strings.Cut(list, ", affected message ID: ")
	out := map[string]bool{}
	for a := range strings.SplitSeq(list, ", ") {
		if a = strings.ToLower(strings.Trim(strings.TrimSpace(a), "<>")); a != "" {
			out[a] = true
		}
	}
	return out
}

// without returns the addresses not in skip.
func without(addrs []*mail.Address, skip map[string]bool) []*mail.Address {
	var out []*mail.Address
	for _, a := range addrs {
		if !skip[strings.ToLower(a.Address)] {
			out = append(out, a)
		}
	}
	return out
}

// countIn counts the addresses in skip.
func countIn(addrs []*mail.Address, skip map[string]bool) int {
	return len(addrs) - len(without(addrs, skip))
}

// temporaryReply finds a 4xx reply among those a SendError lists.
var temporaryReply = regexp.MustCompile(`(?:: |, )4\d\d `)

// permanentReply finds a 5xx reply among those a SendError lists.
var permanentReply = regexp.MustCompile(`(?:: |, )5\d\d `)

// sendAnswer is what a SendError says, without go-mail's words for the
// step and the Message-ID, which the error names already: `550 "5.1.1 ..."
// to <ops@example.com>` for a refused recipient.
func sendAnswer(se *gomail.SendError) string {
	text := strings.TrimPrefix(se.Error(), se.Reason.String()+": ")
	if i := strings.LastIndex(text, ", affected message ID: "); i >= 0 {
		text = text[:i]
	}
	text = strings.Replace(text, ", affected recipient(s): ", " to ", 1)
	return sinktype.PlainLine(text)
}

// tlsProblem words a TLS failure that no retry fixes.
func tlsProblem(err error) (string, bool) {
	var (
		verr *tls.CertificateVerificationError
		uerr x509.UnknownAuthorityError
		herr x509.HostnameError
		cerr x509.CertificateInvalidError
		rerr tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &verr), errors.As(err, &uerr), errors.As(err, &herr), errors.As(err, &cerr):
		return "the server's certificate does not verify (" + sinktype.PlainLine(strings.TrimPrefix(err.Error(), "dial failed: ")) + "): set ca_file to the authority that signed it, or fix the host in smtp", true
	case errors.As(err, &rerr):
		return "the server does not speak TLS there: use tls: starttls for a port that starts in clear (587, 25), tls: tls for 465", true
	}
	return "", false
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
