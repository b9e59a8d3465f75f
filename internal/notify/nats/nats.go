// Package nats is the NATS sink type: it publishes the exact event bytes to
// a subject rendered per event, on core NATS or JetStream, with the event id
// as Nats-Msg-Id. It also makes relay's one connection to NATS (Connect).
package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/redact"
)

// Headers set on every message the NATS sink publishes, besides
// Nats-Msg-Id (the event id).
const (
	// HeaderType carries the event's CloudEvents type, such as
	// energy.alarm.start.
	HeaderType = "Relay-Type"
	// HeaderLevel carries the alarm level, 0 (urgent) to 3 (minor).
	HeaderLevel = "Relay-Level"
)

// DefaultDuplicateWindow is the duplicate window of a stream made by
// create_stream: as long as the default max_age, so that an event replayed
// after a crash within it is stored once.
const DefaultDuplicateWindow = 24 * time.Hour

// Config configures a NATS sink.
type Config struct {
	// Name is the sink's name from the rules file.
	Name string
	// Subject renders the subject of an event, sanitising the values it
	// substitutes (Subject.Render).
	Subject func(ev *event.Event) (string, error)
	// SubjectText is the subject template's text; CreateStream's stream
	// captures its literal leading tokens followed by '>'.
	SubjectText string
	// JetStream makes an event delivered when the stream's PubAck arrives;
	// otherwise when a flush round-trip to the server completes.
	JetStream bool
	// CreateStream, when set, is the name of a stream to create (file
	// storage, DuplicateWindow) if no stream captures the subject yet.
	// It needs JetStream.
	CreateStream string
	// DuplicateWindow is the duplicate window of the stream CreateStream
	// makes (default DefaultDuplicateWindow).
	DuplicateWindow time.Duration
	// Timeout bounds one publish and its ack or flush (default 10s).
	Timeout time.Duration
	// Logger receives a line when the sink creates a stream (default
	// slog.Default()).
	Logger *slog.Logger
}

// Sink publishes the exact event bytes to a subject rendered per event,
// with the event id as Nats-Msg-Id, so that a JetStream stream drops a
// repeat inside its duplicate window.
type Sink struct {
	cfg       Config
	nc        *natsgo.Conn
	js        jetstream.JetStream
	streamSub string

	mu          sync.Mutex
	streamReady bool // create_stream has found or made the stream
}

// NewNATS returns a NATS sink publishing on nc, which it does not own.
func New(nc *natsgo.Conn, cfg Config) (*Sink, error) {
	if cfg.Name == "" {
		return nil, errors.New("nats sink: no name")
	}
	if nc == nil {
		return nil, fmt.Errorf("nats sink %q: no NATS connection (is RELAY_NATS_URL set?)", cfg.Name)
	}
	if cfg.Subject == nil {
		return nil, fmt.Errorf("nats sink %q: no subject renderer", cfg.Name)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.DuplicateWindow == 0 {
		cfg.DuplicateWindow = DefaultDuplicateWindow
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("nats sink %q: timeout %s is negative", cfg.Name, cfg.Timeout)
	}
	if cfg.DuplicateWindow < 100*time.Millisecond {
		return nil, fmt.Errorf("nats sink %q: duplicate window %s is shorter than the server's minimum, 100ms", cfg.Name, cfg.DuplicateWindow)
	}
	s := &Sink{cfg: cfg, nc: nc}
	if cfg.JetStream {
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(cfg.Timeout))
		if err != nil {
			return nil, fmt.Errorf("nats sink %q: %w", cfg.Name, err)
		}
		s.js = js
	}
	if cfg.CreateStream != "" {
		if !cfg.JetStream {
			return nil, fmt.Errorf("nats sink %q: create_stream %q needs jetstream: true", cfg.Name, cfg.CreateStream)
		}
		sub, err := streamSubject(cfg.SubjectText)
		if err != nil {
			return nil, fmt.Errorf("nats sink %q: create_stream %q: %w", cfg.Name, cfg.CreateStream, err)
		}
		s.streamSub = sub
	}
	return s, nil
}

// Name returns the sink's name.
func (s *Sink) Name() string { return s.cfg.Name }

