package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/store"
)

// A healthy receiver that answers every request well inside the webhook's
// own timeout must see every event once and the Deliverer must report no
// failed attempt. The Deliverer bounds a whole SendAll with AttemptTimeout
// (meant to bound one Send): a run of Batch entries at the sink's
// concurrency takes Batch/concurrency request times, so with the defaults
// (AttemptTimeout 1m, Batch 500, concurrency 8) any receiver slower than
// about 0.96 s a request (the webhook timeout is 10 s) has the tail of
// every full run cancelled: requests in flight are cut (the receiver has
// them: duplicates), the rest are "not attempted", all are reported
// Retrying and then sent one at a time. Scaled down here: AttemptTimeout
// 400ms, 40 entries, concurrency 2, 50 ms a request (1 s a run).
func TestReviewSlowHealthyReceiverIsNotCutByTheAttemptTimeout(t *testing.T) {
	var mu sync.Mutex
	got := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev event.Event
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		got[ev.ID]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	st, sink := storeAndHook(t, srv.URL, 2)
	var rmu sync.Mutex
	var retrying []string
	d, err := deliver.NewDeliverer(st, []deliver.Target{{Sink: sink}}, deliver.Options{
		Logger: slog.New(slog.DiscardHandler), MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		AttemptTimeout: 400 * time.Millisecond,
		OnReport: func(r deliver.Report) {
			if r.Fate == deliver.Retrying {
				rmu.Lock()
				retrying = append(retrying, r.Entry.EventID+": "+r.Reason)
				rmu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var records []event.Alarm
	started := time.Now().Add(-time.Minute)
	for i := range 40 {
		records = append(records, alarmRecord(fmt.Sprintf("slow%02d", i), event.StatusOngoing, started, time.Time{}))
	}
	res, err := st.Apply(context.Background(), store.Batch{Observed: records},
		func(*event.Event) []string { return []string{"hook"} })
	if err != nil || len(res.Events) != 40 {
		t.Fatalf("apply: %d events, %v", len(res.Events), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Drain before Run: Run delivers what is pending and returns.
	if err := d.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if depth, _ := st.Depth(); depth["hook"] != 0 {
		t.Fatalf("%d entries left", depth["hook"])
	}
	mu.Lock()
	defer mu.Unlock()
	var repeated []string
	for id, n := range got {
		if n > 1 {
			repeated = append(repeated, fmt.Sprintf("%s ×%d", id, n))
		}
	}
	if len(retrying) > 0 || len(repeated) > 0 {
		t.Fatalf("a receiver answering each request in 50 ms (timeout 10 s) got %d events twice or more %v, "+
			"and %d attempts were reported failed, first %q", len(repeated), repeated, len(retrying), first(retrying))
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
