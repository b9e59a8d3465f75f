package notify_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
)

func TestNoSecretAppearsInErrorsOrLogs(t *testing.T) {
	const (
		slackSecret   = "xoxb-SLACK-TOKEN-SECRET"
		hookPath      = "HOOK-PATH-SECRET"
		signingKey    = "SIGNING-KEY-SECRET-BYTES"
		headerSecret  = "HEADER-SECRET-VALUE"
		querySecret   = "QUERY-SECRET-VALUE"
		natsPassword  = "NATS-PASSWORD-SECRET"
		natsURLSecret = "NATS-URL-PASSWORD-SECRET"
	)
	webhookSecret := "whsec_" + base64.StdEncoding.EncodeToString([]byte(signingKey))
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	badSeed := string(seed[:len(seed)-4]) + "AAAA"
	secrets := []string{slackSecret, hookPath, signingKey, webhookSecret, strings.TrimPrefix(webhookSecret, "whsec_"),
		headerSecret, querySecret, natsPassword, natsURLSecret, string(seed), badSeed}

	log, logs := newLogger()
	var errs []string
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}

	f := newFixture(t, "oncall", "chat", "chat-down", "ops", "ops-down", "bus")
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	// Slack: a token Slack refuses, and an incoming webhook that answers
	// 400 or cannot be reached.
	api := notifytest.NewSlack(t, "the-right-token")
	api.Fail(notifytest.MethodWebhook, notifytest.SlackFailure{Status: 400, Error: "invalid_payload"})
	oncall, err := notify.NewSlack(notify.SlackConfig{Name: "oncall", Channel: "C1", Token: slackSecret, APIURL: api.APIURL(), Clock: f.clk, Logger: log})
	note(err)
	chat, err := notify.NewSlack(notify.SlackConfig{Name: "chat", WebhookURL: api.WebhookURL(hookPath), Clock: f.clk, Logger: log})
	note(err)
	chatDown, err := notify.NewSlack(notify.SlackConfig{Name: "chat-down", WebhookURL: closed.URL + "/services/T/B/" + hookPath, Clock: f.clk, Logger: log})
	note(err)

	// Webhook: signed, with a secret header and a secret in the query,
	// refused by the receiver or unreachable.
	rcv := notifytest.NewReceiver(t, webhookSecret)
	rcv.Down(notifytest.Answer{Status: 400})
	ops, err := notify.NewWebhook(notify.WebhookConfig{Name: "ops", URL: rcv.URL() + "?key=" + querySecret, Secret: webhookSecret,
		Headers: map[string]string{"Authorization": "Bearer " + headerSecret}, Clock: f.clk})
	note(err)
	opsDown, err := notify.NewWebhook(notify.WebhookConfig{Name: "ops-down", URL: closed.URL + "/hook?key=" + querySecret, Secret: webhookSecret,
		Headers: map[string]string{"Authorization": "Bearer " + headerSecret}, Clock: f.clk})
	note(err)

	// NATS: a wrong password, a password in the URL, a corrupt seed.
	srv := notifytest.StartNATS(t, notifytest.NATSConfig{User: "relay", Password: "the-right-password"})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	nc, err := notify.ConnectNATS(ctx, notify.NATSOptions{URL: srv.URL(), User: "relay", Password: natsPassword, ReconnectWait: 20 * time.Millisecond, Logger: log})
	note(err)
	if nc == nil {
		t.Fatal("no connection")
	}
	defer nc.Close()
	if nc.IsConnected() {
		t.Fatal("connected with a wrong password")
	}
	withURLPassword, err := notify.ConnectNATS(ctx, notify.NATSOptions{URL: strings.Replace(srv.URL(), "nats://", "nats://relay:"+natsURLSecret+"@", 1), ReconnectWait: 20 * time.Millisecond, Logger: log})
	note(err)
	if withURLPassword != nil {
		withURLPassword.Close()
	}
	_, err = notify.ConnectNATS(context.Background(), notify.NATSOptions{URL: srv.URL(), NKeySeed: badSeed, Logger: log})
	if err == nil {
		t.Fatal("connected with a corrupt seed")
	}
	note(err)
	bus, err := notify.NewNATS(nc, notify.NATSConfig{Name: "bus", Subject: renderSubject, JetStream: true, Logger: log})
	note(err)

	sinks := []notify.Sink{oncall, chat, chatDown, ops, opsDown, bus}
	targets := make([]notify.Target, len(sinks))
	for i, s := range sinks {
		targets[i] = notify.Target{Sink: s}
	}
	f.start("a1", 0)
	d := delivery(t, f, "bus")
	_, stop := f.runDeliverer(notify.Options{Logger: log}, targets...)
	f.driveTo(len(sinks), t0.Add(30*time.Second))
	// Stop the loop and move past the Slack sinks' pacing, so that the
	// direct attempts below never wait on the fake clock.
	stop()
	f.clk.Advance(time.Minute)
	for _, s := range sinks {
		for _, dl := range f.deadLetters(s.Name()) {
			errs = append(errs, dl.Reason)
		}
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := s.Send(sctx, d)
		scancel()
		note(err)
	}
	for _, name := range []string{"oncall", "chat", "ops"} {
		if len(f.deadLetters(name)) != 1 {
			t.Errorf("sink %s has %d dead letters, want the refused event", name, len(f.deadLetters(name)))
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
