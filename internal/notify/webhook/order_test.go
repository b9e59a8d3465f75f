package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/webhook"
	"github.com/relay-energy/relay/internal/store"
)

// outOfOrder is a receiver that holds each request a random time, so that
// later requests are often answered first, and refuses some with a 503. It
// checks that an alarm's end arrives only after its start was answered 2xx.
type outOfOrder struct {
	t *testing.T

	mu        sync.Mutex
	rnd       *rand.Rand
	accepted  map[string]int  // 2xx answers by event id
	answered  map[string]bool // event ids answered 2xx
	arrivals  int
	inFlight  int
	most      int
	refused   int
	overtakes int          // requests answered before one that came earlier
	pending   map[int]bool // arrival numbers not answered yet
}

func newOutOfOrder(t *testing.T, seed uint64) *outOfOrder {
	return &outOfOrder{t: t, rnd: rand.New(rand.NewPCG(seed, seed)), accepted: map[string]int{},
		answered: map[string]bool{}, pending: map[int]bool{}}
}

func (o *outOfOrder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ev event.Event
	if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
		o.t.Errorf("a request that is not an event: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	if ev.Data.Transition != event.Start && !o.answered[ev.Data.OriginID+":start"] {
		o.t.Errorf("%s arrived before %s:start was answered 2xx", ev.ID, ev.Data.OriginID)
	}
	n := o.arrivals
	o.arrivals++
	o.pending[n] = true
	o.inFlight++
	o.most = max(o.most, o.inFlight)
	hold := time.Duration(o.rnd.IntN(4000)) * time.Microsecond
	refuse := o.rnd.IntN(100) < 10
	o.mu.Unlock()

	time.Sleep(hold)

	o.mu.Lock()
	delete(o.pending, n)
	for m := range o.pending {
		if m < n {
			o.overtakes++
			break
		}
	}
	o.inFlight--
	if refuse {
		o.refused++
	} else {
		o.accepted[ev.ID]++
		o.answered[ev.ID] = true
	}
	o.mu.Unlock()
	if refuse {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// alarmRecord is the upstream record of alarm origin with status, as the
// poller reads it.
func alarmRecord(origin string, status int, occurred, recovered time.Time) event.Alarm {
	raw, _ := json.Marshal(map[string]any{"originId": origin, "status": status})
	return event.Alarm{
		OriginID: origin, Status: status, Level: 1, EventCode: "E1023", EventDesc: "Grid overvoltage",
		TenantID: "T1", StationID: "ST-1", StationName: "Solar Park North", SystemID: "SYS-1",
		DeviceSN: "INV-0042", DeviceName: "Inverter 42", OccurredAt: occurred, RecoveredAt: recovered, Raw: raw,
	}
}

// Through the real pipeline (store, Deliverer, webhook sink at concurrency
// 8) to a receiver that answers out of order and refuses some requests with
// a 503: for every alarm the end's request arrives only after its start was
// answered 2xx, and every event is delivered once. Ends come in later
// batches than their starts, while the starts are in flight, and in the
// same batch as their start.
func TestAnEndNeverOvertakesItsStartOnAConcurrentWebhook(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("receiver seed %d", seed)
	rcv := newOutOfOrder(t, seed)
	srv := httptest.NewServer(rcv)
	defer srv.Close()

	st, sink := storeAndHook(t, srv.URL, 8)
	d, err := deliver.NewDeliverer(st, []deliver.Target{{Sink: sink}}, deliver.Options{
		Logger: slog.New(slog.DiscardHandler), MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	want := map[string]bool{}
	apply := func(records ...event.Alarm) {
		t.Helper()
		res, err := st.Apply(context.Background(), store.Batch{Observed: records},
			func(*event.Event) []string { return []string{"hook"} })
		if err != nil {
			t.Fatalf("apply: %v", err)
		}
		for _, ev := range res.Events {
			want[ev.ID] = true
		}
	}
	name := func(i int) string { return fmt.Sprintf("a%03d", i) }
	started := time.Now().Add(-time.Minute)
	starts := func(from, to int) (out []event.Alarm) {
		for i := from; i < to; i++ {
			out = append(out, alarmRecord(name(i), event.StatusOngoing, started, time.Time{}))
		}
		return out
	}
	ends := func(from, to int) (out []event.Alarm) {
		for i := from; i < to; i++ {
			out = append(out, alarmRecord(name(i), event.StatusEnded, started, time.Now()))
		}
		return out
	}
	// waitAccepted waits until the receiver has accepted n events, so that
	// the next batch comes while the Deliverer is busy.
	waitAccepted := func(n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			rcv.mu.Lock()
			got := len(rcv.accepted)
			rcv.mu.Unlock()
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the receiver accepted %d events in 30 s, want %d", got, n)
			}
			time.Sleep(time.Millisecond)
		}
	}

	apply(starts(0, 80)...)
	waitAccepted(10)
	// Ends of alarms whose starts may still be in flight or refused.
	apply(append(starts(80, 160), ends(0, 40)...)...)
	waitAccepted(60)
	// A start and its end in one batch, as two records.
	var both []event.Alarm
	for i := 160; i < 180; i++ {
		both = append(both, starts(i, i+1)[0], ends(i, i+1)[0])
	}
	apply(append(both, ends(80, 120)...)...)
	// Alarms first seen ended: the start and the end from one record.
	apply(ends(180, 200)...)
	if len(want) != 200+40+20+40+20 {
		t.Fatalf("the batches produced %d events, want 320", len(want))
	}

	deadline := time.Now().Add(60 * time.Second)
	for {
		depth, err := st.Depth()
		if err != nil {
			t.Fatal(err)
		}
		if depth["hook"] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d entries still in the outbox after 60 s", depth["hook"])
		}
		time.Sleep(5 * time.Millisecond)
	}
	if dl, err := st.DeadLetters("hook"); err != nil || len(dl) != 0 {
		t.Fatalf("dead letters %+v (%v), want none", dl, err)
	}

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	var missing, repeated []string
	for id := range want {
		switch n := rcv.accepted[id]; {
		case n == 0:
			missing = append(missing, id)
		case n > 1:
			repeated = append(repeated, fmt.Sprintf("%s ×%d", id, n))
		}
	}
	if len(missing) > 0 || len(repeated) > 0 || len(rcv.accepted) != len(want) {
		t.Fatalf("accepted %d events of %d; missing %s; repeated %s", len(rcv.accepted), len(want),
			strings.Join(missing, " "), strings.Join(repeated, " "))
	}
	// The conditions the test is about did occur.
	if rcv.most < 2 || rcv.most > 8 {
		t.Errorf("at most %d requests in flight, want 2 to 8", rcv.most)
	}
	if rcv.overtakes == 0 || rcv.refused == 0 {
		t.Errorf("%d requests overtook an earlier one and %d were refused: the receiver did not answer out of order", rcv.overtakes, rcv.refused)
	}
	t.Logf("%d requests, %d refused, %d answered before an earlier one, at most %d in flight",
		rcv.arrivals, rcv.refused, rcv.overtakes, rcv.most)
}

// storeAndHook opens a store in a temporary directory, closed when the test
// ends, and a webhook sink "hook" to url with concurrency.
func storeAndHook(t *testing.T, url string, concurrency int) (*store.Store, *webhook.Sink) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "relay.db"), store.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sink, err := webhook.New(webhook.Config{Name: "hook", URL: url, Concurrency: concurrency})
	if err != nil {
		t.Fatal(err)
	}
	return st, sink
}
