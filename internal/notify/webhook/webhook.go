// Package webhook is the webhook sink type: it POSTs each event as a
// structured-mode CloudEvent, signed by the Standard Webhooks scheme when a
// secret is set.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/redact"
)

// Standard Webhooks headers (standardwebhooks.com, v1).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// ContentTypeCloudEvents is the content type of a structured-mode
// CloudEvent, which the webhook sink posts.
const ContentTypeCloudEvents = "application/cloudevents+json"

// Config configures a webhook sink.
type Config struct {
	// Name is the sink's name from the rules file.
	Name string
	// URL receives the POSTs.
	URL string
	// Headers are added to every request. They may hold credentials, so
	// their values never appear in errors or logs. They cannot replace
	// Content-Type or the Standard Webhooks headers.
	Headers map[string]string
	// Secret, when set, signs every request. A secret written
	// "whsec_<base64>" is the base64 of the key; any other string is the key.
	// It never appears in errors or logs.
	Secret string
	// Timeout bounds one request (default 10s).
	Timeout time.Duration
	// Concurrency is the most requests SendAll has in flight at once, from
	// 1 (one after the other) to MaxConcurrency (default
	// DefaultConcurrency).
	Concurrency int
	// HTTPClient makes the requests (default a new client). The sink uses
	// a copy that does not follow redirects; when it has no transport of its
	// own (or the default one), the copy gets one that keeps Concurrency
	// connections open to the receiver between runs.
	HTTPClient *http.Client
	// Clock gives the signature's timestamp and reads Retry-After dates
	// (default the real clock).
	Clock clock.Clock
}

// DefaultConcurrency is how many requests a webhook sink has in flight at
// once when the rules do not say.
const DefaultConcurrency = 8

// MaxConcurrency bounds the concurrency option: more requests in flight
// than this only queue at the receiver, and each holds an event unconfirmed.
const MaxConcurrency = 64

// Sink POSTs the exact event bytes as a structured-mode CloudEvent,
// signed by the Standard Webhooks scheme when a secret is set: webhook-id is
// the event id (the same on every retry, so the receiver can drop repeats),
// webhook-timestamp the Unix seconds of the attempt, and webhook-signature
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>".
//
// SendAll sends the events of a run of distinct alarms, up to Concurrency
// at once; the Deliverer never hands it an alarm's end in the run of its
// start. Once a request fails in a way worth retrying, the requests of the
// run not yet sent wait for the Deliverer's backoff instead (see
// notify.SendConcurrently).
//
// A 2xx answer is a delivery. 408, 425, 429, 5xx and network failures are
// retried, after Retry-After when the receiver sends one. Any other answer
// dead-letters the event at once. That includes a 3xx: redirects are not
// followed, since re-posting a signed event to wherever a redirect points
// would hand it to an address nobody configured; a redirect means url is
// out of date, which no retry can fix.
type Sink struct {
	cfg    Config
	key    []byte
	client *http.Client
	// owned says the client's transport is the sink's own copy, closed
	// with it.
	owned  bool
	target string // the URL as Shown: scheme and host, for errors
	// secrets are the signing secret, the header values and the URL's
	// credentials, cleaned from every error Send returns: a receiver may
	// echo the request in its answer.
	secrets *redact.Set
}

