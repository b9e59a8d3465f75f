package email_test

import (
	"context"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/email"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact/redacttest"
)

// TestAReminderIsAMailInReplyToTheStart: after a restart, the reminder is a
// mail in reply to the start's (In-Reply-To and References its Message-ID,
// the subject the start's after "Re: "), saying the note; the same reminder
// sent again has the same Message-ID, and a later one another.
func TestAReminderIsAMailInReplyToTheStart(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	srv, files := startSMTP(t)
	s := build(t, clk, options(srv, files), env, sinktype.Deps{})
	start := sinktest.Event("r1", 1, event.Start)
	res, err := send(t, clk, s, start, nil)
	if err != nil {
		t.Fatal(err)
	}
	again := build(t, clk, options(srv, files), env, sinktype.Deps{}).(notify.Reminder)
	for range 2 {
		if _, err := sinktest.Remind(t, clk, again, start, res.Memory); err != nil {
			t.Fatalf("Remind: %v", err)
		}
	}
	later := start
	later.Data.Note = "Reminder, ongoing for 8h"
	if _, err := sinktest.Call(t, clk, "Remind 8h", func(ctx context.Context) (notify.Result, error) { return again.Remind(ctx, &later, res.Memory) }); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages()
	if len(msgs) != 4 {
		t.Fatalf("the server took %d mails, want the start and three reminders", len(msgs))
	}
	if a, b := msgs[2].Header("Message-ID"), msgs[3].Header("Message-ID"); a == b {
		t.Errorf("the reminders at 4h and 8h share the Message-ID %s: clients would show only one", a)
	}
	startID, subject := res.Memory[email.MemoryMessageID], msgs[0].Header("Subject")
	r := msgs[1]
	for header, want := range map[string]string{
		"Subject":     "Re: " + subject,
		"In-Reply-To": startID,
		"References":  startID,
	} {
		if got := r.Header(header); got != want {
			t.Errorf("%s: %q, want %q", header, got, want)
		}
	}
	if id := r.Header("Message-ID"); id == "" || id == startID || id != msgs[2].Header("Message-ID") {
		t.Errorf("the reminders' Message-IDs %q and %q, the start's %q: want one of their own, the same for the same reminder",
			id, msgs[2].Header("Message-ID"), startID)
	}
	plain, err := r.Part("text/plain")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plain, sinktest.ReminderNote+": E1023 Grid overvoltage") || !strings.Contains(plain, "still ongoing") {
		t.Errorf("the reminder's text does not lead with the note:\n%s", plain)
	}
}

// TestAReminderFailsAsASendDoes: a temporary refusal (4xx) is retried, a
// permanent one (5xx) is not, and neither error holds the password; a
// start without a Message-ID in the memory gets no reminder.
func TestAReminderFailsAsASendDoes(t *testing.T) {
	clk, srv, sink := mailer(t, "")
	s := sink.(notify.Reminder)
	start := sinktest.Event("r2", 0, event.Start)
	mem := map[string]string{email.MemoryMessageID: "<r2.start.abc@example.com>"}
	texts := map[string]string{}
	for _, c := range []struct {
		code  int
		text  string
		retry bool
	}{{451, "4.3.0 Queue file write error", true}, {554, "5.7.1 Message rejected", false}} {
		srv.FailNext("DATA", c.code, c.text)
		res, err := sinktest.Remind(t, clk, s, start, mem)
		if err == nil || res.Retry != c.retry {
			t.Errorf("Remind at %d: retry %v (%v), want an error and retry %v", c.code, res.Retry, err, c.retry)
			continue
		}
		texts[c.text] = err.Error()
	}
	redacttest.AssertNoSecret(t, []string{password}, texts)
	before := len(srv.Messages())
	if _, err := sinktest.Remind(t, clk, s, start, nil); err != nil || len(srv.Messages()) != before {
		t.Errorf("Remind without memory: %v, %d mails; want nothing sent and no error", err, len(srv.Messages())-before)
	}
}
