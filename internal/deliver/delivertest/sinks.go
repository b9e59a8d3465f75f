package delivertest

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/natsconn"
	"github.com/relay-energy/relay/internal/natstest"
	natssink "github.com/relay-energy/relay/internal/notify/nats"
	"github.com/relay-energy/relay/internal/notify/webhook"
)

// The real sinks that the engine's tests deliver to and that the sinks' own
// tests check under the engine, built as the tests of both want them.

// SubjectText is the default subject template of the rules file.
const SubjectText = "energy.alarms.{{.TenantID}}.{{.StationID}}.{{.Level}}.{{.Transition}}"

// RenderSubject renders SubjectText for the fixture's events, whose values
// need no sanitising (the rules package renders and sanitises in
// production).
func RenderSubject(ev *event.Event) (string, error) {
	d := ev.Data
	return "energy.alarms." + d.TenantID + "." + d.StationID + "." + strconv.Itoa(d.Level) + "." + string(d.Transition), nil
}

// NewWebhook returns the webhook sink of cfg on the fixture's clock.
func NewWebhook(t testing.TB, f *Fixture, cfg webhook.Config) *webhook.Sink {
	t.Helper()
	cfg.Clock = f.Clock
	s, err := webhook.New(cfg)
	if err != nil {
		t.Fatalf("new webhook sink: %v", err)
	}
	return s
}

// ConnectNATS connects to srv as the relay does and closes the connection
// when the test ends.
func ConnectNATS(t testing.TB, srv *natstest.Server) *nats.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nc, err := natsconn.Connect(ctx, natsconn.Options{URL: srv.URL(), ReconnectWait: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if !nc.IsConnected() {
		t.Fatalf("not connected to %s", srv.URL())
	}
	t.Cleanup(nc.Close)
	return nc
}

// NewNATS returns the NATS sink of cfg on nc, named bus and publishing on
// SubjectText unless cfg says otherwise.
func NewNATS(t testing.TB, nc *nats.Conn, cfg natssink.Config) *natssink.Sink {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "bus"
	}
	if cfg.Subject == nil {
		cfg.Subject = RenderSubject
	}
	cfg.SubjectText = SubjectText
	cfg.Logger = slog.New(slog.DiscardHandler)
	s, err := natssink.New(nc, cfg)
	if err != nil {
		t.Fatalf("new nats sink: %v", err)
	}
	return s
}
