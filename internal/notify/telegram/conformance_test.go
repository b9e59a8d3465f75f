package telegram_test

import (
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/telegram"
)

const (
	token  = "7000001:AAHconformanceSuiteToken_abc-123456"
	chatID = -1001234567890
)

// newAPI starts a fake Bot API whose bot is a member of the chat chatID,
// a forum with topic 7.
func newAPI(t *testing.T, clk *clock.Fake) *notifytest.Telegram {
	api := notifytest.NewTelegram(t, token, clk.Now)
	api.AddChat(notifytest.TelegramChat{ID: chatID, Title: "Plant alarms", Username: "plant_alarms", Topics: []int{7}})
	return api
}

// received is one text per message the fake bot sent (edits left out), as
// the chat shows it.
func received(api *notifytest.Telegram) func() []string {
	return func() []string {
		var out []string
		for _, c := range api.Calls() {
			if c.Method == notifytest.TelegramSendMessage && c.Status == 200 {
				out = append(out, c.Text)
			}
		}
		return out
	}
}

// all is one text per message sent or edited, as the chat shows it.
func all(api *notifytest.Telegram) func() []string {
	return func() []string {
		var out []string
		for _, c := range api.Calls() {
			if c.Status == 200 && (c.Method == notifytest.TelegramSendMessage || c.Method == notifytest.TelegramEditMessageText) {
				out = append(out, c.Text)
			}
		}
		return out
	}
}

// checkPair checks that the start's message was edited and the end replied
// to it.
func checkPair(api *notifytest.Telegram) func(t *testing.T, start, end *event.Event) {
	return func(t *testing.T, start, end *event.Event) {
		t.Helper()
		var startID int
		var edited, replied bool
		for _, c := range api.Calls() {
			switch {
			case c.Status != 200:
			case c.Method == notifytest.TelegramSendMessage && c.ReplyTo == 0 && startID == 0 && strings.Contains(c.Text, start.Data.OriginID):
				startID = c.MessageID
			case c.Method == notifytest.TelegramEditMessageText && startID != 0 && c.MessageID == startID:
				edited = strings.Contains(c.Text, "Resolved")
			case c.Method == notifytest.TelegramSendMessage && startID != 0 && c.ReplyTo == startID:
				replied = strings.Contains(c.Text, end.Data.OriginID)
			}
		}
		if startID == 0 || !edited || !replied {
			t.Errorf("start message %d, edited to resolved %v, the end a reply to it %v", startID, edited, replied)
		}
	}
}

func TestConformance(t *testing.T) { sinktest.Run(t, harness("")) }

// TestConformanceButtons runs the suite on a sink with buttons, whose
// golden rendering (render-buttons.golden) shows the keyboards.
func TestConformanceButtons(t *testing.T) { sinktest.Run(t, harness("buttons: true\n")) }

func harness(extra string) sinktest.Harness {
	return sinktest.Harness{
		Type: telegram.Type,
		Start: func(t *testing.T, clk *clock.Fake) sinktest.Vendor {
			api := newAPI(t, clk)
			return sinktest.Vendor{
				URL: api.URL(),
				Options: func(base string) (string, map[string]string) {
					return "token_env: TELEGRAM_BOT_TOKEN\nchat_id: -1001234567890\nmessage_thread_id: 7\napi_url: " + base + "\n" + extra,
						map[string]string{"TELEGRAM_BOT_TOKEN": token}
				},
				Received:  received(api),
				All:       all(api),
				CheckPair: checkPair(api),
			}
		},
	}
}
