package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/console"
	"github.com/relay-energy/relay/internal/notify/sinktest"
)

// The console has no buttons: a start people can acknowledge is followed
// by a line with the command, escaped for the terminal; its end is not.
func TestAStartPeopleCanAcknowledgeIsFollowedByTheCommand(t *testing.T) {
	sinktest.AckRendering(t, console.Type, sinktest.AckCase{Name: "console"})
	ev := sinktest.Event("a1", 0, event.Start)
	ev.Data.AckCommand = "relay ack a1\x1b[2J --by <you>"
	want := console.Line(&ev) + "\n" + `  To acknowledge: relay ack a1\x1b[2J --by <you>` + "\n"
	if got := console.Text(&ev); got != want {
		t.Errorf("\n got %q\nwant %q", got, want)
	}
}

// An acknowledgement, and taking it back, are lines of their own, saying
// who, from where, when (the line's time) and why; what people wrote is
// escaped like upstream text. The console remembers no start, and writes
// them all the same.
func TestAnAcknowledgementIsALineSayingWhoFromWhereAndWhy(t *testing.T) {
	at := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	a := delivertest.Alarm("123", 0, event.StatusOngoing, at, time.Time{})
	ack := event.NewAck(a, event.Ack, 1, event.AckInfo{By: "U123", Name: "Alice Li", Via: "slack",
		At: "2026-11-21T08:02:00.000Z", Comment: "on my way\n\x1b[31m"}, at)
	unack := event.NewAck(a, event.Unack, 1, event.AckInfo{By: "bob", Via: "api", At: "2026-11-21T08:05:30.000Z"}, at)
	var out strings.Builder
	s, err := console.New("console", &out)
	if err != nil {
		t.Fatal(err)
	}
	if !s.CarriesAcks() {
		t.Fatal("the console does not carry acks")
	}
	for _, ev := range []event.Event{ack, unack} {
		if _, err := s.Send(context.Background(), notify.Delivery{EventID: ev.ID, OriginID: "123", Event: &ev}); err != nil {
			t.Fatal(err)
		}
	}
	want := "2026-11-21T08:02:00Z ACK    urgent  Solar Park North / INV-0042  E1023 Grid overvoltage  by Alice Li (U123) via slack — on my way\\n\\x1b[31m  (alarm 123)\n" +
		"2026-11-21T08:05:30Z UNACK  urgent  Solar Park North / INV-0042  E1023 Grid overvoltage  by bob via api  (alarm 123)\n"
	if got := out.String(); got != want {
		t.Errorf("console output\n got %q\nwant %q", got, want)
	}
}
