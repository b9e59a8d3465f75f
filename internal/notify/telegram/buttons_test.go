package telegram_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/telegram"
)

// ackEvent is the ack or unack event (tr) of the alarm origin, as alarm
// management builds it (event.NewAck): the alarm's facts with data.ack.
func ackEvent(origin string, level int, tr event.Transition, info event.AckInfo) event.Event {
	ev := sinktest.Event(origin, level, event.Start)
	ev.Data.Transition, ev.Type, ev.ID, ev.Time = tr, tr.Type(), event.ID(origin, tr), info.At
	ev.Data.Ack = &info
	return ev
}

var alice = event.AckInfo{By: "42", Name: "alice", Via: "telegram", At: "2026-11-21T08:02:00.000Z", Comment: "on my  way"}

func keyboardData(kb [][]notifytest.TelegramButton) []string {
	var out []string
	for _, row := range kb {
		for _, b := range row {
			out = append(out, b.Text+"="+b.CallbackData)
		}
	}
	return out
}

// TestButtonsAreOnTheStartOnlyWithTheOption: with buttons: true the start
// carries Acknowledge, Shelve 1h and Shelve until cleared, whose
// callback_data name the alarm; without it the message has no keyboard.
func TestButtonsAreOnTheStartOnlyWithTheOption(t *testing.T) {
	for _, c := range []struct {
		extra string
		want  []string
	}{
		{"", nil},
		{"buttons: false\n", nil},
		{"buttons: true\n", []string{"Acknowledge=a:k1", "Shelve 1h=s1h:k1", "Shelve until cleared=sc:k1"}},
	} {
		clk, api, s := inChat(t, "tg", c.extra)
		if _, err := send(t, clk, s, sinktest.Event("k1", 0, event.Start), nil); err != nil {
			t.Fatal(err)
		}
		got := keyboardData(api.Messages(chatID)[0].Keyboard)
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%q: the start's buttons are %v, want %v", c.extra, got, c.want)
		}
		if ac, ok := s.(notify.AckCarrier); !ok || ac.CarriesAcks() != (c.want != nil) {
			t.Errorf("%q: CarriesAcks is not %v", c.extra, c.want != nil)
		}
	}
}

// TestCallbackDataFitsTelegramsLimitForTheLongestOriginIDs: the Bot API
// documents InlineKeyboardButton.callback_data as "Data to be sent in a
// callback query to the bot when the button is pressed, 1-64 bytes". Every
// button of relay fits, for an originId at AlarmRef's longest kept form (48
// bytes) and for longer ones (hashed), and the fake, which refuses more,
// takes them.
func TestCallbackDataFitsTelegramsLimitForTheLongestOriginIDs(t *testing.T) {
	const documented = 64
	if telegram.MaxCallbackData != documented {
		t.Fatalf("MaxCallbackData is %d, want the documented %d", telegram.MaxCallbackData, documented)
	}
	clk, api, s := inChat(t, "tg", "buttons: true\n")
	for _, origin := range []string{strings.Repeat("9", 48), strings.Repeat("é", 25), strings.Repeat("x", 49), strings.Repeat("long-id/", 64)} {
		res, err := send(t, clk, s, sinktest.Event(origin, 0, event.Start), nil)
		if err != nil {
			t.Fatalf("a start of a %d-byte originId: %v", len(origin), err)
		}
		if _, err := send(t, clk, s, ackEvent(origin, 0, event.Ack, alice), res.Memory); err != nil {
			t.Fatalf("an ack of a %d-byte originId: %v", len(origin), err)
		}
	}
	n := 0
	for _, c := range api.Calls() {
		if c.Status != 200 {
			t.Errorf("%s refused: %s", c.Method, c.Description)
		}
		for _, b := range keyboardData(c.Keyboard) {
			_, data, _ := strings.Cut(b, "=")
			n++
			if len(data) > documented {
				t.Errorf("callback_data %q has %d bytes", data, len(data))
			}
		}
	}
	if n != 4*4 {
		t.Errorf("%d buttons sent, want 16", n)
	}
}

