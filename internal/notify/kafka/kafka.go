// Package kafka is the Kafka sink type: it produces each event to a Kafka
// topic, keyed by the alarm's origin id, the exact event bytes as the value
// (CloudEvents' Kafka binding in structured mode, with the attributes also
// as ce_ headers), on franz-go's idempotent producer waiting for every
// in-sync replica. An event is delivered once the partition's leader
// acknowledged it.
package kafka

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/redact"
)

// ContentType is the content-type header of every record: the CloudEvents
// JSON event format, which makes a CloudEvents consumer read the value as
// the whole event (the binding's structured mode).
const ContentType = "application/cloudevents+json"

// The SASL mechanisms a sink may authenticate with, as the rules name them.
const (
	SASLPlain       = "plain"
	SASLSCRAMSHA256 = "scram-sha-256"
	SASLSCRAMSHA512 = "scram-sha-512"
)

// Config configures a Kafka sink.
type Config struct {
	// Name is the sink's name from the rules file.
	Name string
	// Brokers are the seed brokers, host:port each; the client learns the
	// rest of the cluster from them.
	Brokers []string
	// Topic renders an event's topic.
	Topic *Topic
	// ClientID is the client.id the brokers see (quotas, logs).
	ClientID string
	// TLS connects over TLS 1.2 or later; CA, when set, is the PEM of the
	// only authorities trusted for the brokers' certificates.
	TLS bool
	CA  []byte
	// SASL is the mechanism (SASLPlain, SASLSCRAMSHA256, SASLSCRAMSHA512),
	// empty for none; Username and Password are its credentials.
	SASL               string
	Username, Password string
	// Timeout bounds one produce and its acknowledgement, and the wait for
	// a connection (default 10s).
	Timeout time.Duration
	// Logger receives the client's replacement (default slog.Default()).
	Logger *slog.Logger
	// Fence is asked immediately before each record is handed to the
	// client, after the wait for a broker: a replica that lost the tenant's
	// lease meanwhile sends nothing (nil never refuses).
	Fence notify.Fence
}

// Sink produces events to a Kafka topic.
type Sink struct {
	cfg      Config
	key      string
	settings [32]byte
	secrets  *redact.Set

	mu     sync.Mutex
	client *client // nil until the first delivery when the sink's settings replace a running client's
	closed atomic.Bool
}

// New returns a Kafka sink. It connects on its first delivery, not before:
// a replica that does not serve the tenant never connects. A sink of the
// same brokers, client id and settings as a running one (its predecessor,
// before a reload closes it) shares its client; one with other settings
// replaces it at its first delivery, so that rules a reload refuses leave
// the running client alone. Close lets the client go.
func New(cfg Config) (*Sink, error) {
	switch {
	case cfg.Name == "":
		return nil, errors.New("kafka sink: no name")
	case len(cfg.Brokers) == 0:
		return nil, fmt.Errorf("kafka sink %q: no brokers", cfg.Name)
	case cfg.Topic == nil:
		return nil, fmt.Errorf("kafka sink %q: no topic", cfg.Name)
	case cfg.ClientID == "":
		return nil, fmt.Errorf("kafka sink %q: no client id", cfg.Name)
	case cfg.SASL != "" && cfg.SASL != SASLPlain && cfg.SASL != SASLSCRAMSHA256 && cfg.SASL != SASLSCRAMSHA512:
		return nil, fmt.Errorf("kafka sink %q: SASL mechanism %q: want %s, %s or %s", cfg.Name, cfg.SASL, SASLPlain, SASLSCRAMSHA256, SASLSCRAMSHA512)
	case len(cfg.CA) > 0 && !cfg.TLS:
		return nil, fmt.Errorf("kafka sink %q: a CA without TLS", cfg.Name)
	}
	if len(cfg.CA) > 0 && !x509.NewCertPool().AppendCertsFromPEM(cfg.CA) {
		return nil, fmt.Errorf("kafka sink %q: the CA holds no PEM certificate", cfg.Name)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Sink{cfg: cfg, key: strings.Join(cfg.Brokers, ",") + "\x00" + cfg.ClientID, settings: settingsOf(cfg), secrets: redact.New(cfg.Password)}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s, nil
}

// settingsOf digests what a client is made of besides its brokers and id.
func settingsOf(cfg Config) [32]byte {
	return sha256.Sum256([]byte(strings.Join([]string{strconv.FormatBool(cfg.TLS), string(cfg.CA), cfg.SASL,
		cfg.Username, cfg.Password, cfg.Timeout.String()}, "\x00")))
}

// open registers the sink among the open sinks of its brokers and client
// id, and takes the running client if its settings are the sink's. A sink
// of another name with the same brokers and client id and other settings
// is refused: the two would replace each other's client at every delivery.
func (s *Sink) open() error {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	for _, o := range open[s.key] {
		if o.cfg.Name != s.cfg.Name && o.settings != s.settings {
			return fmt.Errorf("kafka sink %q: sink %q produces to the same brokers with the same client_id %q and other tls, ca_file, sasl, credentials or timeout: "+
				"give each sink a client_id of its own", s.cfg.Name, o.cfg.Name, s.cfg.ClientID)
		}
	}
	open[s.key] = append(open[s.key], s)
	if c := clients[s.key]; c != nil && c.settings == s.settings {
		c.refs++
		s.client = c
	}
	return nil
}

// clientOf returns the sink's client, making or replacing it at the first
// delivery.
func (s *Sink) clientOf() *client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == nil {
		s.client = clientFor(s.cfg, s.key, s.settings)
	}
	return s.client
}

