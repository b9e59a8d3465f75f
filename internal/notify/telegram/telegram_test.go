package telegram_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/notify/telegram"
	"github.com/relay-energy/relay/internal/redact/redacttest"
)

// build decodes the options of a sink of the bot with tok posting to chat
// through base (plus extra lines) and builds it on clk, pacing with limits.
func build(t *testing.T, name string, clk *clock.Fake, limits *notify.Limits, base, tok, chat, extra string, logs io.Writer) notify.Sink {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	return sinktest.Build(t, telegram.Type, name, "token_env: TG_TOKEN\nchat_id: '"+chat+"'\napi_url: "+base+"\n"+extra,
		map[string]string{"TG_TOKEN": tok}, sinktype.Deps{Clock: clk, Limits: limits, Logger: slog.New(slog.NewTextHandler(logs, nil))})
}

// inChat starts the fake Bot API on a fake clock and builds a sink called
// name posting to the chat chatID, with extra option lines.
func inChat(t *testing.T, name, extra string) (*clock.Fake, *notifytest.Telegram, notify.Sink) {
	t.Helper()
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	return clk, api, build(t, name, clk, notify.NewLimits(clk), api.URL(), token, strconv.Itoa(chatID), extra, nil)
}

func send(t *testing.T, clk *clock.Fake, s notify.Sink, ev event.Event, memory map[string]string) (notify.Result, error) {
	t.Helper()
	return sinktest.SendEvent(t, clk, s, ev, memory)
}

func countCalls(api *notifytest.Telegram, method string, ok bool) int {
	n := 0
	for _, c := range api.Calls() {
		if c.Method == method && (c.Status == 200) == ok {
			n++
		}
	}
	return n
}