// Send publishes one event. A failure while NATS is unreachable is
// retryable; so is a JetStream publish that no stream answers, since an
// operator may still create the stream. A subject that cannot be rendered or
// is invalid, and a message over the server's size limit, are not.
func (s *Sink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	o := s.SendAll(ctx, []notify.Delivery{d})[0]
	return o.Result, o.Err
}

// SendAll publishes several events at once, in order: with JetStream, every
// publish is in flight before the first PubAck is awaited; otherwise one
// flush round-trip covers them all. Each outcome is classified as by Send.
func (s *Sink) SendAll(ctx context.Context, ds []notify.Delivery) []notify.Outcome {
	out := make([]notify.Outcome, len(ds))
	msgs := make([]*natsgo.Msg, len(ds))
	subj := ""
	for k, d := range ds {
		sub, err := s.cfg.Subject(d.Event)
		if err == nil {
			err = checkSubject(sub)
		}
		if err != nil {
			out[k] = notify.Outcome{Err: fmt.Errorf("nats sink %q: event %s: %w", s.cfg.Name, d.EventID, err)}
			continue
		}
		msg := natsgo.NewMsg(sub)
		msg.Header.Set(natsgo.MsgIdHdr, d.EventID)
		msg.Header.Set(HeaderType, d.Event.Type)
		msg.Header.Set(HeaderLevel, strconv.Itoa(d.Level))
		msg.Data = d.Body
		msgs[k] = msg
		subj = sub
	}
	if subj == "" {
		return out
	}
	fail := func(k int, o notify.Outcome) {
		out[k] = o
		msgs[k] = nil
	}
	if !s.nc.IsConnected() {
		for k, m := range msgs {
			if m != nil {
				fail(k, notify.Outcome{Result: notify.Result{Retry: true}, Err: fmt.Errorf("nats sink %q: publish %s to %s: not connected to NATS (%s)",
					s.cfg.Name, ds[k].EventID, m.Subject, s.nc.Status())})
			}
		}
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if !s.cfg.JetStream {
		for k, m := range msgs {
			if m == nil {
				continue
			}
			if err := s.nc.PublishMsg(m); err != nil {
				fail(k, s.classify(ds[k], m.Subject, "publish", err))
			}
		}
		if err := s.nc.FlushWithContext(ctx); err != nil {
			for k, m := range msgs {
				if m != nil {
					fail(k, s.classify(ds[k], m.Subject, "flush", err))
				}
			}
		}
		return out
	}
	if err := s.ensureStream(ctx, subj); err != nil {
		for k, m := range msgs {
			if m != nil {
				fail(k, notify.Outcome{Result: notify.Result{Retry: true}, Err: fmt.Errorf("nats sink %q: %w", s.cfg.Name, err)})
			}
		}
		return out
	}
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for k, m := range msgs {
		if m == nil {
			continue
		}
		// No retries inside the publish: the Deliverer retries with backoff.
		f, err := s.js.PublishMsgAsync(m, jetstream.WithMsgID(ds[k].EventID), jetstream.WithRetryAttempts(0))
		if err != nil {
			fail(k, s.classify(ds[k], m.Subject, "publish", err))
			continue
		}
		futures[k] = f
	}
	for k, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			fail(k, s.classify(ds[k], msgs[k].Subject, "publish", err))
		case <-ctx.Done():
			fail(k, notify.Outcome{Result: notify.Result{Retry: true}, Err: fmt.Errorf("nats sink %q: publish %s to %s: no PubAck: %w",
				s.cfg.Name, ds[k].EventID, msgs[k].Subject, ctx.Err())})
		}
	}
	return out
}

// classify words a publish error and says whether it is worth retrying.
func (s *Sink) classify(d notify.Delivery, subj, op string, err error) notify.Outcome {
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		s.mu.Lock()
		s.streamReady = false
		s.mu.Unlock()
		return notify.Outcome{Result: notify.Result{Retry: true}, Err: fmt.Errorf("nats sink %q: publish %s to %s: no JetStream stream captures the subject: %w",
			s.cfg.Name, d.EventID, subj, err)}
	}
	retry := !errors.Is(err, natsgo.ErrBadSubject) && !errors.Is(err, natsgo.ErrMaxPayload)
	return notify.Outcome{Result: notify.Result{Retry: retry}, Err: fmt.Errorf("nats sink %q: %s %s to %s: %w", s.cfg.Name, op, d.EventID, subj, err)}
}

