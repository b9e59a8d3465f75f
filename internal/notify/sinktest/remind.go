package sinktest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
)

// ReminderNote is the note of the reminders the suite sends, as alarm
// management words it.
const ReminderNote = "Reminder, ongoing for 4h"

// Remind calls r.Remind of ev's alarm with memory as Call does, ev's note
// set to ReminderNote.
func Remind(t testing.TB, clk *clock.Fake, r notify.Reminder, ev event.Event, memory map[string]string) (notify.Result, error) {
	t.Helper()
	ev.Data.Note = ReminderNote
	return Call(t, clk, "Remind of "+ev.Data.OriginID, func(ctx context.Context) (notify.Result, error) { return r.Remind(ctx, &ev, memory) })
}

// keepsNoMemory reports whether r declares that its starts leave no memory.
func keepsNoMemory(r notify.Reminder) bool {
	ml, ok := r.(notify.MemorylessReminder)
	return ok && ml.KeepsNoMemory()
}

func remind(t *testing.T, h Harness) {
	t.Run("the reminder reaches the channel with its note", func(t *testing.T) { remindFlow(t, h) })
	t.Run("status table", func(t *testing.T) { remindStatus(t, h) })
	t.Run("no secret in errors or logs", func(t *testing.T) { remindLeak(t, h) })
}

// reminder returns the sink of f as a Reminder, and skips t when it is none.
func (f *fixture) reminder() notify.Reminder {
	f.t.Helper()
	r, ok := f.build().(notify.Reminder)
	if !ok {
		f.t.Skip("the sink type sends no reminders")
	}
	return r
}

// startFor sends the start of origin and returns the memory it left; it
// skips t when the sink, as configured, can remind of no alarm (a start
// without memory, in a sink that needs it).
func (f *fixture) startFor(r notify.Reminder, origin string) (event.Event, map[string]string) {
	f.t.Helper()
	start := Event(origin, 0, event.Start)
	res, err := f.send(r, start, nil)
	if err != nil {
		f.t.Fatalf("start of %s: %v", origin, err)
	}
	if len(res.Memory) == 0 && !keepsNoMemory(r) {
		before := len(f.all())
		if _, err := Remind(f.t, f.clk, r, start, res.Memory); err != nil {
			f.t.Fatalf("Remind without the memory it needs: %v, want nothing sent and no error", err)
		}
		if n := len(f.all()) - before; n != 0 {
			f.t.Fatalf("Remind without the memory it needs sent %d messages, want none", n)
		}
		f.t.Skip("the sink, as configured, leaves no memory to remind from")
	}
	return start, res.Memory
}

// remindFlow sends a start, then its reminder with the start's memory, as
// alarm management does after a restart: one message more, holding the
// note and the alarm's code. A sink that needs memory sends nothing without.
func remindFlow(t *testing.T, h Harness) {
	f := newFixture(t, h)
	r := f.reminder()
	start, mem := f.startFor(r, "rem1")
	before := len(f.all())
	if _, err := Remind(t, f.clk, f.build().(notify.Reminder), start, mem); err != nil {
		t.Fatalf("Remind: %v", err)
	}
	got := f.all()
	if len(got) != before+1 {
		t.Fatalf("Remind sent %d messages, want 1:\n%s", len(got)-before, strings.Join(got[before:], "\n"))
	}
	if text := got[before]; !strings.Contains(text, ReminderNote) || !strings.Contains(text, start.Data.EventCode) {
		t.Errorf("the reminder does not hold the note %q and the alarm's code %s:\n%s", ReminderNote, start.Data.EventCode, text)
	}
	if !keepsNoMemory(r) {
		if _, err := Remind(t, f.clk, r, start, nil); err != nil {
			t.Errorf("Remind without memory: %v, want nothing sent and no error", err)
		}
		if n := len(f.all()) - before - 1; n != 0 {
			t.Errorf("Remind without memory sent %d messages, want none", n)
		}
	}
}

// remindStatus checks Remind against the status table's extremes: a 500 is
// retried, a 400 is not.
func remindStatus(t *testing.T, h Harness) {
	f := newHTTPFixture(t, h)
	r := f.reminder()
	start, mem := f.startFor(r, "rem2")
	for _, c := range extremes {
		f.front.set("status", c.code, nil)
		res, err := Remind(t, f.clk, r, start, mem)
		if err == nil || res.Retry != c.retry {
			t.Errorf("Remind at HTTP %d: retry %v (%v), want an error and retry %v", c.code, res.Retry, err, c.retry)
		}
	}
}

// remindLeak checks that no secret reaches the errors of Remind, or the
// log, when the server echoes the whole request back.
func remindLeak(t *testing.T, h Harness) {
	f := newHTTPFixture(t, h)
	r := f.reminder()
	start, mem := f.startFor(r, "rem3")
	texts := map[string]string{}
	for _, code := range []int{http.StatusBadRequest, http.StatusInternalServerError} {
		f.front.echo(code, 0)
		if _, err := Remind(t, f.clk, r, start, mem); err != nil {
			texts[fmt.Sprintf("Remind at HTTP %d", code)] = err.Error()
		} else {
			t.Errorf("Remind at HTTP %d echo: no error", code)
		}
	}
	texts["log"] = f.log()
	f.assertNoSecret(t, texts)
}
