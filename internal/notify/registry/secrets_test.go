package registry_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/natsconn"
	"github.com/relay-energy/relay/internal/notify/console"
	"github.com/relay-energy/relay/internal/notify/kafka"
	natssink "github.com/relay-energy/relay/internal/notify/nats"
	"github.com/relay-energy/relay/internal/notify/slack"
	"github.com/relay-energy/relay/internal/notify/webhook"

	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/redact/redacttest"
)

// The secrets the leak tests configure: no error, log line, dead letter or
// metric may hold any of them.
const (
	slackSecret   = "xoxb-SLACK-TOKEN-SECRET"
	hookPath      = "HOOK-PATH-SECRET"
	signingKey    = "SIGNING-KEY-SECRET-BYTES"
	headerSecret  = "HEADER-SECRET-VALUE"
	apiKey        = "API-KEY-SECRET-VALUE"
	querySecret   = "QUERY-SECRET-VALUE"
	natsPassword  = "NATS-PASSWORD-SECRET"
	natsToken     = "NATS-TOKEN-SECRET"
	urlPassword   = "URL-PASSWORD-SECRET"
	kafkaPassword = "KAFKA-PASSWORD-SECRET"
)

// webhookSecret is the Standard Webhooks secret of signingKey, a secret
// itself, as its base64 is.
var webhookSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte(signingKey))

func TestNoSecretAppearsInErrorsOrLogs(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	badSeed := string(seed[:len(seed)-4]) + "AAAA"
	secrets := []string{slackSecret, hookPath, signingKey, webhookSecret, strings.TrimPrefix(webhookSecret, "whsec_"),
		headerSecret, querySecret, natsPassword, urlPassword, string(seed), badSeed}

	log, logs := delivertest.NewLogger()
	var errs []string
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}

	f := delivertest.New(t, "oncall", "chat", "chat-down", "ops", "ops-down", "bus")
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	// Slack: a token Slack refuses, and an incoming webhook that answers
	// 400 or cannot be reached.
	api := notifytest.NewSlack(t, "the-right-token")
	api.Fail(notifytest.MethodWebhook, notifytest.SlackFailure{Status: 400, Error: "invalid_payload"})
	oncall, err := slack.New(slack.Config{Name: "oncall", Channel: "C1", Token: slackSecret, APIURL: api.APIURL(), Clock: f.Clock, Logger: log})
	note(err)
	chat, err := slack.New(slack.Config{Name: "chat", WebhookURL: api.WebhookURL(hookPath), Clock: f.Clock, Logger: log})
	note(err)
	chatDown, err := slack.New(slack.Config{Name: "chat-down", WebhookURL: closed.URL + "/services/T/B/" + hookPath, Clock: f.Clock, Logger: log})
	note(err)

	// Webhook: signed, with a secret header and a secret in the query,
	// refused by the receiver or unreachable.
	rcv := notifytest.NewReceiver(t, webhookSecret)
	rcv.Down(notifytest.Answer{Status: 400})
	ops, err := webhook.New(webhook.Config{Name: "ops", URL: rcv.URL() + "?key=" + querySecret, Secret: webhookSecret,
		Headers: map[string]string{"Authorization": "Bearer " + headerSecret}, Clock: f.Clock})
	note(err)
	opsDown, err := webhook.New(webhook.Config{Name: "ops-down", URL: closed.URL + "/hook?key=" + querySecret, Secret: webhookSecret,
		Headers: map[string]string{"Authorization": "Bearer " + headerSecret}, Clock: f.Clock})
	note(err)

	// NATS: a wrong password, a password in the URL, a corrupt seed.
	srv := natstest.StartServer(t, natstest.Config{User: "relay", Password: "the-right-password"})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	nc, err := natsconn.Connect(ctx, natsconn.Options{URL: srv.URL(), User: "relay", Password: natsPassword, ReconnectWait: 20 * time.Millisecond, Logger: log})
	note(err)
	if nc == nil {
		t.Fatal("no connection")
	}
	defer nc.Close()
	if nc.IsConnected() {
		t.Fatal("connected with a wrong password")
	}
	withURLPassword, err := natsconn.Connect(ctx, natsconn.Options{URL: strings.Replace(srv.URL(), "nats://", "nats://relay:"+urlPassword+"@", 1), ReconnectWait: 20 * time.Millisecond, Logger: log})
	note(err)
	if withURLPassword != nil {
		withURLPassword.Close()
	}
	_, err = natsconn.Connect(context.Background(), natsconn.Options{URL: srv.URL(), NKeySeed: badSeed, Logger: log})
	if err == nil {
		t.Fatal("connected with a corrupt seed")
	}
	note(err)
	bus, err := natssink.New(nc, natssink.Config{Name: "bus", Subject: delivertest.RenderSubject, JetStream: true, Logger: log})
	note(err)

	sinks := []notify.Sink{oncall, chat, chatDown, ops, opsDown, bus}
	targets := make([]deliver.Target, len(sinks))
	for i, s := range sinks {
		targets[i] = deliver.Target{Sink: s}
	}
	f.Start("a1", 0)
	d := f.Delivery("bus")
	_, stop := f.RunDeliverer(deliver.Options{Logger: log}, targets...)
	f.DriveTo(len(sinks), delivertest.T0.Add(30*time.Second))
	// Stop the loop and move past the Slack sinks' pacing, so that the
	// direct attempts below never wait on the fake clock.
	stop()
	f.Clock.Advance(time.Minute)
	for _, s := range sinks {
		for _, dl := range f.DeadLetters(s.Name()) {
			errs = append(errs, dl.Reason)
		}
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := s.Send(sctx, d)
		scancel()
		note(err)
	}
	for _, name := range []string{"oncall", "chat", "ops"} {
		if len(f.DeadLetters(name)) != 1 {
			t.Errorf("sink %s has %d dead letters, want the refused event", name, len(f.DeadLetters(name)))
		}
	}

	text := logs.String()
	if !strings.Contains(text, "dead-lettered") || !strings.Contains(text, "will retry") || !strings.Contains(strings.ToLower(text), "authorization violation") {
		t.Fatalf("the log lacks the lines this test inspects:\n%s", text)
	}
	for _, secret := range secrets {
		if strings.Contains(text, secret) {
			t.Errorf("a log line holds the secret %q:\n%s", secret, text)
		}
		for _, e := range errs {
			if strings.Contains(e, secret) {
				t.Errorf("an error holds the secret %q: %s", secret, e)
			}
		}
	}
}

