// Package mqtt is the MQTT sink type: it publishes the exact event bytes to
// an MQTT 5 broker (Mosquitto, EMQX, HiveMQ), one topic per event, on a
// connection kept by eclipse paho's autopaho, and optionally keeps each
// ongoing alarm as a retained message.
package mqtt

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
)

// Config configures an MQTT sink.
type Config struct {
	// Name is the sink's name from the rules file.
	Name string
	// URL is the broker, mqtt:// or mqtts://, with its port.
	URL *url.URL
	// Topic renders an event's topic; StateTopic its alarm's retained
	// state topic (with RetainState).
	Topic, StateTopic *Topic
	// QoS is 0 or 1: with 1 an event is delivered once the broker's PUBACK
	// says it took it.
	QoS byte
	// RetainState publishes a start retained on its alarm's state topic
	// and clears it (an empty retained message) at the end.
	RetainState bool
	// ClientID is the client identifier: the same at every connection, so
	// that the broker keeps the session.
	ClientID string
	// RootCAs, when set, are the only authorities trusted for an mqtts
	// broker's certificate.
	RootCAs *x509.CertPool
	// Username and Password are the broker's credentials; empty: none.
	Username, Password string
	// Timeout bounds one publish and its acknowledgement, and the wait for
	// a connection (default 10s).
	Timeout time.Duration
	// Logger receives the connection's ups and downs (default
	// slog.Default()).
	Logger *slog.Logger
	// Fence is asked immediately before each message leaves, after the
	// wait for a connection: a replica that lost the tenant's lease
	// meanwhile sends nothing (nil never refuses).
	Fence notify.Fence
}

// Sink publishes events to an MQTT broker.
type Sink struct {
	cfg  Config
	conn *conn
}

