package store

import (
	"slices"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// TestDeliveriesTellWhatBecameOfEachStart: the operator console's delivery
// ledger of an alarm says, per sink, whether its start waits, was sent,
// digested, withheld, given up on or dropped, with the reason and time the
// store keeps.
func TestDeliveriesTellWhatBecameOfEachStart(t *testing.T) {
	s, clk, _ := newStore(t, Options{})
	ids := []string{"pending", "sent", "sent-nomem", "withheld", "digested", "dead", "dropped"}
	var obs []event.Alarm
	for _, id := range ids {
		obs = append(obs, ongoing(id))
	}
	apply(t, s, Batch{Observed: obs}, to("chat"))
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("two")}}, to("chat", "bus"))
	enqueued := clk.Now()
	clk.Advance(time.Minute)
	es, err := s.Pending("chat", 100)
	if err != nil {
		t.Fatal(err)
	}
	entry := map[string]Entry{}
	for _, e := range es {
		entry[e.OriginID] = e
	}
	if err := s.Settle([]Delivery{
		{Entry: entry["sent"], Memory: map[string]string{"ts": "1700.1"}},
		{Entry: entry["sent-nomem"]},
		{Entry: entry["two"]},
		{Entry: entry["withheld"], Suppressed: "silence", Memory: map[string]string{MemorySuppressed: "silence", MemoryWhy: "s-42"}},
		{Entry: entry["digested"], Memory: map[string]string{MemoryDigest: "d-1"}},
	}, nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"dead", "dropped"} {
		if err := s.DeadLetter(entry[id], "slack: 404 channel_not_found"); err != nil {
			t.Fatal(err)
		}
	}
	gaveUp := clk.Now()
	if _, err := s.DropDeadLetters(DeadLetterFilter{Sink: "chat", EventID: "dropped"}); err != nil {
		t.Fatal(err)
	}

	got, err := s.Deliveries(append([]string{"unknown"}, append(ids, "two")...))
	if err != nil {
		t.Fatal(err)
	}
	one := func(state StartState, reason string, at time.Time) []StartDelivery {
		return []StartDelivery{{Sink: "chat", State: state, Reason: reason, At: at}}
	}
	want := map[string][]StartDelivery{
		"pending":    one(StartPending, "", enqueued),
		"sent":       one(StartDelivered, "", time.Time{}),
		"sent-nomem": one(StartDelivered, "", time.Time{}),
		"withheld":   one(StartWithheld, "silence: s-42", time.Time{}),
		"digested":   one(StartDigested, "", time.Time{}),
		"dead":       one(StartDead, "slack: 404 channel_not_found", gaveUp),
		"two":        {{Sink: "chat", State: StartDelivered}, {Sink: "bus", State: StartPending, At: enqueued}},
	}
	if _, ok := got["unknown"]; ok {
		t.Errorf("an alarm the store does not know has deliveries %v", got["unknown"])
	}
	for id, w := range want {
		g := got[id]
		if !slices.EqualFunc(g, w, func(a, b StartDelivery) bool {
			return a.Sink == b.Sink && a.State == b.State && a.Reason == b.Reason && a.At.Equal(b.At)
		}) {
			t.Errorf("deliveries of %s = %+v, want %+v", id, g, w)
		}
	}
	if d := got["dropped"]; len(d) != 1 || d[0].State != StartDropped || d[0].Reason == "" {
		t.Errorf("deliveries of dropped = %+v, want chat dropped with the reason", d)
	}
}

// TestTextsReadTheOngoingAlarmsRecords: the console's rows and its device
// type filter read the words of each ongoing alarm from its upstream record.
func TestTextsReadTheOngoingAlarmsRecords(t *testing.T) {
	s, clk, _ := newStore(t, Options{})
	inv, pcs := ongoing("inv"), ongoing("pcs")
	inv.DeviceTemplateCode, pcs.DeviceTemplateCode = "Inverter", "Store_PCS"
	inv.EventCode, inv.EventDesc, inv.StationName, inv.DeviceName = "E17", "Grid overvoltage", "Hai'an solar", "INV 3"
	apply(t, s, Batch{Observed: []event.Alarm{inv, pcs, ongoing("over")}}, nil)
	clk.Advance(time.Minute)
	apply(t, s, Batch{Observed: []event.Alarm{rec("over", event.StatusEnded, clk.Now())}}, nil)
	got, err := s.Texts([]string{"inv", "pcs", "over", "unknown"})
	if err != nil {
		t.Fatal(err)
	}
	want := AlarmText{EventCode: "E17", EventDesc: "Grid overvoltage", StationName: "Hai'an solar", DeviceName: "INV 3",
		DeviceType: "Inverter"}
	if len(got) != 2 || got["inv"] != want || got["pcs"].DeviceType != "Store_PCS" {
		t.Fatalf("Texts = %+v, want inv %+v and pcs of type Store_PCS alone", got, want)
	}
}

// TestChangesWakeReadersOnceACommittedWrite: a poll that changes alarms and
// an alarm transaction wake the readers of Changes; a poll that only
// repeats what the store knows does not.
func TestChangesWakeReadersOnceACommittedWrite(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	gen0, ch := s.Changes()
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1")}}, to("chat"))
	select {
	case <-ch:
	default:
		t.Fatal("Apply of a new alarm did not close the channel of Changes")
	}
	gen1, ch := s.Changes()
	if gen1 <= gen0 {
		t.Fatalf("generation %d after a write, was %d", gen1, gen0)
	}
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1")}}, to("chat"))
	select {
	case <-ch:
		t.Fatal("a poll that changes nothing woke the readers")
	default:
	}
	if _, err := s.UpdateAlarm("a1", func(a *AlarmTx) error { return a.Put(KV{NS: "ack", Key: "a1", Value: []byte("x")}) }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("an alarm transaction did not close the channel of Changes")
	}
	if gen2, _ := s.Changes(); gen2 != gen1+1 {
		t.Fatalf("generation %d after one more write, want %d", gen2, gen1+1)
	}
}