// Name returns the sink's name.
func (s *Sink) Name() string { return s.cfg.Name }

// Close lets the sink's client go: when no other sink of the process uses
// it (a reload's successor takes it over before its predecessor is
// closed), it is closed, with its connections. The sink sends nothing
// after.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	clientsMu.Lock()
	defer clientsMu.Unlock()
	open[s.key] = slices.DeleteFunc(open[s.key], func(o *Sink) bool { return o == s })
	if len(open[s.key]) == 0 {
		delete(open, s.key)
	}
	if s.client != nil {
		s.client.release()
	}
	return nil
}

// CarriesAcks reports that the topic gets the ack and unack events of the
// alarms whose start it got, keyed by the alarm like its other events: a
// consumer sees who took the alarm, in order between its start and end.
func (s *Sink) CarriesAcks() bool { return true }

// Headers returns the headers of ev's record: content-type, which names
// the value's format (the whole event as JSON: CloudEvents' structured
// mode); the event's attributes but data and datacontenttype as the
// binding's ce_ headers, which a structured-mode record may carry too, so
// that a consumer can route or filter on them without reading the value;
// level, the alarm level; and traceparent, the W3C trace context of the
// delivery attempt, when tracing gives one.
func Headers(ev *event.Event, traceParent string) []kgo.RecordHeader {
	h := []kgo.RecordHeader{
		{Key: "content-type", Value: []byte(ContentType)},
		{Key: "ce_specversion", Value: []byte(ev.SpecVersion)},
		{Key: "ce_id", Value: []byte(ev.ID)},
		{Key: "ce_source", Value: []byte(ev.Source)},
		{Key: "ce_type", Value: []byte(ev.Type)},
	}
	for _, a := range []struct{ key, value string }{
		{"ce_subject", ev.Subject}, {"ce_time", ev.Time}, {"ce_traceparent", ev.TraceParent}, {"ce_tracestate", ev.TraceState},
	} {
		if a.value != "" {
			h = append(h, kgo.RecordHeader{Key: a.key, Value: []byte(a.value)})
		}
	}
	h = append(h, kgo.RecordHeader{Key: "level", Value: []byte(strconv.Itoa(ev.Data.Level))})
	if traceParent != "" {
		h = append(h, kgo.RecordHeader{Key: notify.HeaderTraceParent, Value: []byte(traceParent)})
	}
	return h
}

// client is one franz-go client, shared by every sink of the process with
// the same brokers and client id: a sink rebuilt by a reload of the rules
// takes over its predecessor's, with its producer id, its connections and
// the metadata it learned. Changed settings (TLS, the CA, SASL, the
// credentials, the timeout) replace it: the old one is closed, and its
// sink's sends fail and are retried.
type client struct {
	key      string
	settings [32]byte
	refs     int // sinks using it, under clientsMu

	once sync.Once
	cl   *kgo.Client
	err  error

	mu      sync.Mutex
	closed  error
	healthy bool // a produce or ping succeeded since the last failure
}

var (
	// clientsMu guards clients, open and client.refs.
	clientsMu sync.Mutex
	clients   = map[string]*client{}
	// open are the sinks not closed, by brokers and client id.
	open = map[string][]*Sink{}
)

// clientFor returns the client of key with settings, replacing one with
// other settings.
func clientFor(cfg Config, key string, settings [32]byte) *client {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	c, ok := clients[key]
	if ok && c.settings == settings {
		c.refs++
		return c
	}
	if ok {
		delete(clients, key)
		c.close(errors.New("the client was replaced: the sink's settings changed"))
		cfg.Logger.Info("kafka: the sink's settings changed; a new client replaces the old", "sink", cfg.Name, "client_id", cfg.ClientID)
	}
	c = &client{key: key, settings: settings, refs: 1}
	clients[key] = c
	return c
}

