package telegram_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/clock"
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
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	d := build(t, "ops", clk, notify.NewLimits(clk), api.URL(), token, fmt.Sprint(chatID), "message_thread_id: 7\n", nil).(notify.Digester)
	dg := sinktest.DigestOf("long", 25, 3)
	long := strings.Repeat("🔥", 64) // 256 bytes, 128 UTF-16 units
	for i := range dg.Items {
		it := &dg.Items[i]
		it.EventDesc, it.StationName, it.DeviceName = long, long, fmt.Sprintf("D%02d %s", i, long)
	}
	mem, _, err := sinktest.PostDigest(t, clk, d, dg)
	if err != nil {
		t.Fatalf("PostDigest: %v", err)
	}
	if _, err := sinktest.ListDigest(t, clk, d, dg, mem, dg.Items); err != nil {
		t.Fatalf("ListDigest: %v", err)
	}
	msgs := api.Messages(chatID)
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want the digest and one reply", len(msgs))
	}
	digest, reply := msgs[0], msgs[1]
	if mem[telegram.MemoryMessageID] != strconv.Itoa(digest.ID) || reply.ReplyTo != digest.ID || reply.ThreadID != 7 || !reply.Silent {
		t.Errorf("memory %v; the reply replies to %d in topic %d, silent %v; want to the digest's message %d in topic 7, silent",
			mem, reply.ReplyTo, reply.ThreadID, reply.Silent, digest.ID)
	}
	for i := range dg.Items {
		if !strings.Contains(reply.Text, fmt.Sprintf("D%02d ", i)) {
			t.Errorf("the reply does not name device D%02d:\n%s", i, reply.Text)
		}
	}
}

// TestDigestUpdateEditsTheMessageAndAnUnchangedOneIsNoFailure: an update
// with nothing new (a retry after a lost answer) is Telegram's "message is
// not modified", which is no failure; one with an end edits the message.
func TestDigestUpdateEditsTheMessageAndAnUnchangedOneIsNoFailure(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	d := build(t, "ops", clk, notify.NewLimits(clk), api.URL(), token, fmt.Sprint(chatID), "", nil).(notify.Digester)
	dg := sinktest.DigestOf("edit", 12, 2)
	mem, _, err := sinktest.PostDigest(t, clk, d, dg)
	if err != nil {
		t.Fatalf("PostDigest: %v", err)
	}
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