// NewWebhook returns a webhook sink.
func New(cfg Config) (*Sink, error) {
	if cfg.Name == "" {
		return nil, errors.New("webhook sink: no name")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("webhook sink %q: url is not an absolute http(s) URL", cfg.Name)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("webhook sink %q: timeout %s is negative", cfg.Name, cfg.Timeout)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Concurrency < 1 || cfg.Concurrency > MaxConcurrency {
		return nil, fmt.Errorf("webhook sink %q: concurrency %d: want 1 (one request at a time) to %d", cfg.Name, cfg.Concurrency, MaxConcurrency)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	for name := range cfg.Headers {
		switch strings.ToLower(name) {
		case "content-type", HeaderID, HeaderTimestamp, HeaderSignature:
			return nil, fmt.Errorf("webhook sink %q: header %q is set by the sink and cannot be configured", cfg.Name, name)
		}
		if !validHeaderName(name) {
			return nil, fmt.Errorf("webhook sink %q: %q is not a valid header name", cfg.Name, name)
		}
	}
	key, err := Key(cfg.Secret)
	if err != nil {
		return nil, fmt.Errorf("webhook sink %q: %w", cfg.Name, err)
	}
	client := notify.NoRedirects(cfg.HTTPClient)
	transport := notify.KeepIdleConns(client.Transport, cfg.Concurrency)
	owned := transport != client.Transport
	client.Transport = transport
	secrets := redact.New(cfg.Secret, strings.TrimPrefix(cfg.Secret, "whsec_"))
	for _, v := range cfg.Headers {
		secrets.AddHeader(v)
	}
	AddURLSecrets(secrets, cfg.URL)
	return &Sink{
		cfg:     cfg,
		key:     key,
		client:  client,
		owned:   owned,
		target:  Shown(cfg.URL),
		secrets: secrets,
	}, nil
}

// WebhookKey returns the signing key of a secret: the base64-decoded rest of
// a "whsec_" secret, the bytes of any other, nil for none.
func Key(secret string) ([]byte, error) {
	if secret == "" {
		return nil, nil
	}
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		key, err := base64.StdEncoding.DecodeString(rest)
		if err != nil || len(key) == 0 {
			return nil, errors.New("the secret starts with whsec_ but the rest is not base64")
		}
		return key, nil
	}
	return []byte(secret), nil
}

// Name returns the sink's name.
func (s *Sink) Name() string { return s.cfg.Name }

// Close closes the idle connections of the transport the sink made for
// itself (a copy with room for its concurrency); a transport it was given
// is its owner's to close.
func (s *Sink) Close() error {
	if s.owned {
		s.client.CloseIdleConnections()
	}
	return nil
}

// Send makes one POST of the event.
func (s *Sink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	res, err := s.send(ctx, d)
	return res, s.secrets.Error(err)
}

// Concurrency returns how many requests SendAll has in flight at most
// (notify.Concurrent).
func (s *Sink) Concurrency() int { return s.cfg.Concurrency }

// SendAll makes one POST of each event, up to Concurrency at once, and
// returns their outcomes in order.
func (s *Sink) SendAll(ctx context.Context, ds []notify.Delivery) []notify.Outcome {
	out := notify.SendConcurrently(ctx, ds, s.cfg.Concurrency, s.target, s.send)
	for i, o := range out {
		if _, ok := errors.AsType[*notify.NotAttemptedError](o.Err); ok {
			o.Err = fmt.Errorf("webhook sink %q: POST %s %w", s.cfg.Name, ds[i].EventID, o.Err)
		}
		out[i].Err = s.secrets.Error(o.Err)
	}
	return out
}

func (s *Sink) send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, bytes.NewReader(d.Body))
	if err != nil {
		return notify.Result{}, fmt.Errorf("webhook sink %q: cannot build the request to %s: check url", s.cfg.Name, s.target)
	}
	for name, value := range s.cfg.Headers {
		req.Header.Set(name, value)
	}
	req.Header.Set("Content-Type", ContentTypeCloudEvents)
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "relay")
	}
	if s.key != nil {
		ts := s.cfg.Clock.Now().Unix()
		req.Header.Set(HeaderID, d.EventID)
		req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(HeaderSignature, "v1,"+sign(s.key, d.EventID, ts, d.Body))
	}
	if d.TraceParent != "" {
		req.Header.Set(notify.HeaderTraceParent, d.TraceParent)
	}
	_, res, err := notify.Post(s.client, req, s.cfg.Clock.Now, fmt.Sprintf("webhook sink %q: POST %s to %s", s.cfg.Name, d.EventID, s.target), s.secrets)
	return res, err
}

// sign returns the base64 HMAC-SHA256 of "id.timestamp.body".
func sign(key []byte, id string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "."))
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// validHeaderName reports whether name is an HTTP header field name (an
// RFC 9110 token).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r > unicode.MaxASCII || r <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) || r == 0x7f {
			return false
		}
	}
	return true
}

var _ notify.Pipeliner = (*Sink)(nil)
