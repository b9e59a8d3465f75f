package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/slack-go/slack"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/termtext"
)

// probeTimeout bounds each sink's probe.
const probeTimeout = 10 * time.Second

// ProbeSinks reaches every sink of rules without sending an event: NATS is
// connected (and, for JetStream sinks, a stream must capture the subject of
// a sample event), the Slack token is checked with auth.test, and webhook
// hosts are dialled. It writes one line per sink to w and returns one
// problem per sink that could not be reached.
func ProbeSinks(ctx context.Context, w io.Writer, rules *route.Rules, cfg config.Config) []error {
	var problems []error
	var nc *nats.Conn
	defer func() {
		if nc != nil {
			nc.Close()
		}
	}()
	sample := probeEvent()
	for _, s := range rules.Sinks {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		var line string
		var err error
		switch s.Type {
		case route.TypeNATS:
			if nc == nil {
				nc, err = connectProbe(pctx, cfg)
			}
			if err == nil {
				line, err = probeNATS(pctx, nc, s, &sample)
			}
		case route.TypeSlack:
			line, err = probeSlack(pctx, s, cfg)
		case route.TypeWebhook:
			line, err = probeHost(pctx, s.URL)
		default:
			line = "writes to stdout"
		}
		cancel()
		if err != nil {
			problems = append(problems, fmt.Errorf("%s:%d: sink %q: %w", rules.File, s.Line, s.Name, err))
			line = "FAILED"
		}
		fmt.Fprintf(w, "sink %s (%s): %s\n", s.Name, s.Type, line)
	}
	return problems
}

func connectProbe(ctx context.Context, cfg config.Config) (*nats.Conn, error) {
	nc, err := notify.ConnectNATS(ctx, notify.NATSOptions{
		URL: cfg.NATS.URL, Creds: cfg.NATS.Creds, NKeySeed: cfg.NATS.NKeySeed, Token: cfg.NATS.Token,
		User: cfg.NATS.User, Password: cfg.NATS.Password, CA: cfg.NATS.CA, Cert: cfg.NATS.Cert, Key: cfg.NATS.Key,
		Name: "relay-check", Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	// ConnectNATS keeps retrying in the background; a probe wants an answer.
	deadline, _ := ctx.Deadline()
	if err := nc.FlushTimeout(time.Until(deadline)); err != nil || !nc.IsConnected() {
		nc.Close()
		return nil, fmt.Errorf("nats: no connection to the server of RELAY_NATS_URL within %s", probeTimeout)
	}
	return nc, nil
}

func probeNATS(ctx context.Context, nc *nats.Conn, s route.Sink, sample *event.Event) (string, error) {
	subject, err := s.RenderSubject(sample)
	if err != nil {
		return "", err
	}
	if !s.JetStream {
		return fmt.Sprintf("connected to %s (core NATS)", nc.ConnectedUrlRedacted()), nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return "", fmt.Errorf("jetstream: %w", err)
	}
	stream, err := js.StreamNameBySubject(ctx, subject)
	switch {
	case err == nil:
		return fmt.Sprintf("connected; stream %s captures %s", stream, subject), nil
	case s.CreateStream != "":
		return fmt.Sprintf("connected; no stream captures %s yet, relay will create %s", subject, s.CreateStream), nil
	}
	return "", fmt.Errorf("jetstream: no stream captures subject %s (%v): create one, or set create_stream", subject, err)
}

func probeSlack(ctx context.Context, s route.Sink, cfg config.Config) (string, error) {
	if s.WebhookURL != "" {
		return probeHost(ctx, s.WebhookURL)
	}
	api := cfg.Slack.APIURL
	if api == "" {
		api = notify.DefaultSlackAPIURL
	}
	if !strings.HasSuffix(api, "/") {
		api += "/"
	}
	resp, err := slack.New(cfg.Slack.Token, slack.OptionAPIURL(api)).AuthTestContext(ctx)
	if err != nil {
		return "", fmt.Errorf("slack auth.test: %s", redactToken(err.Error(), cfg.Slack.Token))
	}
	return fmt.Sprintf("token valid for team %s as %s; posts to channel %s (the bot must be invited)", termtext.Escape(resp.Team), termtext.Escape(resp.User), s.Channel), nil
}

// probeHost dials the host of a URL, which shows DNS, routes and network
// policies are in place without posting anything.
func probeHost(ctx context.Context, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("not a URL with a host")
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("cannot reach %s: %w", addr, err)
	}
	conn.Close()
	return fmt.Sprintf("%s reachable; nothing was sent", addr), nil
}

func redactToken(msg, token string) string {
	if token == "" {
		return msg
	}
	return strings.ReplaceAll(msg, token, "[redacted]")
}

// probeEvent is the event whose subject a JetStream probe looks up.
func probeEvent() event.Event {
	now := time.Now()
	return event.New(event.Alarm{
		OriginID: "probe", Status: event.StatusOngoing, TenantID: "probe", StationID: "probe",
		SystemID: "probe", DeviceSN: "probe", EventCode: "probe", OccurredAt: now,
	}, event.Start, now, false)
}
