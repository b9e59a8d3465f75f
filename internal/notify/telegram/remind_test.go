package telegram_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/telegram"
)

// TestAReminderRepliesToTheStartInItsTopic: after a restart, the reminder
// is a reply to the start's message, from its memory, in the forum topic the
// sink posts to, saying the note, the alarm and its id.
func TestAReminderRepliesToTheStartInItsTopic(t *testing.T) {
	clk, api, s := inChat(t, "tg", "message_thread_id: 7\n")
	start := sinktest.Event("r1", 0, event.Start)
	res, err := send(t, clk, s, start, nil)
	if err != nil {
		t.Fatal(err)
	}
	again := build(t, "tg", clk, notify.NewLimits(clk), api.URL(), token, strconv.Itoa(chatID), "message_thread_id: 7\n", nil)
	if _, err := sinktest.Remind(t, clk, again.(notify.Reminder), start, res.Memory); err != nil {
		t.Fatalf("Remind: %v", err)
	}
	msgs := api.Messages(chatID)
	if len(msgs) != 2 {
		t.Fatalf("%d messages in the chat, want the start and its reminder", len(msgs))
	}
	startID, _ := strconv.Atoi(res.Memory[telegram.MemoryMessageID])
	r := msgs[1]
	if r.ReplyTo != startID || r.ThreadID != 7 {
		t.Errorf("the reminder replies to message %d in topic %d, want %d in topic 7", r.ReplyTo, r.ThreadID, startID)
	}
	for _, want := range []string{sinktest.ReminderNote, "E1023 Grid overvoltage <phase A> & *B*", "North Park_1 [PV] / Inverter #3", "still ongoing", "r1"} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("the reminder does not say %q:\n%s", want, r.Text)
		}
	}
	if msgs[0].Edits != 0 {
		t.Errorf("the start message was edited %d times by a reminder, want none", msgs[0].Edits)
	}
}

// TestAReminderOfAMessageGoneStillReachesTheChat: a start deleted from the
// chat does not stop its reminders, which then stand on their own.
func TestAReminderOfAMessageGoneStillReachesTheChat(t *testing.T) {
	clk, api, s := inChat(t, "tg", "")
	mem := map[string]string{telegram.MemoryMessageID: "999", telegram.MemoryChatID: strconv.Itoa(chatID)}
	if _, err := sinktest.Remind(t, clk, s.(notify.Reminder), sinktest.Event("r2", 1, event.Start), mem); err != nil {
		t.Fatalf("Remind of a message gone: %v", err)
	}
	if n := countCalls(api, notifytest.TelegramSendMessage, true); n != 1 {
		t.Errorf("%d messages sent, want the reminder", n)
	}
}
