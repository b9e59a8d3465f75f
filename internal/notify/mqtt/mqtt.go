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
	"io"
	"log/slog"
	"net/url"
	"slices"
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
	cfg     Config
	conn    *conn
	release sync.Once
}

// New returns an MQTT sink. It connects on its first delivery, not before:
// a replica that does not serve the tenant never connects, and its client
// identifier does not take the session from the one that does. Close lets
// the connection go.
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

// Close lets the sink's connection go: when no other sink of the process
// uses it (a reload's successor takes it over before its predecessor is
// closed), it is disconnected, so that a replica that stopped serving the
// tenant does not take the client identifier's session from the one that
// serves it now. The sink sends nothing after.
func (s *Sink) Close() error {
	s.release.Do(func() { s.conn.release() })
	return nil
}

// conn is one connection to a broker, shared by every sink of the process
// with the same broker and client identifier: a sink rebuilt by a reload
// of the rules takes over its predecessor's, since two connections with
// one client identifier would take the session from each other at every
// reconnection. Changed settings (credentials, trusted authorities, the
// timeout) replace it: the old one is closed.
type conn struct {
	key    string
	cfg    Config // of the sink that made it
	refs   int    // sinks using it, under connsMu
	once   sync.Once
	cm     *autopaho.ConnectionManager
	err    error
	cancel context.CancelFunc

	mu        sync.Mutex
	lastErr   error  // the last failed connection attempt's, nil once connected
	maxPacket uint32 // the broker's maximum packet size (CONNACK), 0: none said
	ups       int    // connections made

	// stateMu orders the retained messages of the alarms' states: state
	// holds the state of every ongoing alarm published on this connection
	// (topic to payload), published again after each reconnection, since
	// a broker restarted without persistence has lost them.
	stateMu sync.Mutex
	state   map[string][]byte
	fence   notify.Fence // of the sink that last published a state
}

var (
	connsMu sync.Mutex
	conns   = map[string]*conn{}
)

func connFor(cfg Config) *conn {
	key := cfg.URL.String() + "\x00" + cfg.ClientID
	connsMu.Lock()
	defer connsMu.Unlock()
	c, ok := conns[key]
	if ok && sameSettings(c.cfg, cfg) {
		c.refs++
		return c
	}
	if ok {
		delete(conns, key)
		c.close("the connection was replaced: the sink's settings changed")
	}
	c = &conn{key: key, cfg: cfg, refs: 1, state: map[string][]byte{}}
	conns[key] = c
	return c
}

// sameSettings says whether a and b, of one broker and client identifier,
// connect alike.
func sameSettings(a, b Config) bool {
	roots := a.RootCAs == b.RootCAs || (a.RootCAs != nil && a.RootCAs.Equal(b.RootCAs))
	return a.Username == b.Username && a.Password == b.Password && roots && a.Timeout == b.Timeout
}

// release is a sink's Close: the last sink using c disconnects it.
func (c *conn) release() {
	connsMu.Lock()
	defer connsMu.Unlock()
	if c.refs--; c.refs > 0 {
		return
	}
	if conns[c.key] == c {
		delete(conns, c.key)
	}
	c.close("the sink was closed: the rules no longer define it, or this replica no longer serves its tenant")
}

// close ends the connection, if it was started (a DISCONNECT, waited for
// up to a second, so that the broker has let it go before a successor
// connects), and keeps it from starting; why is what its sinks' sends say
// from then on.
func (c *conn) close(why string) {
	c.once.Do(func() { c.err = errors.New(why) })
	if c.cancel == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.cm.Disconnect(ctx)
	c.cancel()
}

