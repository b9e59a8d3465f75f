package deliver_test

import (
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/webhook"
	"github.com/relay-energy/relay/internal/redact"
	"github.com/relay-energy/relay/internal/redact/redacttest"
	"github.com/relay-energy/relay/internal/testwait"
)

// A sink that answers 500 shows when and why its last attempt failed,
// without the key of its URL; once it takes the entry, when it last did,
// and the failure stays for the operator to read.
func TestSinkStatusKeepsTheLastFailureAndDeliveryWithoutSecrets(t *testing.T) {
	const key = "hook-key-5f3a9c2e"
	f := delivertest.New(t, "ops")
	rcv := notifytest.NewReceiver(t, "")
	rcv.Down(notifytest.Answer{Status: 500})
	url := rcv.URL() + "?key=" + key
	secrets := redact.New()
	secrets.AddURL(url, false)
	status := deliver.NewStatuses()
	f.RunDeliverer(deliver.Options{Status: status, Secrets: secrets},
		deliver.Target{Sink: delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: url})})
	if got := status.Get("ops"); got != (deliver.SinkStatus{}) {
		t.Fatalf("status before any attempt: %+v, want zero", got)
	}
	f.Start("a1", 0)
	testwait.For(t, 5*time.Second, "the first attempt", func() bool { return len(rcv.Requests()) == 1 })
	f.Settle(1)
	failed := status.Get("ops")
	if !failed.LastFailed.Equal(delivertest.T0) || !strings.Contains(failed.LastError, "500") || !failed.LastDelivered.IsZero() {
		t.Fatalf("status after a 500: %+v, want failed at %s saying 500, never delivered", failed, delivertest.T0)
	}
	redacttest.AssertNoSecret(t, []string{key}, map[string]string{"the last error": failed.LastError})

	rcv.Up()
	f.DriveUntil(1, delivertest.T0.Add(time.Minute), func() bool { return len(f.Pending("ops")) == 0 })
	got := status.Get("ops")
	if got.LastDelivered.IsZero() || got.LastDelivered.Before(failed.LastFailed) || got.LastFailed != failed.LastFailed || got.LastError != failed.LastError {
		t.Fatalf("status after the retry went out: %+v, want delivered after %s with the failure kept", got, failed.LastFailed)
	}
	if other := status.Get("other"); other != (deliver.SinkStatus{}) {
		t.Errorf("a sink never run: %+v, want zero", other)
	}
}
