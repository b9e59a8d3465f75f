// Package natsconn makes relay's one connection to NATS, shared by the NATS
// sinks, the replicated state (internal/jsbackend) and the leases of
// replicas (internal/ha): every authentication method of RELAY_NATS_*, a
// connection that reconnects forever, and errors and logs without secrets.
package natsconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/relay-energy/relay/internal/redact"
)

// Options say how to reach and authenticate to NATS. Secrets in them
// never appear in errors or logs.
type Options struct {
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
func Connect(ctx context.Context, o Options) (*natsgo.Conn, error) {
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