// start connects in the background, once, for the life of the connection.
func (c *conn) start(cfg Config) {
	c.once.Do(func() {
		cc := clientConfig(cfg)
		cc.OnConnectionUp = func(_ *autopaho.ConnectionManager, ack *paho.Connack) {
			c.mu.Lock()
			was := c.lastErr
			c.lastErr = nil
			c.maxPacket = 0
			if ack != nil && ack.Properties != nil && ack.Properties.MaximumPacketSize != nil {
				c.maxPacket = *ack.Properties.MaximumPacketSize
			}
			c.ups++
			again := c.ups > 1
			c.mu.Unlock()
			if was != nil {
				cfg.Logger.Info("mqtt: connected to the broker", "sink", cfg.Name, "broker", cfg.URL.Host)
			}
			if again && cfg.RetainState {
				go c.reassert(cfg)
			}
		}
		cc.OnConnectError = func(err error) {
			c.mu.Lock()
			first := c.lastErr == nil
			c.lastErr = err
			c.mu.Unlock()
			if first {
				cfg.Logger.Warn("mqtt: cannot connect to the broker; retrying", "sink", cfg.Name, "broker", cfg.URL.Host, "err", connectError(err))
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		c.cancel = cancel
		c.cm, c.err = autopaho.NewConnection(ctx, cc)
	})
}

// clientConfig is how relay connects with cfg, without the callbacks.
func clientConfig(cfg Config) autopaho.ClientConfig {
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
		ClientConfig:                  paho.ClientConfig{ClientID: cfg.ClientID},
	}
	if cfg.URL.Scheme == "mqtts" {
		cc.TlsCfg = &tls.Config{RootCAs: cfg.RootCAs, ServerName: cfg.URL.Hostname(), MinVersion: tls.VersionTLS12}
	}
	return cc
}

// reassert publishes the retained state of the ongoing alarms again after
// a reconnection: a broker restarted without persistence has forgotten it.
// A state changed meanwhile is left to its Send; a failure leaves the rest
// to the next reconnection.
func (c *conn) reassert(cfg Config) {
	c.stateMu.Lock()
	topics := make([]string, 0, len(c.state))
	for t := range c.state {
		topics = append(topics, t)
	}
	c.stateMu.Unlock()
	slices.Sort(topics)
	n := 0
	for _, topic := range topics {
		err := func() error {
			c.stateMu.Lock()
			defer c.stateMu.Unlock()
			body, ok := c.state[topic]
			if !ok {
				return nil
			}
			if err := c.fence.Check(); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
			defer cancel()
			_, err := c.cm.Publish(ctx, &paho.Publish{Topic: topic, QoS: cfg.QoS, Retain: true, Payload: body})
			n++
			return err
		}()
		if err != nil {
			cfg.Logger.Warn("mqtt: the ongoing alarms' retained state was not published again after the reconnection; the next reconnection tries again",
				"sink", cfg.Name, "broker", cfg.URL.Host, "published", n, "of", len(topics), "err", err)
			return
		}
	}
	if n > 0 {
		cfg.Logger.Info("mqtt: the ongoing alarms' retained state published again after the reconnection", "sink", cfg.Name, "broker", cfg.URL.Host, "alarms", n)
	}
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

// CarriesAcks reports that the broker gets the ack and unack events of the
// alarms it got, published like any event on the topic ({transition} is
// ack or unack): a SCADA screen shows who took the alarm. They leave the
// retained state alone: an acknowledgement may come after the alarm ended,
// and must not bring its state back.
func (s *Sink) CarriesAcks() bool { return true }

// Send publishes one event, and with RetainState its alarm's state first:
// the retained state follows the alarm even when the event then fails for
// good. While the broker cannot be reached, or refuses the connection, the
// delivery is retried; a publish the broker refuses for good (not
// authorised for the topic, a topic, payload or size it does not take) is
// not.
func (s *Sink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	ev, err := d.Decoded()
	if err != nil {
		return notify.Result{}, fmt.Errorf("mqtt sink %q: %w", s.cfg.Name, err)
	}
	topic, err := s.cfg.Topic.Render(ev)
	if err != nil {
		return notify.Result{}, fmt.Errorf("mqtt sink %q: %w", s.cfg.Name, err)
	}
	var state string
	if s.cfg.RetainState && ev.Data.Transition.Valid() {
		if state, err = s.cfg.StateTopic.Render(ev); err != nil {
			return notify.Result{}, fmt.Errorf("mqtt sink %q: %w", s.cfg.Name, err)
		}
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
	props := &paho.PublishProperties{ContentType: "application/cloudevents+json",
		User: paho.UserProperties{{Key: "ce_id", Value: d.EventID}, {Key: "ce_type", Value: ev.Type}, {Key: "level", Value: strconv.Itoa(d.Level)}}}
	if d.TraceParent != "" {
		// W3C trace context in MQTT 5 carries it as a user property.
		props.User = append(props.User, paho.UserProperty{Key: notify.HeaderTraceParent, Value: d.TraceParent})
	}
	if s.cfg.RetainState && ev.Data.Transition.Valid() {
		if res, err := s.publishState(ctx, d, ev, state, props); err != nil {
			return res, err
		}
	}
	return s.publish(ctx, d, &paho.Publish{Topic: topic, QoS: s.cfg.QoS, Payload: d.Body, Properties: props})
}

// publishState publishes the retained state of d's alarm on topic: its
// start, or an empty message that clears it, and keeps it to publish again
// after a reconnection.
func (s *Sink) publishState(ctx context.Context, d notify.Delivery, ev *event.Event, topic string, props *paho.PublishProperties) (notify.Result, error) {
	body := d.Body
	if ev.Data.Transition != event.Start {
		body = nil // an empty retained message clears the alarm's state
	}
	c := s.conn
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	c.fence = s.cfg.Fence
	res, err := s.publish(ctx, d, &paho.Publish{Topic: topic, QoS: s.cfg.QoS, Retain: true, Payload: body, Properties: props})
	if err == nil {
		if body == nil {
			delete(c.state, topic)
		} else {
			c.state[topic] = body
		}
	}
	return res, err
}

// publish asks the fence, sends one message and waits for its PUBACK (QoS
// 1).
func (s *Sink) publish(ctx context.Context, d notify.Delivery, p *paho.Publish) (notify.Result, error) {
	what := "publish"
	if p.Retain {
		what = "publish the retained state of"
	}
	fail := func(retry bool, format string, args ...any) (notify.Result, error) {
		return notify.Result{Retry: retry}, fmt.Errorf("mqtt sink %q: %s %s to %s: %s", s.cfg.Name, what, d.EventID, p.Topic, fmt.Sprintf(format, args...))
	}
	if err := s.cfg.Fence.Check(); err != nil {
		return fail(true, "not sent: %v", err)
	}
	s.conn.mu.Lock()
	limit := s.conn.maxPacket
	s.conn.mu.Unlock()
	if limit > 0 {
		// The broker drops the connection of a client that sends a packet
		// over its maximum: say so instead, for good.
		if n, err := p.Packet().WriteTo(io.Discard); err == nil && n > int64(limit) {
			return fail(false, "the message is %d bytes, over the broker's maximum packet size of %d", n, limit)
		}
	}
	resp, err := s.conn.cm.Publish(ctx, p)
	switch {
	case err == nil:
		return notify.Result{}, nil
	case errors.Is(err, paho.ErrInvalidArguments):
		// Refused before it left: the broker keeps no retained messages,
		// or takes a lower QoS. Retrying sends the event again each time.
		return fail(false, "the broker does not take it: %v", err)
	case resp != nil && resp.ReasonCode >= 0x80:
		switch resp.ReasonCode {
		case 0x87, 0x90, 0x95, 0x99: // not authorised, topic name invalid, too large, payload format invalid
			return fail(false, "the broker refused it (PUBACK 0x%02X): %v", resp.ReasonCode, err)
		}
	case errors.Is(err, context.DeadlineExceeded) && s.cfg.QoS > 0:
		return fail(true, "no PUBACK within %s (the broker may have it: a retry may publish it twice)", s.cfg.Timeout)
	}
	return fail(true, "%v", err)
}

// probe connects with cfg, reports the broker's answer, and whether it
// takes what the sink sends (its QoS, retained messages), and disconnects.
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
	acks := make(chan *paho.Connack, 1)
	cc := clientConfig(cfg)
	cc.OnConnectError = func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	cc.OnConnectionUp = func(_ *autopaho.ConnectionManager, ack *paho.Connack) {
		select {
		case acks <- ack:
		default:
		}
	}
	cctx, stop := context.WithCancel(ctx)
	cm, err := autopaho.NewConnection(cctx, cc)
	if err != nil {
		stop()
		return "", err
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), time.Second)
		_ = cm.Disconnect(dctx)
		dcancel()
		stop()
		<-cm.Done()
	}()
	var ack *paho.Connack
	select {
	case err := <-errs:
		return "", errors.New(connectError(err))
	case ack = <-acks:
	case <-ctx.Done():
		return "", fmt.Errorf("no connection to %s within %s", cfg.URL.Host, cfg.Timeout)
	}
	if ack != nil && ack.Properties != nil {
		if p := ack.Properties; p.MaximumQoS != nil && *p.MaximumQoS < cfg.QoS {
			return "", fmt.Errorf("the broker takes QoS %d at most; the sink publishes at QoS %d: set qos: 0, or allow QoS 1 on the broker", *p.MaximumQoS, cfg.QoS)
		}
		if !ack.Properties.RetainAvailable && cfg.RetainState {
			return "", errors.New("the broker keeps no retained messages (CONNACK: retain not available); retain_state needs them: enable retain on the broker, or leave retain_state out")
		}
	}
	return fmt.Sprintf("connected to %s://%s as %s; the broker accepted the credentials", cfg.URL.Scheme, cfg.URL.Host, cfg.ClientID), nil
}
