package nats_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	natssink "github.com/relay-energy/relay/internal/notify/nats"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/testwait"
)

// onBus starts a NATS server, connects to it and makes the fixture of a
// relay whose one sink is "bus".
func onBus(t *testing.T) (*natstest.Server, *nats.Conn, *delivertest.Fixture) {
	t.Helper()
	srv := natstest.StartServer(t, natstest.Config{})
	nc := delivertest.ConnectNATS(t, srv)
	return srv, nc, delivertest.New(t, "bus")
}

// subscribe subscribes nc to subject, failing t if it cannot.
func subscribe(t *testing.T, nc *nats.Conn, subject string) *nats.Subscription {
	t.Helper()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

func streamMsgs(t *testing.T, nc *nats.Conn, name string) uint64 {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestJetStreamStoresAnEventOnceWhenACrashRepeatsIt(t *testing.T) {
	srv, nc, f := onBus(t)
	sub := subscribe(t, nc, "energy.alarms.>")
	f.Start("a1", 0)
	d := f.Delivery("bus")

	// The relay publishes, then dies before the outbox commit.
	sink := delivertest.NewNATS(t, nc, natssink.Config{JetStream: true, CreateStream: "ALARMS"})
	if _, err := sink.Send(context.Background(), d); err != nil {
		t.Fatalf("first publish: %v", err)
	}
	// It restarts: the store is reopened and a new sink sends the entry again.
	f.Reopen()
	if got := f.Pending("bus"); delivertest.Join(got) != "a1:start" {
		t.Fatalf("outbox after the crash = %v, want a1:start still there", got)
	}
	f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: delivertest.NewNATS(t, delivertest.ConnectNATS(t, srv), natssink.Config{JetStream: true, CreateStream: "ALARMS"})})
	testwait.For(t, 5*time.Second, "the second publish", func() bool { return len(f.Pending("bus")) == 0 })

	if n := streamMsgs(t, nc, "ALARMS"); n != 1 {
		t.Fatalf("stream holds %d messages, want the event once", n)
	}
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Subject != "energy.alarms.T1.ST-1.0.start" {
		t.Fatalf("subject %q", msg.Subject)
	}
	if !bytes.Equal(msg.Data, d.Body) {
		t.Fatalf("subscriber got\n%s\nwant the exact event bytes\n%s", msg.Data, d.Body)
	}
	for name, want := range map[string]string{"Nats-Msg-Id": "a1:start", "Relay-Type": "energy.alarm.start", "Relay-Level": "0"} {
		if got := msg.Header.Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}

	js, _ := jetstream.New(nc)
	stream, err := js.Stream(context.Background(), "ALARMS")
	if err != nil {
		t.Fatal(err)
	}
	cfg := stream.CachedInfo().Config
	if delivertest.Join(cfg.Subjects) != "energy.alarms.>" || cfg.Duplicates != 24*time.Hour {
		t.Fatalf("created stream subjects %v duplicates %s, want energy.alarms.> and 24h", cfg.Subjects, cfg.Duplicates)
	}
	stored, err := stream.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stored.Data, d.Body) {
		t.Fatal("the stored message is not the exact event bytes")
	}
}

func TestCreateStreamLeavesAnExistingStreamAlone(t *testing.T) {
	_, nc, f := onBus(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "OPS", Subjects: []string{"energy.>"}}); err != nil {
		t.Fatal(err)
	}
	f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: delivertest.NewNATS(t, nc, natssink.Config{JetStream: true, CreateStream: "ALARMS"})})
	f.Start("a1", 0)
	testwait.For(t, 5*time.Second, "the publish", func() bool { return len(f.Pending("bus")) == 0 })
	if n := streamMsgs(t, nc, "OPS"); n != 1 {
		t.Fatalf("operator's stream holds %d messages, want 1", n)
	}
	if _, err := js.Stream(context.Background(), "ALARMS"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream ALARMS: %v, want it never created", err)
	}
}