func TestAnEndEditsTheStartAndRepliesToItOnceThoughTheReplyIsRetried(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	// A proxy that fails the first reply with a 502, as a gateway would.
	target, _ := url.Parse(api.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	var failed atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("reply_parameters")) && !failed.Swap(true) {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	s := build(t, "plant", clk, notify.NewLimits(clk), front.URL, token, "-1001234567890", "", nil)
	res, err := send(t, clk, s, sinktest.Event("a1", 0, event.Start), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Memory[telegram.MemoryMessageID] == "" || res.Memory[telegram.MemoryChatID] != "-1001234567890" {
		t.Fatalf("memory %v, want the start's message_id and chat", res.Memory)
	}
	startMemory := res.Memory
	end := sinktest.Event("a1", 0, event.End)
	res, err = send(t, clk, s, end, startMemory)
	if err == nil || !res.Retry {
		t.Fatalf("the first attempt at the end: retry %v (%v), want a retried 502", res.Retry, err)
	}
	if _, err := send(t, clk, s, end, startMemory); err != nil {
		t.Fatalf("the retry of the end: %v", err)
	}
	msgs := api.Messages(chatID)
	if msgs[0].Edits != 1 || !strings.Contains(msgs[0].Text, "Resolved: URGENT alarm") {
		t.Errorf("the start message %+v, want it edited once to resolved", msgs[0])
	}
	replies := 0
	for _, m := range msgs {
		if m.ReplyTo == msgs[0].ID {
			replies++
		}
	}
	if replies != 1 {
		t.Errorf("%d replies to the start, want 1", replies)
	}
	if n := countCalls(api, notifytest.TelegramEditMessageText, false); n != 1 {
		t.Errorf("%d refused edits, want the one repeated by the retry (message is not modified)", n)
	}
}

func TestAnEndWhoseStartMessageIsGoneIsStillSent(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	var logs bytes.Buffer
	s := build(t, "plant", clk, notify.NewLimits(clk), api.URL(), token, "-1001234567890", "", &logs)
	memory := map[string]string{telegram.MemoryMessageID: "99999", telegram.MemoryChatID: fmt.Sprint(chatID)}
	if _, err := send(t, clk, s, sinktest.Event("gone", 1, event.Invalid), memory); err != nil {
		t.Fatal(err)
	}
	msgs := api.Messages(chatID)
	if len(msgs) != 1 || !strings.Contains(msgs[0].Text, "Cancelled") || !strings.Contains(msgs[0].Text, "gone") {
		t.Fatalf("messages %+v, want the cancellation sent", msgs)
	}
	if !strings.Contains(logs.String(), "could not edit the start message") || strings.Contains(logs.String(), token) {
		t.Errorf("log %q, want a warning without the token", logs.String())
	}
}

func TestA429IsRetriedAfterRetryAfterAndHoldsTheChatBack(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	// Another sender of the bot spends the chat's minute.
	for range 20 {
		resp, err := http.Post(api.URL()+"/bot"+token+"/sendMessage", "application/json", strings.NewReader(`{"chat_id":-1001234567890,"text":"other"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	clk.Advance(15 * time.Second)
	limits := notify.NewLimits(clk)
	a := build(t, "a", clk, limits, api.URL(), token, "-1001234567890", "", nil)
	b := build(t, "b", clk, limits, api.URL(), token, "-1001234567890", "", nil)
	res, err := send(t, clk, a, sinktest.Event("r1", 0, event.Start), nil)
	if err == nil || !res.Retry || res.RetryAfter != 45*time.Second {
		t.Fatalf("retry %v after %s (%v), want a retry after Telegram's retry_after of 45s", res.Retry, res.RetryAfter, err)
	}
	sent := clk.Now()
	if _, err := send(t, clk, b, sinktest.Event("r2", 0, event.Start), nil); err != nil {
		t.Fatalf("the other sink of the chat: %v", err)
	}
	calls := api.Calls()
	if last := calls[len(calls)-1]; last.Status != 200 || last.At.Sub(sent) < 45*time.Second {
		t.Errorf("the other sink sent %s after the 429 (%+v), want it held back 45s", last.At.Sub(sent), last)
	}
}

func TestRefusalsAreDeadLetteredSayingWhatToFix(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	api.AddChat(notifytest.TelegramChat{ID: -1009, Title: "Left"})
	api.Kick(-1009)
	cases := []struct {
		name, tok, chat string
		want            []string
	}{
		{"an unknown chat", token, "-100555", []string{"400", "chat not found", "chat_id", "-100555", "TG_TOKEN"}},
		{"a chat the bot was kicked from", token, "-1009", []string{"403", "bot was kicked", "chat_id -1009", "TG_TOKEN"}},
		{"a revoked token", "7000001:AAHrevokedTokenOfTheBot_abcdef12345", "-1001234567890", []string{"401", "Unauthorized", "TG_TOKEN"}},
	}
	for _, c := range cases {
		s := build(t, "plant", clk, notify.NewLimits(clk), api.URL(), c.tok, c.chat, "", nil)
		res, err := send(t, clk, s, sinktest.Event("x1", 0, event.Start), nil)
		if err == nil || res.Retry {
			t.Errorf("%s: retry %v (%v), want a dead letter", c.name, res.Retry, err)
			continue
		}
		for _, w := range append(c.want, `telegram sink "plant": sendMessage of x1:start`) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the error does not say %q: %v", c.name, w, err)
			}
		}
		redacttest.AssertNoSecret(t, []string{c.tok}, map[string]string{"error": err.Error()})
	}
}

func TestABurstToOneChatKeeps1ASecondAnd20AMinute(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	s := build(t, "plant", clk, notify.NewLimits(clk), api.URL(), token, "@plant_alarms", "", nil)
	const n = 50
	for i := range n {
		if _, err := send(t, clk, s, sinktest.Event(fmt.Sprintf("b%02d", i), i%4, event.Start), nil); err != nil {
			t.Fatalf("alarm %d: %v", i, err)
		}
	}
	calls := api.Calls()
	if len(calls) != n {
		t.Fatalf("%d calls, want %d", len(calls), n)
	}
	for i, c := range calls {
		if c.Status != 200 {
			t.Fatalf("message %d refused: %d %s", i, c.Status, c.Description)
		}
		if i > 0 && c.At.Sub(calls[i-1].At) < time.Second {
			t.Fatalf("messages %d and %d %s apart", i-1, i, c.At.Sub(calls[i-1].At))
		}
		if i+20 < n && calls[i+20].At.Sub(c.At) < time.Minute {
			t.Fatalf("messages %d and %d %s apart: 21 within a minute", i, i+20, calls[i+20].At.Sub(c.At))
		}
	}
}

func TestALongTextIsCutTo4096CharactersWithItsTagsClosed(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	// 300 iterations of an entity and ten surrogate pairs: 6,300 UTF-16
	// units, in few template steps, so that the template's 100 ms bound is
	// far even under -race on a busy machine (3,000 steps of one pair each
	// overran it there, and the sink sent its default text).
	s := build(t, "plant", clk, notify.NewLimits(clk), api.URL(), token, "-1001234567890",
		"text: '<b>{{.OriginID}}</b> <i>{{range 300}}&amp;🔥🔥🔥🔥🔥🔥🔥🔥🔥🔥{{end}}</i>'\n", nil)
	if _, err := send(t, clk, s, sinktest.Event("long1", 0, event.Start), nil); err != nil {
		t.Fatal(err)
	}
	got := api.Messages(chatID)[0]
	if n := len(utf16(got.Text)); n > telegram.MaxText || n < telegram.MaxText-2 || !strings.HasSuffix(got.Text, "…") {
		t.Errorf("the text has %d UTF-16 units and ends %q, want it cut to %d with …", n, got.Text[len(got.Text)-10:], telegram.MaxText)
	}
	if !strings.HasSuffix(got.HTML, "…</i>") {
		t.Errorf("the HTML ends %q, want the <i> closed", got.HTML[len(got.HTML)-20:])
	}
}

func utf16(s string) []int {
	var out []int
	for _, r := range s {
		out = append(out, 1)
		if r >= 0x10000 {
			out = append(out, 1)
		}
	}
	return out
}

func TestUpstreamValuesCannotChangeTheMarkup(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	s := build(t, "plant", clk, notify.NewLimits(clk), api.URL(), token, "-1001234567890",
		"title: '<b>{{.Event.Data.DeviceName}}</b>'\n", nil)
	ev := sinktest.Event("esc1", 0, event.Start)
	ev.Data.DeviceName = `</b><a href="https://evil">click</a> & <b>`
	if _, err := send(t, clk, s, ev, nil); err != nil {
		t.Fatal(err)
	}
	if got := api.Messages(chatID)[0]; !strings.HasPrefix(got.Text, `</b><a href="https://evil">click</a> & <b>`) {
		t.Errorf("the title reads %q, want the device name as plain text", got.Text)
	}
}

func TestAForumTopicAndSilenceAreKept(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	s := build(t, "plant", clk, notify.NewLimits(clk), api.URL(), token, "-1001234567890", "message_thread_id: 7\ndisable_notification: true\n", nil)
	res, err := send(t, clk, s, sinktest.Event("t1", 0, event.Start), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := send(t, clk, s, sinktest.Event("t1", 0, event.End), res.Memory); err != nil {
		t.Fatal(err)
	}
	for _, m := range api.Messages(chatID) {
		if m.ThreadID != 7 || !m.Silent {
			t.Errorf("message %+v, want it in topic 7 without sound", m)
		}
	}
	s = build(t, "plant", clk, notify.NewLimits(clk), api.URL(), token, "-1001234567890", "message_thread_id: 8\n", nil)
	if _, err := send(t, clk, s, sinktest.Event("t2", 0, event.Start), nil); err == nil || !strings.Contains(err.Error(), "message_thread_id") {
		t.Errorf("an unknown topic: %v, want a dead letter naming message_thread_id", err)
	}
}

func TestProbeChecksTheTokenAndTheChatWithoutSending(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	cfg := sinktest.Decode(t, telegram.Type, "token_env: TG_TOKEN\nchat_id: '@plant_alarms'\napi_url: "+api.URL()+"\n", map[string]string{"TG_TOKEN": token})
	line, err := cfg.Probe(context.Background(), sinktype.Deps{})
	if err != nil || !strings.Contains(line, "@relay_alarm_bot") || !strings.Contains(line, "Plant alarms") {
		t.Errorf("probe: %q, %v", line, err)
	}
	cfg = sinktest.Decode(t, telegram.Type, "token_env: TG_TOKEN\nchat_id: '-100555'\napi_url: "+api.URL()+"\n", map[string]string{"TG_TOKEN": token})
	if _, err := cfg.Probe(context.Background(), sinktype.Deps{}); err == nil || !strings.Contains(err.Error(), "chat not found") || strings.Contains(err.Error(), token) {
		t.Errorf("probe of an unknown chat: %v", err)
	}
	if n := countCalls(api, notifytest.TelegramSendMessage, true); n != 0 {
		t.Errorf("the probe sent %d messages", n)
	}
}

func TestOptionsAreCheckedAtLoad(t *testing.T) {
	env := map[string]string{"TG_TOKEN": token}
	cases := []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"no token", "chat_id: -100123\n", nil, "missing: a telegram sink needs token_env"},
		{"no chat", "token_env: TG_TOKEN\n", env, "missing: a telegram sink needs chat_id"},
		{"not a token", "token_env: TG_TOKEN\nchat_id: -100123\n", map[string]string{"TG_TOKEN": "secret-but-not-a-token"}, "does not hold a bot token"},
		{"not a chat", "token_env: TG_TOKEN\nchat_id: plant alarms\n", env, "is not a chat"},
		{"a topic that is no number", "token_env: TG_TOKEN\nchat_id: -100123\nmessage_thread_id: general\n", env, "want the positive number of a forum topic"},
		{"bad HTML escaping in a template", "token_env: TG_TOKEN\nchat_id: -100123\ntitle: '{{.Nope}}'\n", env, "bad template"},
	}
	for _, c := range cases {
		_, err := sinktest.DecodeErr(telegram.Type, c.yaml, c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret-but-not-a-token") {
			t.Errorf("%s: the error shows the variable's value: %v", c.name, err)
		}
	}
	if !utf8.ValidString(telegram.Escape("<&>")) || telegram.Escape("<&>") != "&lt;&amp;&gt;" {
		t.Errorf("Escape(<&>) = %q", telegram.Escape("<&>"))
	}
}

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

// Without buttons, a start people can acknowledge ends with the command
// that does it; with them it does not.
func TestStartWithoutButtonsSaysHowToAcknowledge(t *testing.T) {
	ev := sinktest.Event("a1", 0, event.Start)
	ev.Data.AckCommand = "relay ack a1 --by <you>"
	for _, extra := range []string{"", "buttons: true\n"} {
		clk, api, s := inChat(t, "plant", extra)
		if _, err := send(t, clk, s, ev, nil); err != nil {
			t.Fatal(err)
		}
		text := api.Messages(chatID)[0].Text
		// The fake reads the HTML as Telegram does: the text as shown.
		if got := strings.HasSuffix(text, "To acknowledge: relay ack a1 --by <you>"); got != (extra == "") {
			t.Fatalf("options %q: text %q; want the command last only without buttons", extra, text)
		}
	}
}