// ensureStream creates the create_stream stream unless a stream already
// captures subj. It looks again after a publish found no stream.
func (s *Sink) ensureStream(ctx context.Context, subj string) error {
	if s.cfg.CreateStream == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streamReady {
		return nil
	}
	_, err := s.js.StreamNameBySubject(ctx, subj)
	if err == nil {
		s.streamReady = true
		return nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("create_stream %q: looking for a stream that captures %s: %w", s.cfg.CreateStream, subj, err)
	}
	_, err = s.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:       s.cfg.CreateStream,
		Subjects:   []string{s.streamSub},
		Storage:    jetstream.FileStorage,
		Duplicates: s.cfg.DuplicateWindow,
	})
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("create_stream %q: a stream of that name exists but does not capture %s", s.cfg.CreateStream, subj)
	}
	if err != nil {
		return fmt.Errorf("create_stream %q on %s: %w", s.cfg.CreateStream, s.streamSub, err)
	}
	s.cfg.Logger.Info("created JetStream stream", "sink", s.cfg.Name, "stream", s.cfg.CreateStream,
		"subjects", s.streamSub, "duplicate_window", s.cfg.DuplicateWindow)
	s.streamReady = true
	return nil
}

// ConnOptions say how to reach and authenticate to NATS. Secrets in them
// never appear in errors or logs.
type ConnOptions struct {
	// URL is the server URL, or several separated by commas.
	URL string
	// Creds is the path of a credentials file (user JWT and nkey seed).
	Creds string
	// NKeySeed is a user nkey seed ("SU...") or the path of a file holding one.
	NKeySeed string
	// Token is an authentication token.
	Token string
	// User and Password authenticate by user name and password.
	User, Password string
	// CA is the path of a PEM file of root CAs to trust.
	CA string
	// Cert and Key are the paths of a PEM client certificate and its key.
	Cert, Key string
	// Name is the connection name shown by the server (default "relay").
	Name string
	// ReconnectWait is the pause between reconnect attempts (default 2s).
	ReconnectWait time.Duration
	// Logger receives connection, disconnection and reconnection lines
	// (default slog.Default()).
	Logger *slog.Logger
}

