package deliver_test

import (
	"slices"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/webhook"
	"github.com/relay-energy/relay/internal/store"
)

// TestAReplayDuringAnOutageNeverSendsAnEndBeforeItsStart is sequence 3 of
// the delivery ledger's issue. A start is refused (400) and dead-lettered;
// the receiver then goes down; the alarm ends; an operator replays the start
// while the receiver is still down. Before the ledger the delivery loop kept
// retrying the end it held, and the receiver got end, start, end once it was
// back. The end now waits beside its start, so the receiver gets the start,
// then the end, once each.
func TestAReplayDuringAnOutageNeverSendsAnEndBeforeItsStart(t *testing.T) {
	f := delivertest.New(t, "ops")
	rcv := notifytest.NewReceiver(t, "")
	rcv.Queue(notifytest.Answer{Status: 400})
	f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: delivertest.NewWebhook(t, f, webhook.Config{Name: "ops", URL: rcv.URL(), Concurrency: 1})})
	start := f.Start("a1", 0)
	f.DriveUntil(1, delivertest.T0.Add(time.Hour), func() bool { return len(f.DeadLetters("ops")) == 1 })

	rcv.Down(notifytest.Answer{Status: 503})
	f.Clock.Advance(time.Minute)
	f.Finish("a1", 0, event.StatusEnded, delivertest.Occurred(t, start))
	f.DriveTo(1, f.Clock.Now().Add(30*time.Second))
	replayed, refused, err := f.Store.ReplayDeadLetters(store.DeadLetterFilter{EventID: "a1"})
	if err != nil || len(replayed) != 2 || len(refused) != 0 {
		t.Fatalf("replay: %d replayed, refused %+v, %v; want the start and its end", len(replayed), refused, err)
	}
	f.DriveTo(1, f.Clock.Now().Add(time.Minute))
	rcv.Up()
	f.DriveUntil(1, f.Clock.Now().Add(time.Hour), func() bool { return len(f.Pending("ops")) == 0 })

	var got []string
	for _, body := range rcv.Accepted() {
		ev, err := event.Unmarshal(body)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.ID)
	}
	if want := []string{"a1:start", "a1:end"}; !slices.Equal(got, want) {
		t.Fatalf("the receiver accepted %v, want %v", got, want)
	}
	// Not even an attempt at the end came before its start went out.
	for _, r := range rcv.Requests() {
		ev, err := event.Unmarshal(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		if ev.ID == "a1:end" {
			t.Fatalf("the end was attempted (answered %d) before its start was delivered", r.Status)
		}
		if ev.ID == "a1:start" && r.Status >= 200 && r.Status < 300 {
			break
		}
	}
}
