package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestWebhookPhaseDeliversEverySignedEventOnce runs the webhook figure's
// pipeline on a few alarms: the receiver gets every start, each signature
// verifies, and the figure is a rate.
func TestWebhookPhaseDeliversEverySignedEventOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := newWebhookPipeline(ctx, t.TempDir(), "test", 301, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.run(ctx)
	n, rerr := w.recv.progress()
	if cerr := w.close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if rerr != nil {
		t.Fatal(rerr)
	}
	if res.Events != 301 || n != 301 || res.EventsPerSec <= 0 {
		t.Fatalf("result = %+v with %d distinct events received, want 301 at a positive rate", res, n)
	}
}

// post sends body to url with headers and returns the status.
func post(t *testing.T, url string, body string, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestSigningReceiverCountsVerifiedEventsAndRefusesOthers(t *testing.T) {
	key := []byte("a key of the bench")
	r, err := startReceiver("/hook", 2, signedIDs(key))
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	signed := func(id, body string) map[string]string {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + ".1700000000." + body))
		return map[string]string{"webhook-id": id, "webhook-timestamp": "1700000000",
			"webhook-signature": "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))}
	}
	tests := []struct {
		name   string
		body   string
		header map[string]string
		want   int
	}{
		{"signed", `{"a":1}`, signed("e1", `{"a":1}`), http.StatusNoContent},
		{"a repeat", `{"a":1}`, signed("e1", `{"a":1}`), http.StatusNoContent},
		{"unsigned", `{"b":1}`, map[string]string{"webhook-id": "e2"}, http.StatusUnauthorized},
		{"signed over another body", `{"b":2}`, signed("e2", `{"b":1}`), http.StatusUnauthorized},
	}
	for _, tt := range tests {
		if got := post(t, r.url, tt.body, tt.header); got != tt.want {
			t.Fatalf("%s: status %d, want %d", tt.name, got, tt.want)
		}
	}
	n, err := r.progress()
	if n != 1 || err == nil || !strings.Contains(err.Error(), "refused 2 of 4") {
		t.Fatalf("progress = %d, %v; want 1 distinct and an error saying 2 of 4 were refused", n, err)
	}
	if _, err := r.wait(context.Background(), 10*time.Millisecond); err == nil || !strings.Contains(err.Error(), "no v1 signature matches") {
		t.Fatalf("wait = %v, want an error naming the rejection", err)
	}
	if got := post(t, r.url, `{"c":1}`, signed("e3", `{"c":1}`)); got != http.StatusNoContent {
		t.Fatalf("status %d, want 204", got)
	}
	if _, err := r.wait(context.Background(), 5*time.Second); err != nil {
		t.Fatalf("wait after the second distinct event: %v", err)
	}
}

func TestAlertmanagerReceiverCountsDistinctAlerts(t *testing.T) {
	r, err := startReceiver("/alertmanager", 3, alertIDs)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	notification := func(ids ...string) string {
		var alerts []string
		for _, id := range ids {
			alerts = append(alerts, `{"status":"firing","labels":{"alertname":"X","`+amIDLabel+`":"`+id+`"}}`)
		}
		return `{"version":"4","status":"firing","alerts":[` + strings.Join(alerts, ",") + `]}`
	}
	for _, body := range []string{notification("a"), notification("a", "b"), notification("b")} {
		if got := post(t, r.url, body, nil); got != http.StatusNoContent {
			t.Fatalf("status %d, want 204", got)
		}
	}
	if n, err := r.progress(); n != 2 || err != nil {
		t.Fatalf("progress = %d, %v; want 2 distinct alerts", n, err)
	}
	if got := post(t, r.url, `{"alerts":[{"labels":{"alertname":"X"}}]}`, nil); got != http.StatusBadRequest {
		t.Fatalf("an alert without %s: status %d, want 400", amIDLabel, got)
	}
	if got := post(t, r.url, notification("c"), nil); got != http.StatusNoContent {
		t.Fatalf("status %d, want 204", got)
	}
	last, err := r.wait(context.Background(), 5*time.Second)
	if err != nil || last.IsZero() {
		t.Fatalf("wait = %v, %v; want the time the third alert arrived", last, err)
	}
}
