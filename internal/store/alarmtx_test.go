package store

import (
	"errors"
	"slices"
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

// StartHeld is false where the start is a dead letter: nothing of the alarm
// follows it there.
func TestStartHeldFollowsTheLedger(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a")}}, to("bus", "chat"))
	es, err := s.Pending("chat", 10)
	if err != nil || len(es) != 1 {
		t.Fatalf("pending %v, %v", es, err)
	}
	if err := s.DeadLetter(es[0], "refused"); err != nil {
		t.Fatal(err)
	}
	_, err = s.UpdateAlarm("a", func(tx *AlarmTx) error {
		if !tx.StartHeld("bus") || tx.StartHeld("chat") {
			t.Fatalf("StartHeld: bus %v, chat %v; want true, false", tx.StartHeld("bus"), tx.StartHeld("chat"))
		}
		return ErrUnchanged
	})
	if err != nil {
		t.Fatal(err)
	}
}
