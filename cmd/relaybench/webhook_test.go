package main

// This file builds its pipeline and receiver itself, from the internal
// packages and syntheticAlarms only, rather than with webhook.go and
// receiver.go: it can then be copied into an older checkout of relay, so
// that a ratio between two versions is measured with the same benchmark in
// one session.

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

// hookBenchRules sends every event to one signed webhook sink; %q is the
// receiver's URL.
const hookBenchRules = `sinks:
  - name: hook
    type: webhook
    url: %q
    secret_env: HOOK_BENCH_SECRET
routes:
  - name: everything
    to: [hook]
`

// hookCounter is a webhook receiver that verifies the Standard Webhooks
// signature of each request, answers 204, and closes done once want
// distinct webhook-ids arrived.
type hookCounter struct {
	key  []byte
	want int
	done chan struct{}

	mu       sync.Mutex
	seen     map[string]struct{}
	rejected int
	last     time.Time
}

func (h *hookCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id, ts := r.Header.Get("Webhook-Id"), r.Header.Get("Webhook-Timestamp")
	mac := hmac.New(sha256.New, h.key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	h.mu.Lock()
	defer h.mu.Unlock()
	if id == "" || !hmac.Equal([]byte(r.Header.Get("Webhook-Signature")), []byte(want)) {
		h.rejected++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	h.seen[id] = struct{}{}
	if len(h.seen) == h.want && h.last.IsZero() {
		h.last = time.Now()
		close(h.done)
	}
	w.WriteHeader(http.StatusNoContent)
}

// BenchmarkWebhookPipeline measures the webhook figure: one op is the start
// of one distinct synthetic alarm (an event of about 1 KB) applied to a
// fresh bbolt store in batches of 500, routed, passed by alarm management
// (which manages webhook sinks by default) and delivered by the notify
// Deliverer through a signed webhook sink, built from a rules file as the
// service builds it, to an in-process receiver that verifies each signature
// and answers 204; timed from the first Apply to the answer to the last
// distinct event. Preparing the records is not timed.
func BenchmarkWebhookPipeline(b *testing.B) {
	log := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ReportAllocs()
	b.StopTimer()
	key := make([]byte, 32)
	rand.Read(key)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	recv := &hookCounter{key: key, want: b.N, done: make(chan struct{}), seen: make(map[string]struct{}, b.N)}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	rules, err := route.Parse("hook-bench.yaml", fmt.Appendf(nil, hookBenchRules, srv.URL+"/hook"), func(name string) (string, bool) {
		return secret, name == "HOOK_BENCH_SECRET"
	})
	if err != nil {
		b.Fatal(err)
	}
	rs, ok := rules.Sink("hook")
	if !ok {
		b.Fatal("rules: no sink hook")
	}
	sink, err := rs.Config.Build(ctx, rs.Name, sinktype.Deps{Logger: log, HTTP: &http.Client{}}.Defaults())
	if err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(filepath.Join(b.TempDir(), "hook-bench.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	mgr, err := manage.New(manage.Options{Store: st, Rules: func() *route.Rules { return rules }, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	deliv, err := deliver.NewDeliverer(st, []deliver.Target{{Sink: sink, MaxAge: rs.MaxAge, MaxRetryAfter: rs.MaxRetryAfter}},
		deliver.Options{Logger: log, Gate: mgr})
	if err != nil {
		b.Fatal(err)
	}
	mgr.SetSinks([]notify.Sink{sink})
	router := func(ev *event.Event) []string {
		mgr.Observe(ev)
		return rules.SinksFor(ev)
	}
	alarms, err := syntheticAlarms(b.N, time.Now().Add(-time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()

	b.StartTimer()
	began := time.Now()
	wg.Go(func() { _ = deliv.Run(ctx) })
	for i := 0; i < len(alarms); i += 500 {
		if _, err := st.Apply(ctx, store.Batch{Observed: alarms[i:min(i+500, len(alarms))], DetectedAt: time.Now()}, router); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-recv.done:
	case <-time.After(5 * time.Minute):
		recv.mu.Lock()
		defer recv.mu.Unlock()
		b.Fatalf("%d of %d events received after 5 minutes (%d rejected)", len(recv.seen), b.N, recv.rejected)
	}
	b.StopTimer()
	recv.mu.Lock()
	defer recv.mu.Unlock()
	if recv.rejected > 0 {
		b.Fatalf("the receiver rejected %d requests: their signatures did not verify", recv.rejected)
	}
	b.ReportMetric(float64(b.N)/recv.last.Sub(began).Seconds(), "events/s")
}