// New returns an MQTT sink. It connects on its first delivery, not before:
// a replica that does not serve the tenant never connects, and its client
// identifier does not take the session from the one that does.
func New(cfg Config) (*Sink, error) {
	switch {
	case cfg.Name == "":
		return nil, errors.New("mqtt sink: no name")
	case cfg.URL == nil:
		return nil, fmt.Errorf("mqtt sink %q: no broker URL", cfg.Name)
	case cfg.Topic == nil || (cfg.RetainState && cfg.StateTopic == nil):
		return nil, fmt.Errorf("mqtt sink %q: no topic", cfg.Name)
	case cfg.QoS > 1:
		return nil, fmt.Errorf("mqtt sink %q: qos %d: want 0 or 1", cfg.Name, cfg.QoS)
	case cfg.ClientID == "":
		return nil, fmt.Errorf("mqtt sink %q: no client identifier", cfg.Name)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Sink{cfg: cfg, conn: connFor(cfg)}, nil
}

// Name returns the sink's name.
func (s *Sink) Name() string { return s.cfg.Name }

// conn is one connection to a broker, shared by every sink of the process
// with the same broker and client identifier: a sink rebuilt by a reload
// of the rules takes over its predecessor's, since two connections with
// one client identifier would take the session from each other at every
// reconnection. Changed credentials replace it: the old one is closed.
type conn struct {
	creds  string
	once   sync.Once
	cm     *autopaho.ConnectionManager
	err    error
	cancel context.CancelFunc

	mu      sync.Mutex
	lastErr error // the last failed connection attempt's, nil once connected
}

var (
	connsMu sync.Mutex
	conns   = map[string]*conn{}
)

func connFor(cfg Config) *conn {
	key := cfg.URL.String() + "\x00" + cfg.ClientID
	creds := cfg.Username + "\x00" + cfg.Password
	connsMu.Lock()
	defer connsMu.Unlock()
	c, ok := conns[key]
	if ok && c.creds == creds {
		return c
	}
	if ok {
		c.close()
	}
	c = &conn{creds: creds}
	conns[key] = c
	return c
}

// close ends the connection, if it was started (a DISCONNECT, waited for
// up to a second, so that the broker has let it go before its successor
// connects), and keeps it from starting.
func (c *conn) close() {
	c.once.Do(func() { c.err = errors.New("the connection was replaced: the credentials changed") })
	if c.cancel == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.cm.Disconnect(ctx)
	c.cancel()
}

// start connects in the background, once, for the life of the process.
func (c *conn) start(cfg Config) {
	c.once.Do(func() {
		cc := autopaho.ClientConfig{
			ServerUrls: []*url.URL{brokerURL(cfg.URL)},
			KeepAlive:  30,
			// No session: a message the broker refuses by dropping the
			// connection would be resent at every reconnection, and the
			// outbox retries what was not acknowledged anyway.
			CleanStartOnInitialConnection: true,
			SessionExpiryInterval:         0,
			ConnectTimeout:                cfg.Timeout,
			ReconnectBackoff:              autopaho.NewExponentialBackoff(500*time.Millisecond, 30*time.Second, time.Second, 2),
			ConnectUsername:               cfg.Username,
			ConnectPassword:               []byte(cfg.Password),
			OnConnectionUp: func(*autopaho.ConnectionManager, *paho.Connack) {
				c.mu.Lock()
				was := c.lastErr
				c.lastErr = nil
				c.mu.Unlock()
				if was != nil {
					cfg.Logger.Info("mqtt: connected to the broker", "sink", cfg.Name, "broker", cfg.URL.Host)
				}
			},
			OnConnectError: func(err error) {
				c.mu.Lock()
				first := c.lastErr == nil
				c.lastErr = err
				c.mu.Unlock()
				if first {
					cfg.Logger.Warn("mqtt: cannot connect to the broker; retrying", "sink", cfg.Name, "broker", cfg.URL.Host, "err", connectError(err))
				}
			},
			ClientConfig: paho.ClientConfig{ClientID: cfg.ClientID},
		}
		if cfg.URL.Scheme == "mqtts" {
			cc.TlsCfg = &tls.Config{RootCAs: cfg.RootCAs, ServerName: cfg.URL.Hostname(), MinVersion: tls.VersionTLS12}
		}
		ctx, cancel := context.WithCancel(context.Background())
		c.cancel = cancel
		c.cm, c.err = autopaho.NewConnection(ctx, cc)
	})
}

// brokerURL is u as autopaho names the schemes: mqtt and tls.
func brokerURL(u *url.URL) *url.URL {
	out := *u
	if out.Scheme == "mqtts" {
		out.Scheme = "tls"
	}
	return &out
}

// connectError says why the broker refused a connection, in its words.
func connectError(err error) string {
	var ce *autopaho.ConnackError
	if errors.As(err, &ce) {
		switch ce.ReasonCode {
		case 0x86:
			return "the broker refused the user name or password (CONNACK 0x86): check username_env and password_env"
		case 0x87:
			// Mosquitto answers a wrong password so too.
			return "the broker refused the user name or password, or does not authorise this client (CONNACK 0x87): check username_env, password_env and the broker's ACL for the user and client_id"
		case 0x85:
			return "the broker refused the client identifier (CONNACK 0x85): set client_id"
		}
		return fmt.Sprintf("the broker refused the connection (CONNACK 0x%02X %s)", ce.ReasonCode, ce.Reason)
	}
	return err.Error()
}

// Send publishes one event, and with RetainState its alarm's state. While
// the broker cannot be reached, or refuses the connection, the delivery is
// retried; a publish the broker refuses for good (not authorised for the
// topic, a topic or payload it does not take) is not.
func (s *Sink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	ev, err := d.Decoded()
	if err != nil {
		return notify.Result{}, fmt.Errorf("mqtt sink %q: %w", s.cfg.Name, err)
	}
	topic, err := s.cfg.Topic.Render(ev)
	if err != nil {
		return notify.Result{}, fmt.Errorf("mqtt sink %q: %w", s.cfg.Name, err)
	}
	s.conn.start(s.cfg)
	if s.conn.err != nil {
		return notify.Result{Retry: true}, fmt.Errorf("mqtt sink %q: %w", s.cfg.Name, s.conn.err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if err := s.conn.cm.AwaitConnection(ctx); err != nil {
		s.conn.mu.Lock()
		why := s.conn.lastErr
		s.conn.mu.Unlock()
		msg := "not connected"
		if why != nil {
			msg = connectError(why)
		}
		return notify.Result{Retry: true}, fmt.Errorf("mqtt sink %q: publish %s to %s: %s", s.cfg.Name, d.EventID, s.cfg.URL.Host, msg)
	}
	if err := s.cfg.Fence.Check(); err != nil {
		return notify.Result{Retry: true}, fmt.Errorf("mqtt sink %q: publish %s: not sent: %w", s.cfg.Name, d.EventID, err)
	}
	props := &paho.PublishProperties{ContentType: "application/cloudevents+json",
		User: paho.UserProperties{{Key: "ce_id", Value: d.EventID}, {Key: "ce_type", Value: ev.Type}, {Key: "level", Value: strconv.Itoa(d.Level)}}}
	if res, err := s.publish(ctx, d, topic, d.Body, false, props); err != nil {
		return res, err
	}
	if !s.cfg.RetainState {
		return notify.Result{}, nil
	}
	state, err := s.cfg.StateTopic.Render(ev)
	if err != nil {
		return notify.Result{}, fmt.Errorf("mqtt sink %q: %w", s.cfg.Name, err)
	}
	if err := s.cfg.Fence.Check(); err != nil {
		return notify.Result{Retry: true}, fmt.Errorf("mqtt sink %q: retained state of %s: not sent: %w", s.cfg.Name, d.EventID, err)
	}
	body := d.Body
	if ev.Data.Transition != event.Start {
		body = nil // an empty retained message clears the alarm's state
	}
	return s.publish(ctx, d, state, body, true, props)
}

// publish sends one message and waits for its PUBACK (QoS 1).
func (s *Sink) publish(ctx context.Context, d notify.Delivery, topic string, body []byte, retain bool, props *paho.PublishProperties) (notify.Result, error) {
	resp, err := s.conn.cm.Publish(ctx, &paho.Publish{Topic: topic, QoS: s.cfg.QoS, Retain: retain, Payload: body, Properties: props})
	if err == nil {
		return notify.Result{}, nil
	}
	what := "publish"
	if retain {
		what = "publish the retained state of"
	}
	if errors.Is(err, paho.ErrInvalidArguments) {
		// Refused before it left: the broker keeps no retained messages,
		// or takes a lower QoS. Retrying sends the event again each time.
		return notify.Result{}, fmt.Errorf("mqtt sink %q: %s %s to %s: the broker does not take it: %w", s.cfg.Name, what, d.EventID, topic, err)
	}
	if resp != nil && resp.ReasonCode >= 0x80 {
		switch resp.ReasonCode {
		case 0x87, 0x90, 0x95, 0x99: // not authorised, topic name invalid, too large, payload format invalid
			return notify.Result{}, fmt.Errorf("mqtt sink %q: %s %s to %s: the broker refused it (PUBACK 0x%02X): %w", s.cfg.Name, what, d.EventID, topic, resp.ReasonCode, err)
		}
	}
	return notify.Result{Retry: true}, fmt.Errorf("mqtt sink %q: %s %s to %s: %w", s.cfg.Name, what, d.EventID, topic, err)
}

// probe connects with cfg, reports the broker's answer and disconnects.
func probe(ctx context.Context, cfg Config) (string, error) {
	if cfg.URL == nil {
		return "", errors.New("no broker URL")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	errs := make(chan error, 1)
	cc := autopaho.ClientConfig{
		ServerUrls: []*url.URL{brokerURL(cfg.URL)}, KeepAlive: 30, CleanStartOnInitialConnection: true,
		ConnectTimeout: cfg.Timeout, ConnectUsername: cfg.Username, ConnectPassword: []byte(cfg.Password),
		OnConnectError: func(err error) {
			select {
			case errs <- err:
			default:
			}
		},
		ClientConfig: paho.ClientConfig{ClientID: cfg.ClientID},
	}
	if cfg.URL.Scheme == "mqtts" {
		cc.TlsCfg = &tls.Config{RootCAs: cfg.RootCAs, ServerName: cfg.URL.Hostname(), MinVersion: tls.VersionTLS12}
	}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	cm, err := autopaho.NewConnection(cctx, cc)
	if err != nil {
		return "", err
	}
	up := make(chan error, 1)
	go func() { up <- cm.AwaitConnection(ctx) }()
	select {
	case err := <-errs:
		return "", errors.New(connectError(err))
	case err := <-up:
		if err != nil {
			return "", fmt.Errorf("no connection to %s within %s", cfg.URL.Host, cfg.Timeout)
		}
	}
	_ = cm.Disconnect(ctx)
	return fmt.Sprintf("connected to %s://%s as %s; the broker accepted the credentials", cfg.URL.Scheme, cfg.URL.Host, cfg.ClientID), nil
}