func TestCoreNATSDeliversAfterAFlush(t *testing.T) {
	_, nc, f := onBus(t)
	sub := subscribe(t, nc, "energy.alarms.T1.>")
	f.Start("a1", 2)
	d := f.Delivery("bus")
	if _, err := delivertest.NewNATS(t, nc, natssink.Config{}).Send(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Subject != "energy.alarms.T1.ST-1.2.start" || !bytes.Equal(msg.Data, d.Body) || msg.Header.Get("Nats-Msg-Id") != "a1:start" {
		t.Fatalf("got %s %q %s", msg.Subject, msg.Header, msg.Data)
	}
}

func TestJetStreamWithoutStreamIsRetriedUntilOneExists(t *testing.T) {
	_, nc, f := onBus(t)
	f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: delivertest.NewNATS(t, nc, natssink.Config{JetStream: true, Timeout: time.Second})})
	f.Start("a1", 0)
	f.DriveTo(1, delivertest.T0.Add(10*time.Second))
	if got := f.Pending("bus"); delivertest.Join(got) != "a1:start" {
		t.Fatalf("outbox = %v, want a1:start kept while no stream captures the subject", got)
	}
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "LATE", Subjects: []string{"energy.alarms.>"}}); err != nil {
		t.Fatal(err)
	}
	f.DriveUntil(1, delivertest.T0.Add(time.Hour), func() bool { return len(f.Pending("bus")) == 0 })
	if n := streamMsgs(t, nc, "LATE"); n != 1 {
		t.Fatalf("stream holds %d messages, want 1", n)
	}
}

func TestNATSOutageKeepsTheOutboxUntilReconnected(t *testing.T) {
	srv, nc, f := onBus(t)
	f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: delivertest.NewNATS(t, nc, natssink.Config{JetStream: true, CreateStream: "ALARMS", Timeout: time.Second})})
	f.Start("a1", 0)
	testwait.For(t, 5*time.Second, "the first publish", func() bool { return len(f.Pending("bus")) == 0 })

	srv.Shutdown()
	testwait.For(t, 5*time.Second, "the disconnection", func() bool { return !nc.IsConnected() })
	f.Start("a2", 0)
	f.Start("a3", 0)
	f.DriveTo(1, delivertest.T0.Add(10*time.Minute))
	if got := f.Pending("bus"); delivertest.Join(got) != "a2:start a3:start" {
		t.Fatalf("outbox during the outage = %v, want both events kept", got)
	}
	srv.Restart()
	testwait.For(t, 5*time.Second, "the reconnection", nc.IsConnected)
	f.DriveUntil(1, delivertest.T0.Add(time.Hour), func() bool { return len(f.Pending("bus")) == 0 })
	if n := streamMsgs(t, nc, "ALARMS"); n != 3 {
		t.Fatalf("stream holds %d messages, want 3", n)
	}
}

func TestNATSBadSubjectIsDeadLettered(t *testing.T) {
	_, nc, f := onBus(t)
	sink := delivertest.NewNATS(t, nc, natssink.Config{Subject: func(*event.Event) (string, error) { return "energy..start", nil }})
	f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: sink})
	f.Start("a1", 0)
	testwait.For(t, 5*time.Second, "a dead letter", func() bool { return len(f.DeadLetters("bus")) == 1 })
	if r := f.DeadLetters("bus")[0].Reason; !strings.Contains(r, "which has an empty token") {
		t.Fatalf("reason %q, want it to name the empty token", r)
	}
}

func TestNATSDeliversEveryAlarmInOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  natssink.Config
	}{
		{"jetstream", natssink.Config{JetStream: true, CreateStream: "ALARMS"}},
		{"core", natssink.Config{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, nc, f := onBus(t)
			sub := subscribe(t, nc, "energy.alarms.>")
			f.Clock.Advance(time.Minute)
			began, now := delivertest.T0.Add(-time.Hour), f.Clock.Now()
			// Alarms that started and ended between two polls: each yields
			// its start and its end, which a pipelined publish must keep in
			// order.
			f.Apply(
				delivertest.Alarm("a1", 0, event.StatusEnded, began, now),
				delivertest.Alarm("a2", 1, event.StatusInvalid, began, now),
				delivertest.Alarm("a3", 2, event.StatusOngoing, began, time.Time{}),
				delivertest.Alarm("a4", 3, event.StatusEnded, began, now),
			)
			want := delivertest.Join(f.Pending("bus"))
			f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: delivertest.NewNATS(t, nc, tc.cfg)})
			testwait.For(t, 5*time.Second, "the deliveries", func() bool { return len(f.Pending("bus")) == 0 })
			var got []string
			for range 7 {
				msg, err := sub.NextMsg(5 * time.Second)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, msg.Header.Get("Nats-Msg-Id"))
			}
			if delivertest.Join(got) != want {
				t.Fatalf("received %q, want the outbox order %q", delivertest.Join(got), want)
			}
			if tc.cfg.JetStream {
				if n := streamMsgs(t, nc, "ALARMS"); n != 7 {
					t.Fatalf("stream holds %d messages, want 7", n)
				}
			}
		})
	}
}
