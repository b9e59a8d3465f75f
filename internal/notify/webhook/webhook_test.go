package webhook_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/webhook"
	"github.com/relay-energy/relay/internal/testwait"
)

func TestWebhookSignatureVerifiesWithIndependentReceiver(t *testing.T) {
	for _, tc := range []struct {
		name, secret string
	}{
		{"whsec base64 secret", "whsec_" + base64.StdEncoding.EncodeToString([]byte("a 24-byte signing key!!!"))},
		{"raw secret", "plain text secret, used as bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := delivertest.New(t, "ops")
			rcv := notifytest.NewReceiver(t, tc.secret)
			rcv.CheckTimestamps(f.Clock.Now)
			sink := delivertest.NewWebhook(t, f, webhook.Config{
				Name: "ops", URL: rcv.URL(), Secret: tc.secret,
				Headers: map[string]string{"X-Tenant": "T1"},
			})
			f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: sink})
			ev := f.Start("a1", 0)
			want, _ := ev.Marshal()

			testwait.For(t, 5*time.Second, "the delivery", func() bool { return len(f.Pending("ops")) == 0 })
			reqs := rcv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("receiver got %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if !r.Verified {
				t.Fatalf("signature did not verify: %s", r.Reject)
			}
			for _, h := range []struct{ name, want string }{
				{"Content-Type", "application/cloudevents+json"},
				{"Webhook-Id", "a1:start"},
				{"Webhook-Timestamp", strconv.FormatInt(delivertest.T0.Unix(), 10)},
				{"X-Tenant", "T1"},
			} {
				if got := r.Header.Get(h.name); got != h.want {
					t.Errorf("header %s = %q, want %q", h.name, got, h.want)
				}
			}
			if !bytes.Equal(r.Body, want) {
				t.Fatalf("body is not the event bytes:\n got %s\nwant %s", r.Body, want)
			}
		})
	}
}

func TestWebhookWrongSecretFailsVerification(t *testing.T) {
	f := delivertest.New(t, "ops")
	rcv := notifytest.NewReceiver(t, "the receiver's secret")
	sink := delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL(), Secret: "another secret"})
	f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: sink})
	f.Start("a1", 0)
	testwait.For(t, 5*time.Second, "a dead letter", func() bool { return len(f.DeadLetters("ops")) == 1 })
	if r := rcv.Requests(); len(r) != 1 || r[0].Verified {
		t.Fatalf("requests = %+v, want one that fails verification", r)
	}
}

func TestWebhookServerErrorsAreRetriedWithTheSameID(t *testing.T) {
	f := delivertest.New(t, "ops")
	rcv := notifytest.NewReceiver(t, "s3cret")
	rcv.CheckTimestamps(f.Clock.Now)
	rcv.Queue(notifytest.Answer{Status: 500}, notifytest.Answer{Status: 503, RetryAfter: "7"})
	sink := delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL(), Secret: "s3cret"})
	f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: sink})
	f.Start("a1", 0)

	testwait.For(t, 5*time.Second, "the first attempt", func() bool { return len(rcv.Requests()) == 1 })
	f.Settle(1)
	next, _ := f.Clock.NextDeadline()
	if wait := next.Sub(f.Clock.Now()); wait < 800*time.Millisecond || wait > time.Second {
		t.Fatalf("after a 500 the next attempt is in %s, want 0.8s to 1s", wait)
	}
	f.Clock.Set(next)
	testwait.For(t, 5*time.Second, "the second attempt", func() bool { return len(rcv.Requests()) == 2 })
	f.Settle(1)
	next, _ = f.Clock.NextDeadline()
	if wait := next.Sub(f.Clock.Now()); wait != 7*time.Second {
		t.Fatalf("after a 503 with Retry-After: 7 the next attempt is in %s, want 7s", wait)
	}
	f.Clock.Set(next)
	testwait.For(t, 5*time.Second, "the delivery", func() bool { return len(f.Pending("ops")) == 0 })

	reqs := rcv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("receiver got %d requests, want 3", len(reqs))
	}
	var stamps []string
	for i, r := range reqs {
		if !r.Verified {
			t.Fatalf("request %d: signature did not verify: %s", i, r.Reject)
		}
		if id := r.Header.Get("Webhook-Id"); id != "a1:start" {
			t.Fatalf("request %d: webhook-id %q, want a1:start on every retry", i, id)
		}
		stamps = append(stamps, r.Header.Get("Webhook-Timestamp"))
	}
	if stamps[0] == stamps[2] {
		t.Fatalf("webhook-timestamp %v: want the time of each attempt", stamps)
	}
}