// TestEverySinkTypeLeaksNoSecret runs the shared leak check for each sink
// type against receivers that echo the whole request (URL, headers, body)
// in their error answers: no configured secret may reach the error Send
// returns, a debug-level log line, a dead letter or a metric. The deliverer
// is given no redaction of its own, so each sink must clean what it says.
func TestEverySinkTypeLeaksNoSecret(t *testing.T) {
	type build func(t *testing.T, f *delivertest.Fixture, log *slog.Logger) (notify.Sink, []string)
	cases := map[string]build{
		"webhook": func(t *testing.T, f *delivertest.Fixture, log *slog.Logger) (notify.Sink, []string) {
			echo := notifytest.NewEcho(t, http.StatusBadRequest)
			u := strings.Replace(echo.URL, "http://", "http://relay:"+urlPassword+"@", 1) + "/hook?key=" + querySecret
			s, err := webhook.New(webhook.Config{Name: "webhook", URL: u, Secret: webhookSecret, Clock: f.Clock,
				Headers: map[string]string{"Authorization": "Bearer " + headerSecret, "X-Api-Key": apiKey}})
			if err != nil {
				t.Fatal(err)
			}
			return s, []string{webhookSecret, strings.TrimPrefix(webhookSecret, "whsec_"), headerSecret, apiKey, querySecret, urlPassword}
		},
		"slack incoming webhook": func(t *testing.T, f *delivertest.Fixture, log *slog.Logger) (notify.Sink, []string) {
			echo := notifytest.NewEcho(t, http.StatusBadRequest)
			s, err := slack.New(slack.Config{Name: "slack incoming webhook", WebhookURL: echo.URL + "/services/T0/B0/" + hookPath,
				Clock: f.Clock, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			return s, []string{hookPath}
		},
		"slack web api": func(t *testing.T, f *delivertest.Fixture, log *slog.Logger) (notify.Sink, []string) {
			echo := notifytest.NewEcho(t, http.StatusBadRequest)
			s, err := slack.New(slack.Config{Name: "slack web api", Channel: "C1", Token: slackSecret, APIURL: echo.URL + "/api/",
				Clock: f.Clock, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			return s, []string{slackSecret}
		},
		"nats": func(t *testing.T, f *delivertest.Fixture, log *slog.Logger) (notify.Sink, []string) {
			srv := natstest.StartServer(t, natstest.Config{Token: natsToken})
			nc, err := natsconn.Connect(context.Background(), natsconn.Options{URL: srv.URL(), Token: natsToken, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			// JetStream is not enabled for the stream: every publish fails.
			s, err := natssink.New(nc, natssink.Config{Name: "nats", Subject: delivertest.RenderSubject, JetStream: true, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			return s, []string{natsToken}
		},
		"kafka": func(t *testing.T, f *delivertest.Fixture, log *slog.Logger) (notify.Sink, []string) {
			// The brokers refuse the password as Kafka does
			// (SASL_AUTHENTICATION_FAILED), with a message that echoes
			// the PLAIN bytes the client sent, the password among them.
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", "relay", "the-right-password"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			c.ControlKey(int16(kmsg.SASLAuthenticate), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				req := r.(*kmsg.SASLAuthenticateRequest)
				resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
				resp.ErrorCode = 58
				msg := "Authentication failed for " + string(req.SASLAuthBytes)
				resp.ErrorMessage = &msg
				return resp, nil, true
			})
			topic, err := kafka.CompileTopic(kafka.DefaultTopic)
			if err != nil {
				t.Fatal(err)
			}
			s, err := kafka.New(kafka.Config{Name: "kafka", Brokers: c.ListenAddrs(), Topic: topic, ClientID: "relay-leak",
				SASL: kafka.SASLPlain, Username: "relay", Password: kafkaPassword, Timeout: 5 * time.Second, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s, []string{kafkaPassword}
		},
		"console": func(t *testing.T, f *delivertest.Fixture, log *slog.Logger) (notify.Sink, []string) {
			s, err := console.New("console", io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			return s, nil
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			f := delivertest.New(t, name)
			log, logs := delivertest.NewLogger()
			sink, secrets := mk(t, f, log)
			f.Start("a1", 0)
			d := f.Delivery(name)
			reg := prometheus.NewRegistry()
			_, stop := f.RunDeliverer(deliver.Options{Logger: log, Metrics: deliver.NewMetrics(reg)}, deliver.Target{Sink: sink, MaxAge: time.Minute})
			f.DriveTo(1, delivertest.T0.Add(2*time.Minute))
			stop()
			f.Clock.Advance(time.Minute)
			texts := map[string]string{"the log": logs.String()}
			for i, dl := range f.DeadLetters(name) {
				texts[fmt.Sprintf("dead letter %d", i)] = dl.Reason
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := sink.Send(ctx, d); err != nil {
				texts["the error of Send"] = fmt.Sprintf("%v %+v", err, err)
			}
			var metrics strings.Builder
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				metrics.WriteString(mf.String())
			}
			texts["the metrics"] = metrics.String()
			if name != "console" && len(f.DeadLetters(name)) == 0 && !strings.Contains(texts["the log"], "will retry") {
				t.Fatalf("the sink neither failed nor retried; the check would prove nothing:\n%s", texts["the log"])
			}
			redacttest.AssertNoSecret(t, secrets, texts)
		})
	}
}