// release is a sink's Close: the last sink using c closes it. Under
// clientsMu.
func (c *client) release() {
	if c.refs--; c.refs > 0 {
		return
	}
	if clients[c.key] == c {
		delete(clients, c.key)
	}
	c.close(errors.New("the sink was closed: the rules no longer define it, or this replica no longer serves its tenant"))
}

// close closes the client, if it was started, and keeps it from starting:
// its records not yet acknowledged fail, and so do later sends.
func (c *client) close(why error) {
	c.once.Do(func() {})
	c.mu.Lock()
	first := c.closed == nil
	if first {
		c.closed = why
	}
	c.mu.Unlock()
	if first && c.cl != nil {
		c.cl.Close()
	}
}

// get returns the client, made at the first call.
func (c *client) get(cfg Config) (*kgo.Client, error) {
	c.once.Do(func() { c.cl, c.err = kgo.NewClient(clientOptions(cfg)...) })
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed != nil {
		return nil, c.closed
	}
	if c.err != nil {
		return nil, c.err
	}
	return c.cl, nil
}

func (c *client) isHealthy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.healthy
}

func (c *client) setHealthy(ok bool) {
	c.mu.Lock()
	c.healthy = ok
	c.mu.Unlock()
}

// clientOptions are the client's options for cfg. Every producer choice
// that the sink's promise rests on is written out, defaults included.
func clientOptions(cfg Config) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.DialTimeout(cfg.Timeout),
		// Every in-sync replica has the record before the leader
		// acknowledges it; the idempotent producer (franz-go's default,
		// never disabled here) lets the client resend a batch whose
		// acknowledgement was lost without the broker storing it twice.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// One record at a time, waited for: nothing to batch by lingering.
		kgo.ProducerLinger(0),
		// Events are small; every consumer reads an uncompressed batch.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		// A record not acknowledged within the timeout is failed, also
		// when its batch was sent: by default the idempotent producer
		// keeps resending it after Send returned, so that a replica
		// fenced meanwhile, or one whose dead letter it became, could
		// still store it after the alarm's later events. A retry may then
		// store it twice (the ce_id tells them apart); order holds.
		kgo.AllowIdempotentProduceCancellation(),
		kgo.RecordDeliveryTimeout(cfg.Timeout),
	}
	// Not kgo.AllowAutoTopicCreation: the topic belongs to the operator,
	// and asking for it never creates it, even on a cluster that creates
	// topics on first use.
	if cfg.TLS {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if len(cfg.CA) > 0 {
			tc.RootCAs = x509.NewCertPool()
			tc.RootCAs.AppendCertsFromPEM(cfg.CA)
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if m := mechanism(cfg); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts
}

func mechanism(cfg Config) sasl.Mechanism {
	switch cfg.SASL {
	case SASLPlain:
		return plain.Auth{User: cfg.Username, Pass: cfg.Password}.AsMechanism()
	case SASLSCRAMSHA256:
		return scram.Auth{User: cfg.Username, Pass: cfg.Password}.AsSha256Mechanism()
	case SASLSCRAMSHA512:
		return scram.Auth{User: cfg.Username, Pass: cfg.Password}.AsSha512Mechanism()
	}
	return nil
}

// Send produces one event and waits for its acknowledgement: it is
// delivered once the partition's leader has it from every in-sync
// replica. While no broker can be reached, or the cluster answers with an
// error worth retrying, the delivery is retried; an answer that says the
// record can never be stored (too large, not authorised, an invalid topic,
// refused credentials) is not.
//
// A produce not acknowledged within the timeout is failed in the client
// too (no resend of it after Send returned, when the fence may refuse, or
// another replica delivers the alarm's later events): it may have been
// stored, and the retry then stores the event a second time, which
// consumers drop by ce_id. The client's own retries of a batch whose
// acknowledgement was lost within the timeout (a connection cut) store
// nothing twice.
func (s *Sink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	ev, err := d.Decoded()
	if err != nil {
		return notify.Result{}, fmt.Errorf("kafka sink %q: %w", s.cfg.Name, err)
	}
	topic, err := s.cfg.Topic.Render(ev)
	if err != nil {
		return notify.Result{}, fmt.Errorf("kafka sink %q: %w", s.cfg.Name, err)
	}
	if s.closed.Load() {
		return notify.Result{Retry: true}, fmt.Errorf("kafka sink %q: produce %s: not sent: the sink was closed", s.cfg.Name, d.EventID)
	}
	c := s.clientOf()
	cl, err := c.get(s.cfg)
	if err != nil {
		return notify.Result{Retry: true}, fmt.Errorf("kafka sink %q: produce %s: %w", s.cfg.Name, d.EventID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	// After a failure, or before the first record, a broker answers first,
	// so that the fence is asked when the record can leave at once.
	if !c.isHealthy() {
		if err := cl.Ping(ctx); err != nil {
			return s.failed(c, d, topic, "reach the brokers for", err)
		}
		c.setHealthy(true)
	}
	if err := s.cfg.Fence.Check(); err != nil {
		return notify.Result{Retry: true}, fmt.Errorf("kafka sink %q: produce %s: not sent: %w", s.cfg.Name, d.EventID, err)
	}
	rec := &kgo.Record{Topic: topic, Key: []byte(ev.Data.OriginID), Value: d.Body, Headers: Headers(ev, d.TraceParent)}
	done := make(chan error, 1)
	cl.Produce(ctx, rec, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err = <-done:
	case <-ctx.Done():
		select {
		case err = <-done:
		default:
			err = ctx.Err()
		}
	}
	if err != nil {
		return s.failed(c, d, topic, "produce", err)
	}
	return notify.Result{}, nil
}

// failed words a failure and says whether it is worth retrying.
func (s *Sink) failed(c *client, d notify.Delivery, topic, op string, err error) (notify.Result, error) {
	c.setHealthy(false)
	msg := describe(s.cfg, err)
	if errors.Is(err, context.DeadlineExceeded) {
		msg = fmt.Sprintf("no broker answered within %s", s.cfg.Timeout)
		if op == "produce" {
			msg = fmt.Sprintf("no acknowledgement within %s (the record may still be stored: a retry may store it twice)", s.cfg.Timeout)
		}
	}
	// The password never reaches the client's errors; a broker's own
	// message could still echo what it was sent.
	return notify.Result{Retry: Retriable(err)}, &sendError{
		msg: s.secrets.String(fmt.Sprintf("kafka sink %q: %s %s to topic %s: %s", s.cfg.Name, op, d.EventID, topic, msg)), err: err}
}

// sendError is a failure as the sink words it, with the client's error in
// its chain (errors.Is finds the kerr.Error), not in its text.
type sendError struct {
	msg string
	err error
}

func (e *sendError) Error() string { return e.msg }
func (e *sendError) Unwrap() error { return e.err }

// Retriable says whether a failed produce may succeed when tried again.
// The cluster's answers that say the record can never be stored as it is
// are not: a record or batch over the topic's max.message.bytes, a record
// the broker finds invalid, a topic name the cluster refuses, and a topic
// policy. Every other failure is: brokers that cannot be reached, a leader
// moving, too few in-sync replicas, a topic not (yet) created, a timeout,
// and refused credentials or a missing ACL, as the MQTT sink's are, since
// they are fixed on the cluster or by a reload (a password rotated on the
// brokers before relay's variable), after which the outbox goes on in
// order; max_age and the failing-sink alert bound the wait.
func Retriable(err error) bool {
	for _, permanent := range []*kerr.Error{
		kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord,
		kerr.InvalidTopicException, kerr.PolicyViolation,
	} {
		if errors.Is(err, permanent) {
			return false
		}
	}
	return true
}

// describe says what a failure means for the operator, in the cluster's
// words where it answered.
func describe(cfg Config, err error) string {
	var ke *kerr.Error
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return "the brokers refused the user name or password (SASL_AUTHENTICATION_FAILED): check username_env, password_env and sasl"
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return "the brokers do not offer this SASL mechanism (UNSUPPORTED_SASL_MECHANISM): check sasl"
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return "the user may not write to the topic (TOPIC_AUTHORIZATION_FAILED): grant it WRITE on the topic"
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return "the user may not produce idempotently (CLUSTER_AUTHORIZATION_FAILED): grant it WRITE on the topic (brokers before Kafka 3.0: IDEMPOTENT_WRITE on the cluster)"
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return "the record is larger than the topic takes (max.message.bytes)"
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return "the topic does not exist (UNKNOWN_TOPIC_OR_PARTITION): create it; relay never does"
	case errors.As(err, &ke):
		return "the cluster answered " + ke.Message + ": " + ke.Description
	case cfg.SASL != "" && errors.Is(err, io.EOF):
		return "a broker closed the connection (EOF); at the handshake, some brokers so refuse the user name, the password or the SASL mechanism: check sasl, username_env and password_env"
	}
	return err.Error()
}
