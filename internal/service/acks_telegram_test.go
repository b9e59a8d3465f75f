package service

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/testwait"
)

// startTelegramService runs the relay on the real clock with rules against
// up, the bot token ackTelegramToken in TELEGRAM_TOKEN.
func startTelegramService(t *testing.T, up *sim.Server, rules string) *ackService {
	t.Helper()
	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "rules.yaml")
	writeFile(t, rulesPath, rules)
	appID, secret := up.Credentials()
	env := map[string]string{
		"RELAY_BASE_URL": up.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": secret,
		"RELAY_RATE_LIMIT": "600", "RELAY_STATE_PATH": filepath.Join(dir, "relay.db"), "RELAY_RULES": rulesPath,
		"RELAY_ADMIN_TOKEN": ackAdminToken, "RELAY_LISTEN": "127.0.0.1:0", "RELAY_SHUTDOWN_GRACE": "1s",
		"TELEGRAM_TOKEN": ackTelegramToken,
	}
	cfg, err := config.Load(context.Background(), envconfig.MapLookuper(env))
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the relay's log:\n%s", logs.String())
		}
	})
	ops, _ := startRun(t, Options{Config: cfg, Console: io.Discard, Logger: NewLogger(&logs, "debug", "text", nil),
		Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	return &ackService{t: t, up: up, ops: ops}
}

// telegramButton returns the callback_data of the button labelled label on
// the message m, "" when it has none.
func telegramButton(m notifytest.TelegramMessage, label string) string {
	for _, row := range m.Keyboard {
		for _, b := range row {
			if b.Text == label {
				return b.CallbackData
			}
		}
	}
	return ""
}

// telegramStorm is what a chat shows of a storm of alarms: the digest's
// message, and the alarms posted on their own before it opened (the
// others are the digest's).
type telegramStorm struct {
	digest notifytest.TelegramMessage
	alone  []string
}

// awaitStorm waits until the chat shows each of ids, on its own or in a
// digest with Acknowledge all, and the digest's list (a reply to it, which
// relay posts once it has stored the digest), and returns what it shows.
func awaitStorm(t *testing.T, tg *notifytest.Telegram, chat int64, ids []string) telegramStorm {
	t.Helper()
	var st telegramStorm
	testwait.For(t, 30*time.Second, fmt.Sprintf("the %d alarms of chat %d, in a digest or on their own", len(ids), chat), func() bool {
		st = telegramStorm{}
		in := 0
		msgs := tg.Messages(chat)
		for _, m := range msgs {
			if m.ReplyTo != 0 {
				continue
			}
			if telegramButton(m, "Acknowledge all") != "" {
				st.digest = m
				_, title, _ := strings.Cut(m.Text, "Alarm storm: ")
				if _, err := fmt.Sscanf(title, "%d alarms", &in); err != nil {
					t.Fatalf("the digest's message %q does not say how many alarms it holds: %v", m.Text, err)
				}
				continue
			}
			if telegramButton(m, "Acknowledge") == "" {
				continue
			}
			for _, id := range ids {
				if strings.Contains(m.Text, id) {
					st.alone = append(st.alone, id)
				}
			}
		}
		listed := slices.ContainsFunc(msgs, func(m notifytest.TelegramMessage) bool { return m.ReplyTo != 0 && m.ReplyTo == st.digest.ID })
		return listed && len(st.alone)+in == len(ids)
	})
	return st
}

// TestAcknowledgeAllActsOnTheDigestOfTheChatItWasClickedIn: two sinks of
// one bot, with buttons, post to two chats, each flooded into a storm
// digest with Acknowledge all; both are read by the one poller of the bot.
// Acknowledge all clicked in the second chat acknowledges the alarms of the
// second chat's digest, and none of the first chat; clicked in the first,
// it acknowledges the first chat's. The alarms posted on their own stay
// unacknowledged.
func TestAcknowledgeAllActsOnTheDigestOfTheChatItWasClickedIn(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for a few seconds")
	}
	const north, south = -1001000000001, -1002000000002
	up := sim.StartTest(t, sim.Options{RateLimit: 600})
	tg := notifytest.NewTelegram(t, ackTelegramToken, time.Now)
	tg.AddChat(notifytest.TelegramChat{ID: north, Type: "supergroup", Title: "North"})
	tg.AddChat(notifytest.TelegramChat{ID: south, Type: "supergroup", Title: "South"})
	sink := func(name string, chat int64) string {
		return fmt.Sprintf("  - name: %s\n    type: telegram\n    token_env: TELEGRAM_TOKEN\n    chat_id: \"%d\"\n    api_url: %s\n"+
			"    buttons: true\n    digest: { threshold: 2, window: 10m }\n", name, chat, tg.URL())
	}
	s := startTelegramService(t, up, "sinks:\n"+sink("north", north)+sink("south", south)+`routes:
  - name: urgent
    match: { levels: [0] }
    to: [north]
    ack_by: [telegram:42]
  - name: severe
    match: { levels: [1] }
    to: [south]
    ack_by: [telegram:42]
`)
	ids := map[int64][]string{}
	for _, chat := range []int64{north, south} {
		level := map[int64]int{north: 0, south: 1}[chat]
		for range 4 {
			id, err := up.StartAlarm(sim.AlarmSpec{Level: level})
			if err != nil {
				t.Fatal(err)
			}
			ids[chat] = append(ids[chat], id)
		}
	}
	storms := map[int64]telegramStorm{north: awaitStorm(t, tg, north, ids[north]), south: awaitStorm(t, tg, south, ids[south])}
	tg.WaitPolling(t, 1)

	answer := func(qid string) notifytest.TelegramAnswer {
		var got notifytest.TelegramAnswer
		testwait.For(t, 10*time.Second, "the answer to click "+qid, func() bool {
			for _, a := range tg.Answers() {
				if a.CallbackQueryID == qid {
					got = a
					return true
				}
			}
			return false
		})
		return got
	}
	// acked checks which alarms of chat are acknowledged: those of its
	// digest when digest is true, none when false; never those alone.
	acked := func(when string, chat int64, digest bool) {
		t.Helper()
		for _, id := range ids[chat] {
			want := digest && !slices.Contains(storms[chat].alone, id)
			if got := s.alarm(id); got.Acknowledged != want || want && (got.By != "42" || got.Via != "telegram") {
				t.Errorf("%s: alarm %s of chat %d: %+v, want acknowledged %v (by 42 via telegram)", when, id, chat, got, want)
			}
		}
	}
	clickAll := func(chat int64) {
		t.Helper()
		st := storms[chat]
		_, qid := tg.PushCallback(notifytest.TelegramUser{ID: 42, Username: "alice", FirstName: "Alice"}, chat, st.digest.ID,
			telegramButton(st.digest, "Acknowledge all"))
		if a := answer(qid); a.ShowAlert || strings.Contains(a.Text, "No such alarm") || !strings.HasPrefix(a.Text, "Acknowledged") {
			t.Errorf("Acknowledge all in chat %d was answered %+v, want the digest's alarms acknowledged", chat, a)
		}
	}

	clickAll(south)
	acked("after Acknowledge all in the second chat", south, true)
	acked("after Acknowledge all in the second chat", north, false)
	clickAll(north)
	acked("after Acknowledge all in the first chat", north, true)
	acked("after Acknowledge all in the first chat", south, true)
}