// Connect connects to NATS with every authentication option o sets. The
// connection reconnects forever, even after an authentication error (so that
// credentials fixed on the server are picked up); while it is down, NATS
// sinks publish nothing and fail retryably, and the outbox keeps the events. If the server cannot be reached at once, Connect waits for the
// first connection until ctx is done, then returns the connection anyway,
// still trying in the background (check IsConnected). It fails only for
// options that cannot work: a missing file, a bad seed, conflicting methods.
func Connect(ctx context.Context, o ConnOptions) (*natsgo.Conn, error) {
	if strings.TrimSpace(o.URL) == "" {
		return nil, errors.New("nats: no server URL")
	}
	where := redactURLs(o.URL)
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	if o.Name == "" {
		o.Name = "relay"
	}
	if o.ReconnectWait == 0 {
		o.ReconnectWait = 2 * time.Second
	}
	methods := 0
	for _, set := range []bool{o.Creds != "", o.NKeySeed != "", o.Token != "", o.User != "" || o.Password != ""} {
		if set {
			methods++
		}
	}
	if methods > 1 {
		return nil, errors.New("nats: set only one of credentials file, nkey seed, token, or user and password")
	}
	if (o.User == "") != (o.Password == "") {
		return nil, errors.New("nats: user and password must be set together")
	}
	if (o.Cert == "") != (o.Key == "") {
		return nil, errors.New("nats: client certificate and key must be set together")
	}

	repeats := &errorRepeats{}
	connected := make(chan struct{}, 1)
	signal := func() {
		repeats.reset()
		select {
		case connected <- struct{}{}:
		default:
		}
	}
	opts := []natsgo.Option{
		natsgo.Name(o.Name),
		natsgo.RetryOnFailedConnect(true),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(o.ReconnectWait),
		natsgo.ConnectHandler(func(nc *natsgo.Conn) {
			log.Info("nats connected", "url", nc.ConnectedUrlRedacted())
			signal()
		}),
		natsgo.ReconnectHandler(func(nc *natsgo.Conn) {
			log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
			signal()
		}),
		natsgo.DisconnectErrHandler(func(_ *natsgo.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "url", where, "error", err)
			}
		}),
		natsgo.ErrorHandler(func(_ *natsgo.Conn, _ *natsgo.Subscription, err error) {
			if repeats.seen(err) {
				return
			}
			log.Warn("nats error", "url", where, "error", err)
		}),
		natsgo.ClosedHandler(func(nc *natsgo.Conn) {
			log.Info("nats connection closed", "url", where, "last_error", nc.LastError())
		}),
		natsgo.IgnoreAuthErrorAbort(),
	}
	switch {
	case o.Creds != "":
		opts = append(opts, natsgo.UserCredentials(o.Creds))
	case o.NKeySeed != "":
		opt, err := nkeyOption(o.NKeySeed)
		if err != nil {
			return nil, err
		}
		opts = append(opts, opt)
	case o.Token != "":
		opts = append(opts, natsgo.Token(o.Token))
	case o.User != "":
		opts = append(opts, natsgo.UserInfo(o.User, o.Password))
	}
	if o.CA != "" {
		opts = append(opts, natsgo.RootCAs(o.CA))
	}
	if o.Cert != "" {
		opts = append(opts, natsgo.ClientCert(o.Cert, o.Key))
	}
	nc, err := natsgo.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats: connect to %s: %s", where, redact.New(o.Token, o.Password, o.NKeySeed).String(err.Error()))
	}
	if nc.IsConnected() {
		return nc, nil
	}
	select {
	case <-connected:
	case <-ctx.Done():
		if !nc.IsConnected() {
			log.Warn("nats not connected yet, retrying in the background", "url", where, "error", nc.LastError())
		}
	}
	return nc, nil
}

// errorRepeats keeps an asynchronous NATS error that repeats on every
// reconnect attempt (such as an authorization violation) to one log line
// until the connection is up again.
type errorRepeats struct {
	mu   sync.Mutex
	last string
}

// seen reports whether err is the error logged last.
func (r *errorRepeats) seen(err error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	msg := fmt.Sprint(err)
	if msg == r.last {
		return true
	}
	r.last = msg
	return false
}

func (r *errorRepeats) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = ""
}

// nkeyOption signs with a seed given inline ("SU...") or read from a file.
func nkeyOption(seed string) (natsgo.Option, error) {
	if s := strings.TrimSpace(seed); strings.HasPrefix(s, "SU") {
		kp, err := nkeys.FromSeed([]byte(s))
		if err != nil {
			return nil, errors.New("nats: the nkey seed is not a valid user seed")
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, errors.New("nats: the nkey seed is not a valid user seed")
		}
		return natsgo.Nkey(pub, kp.Sign), nil
	}
	s := strings.TrimSpace(seed)
	if strings.HasPrefix(s, "S") || strings.ContainsAny(s, " \n\t") || !strings.Contains(s, "/") {
		// Not a path: most likely a seed of another kind, or a whole seed
		// file pasted in. Never echo it.
		return nil, errors.New("nats: RELAY_NATS_NKEY_SEED is neither a user seed (SU...) nor the path of a seed file (written with a /, such as ./user.nk)")
	}
	opt, err := natsgo.NkeyOptionFromSeed(s)
	if err != nil {
		return nil, fmt.Errorf("nats: nkey seed file %s: %w", s, err)
	}
	return opt, nil
}

// redactURLs returns a comma-separated list of URLs with any password
// replaced, for errors and logs.
func redactURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if u, err := url.Parse(p); err == nil && u.User != nil {
			u.User = url.User("redacted")
			p = u.String()
		} else if err != nil && strings.Contains(p, "@") {
			p = "(unparsable URL)"
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}
