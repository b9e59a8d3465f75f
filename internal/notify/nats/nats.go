// Package nats is the NATS sink type: it publishes the exact event bytes to
// a subject rendered per event, on core NATS or JetStream, with the event id
// as Nats-Msg-Id, on the connection package natsconn makes.
package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
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

// CarriesAcks reports that the bus gets the ack and unack events of the
// alarms it got, published like any event: the subject template sees
// .Transition ack or unack (the default subject ends in .ack or .unack),
// and Nats-Msg-Id is the event id, which event.NewAck numbers so that a
// second acknowledgement of an alarm is not taken for a repeat of the
// first. The bus keeps no memory of a start, and publishes them all.
func (s *Sink) CarriesAcks() bool { return true }

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
		if d.TraceParent != "" {
			msg.Header.Set(notify.HeaderTraceParent, d.TraceParent)
		}
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
