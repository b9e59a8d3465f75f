// Package mqtt is the MQTT sink type: it publishes the exact event bytes to
// an MQTT 5 broker (Mosquitto, EMQX, HiveMQ), one topic per event, on a
// connection kept by eclipse paho's autopaho, and optionally keeps each
// ongoing alarm as a retained message.
package mqtt

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

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
	// Tenant is the tenant whose sink it is ("" without a tenants file):
	// with Name, whose retained states the sink publishes.
	Tenant string
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
	cfg   Config
	key   string // the broker and client id (connKey)
	owner string // the tenant and sink name (owner)
	book  *book

	mu     sync.Mutex
	conn   *conn // nil until the first delivery when the sink's settings replace a running connection's
	closed bool
}

// New returns an MQTT sink. It connects on its first delivery, not before:
// a replica that does not serve the tenant never connects, and its client
// identifier does not take the session from the one that does. A sink of
// the same broker, client id and settings as a running one (its
// predecessor, before a reload closes it) shares its connection; one with
// other settings replaces it at its first delivery, so that rules a reload
// refuses leave the running connection alone. Close lets the connection
// go.
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
	s := &Sink{cfg: cfg, key: connKey(cfg), owner: cfg.Tenant + "\x00" + cfg.Name}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s, nil
}

// Name returns the sink's name.
func (s *Sink) Name() string { return s.cfg.Name }

// Close lets the sink's connection go: when no other sink of the process
// uses it (a reload's successor takes it over before its predecessor is
// closed), it is disconnected, so that a replica that stopped serving the
// tenant does not take the client identifier's session from the one that
// serves it now. The sink sends nothing after.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	connsMu.Lock()
	defer connsMu.Unlock()
	s.book.leave(s)
	if s.conn != nil {
		s.conn.release()
	}
	return nil
}

// connection returns the sink's connection, making or replacing it at the
// first delivery.
func (s *Sink) connection() (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("the sink was closed: the rules no longer define it, or this replica no longer serves its tenant")
	}
	if s.conn == nil {
		connsMu.Lock()
		s.conn = connFor(s.cfg, s.key)
		connsMu.Unlock()
	}
	return s.conn, nil
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
	c, err := s.connection()
	if err != nil {
		return notify.Result{Retry: true}, fmt.Errorf("mqtt sink %q: %w", s.cfg.Name, err)
	}
	c.start()
	if c.err != nil {
		return notify.Result{Retry: true}, fmt.Errorf("mqtt sink %q: %w", s.cfg.Name, c.err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if err := c.cm.AwaitConnection(ctx); err != nil {
		c.mu.Lock()
		why, closed := c.lastErr, c.closed
		c.mu.Unlock()
		msg := "not connected"
		switch {
		case closed != "":
			msg = closed
		case why != nil:
			msg = connectError(why)
		}
		return notify.Result{Retry: true}, fmt.Errorf("mqtt sink %q: publish %s to %s: %s", s.cfg.Name, d.EventID, s.cfg.URL.Host, msg)
	}
	props := &paho.PublishProperties{ContentType: "application/cloudevents+json",
		User: paho.UserProperties{{Key: "ce_id", Value: PropertyText(d.EventID)}, {Key: "ce_type", Value: ev.Type}, {Key: "level", Value: strconv.Itoa(d.Level)}}}
	if d.TraceParent != "" {
		// W3C trace context in MQTT 5 carries it as a user property.
		props.User = append(props.User, paho.UserProperty{Key: notify.HeaderTraceParent, Value: d.TraceParent})
	}
	if s.cfg.RetainState && ev.Data.Transition.Valid() {
		if res, err := s.publishState(ctx, c, d, ev, state, props); err != nil {
			return res, err
		}
	}
	return s.publish(ctx, c, d, &paho.Publish{Topic: topic, QoS: s.cfg.QoS, Payload: d.Body, Properties: props})
}

// publish asks the fence, sends one message on c and waits for its PUBACK
// (QoS 1).
func (s *Sink) publish(ctx context.Context, c *conn, d notify.Delivery, p *paho.Publish) (notify.Result, error) {
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
	c.mu.Lock()
	limit := c.maxPacket
	c.mu.Unlock()
	if limit > 0 {
		// The broker drops the connection of a client that sends a packet
		// over its maximum: say so instead, for good.
		if n, err := p.Packet().WriteTo(io.Discard); err == nil && n > int64(limit) {
			return fail(false, "the message is %d bytes, over the broker's maximum packet size of %d", n, limit)
		}
	}
	resp, err := c.cm.Publish(ctx, p)
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
		return fail(true, "no PUBACK within %s: the connection may have dropped, or the broker is slow (it may have the message: a retry may publish it twice)", s.cfg.Timeout)
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