func TestWebhookRejectionsAreDeadLetteredAtOnceAndCounted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer notifytest.Answer
	}{
		{"400", notifytest.Answer{Status: 400}},
		{"404", notifytest.Answer{Status: 404}},
		{"410", notifytest.Answer{Status: 410}},
		{"redirect is not followed", notifytest.Answer{Status: 307, Location: "/elsewhere"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := delivertest.New(t, "ops")
			rcv := notifytest.NewReceiver(t, "")
			rcv.Queue(tc.answer)
			reg := prometheus.NewPedanticRegistry()
			// One request at a time: the first answer is a1's.
			sink := delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL(), Concurrency: 1})
			f.RunDeliverer(deliver.Options{Metrics: deliver.NewMetrics(reg)}, deliver.Target{Sink: sink})
			f.Start("a1", 0)
			f.Start("a2", 0)

			testwait.For(t, 5*time.Second, "both entries to leave the outbox", func() bool { return len(f.Pending("ops")) == 0 })
			if n := len(rcv.Requests()); n != 2 {
				t.Fatalf("receiver got %d requests, want 2 (one per event, no retry, no redirect)", n)
			}
			dl := f.DeadLetters("ops")
			if len(dl) != 1 || dl[0].EventID != "a1:start" {
				t.Fatalf("dead letters = %+v, want a1:start", dl)
			}
			if !strings.Contains(dl[0].Reason, "HTTP "+strconv.Itoa(tc.answer.Status)) {
				t.Fatalf("dead letter reason %q does not name the status", dl[0].Reason)
			}
			if got := delivertest.EventIDs(t, rcv.Accepted()); delivertest.Join(got) != "a2:start" {
				t.Fatalf("accepted %v, want a2:start after the dead letter", got)
			}
			want := `
# HELP relay_dead_letters_total Outbox entries given up on, by sink and reason (rejected, expired, undecodable).
# TYPE relay_dead_letters_total counter
relay_dead_letters_total{reason="expired",sink="ops"} 0
relay_dead_letters_total{reason="rejected",sink="ops"} 1
relay_dead_letters_total{reason="undecodable",sink="ops"} 0
# HELP relay_deliveries_total Delivery attempts by sink and outcome (delivered or failed).
# TYPE relay_deliveries_total counter
relay_deliveries_total{outcome="delivered",sink="ops"} 1
relay_deliveries_total{outcome="failed",sink="ops"} 1
# HELP relay_delivery_retries_total Failed delivery attempts that were scheduled for another attempt, by sink.
# TYPE relay_delivery_retries_total counter
relay_delivery_retries_total{sink="ops"} 0
`
			// The counters move once the run's commit has landed, which
			// may be just after the entries left the outbox.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
				err := testutil.GatherAndCompare(reg, strings.NewReader(want),
					"relay_dead_letters_total", "relay_deliveries_total", "relay_delivery_retries_total")
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestWebhookRetryAfterIsHonoured(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter func(now time.Time) string
		want       time.Duration
	}{
		{"seconds", func(time.Time) string { return "120" }, 120 * time.Second},
		{"HTTP date", func(now time.Time) string { return now.Add(90 * time.Second).Format(http.TimeFormat) }, 90 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := delivertest.New(t, "ops")
			rcv := notifytest.NewReceiver(t, "")
			rcv.Queue(notifytest.Answer{Status: 429, RetryAfter: tc.retryAfter(f.Clock.Now())})
			f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL()})})
			f.Start("a1", 0)
			testwait.For(t, 5*time.Second, "the first attempt", func() bool { return len(rcv.Requests()) == 1 })
			f.Settle(1)
			next, _ := f.Clock.NextDeadline()
			if wait := next.Sub(f.Clock.Now()); wait != tc.want {
				t.Fatalf("next attempt in %s, want %s", wait, tc.want)
			}
			f.Clock.Set(next)
			testwait.For(t, 5*time.Second, "the delivery", func() bool { return len(rcv.Accepted()) == 1 })
		})
	}
}

func TestWebhookTimeoutIsRetryable(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	f := delivertest.New(t, "ops")
	f.Start("a1", 0)
	sink := delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: slow.URL, Timeout: 50 * time.Millisecond})
	res, err := sink.Send(context.Background(), f.Delivery("ops"))
	if err == nil || !res.Retry {
		t.Fatalf("Send = %+v, %v; want a retryable error", res, err)
	}
	if !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("error %q does not say it timed out", err)
	}
}

func TestNewWebhookRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  webhook.Config
		want string
	}{
		{"relative url", webhook.Config{Name: "ops", URL: "/hook"}, "not an absolute http(s) URL"},
		{"ftp url", webhook.Config{Name: "ops", URL: "ftp://example.com/"}, "not an absolute http(s) URL"},
		{"signature header", webhook.Config{Name: "ops", URL: "https://example.com/", Headers: map[string]string{"Webhook-Signature": "x"}}, "set by the sink"},
		{"content type", webhook.Config{Name: "ops", URL: "https://example.com/", Headers: map[string]string{"content-type": "x"}}, "set by the sink"},
		{"bad header name", webhook.Config{Name: "ops", URL: "https://example.com/", Headers: map[string]string{"X Bad": "x"}}, "not a valid header name"},
		{"whsec not base64", webhook.Config{Name: "ops", URL: "https://example.com/", Secret: "whsec_not*base64"}, "not base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := webhook.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewWebhook error = %v, want one containing %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), `"ops"`) {
				t.Fatalf("error %q does not name the sink", err)
			}
		})
	}
}

func TestWebhookSendsTheAttemptsTraceParentOnlyWhenTraced(t *testing.T) {
	f := delivertest.New(t, "ops")
	rcv := notifytest.NewReceiver(t, "")
	sink := delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL()})
	ev := f.Start("a1", 0)
	body, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, want := range []string{"", tp} {
		d := notify.Delivery{EventID: ev.ID, OriginID: "a1", Body: body, Event: &ev, Attempt: 1, TraceParent: want}
		if _, err := sink.Send(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		reqs := rcv.Requests()
		h := reqs[len(reqs)-1].Header
		if got, ok := h["Traceparent"]; h.Get("traceparent") != want || (want == "" && ok) {
			t.Fatalf("with TraceParent %q the request's traceparent is %q", want, got)
		}
	}
}