// TestAnAckEditsTheStartAndAnUnackPutsItBack: an ack edits the start's
// message to say who took it, when and why, with Unacknowledge as its only
// button; the unack puts the buttons back and says who withdrew it; an end
// after a new ack keeps the line and drops the buttons.
func TestAnAckEditsTheStartAndAnUnackPutsItBack(t *testing.T) {
	clk, api, s := inChat(t, "tg", "buttons: true\n")
	res, err := send(t, clk, s, sinktest.Event("k2", 1, event.Start), nil)
	if err != nil {
		t.Fatal(err)
	}
	startText := api.Messages(chatID)[0].Text
	mem := res.Memory
	res, err = send(t, clk, s, ackEvent("k2", 1, event.Ack, alice), mem)
	if err != nil {
		t.Fatal(err)
	}
	m := api.Messages(chatID)[0]
	wantLine := "✅ Acknowledged by alice at 08:02 UTC — on my way"
	if m.Text != startText+"\n\n"+wantLine {
		t.Errorf("after the ack the start reads:\n%s\nwant its text and %q", m.Text, wantLine)
	}
	if got := keyboardData(m.Keyboard); len(got) != 1 || got[0] != "Unacknowledge=u:k2" {
		t.Errorf("after the ack the buttons are %v, want Unacknowledge", got)
	}
	if res.Memory[telegram.MemoryAck] == "" || res.Memory[telegram.MemoryMessageID] != mem[telegram.MemoryMessageID] {
		t.Errorf("memory after the ack %v, want the start's and the line", res.Memory)
	}
	mem = res.Memory
	bob := event.AckInfo{By: "43", Name: "bob", Via: "api", At: "2026-11-21T08:10:00.000Z"}
	res, err = send(t, clk, s, ackEvent("k2", 1, event.Unack, bob), mem)
	if err != nil {
		t.Fatal(err)
	}
	m = api.Messages(chatID)[0]
	if want := startText + "\n\n↩️ Acknowledgement withdrawn by bob at 08:10 UTC"; m.Text != want {
		t.Errorf("after the unack the start reads:\n%s\nwant\n%s", m.Text, want)
	}
	if got := keyboardData(m.Keyboard); len(got) != 3 {
		t.Errorf("after the unack the buttons are %v, want the start's three", got)
	}
	if _, ok := res.Memory[telegram.MemoryAck]; ok || res.Memory[telegram.MemoryMessageID] == "" {
		t.Errorf("memory after the unack %v, want the start's without the line", res.Memory)
	}
	res, err = send(t, clk, s, ackEvent("k2", 1, event.Ack, alice), res.Memory)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := send(t, clk, s, sinktest.Event("k2", 1, event.End), res.Memory); err != nil {
		t.Fatal(err)
	}
	msgs := api.Messages(chatID)
	m = msgs[0]
	if !strings.Contains(m.Text, "Resolved") || !strings.HasSuffix(m.Text, "\n\n"+wantLine) || m.Keyboard != nil {
		t.Errorf("after the end the start reads:\n%s\nwith buttons %v; want it resolved, acknowledged by alice, without buttons", m.Text, m.Keyboard)
	}
	if len(msgs) != 2 || msgs[1].ReplyTo != m.ID {
		t.Errorf("%d messages, want the start and the end's reply to it", len(msgs))
	}
}

// TestAnAckWithoutItsStartOrRepeatedIsNoFailure: an ack of an alarm whose
// start left no message does nothing; an ack repeated after a lost answer
// is Telegram's "message is not modified", which is no failure and no
// warning; an ack of a message deleted from the chat is logged.
func TestAnAckWithoutItsStartOrRepeatedIsNoFailure(t *testing.T) {
	clk, api, s := inChat(t, "tg", "buttons: true\n")
	if res, err := send(t, clk, s, ackEvent("k3", 0, event.Ack, alice), nil); err != nil || res.Memory != nil {
		t.Fatalf("an ack without memory: memory %v, %v; want nothing done", res.Memory, err)
	}
	if n := len(api.Calls()); n != 0 {
		t.Fatalf("an ack without memory made %d calls", n)
	}
	var logs bytes.Buffer
	s = build(t, "tg", clk, notify.NewLimits(clk), api.URL(), token, strconv.Itoa(chatID), "buttons: true\n", &logs)
	res, err := send(t, clk, s, sinktest.Event("k3", 0, event.Start), nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := send(t, clk, s, ackEvent("k3", 0, event.Ack, alice), res.Memory); err != nil {
			t.Fatalf("an ack: %v", err)
		}
	}
	if n := countCalls(api, notifytest.TelegramEditMessageText, false); n != 1 || logs.Len() != 0 {
		t.Errorf("%d edits refused, log %q; want the repeat's, quietly", n, logs.String())
	}
	gone := map[string]string{telegram.MemoryMessageID: "99999", telegram.MemoryChatID: strconv.Itoa(chatID)}
	if _, err := send(t, clk, s, ackEvent("k4", 0, event.Ack, alice), gone); err != nil {
		t.Fatalf("an ack of a message gone: %v", err)
	}
	if !strings.Contains(logs.String(), "could not edit the start message to show its acknowledgement") || strings.Contains(logs.String(), token) {
		t.Errorf("log %q, want a warning without the token", logs.String())
	}
}

// TestADigestCarriesAcknowledgeAllWhileAlarmsAreOngoing: with buttons a
// digest carries "Acknowledge all" naming the digest, which its updates
// keep while an alarm of it is ongoing and drop when none is; without, no
// button.
func TestADigestCarriesAcknowledgeAllWhileAlarmsAreOngoing(t *testing.T) {
	for _, buttons := range []bool{false, true} {
		clk, api, s := inChat(t, "ops", "buttons: "+strconv.FormatBool(buttons)+"\n")
		d := s.(notify.Digester)
		dg := sinktest.DigestOf("20261121T080000Z-1", 3, 1)
		mem := sinktest.ShowDigest(t, clk, d, dg)
		want := "Acknowledge all=da:20261121T080000Z-1"
		if got := strings.Join(keyboardData(api.Messages(chatID)[0].Keyboard), " "); (got == want) != buttons || (got == "") == buttons {
			t.Errorf("buttons %v: the digest carries %q", buttons, got)
		}
		sinktest.EndDigestItems(dg, 0, 1)
		if _, err := sinktest.UpdateDigest(t, clk, d, dg, mem); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(keyboardData(api.Messages(chatID)[0].Keyboard), " "); (got == want) != buttons {
			t.Errorf("buttons %v: with an alarm ongoing the digest carries %q", buttons, got)
		}
		sinktest.EndDigestItems(dg, 2)
		if _, err := sinktest.UpdateDigest(t, clk, d, dg, mem); err != nil {
			t.Fatal(err)
		}
		if kb := api.Messages(chatID)[0].Keyboard; kb != nil {
			t.Errorf("buttons %v: with every alarm over the digest carries %v", buttons, kb)
		}
	}
}
