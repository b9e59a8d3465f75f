package telegram_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/telegram"
)

// TestDigestRepliesFitTelegramsLimitWithLongNames: 25 alarms whose names
// are 256 bytes of characters outside the Basic Multilingual Plane (two
// UTF-16 units each) are one silent reply to the digest's message, within
// 4096 characters as Telegram counts them, each alarm's device still named
// by its start.
func TestDigestRepliesFitTelegramsLimitWithLongNames(t *testing.T) {
	clk, api, s := inChat(t, "ops", "message_thread_id: 7\n")
	d := s.(notify.Digester)
	dg := sinktest.DigestOf("long", 25, 3)
	sinktest.LongNames(dg, strings.Repeat("🔥", 64)) // 256 bytes, 128 UTF-16 units
	mem := sinktest.ShowDigest(t, clk, d, dg)
	sinktest.ListDigests(t, clk, d, dg, mem, dg.Items)
	msgs := api.Messages(chatID)
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want the digest and one reply", len(msgs))
	}
	digest, reply := msgs[0], msgs[1]
	if mem[telegram.MemoryMessageID] != strconv.Itoa(digest.ID) || reply.ReplyTo != digest.ID || reply.ThreadID != 7 || !reply.Silent {
		t.Errorf("memory %v; the reply replies to %d in topic %d, silent %v; want to the digest's message %d in topic 7, silent",
			mem, reply.ReplyTo, reply.ThreadID, reply.Silent, digest.ID)
	}
	sinktest.AssertDevices(t, dg, reply.Text)
}

// TestDigestUpdateEditsTheMessageAndAnUnchangedOneIsNoFailure: an update
// with nothing new (a retry after a lost answer) is Telegram's "message is
// not modified", which is no failure; one with an end edits the message.
func TestDigestUpdateEditsTheMessageAndAnUnchangedOneIsNoFailure(t *testing.T) {
	clk, api, s := inChat(t, "ops", "")
	d := s.(notify.Digester)
	dg := sinktest.DigestOf("edit", 12, 2)
	mem := sinktest.ShowDigest(t, clk, d, dg)
	if res, err := sinktest.UpdateDigest(t, clk, d, dg, mem); err != nil || res.Retry {
		t.Fatalf("an update with nothing new: retry %v, %v; want no failure", res.Retry, err)
	}
	sinktest.EndDigestItems(dg, 0, 1)
	if _, err := sinktest.UpdateDigest(t, clk, d, dg, mem); err != nil {
		t.Fatalf("UpdateDigest: %v", err)
	}
	msg := api.Messages(chatID)[0]
	if msg.Edits != 1 || !strings.Contains(msg.Text, "12 alarms since 08:00 UTC, 10 ongoing") {
		t.Errorf("the digest was edited %d times and says:\n%s", msg.Edits, msg.Text)
	}
	if n := countCalls(api, notifytest.TelegramEditMessageText, false); n != 1 {
		t.Errorf("%d edits refused, want the one with nothing new", n)
	}
	if _, err := sinktest.UpdateDigest(t, clk, d, dg, map[string]string{}); err == nil {
		t.Error("an update without memory of the message succeeded")
	}
}
