package nats_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/event"
	natssink "github.com/relay-energy/relay/internal/notify/nats"
	"github.com/relay-energy/relay/internal/notify/sinktest"
)

// Acknowledgements go on the bus like any event: each ack and unack on the
// subject the template writes for it (the default ends in .ack or .unack),
// with the event id as Nats-Msg-Id, so that JetStream keeps a second
// acknowledgement of the same alarm (a new id) and drops a repeat of one
// (the same id).
func TestAcksArePublishedOnTheirOwnSubjectsAndEachIsStoredOnce(t *testing.T) {
	_, nc, _ := onBus(t)
	sub := subscribe(t, nc, "energy.alarms.>")
	subject, err := natssink.CompileSubject(natssink.DefaultSubject)
	if err != nil {
		t.Fatal(err)
	}
	sink := delivertest.NewNATS(t, nc, natssink.Config{JetStream: true, CreateStream: "ALARMS", Subject: subject.Render})
	if !sink.CarriesAcks() {
		t.Fatal("the bus does not carry acks")
	}
	start := sinktest.Event("a1", 2, event.Start)
	a := event.Alarm{OriginID: "a1", Level: 2, TenantID: start.Data.TenantID, StationID: start.Data.StationID,
		DeviceSN: start.Data.DeviceSN, OccurredAt: sinktest.Epoch.Add(-17 * time.Minute)}
	info := func(by, at string) event.AckInfo { return event.AckInfo{By: by, Via: "slack", At: at} }
	events := []event.Event{
		start,
		event.NewAck(a, event.Ack, 1, info("U1", "2026-11-21T08:01:00.000Z"), sinktest.Epoch),
		event.NewAck(a, event.Unack, 1, info("U1", "2026-11-21T08:02:00.000Z"), sinktest.Epoch),
		event.NewAck(a, event.Ack, 2, info("U2", "2026-11-21T08:03:00.000Z"), sinktest.Epoch),
	}
	for _, ev := range events {
		if _, err := sink.Send(context.Background(), sinktest.Delivery(t, ev, nil)); err != nil {
			t.Fatalf("%s: %v", ev.ID, err)
		}
	}
	// A retry of the first ack, as after a crash before its commit.
	if _, err := sink.Send(context.Background(), sinktest.Delivery(t, events[1], nil)); err != nil {
		t.Fatal(err)
	}
	want := []struct{ subject, id, typ string }{
		{"energy.alarms.1001.5001.2.start", "a1:start", "energy.alarm.start"},
		{"energy.alarms.1001.5001.2.ack", "a1:ack", "energy.alarm.ack"},
		{"energy.alarms.1001.5001.2.unack", "a1:unack", "energy.alarm.unack"},
		{"energy.alarms.1001.5001.2.ack", "a1:ack.2", "energy.alarm.ack"},
		{"energy.alarms.1001.5001.2.ack", "a1:ack", "energy.alarm.ack"},
	}
	for _, w := range want {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("waiting for %s: %v", w.id, err)
		}
		if m.Subject != w.subject || m.Header.Get(nats.MsgIdHdr) != w.id || m.Header.Get(natssink.HeaderType) != w.typ {
			t.Errorf("got %s (id %s, type %s), want %s (id %s, type %s)", m.Subject, m.Header.Get(nats.MsgIdHdr),
				m.Header.Get(natssink.HeaderType), w.subject, w.id, w.typ)
		}
		if w.id != "a1:start" {
			ev, err := event.Unmarshal(m.Data)
			if err != nil || ev.Data.Ack == nil || ev.Data.Ack.Via != "slack" {
				t.Errorf("%s: the message is not the ack event with who acknowledged (%v): %s", w.id, err, m.Data)
			}
		}
	}
	if n := streamMsgs(t, nc, "ALARMS"); n != 4 {
		t.Errorf("stream holds %d messages, want 4: the start, both acks and the unack, the repeated ack once", n)
	}
}
