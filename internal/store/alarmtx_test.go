package store

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// UpdateAlarm writes an alarm's values, outbox entries and ledger set in one
// transaction, which a reopen (on JetStream, a restore from the stream)
// keeps; ErrUnchanged or an error writes nothing; an alarm the store does
// not know is reported, not created.
func TestUpdateAlarmWritesTogether(t *testing.T) {
	s, clk, path := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a")}}, to("bus"))
	clk.Advance(time.Minute)
	found, err := s.UpdateAlarm("a", func(tx *AlarmTx) error {
		rec, ongoing, err := tx.Record()
		if err != nil || !ongoing || rec.OriginID != "a" {
			t.Fatalf("Record = %+v, %v, %v", rec, ongoing, err)
		}
		if sinks, err := tx.Sinks(); err != nil || !slices.Equal(sinks, []string{"bus"}) {
			t.Fatalf("Sinks = %v, %v", sinks, err)
		}
		ev := event.NewAck(rec, event.Ack, 1, event.AckInfo{By: "U1", Via: "slack", At: event.FormatTime(tx.Now())}, tx.Tracked().FirstSeen)
		if err := tx.Enqueue("bus", &ev); err != nil {
			return err
		}
		start := event.New(rec, event.Start, tx.Tracked().FirstSeen, false)
		if err := tx.Enqueue("oncall", &start); err != nil {
			return err
		}
		if err := tx.Join("oncall"); err != nil {
			return err
		}
		return tx.Put(KV{NS: "ack", Key: "a", Value: []byte("acked")})
	})
	if err != nil || !found {
		t.Fatalf("UpdateAlarm = %v, %v", found, err)
	}
	for _, fail := range []error{ErrUnchanged, errors.New("boom")} {
		_, err := s.UpdateAlarm("a", func(tx *AlarmTx) error {
			if err := tx.Put(KV{NS: "ack", Key: "a", Value: []byte("changed")}); err != nil {
				return err
			}
			if err := tx.Join("ghost"); err != nil {
				return err
			}
			return fail
		})
		if (err == nil) != (fail == ErrUnchanged) {
			t.Fatalf("UpdateAlarm returning %v: err %v", fail, err)
		}
	}
	if found, err := s.UpdateAlarm("nobody", func(*AlarmTx) error { t.Fatal("called for an unknown alarm"); return nil }); found || err != nil {
		t.Fatalf("unknown alarm: %v, %v", found, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, Options{Clock: clk})
	if got := pendingIDs(t, s, "bus"); !slices.Equal(got, []string{"a:start", "a:ack"}) {
		t.Fatalf("bus's outbox = %v, want the start then the ack", got)
	}
	if got := pendingIDs(t, s, "oncall"); !slices.Equal(got, []string{"a:start"}) {
		t.Fatalf("oncall's outbox = %v", got)
	}
	if v, err := s.Get("ack", "a"); err != nil || string(v) != "acked" {
		t.Fatalf("value = %q, %v; want what the committed transaction wrote", v, err)
	}
	// The end goes to the joined sink too, and only there besides the bus.
	apply(t, s, Batch{Observed: []event.Alarm{rec("a", event.StatusEnded, clk.Now())}}, to("bus"))
	if got := pendingIDs(t, s, "oncall"); !slices.Equal(got, []string{"a:start", "a:end"}) {
		t.Fatalf("oncall's outbox after the end = %v: a joined sink gets the end", got)
	}
	if sinks, _, _ := s.StartSinks("a"); slices.Contains(sinks, "ghost") {
		t.Fatalf("a rolled back Join stayed: %v", sinks)
	}
	_, err = s.UpdateAlarm("a", func(tx *AlarmTx) error {
		if _, ongoing, err := tx.Record(); err != nil || ongoing {
			t.Fatalf("Record of an ended alarm: ongoing %v, %v", ongoing, err)
		}
		return ErrUnchanged
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An acknowledgement follows its start's fate at a sink: one enqueued while
// the start was still tried is parked beside it when it becomes a dead
// letter, one enqueued after is parked at once, and a replay sends them in
// order; after a dropped start it is recorded as dropped. Nothing of the
// alarm reaches a sink that does not hold its start.
func TestAnAcknowledgementFollowsItsStartsFate(t *testing.T) {
	s, clk, _ := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a"), ongoing("b")}}, to("bus", "chat"))
	ack := func(origin string, n int) {
		t.Helper()
		_, err := s.UpdateAlarm(origin, func(tx *AlarmTx) error {
			rec, _, err := tx.Record()
			if err != nil {
				return err
			}
			ev := event.NewAck(rec, event.Ack, n, event.AckInfo{By: "U1", Via: "slack", At: event.FormatTime(tx.Now())}, tx.Tracked().FirstSeen)
			for _, sink := range []string{"bus", "chat"} {
				if err := tx.Enqueue(sink, &ev); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	ack("a", 1)
	es, err := s.Pending("chat", 10)
	if err != nil || len(es) != 3 {
		t.Fatalf("chat's outbox: %v, %v", es, err)
	}
	// a's start, then b's: each becomes a dead letter.
	for _, e := range []Entry{es[0], es[1]} {
		if err := s.DeadLetter(e, "refused"); err != nil {
			t.Fatal(err)
		}
	}
	if got := pendingIDs(t, s, "chat"); len(got) != 0 {
		t.Fatalf("chat's outbox after its starts died: %v; want a's ack parked beside its start", got)
	}
	clk.Advance(time.Minute)
	ack("a", 2)
	ack("b", 1)
	if got := pendingIDs(t, s, "chat"); len(got) != 0 {
		t.Fatalf("chat's outbox after more acks: %v; want them parked", got)
	}
	if got := pendingIDs(t, s, "bus"); !slices.Equal(got, []string{"a:start", "b:start", "a:ack", "a:ack.2", "b:ack"}) {
		t.Fatalf("bus's outbox: %v; the bus holds the starts and gets every ack", got)
	}
	if _, err := s.DropDeadLetters(DeadLetterFilter{Sink: "chat", EventID: "b"}); err != nil {
		t.Fatal(err)
	}
	ack("b", 2)
	sup, err := s.Suppressed("chat")
	if err != nil || len(sup) != 1 || sup[0].EventID != "b:ack.2" || !strings.HasPrefix(sup[0].Reason, "dropped (start-dropped)") {
		t.Fatalf("chat's suppressed log: %+v, %v; want b's later ack dropped with its start", sup, err)
	}
	if _, refused, err := s.ReplayDeadLetters(DeadLetterFilter{Sink: "chat"}); err != nil || len(refused) != 0 {
		t.Fatalf("replay: refused %v, %v", refused, err)
	}
	if got := pendingIDs(t, s, "chat"); !slices.Equal(got, []string{"a:start", "a:ack", "a:ack.2"}) {
		t.Fatalf("chat's outbox after the replay: %v; want a's start, then its acks", got)
	}
}

// An alarm recorded before the delivery ledger has no set. A Join keeps its
// end where the rules in force route it and adds the joined sinks; Adopt
// then fixes the set: the sinks the rules route its start to now and those
// joined, whatever the rules say when the end comes.
func TestJoinAndAdoptOfAnAlarmFromBeforeTheLedger(t *testing.T) {
	s, clk, path := newStore(t, Options{EndsByRules: true})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a"), ongoing("b")}}, to("bus", "chat"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, path, Options{Clock: clk})
	for _, id := range []string{"a", "b"} {
		_, err := s.UpdateAlarm(id, func(tx *AlarmTx) error {
			if tx.Ledgered() {
				t.Fatal("an alarm recorded before the ledger says its set decides where its end goes")
			}
			if err := tx.Join("oncall"); err != nil {
				return err
			}
			if tx.Ledgered() {
				t.Fatal("a Join alone makes the set decide where the end goes")
			}
			if id == "b" {
				return tx.Adopt([]string{"bus", "chat"})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The rules of the moment send ends to the bus alone: a's follows them
	// and the joined sink, b's its adopted set.
	apply(t, s, Batch{Observed: []event.Alarm{rec("a", event.StatusEnded, clk.Now()), rec("b", event.StatusEnded, clk.Now())}}, to("bus"))
	for sink, want := range map[string][]string{"bus": {"a:end", "b:end"}, "chat": {"b:end"}, "oncall": {"a:end", "b:end"}} {
		got := pendingIDs(t, s, sink)
		for _, id := range want {
			if !slices.Contains(got, id) {
				t.Fatalf("%s's outbox: %v; want %s", sink, got, id)
			}
		}
		if sink == "chat" && slices.Contains(got, "a:end") {
			t.Fatalf("chat's outbox: %v; a's end follows the rules of the moment, which do not send it there", got)
		}
	}
}

// A sink whose rules say send_resolved: false gets starts and no end nor
// invalid: each is recorded as dropped, not wanted, in its suppressed log,
// and counted; every other sink of the alarm gets it.
func TestEndsNotWantedAreRecordedAsDropped(t *testing.T) {
	s, clk, _ := newStore(t, Options{})
	s.SetResolvedOff([]string{"tickets"})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a"), ongoing("b")}}, to("bus", "tickets"))
	ds, err := s.Deliveries([]string{"a"})
	if err != nil || len(ds["a"]) != 2 || ds["a"][0].NoEnd || !ds["a"][1].NoEnd {
		t.Fatalf("Deliveries = %+v, %v; want tickets' start marked as wanting no end, the bus's not", ds, err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{rec("a", event.StatusEnded, clk.Now()), rec("b", event.StatusInvalid, clk.Now())}}, to("bus", "tickets"))
	if got := pendingIDs(t, s, "tickets"); !slices.Equal(got, []string{"a:start", "b:start"}) {
		t.Fatalf("tickets' outbox: %v; want the starts only", got)
	}
	if got := pendingIDs(t, s, "bus"); !slices.Equal(got, []string{"a:start", "b:start", "a:end", "b:invalid"}) {
		t.Fatalf("bus's outbox: %v", got)
	}
	sup, err := s.Suppressed("tickets")
	if err != nil || len(sup) != 2 {
		t.Fatalf("tickets' suppressed log: %+v, %v", sup, err)
	}
	for _, d := range sup {
		if !strings.HasPrefix(d.Reason, "dropped (end-not-wanted): ") || !strings.Contains(d.Reason, "send_resolved: false") {
			t.Fatalf("%s recorded as %q", d.EventID, d.Reason)
		}
	}
	if n := s.DroppedCounts()[[2]string{"tickets", DropEndNotWanted}]; n != 2 {
		t.Fatalf("counted %d ends not wanted, want 2", n)
	}
	// A dead start's end is not parked beside it either: a replay of the
	// start must not send it (found by the simulation, seed 136).
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("c")}}, to("tickets"))
	es, err := s.Pending("tickets", 10)
	if err != nil || len(es) != 3 {
		t.Fatalf("tickets' outbox: %v, %v", es, err)
	}
	if err := s.DeadLetter(es[2], "refused"); err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Observed: []event.Alarm{rec("c", event.StatusEnded, clk.Now())}}, to("tickets"))
	if _, _, err := s.ReplayDeadLetters(DeadLetterFilter{Sink: "tickets", EventID: "c"}); err != nil {
		t.Fatal(err)
	}
	if got := pendingIDs(t, s, "tickets"); !slices.Equal(got, []string{"a:start", "b:start", "c:start"}) {
		t.Fatalf("tickets' outbox after the replay: %v; want c's start without its end", got)
	}
}
