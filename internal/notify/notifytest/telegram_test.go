package notifytest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

const telegramTestToken = "123456789:AAH-fakeTokenForTheSelfTest_0123456"

// callTelegram posts body to method as the Bot API documentation shows it
// and returns the status and the answer.
func callTelegram(t *testing.T, base, token, method, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(base+"/bot"+token+"/"+method, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		t.Fatalf("%s: the answer is not JSON: %v", method, err)
	}
	if ok, _ := ans["ok"].(bool); ok != (resp.StatusCode == 200) {
		t.Fatalf("%s: HTTP %d with ok %v", method, resp.StatusCode, ans["ok"])
	}
	return resp.StatusCode, ans
}

func newTelegramForTest(t *testing.T, now *time.Time) *Telegram {
	g := NewTelegram(t, telegramTestToken, func() time.Time { return *now })
	g.AddChat(TelegramChat{ID: -1001234567890, Username: "plant_alarms", Title: "Plant alarms", Topics: []int{7}})
	return g
}

func TestTelegramFakeAnswersAsTheBotAPIDoes(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	g := newTelegramForTest(t, &now)
	_, first := callTelegram(t, g.URL(), telegramTestToken, "sendMessage", `{"chat_id":-1001234567890,"text":"<b>start</b>","parse_mode":"HTML"}`)
	firstID := int(first["result"].(map[string]any)["message_id"].(float64))
	cases := []struct {
		name, token, method, body string
		status                    int
		description               string
	}{
		{"a wrong token", "123456789:wrong", "sendMessage", `{"chat_id":-1001234567890,"text":"x"}`, 401, "Unauthorized"},
		{"an unknown method", telegramTestToken, "sendTelegram", `{}`, 404, "Not Found"},
		{"an unknown chat", telegramTestToken, "sendMessage", `{"chat_id":-100999,"text":"x"}`, 400, "Bad Request: chat not found"},
		{"a chat by its username", telegramTestToken, "sendMessage", `{"chat_id":"@plant_alarms","text":"x"}`, 200, ""},
		{"a chat by a numeric string", telegramTestToken, "sendMessage", `{"chat_id":"-1001234567890","text":"y"}`, 200, ""},
		{"an unknown tag", telegramTestToken, "sendMessage", `{"chat_id":-1001234567890,"text":"<phase A>","parse_mode":"HTML"}`, 400, "Bad Request: can't parse entities: unsupported start tag"},
		{"an unclosed tag", telegramTestToken, "sendMessage", `{"chat_id":-1001234567890,"text":"<b>x","parse_mode":"HTML"}`, 400, "can't find end tag"},
		{"crossed tags", telegramTestToken, "sendMessage", `{"chat_id":-1001234567890,"text":"<b><i>x</b></i>","parse_mode":"HTML"}`, 400, "unmatched end tag"},
		{"a bare ampersand", telegramTestToken, "sendMessage", `{"chat_id":-1001234567890,"text":"A & B","parse_mode":"HTML"}`, 400, "can't parse entities"},
		{"entities", telegramTestToken, "sendMessage", `{"chat_id":-1001234567890,"text":"&lt;A&gt; &amp; &#66; <a href=\"https://x\">l</a>","parse_mode":"HTML"}`, 200, ""},
		{"4096 characters after parsing", telegramTestToken, "sendMessage", `{"chat_id":-1001234567890,"text":"<b>` + strings.Repeat("&amp;", 4096) + `</b>","parse_mode":"HTML"}`, 200, ""},
		{"4097 characters", telegramTestToken, "sendMessage", `{"chat_id":-1001234567890,"text":"` + strings.Repeat("x", 4097) + `"}`, 400, "Bad Request: message is too long"},
		{"a topic", telegramTestToken, "sendMessage", `{"chat_id":-1001234567890,"message_thread_id":7,"text":"x"}`, 200, ""},
		{"an unknown topic", telegramTestToken, "sendMessage", `{"chat_id":-1001234567890,"message_thread_id":8,"text":"x"}`, 400, "Bad Request: message thread not found"},
		{"a reply to a missing message", telegramTestToken, "sendMessage", `{"chat_id":-1001234567890,"text":"x","reply_parameters":{"message_id":99999}}`, 400, "Bad Request: message to be replied not found"},
		{"a reply to a missing message, allowed without", telegramTestToken, "sendMessage", `{"chat_id":-1001234567890,"text":"x","reply_parameters":{"message_id":99999,"allow_sending_without_reply":true}}`, 200, ""},
		{"an edit", telegramTestToken, "editMessageText", `{"chat_id":-1001234567890,"message_id":` + itoa(firstID) + `,"text":"<b>resolved</b>","parse_mode":"HTML"}`, 200, ""},
		{"the same edit again", telegramTestToken, "editMessageText", `{"chat_id":-1001234567890,"message_id":` + itoa(firstID) + `,"text":"<b>resolved</b>","parse_mode":"HTML"}`, 400, "Bad Request: message is not modified"},
		{"an edit of a missing message", telegramTestToken, "editMessageText", `{"chat_id":-1001234567890,"message_id":99999,"text":"x"}`, 400, "Bad Request: message to edit not found"},
		{"getMe", telegramTestToken, "getMe", ``, 200, ""},
	}
	for _, c := range cases {
		status, ans := callTelegram(t, g.URL(), c.token, c.method, c.body)
		desc, _ := ans["description"].(string)
		if status != c.status || !strings.HasPrefix(desc, c.description) && !strings.Contains(desc, c.description) {
			t.Errorf("%s: HTTP %d %q, want %d %q", c.name, status, desc, c.status, c.description)
		}
	}
	_, reply := callTelegram(t, g.URL(), telegramTestToken, "sendMessage",
		`{"chat_id":-1001234567890,"text":"ended","reply_parameters":{"message_id":`+itoa(firstID)+`,"allow_sending_without_reply":true}}`)
	if got := reply["result"].(map[string]any)["reply_to_message"]; got == nil {
		t.Errorf("a reply to an existing message: %v, want reply_to_message", reply)
	}
	msgs := g.Messages(-1001234567890)
	if msgs[0].Text != "resolved" || msgs[0].Edits != 1 {
		t.Errorf("the first message is %+v, want it edited once to resolved", msgs[0])
	}
	g.Kick(-1001234567890)
	if status, ans := callTelegram(t, g.URL(), telegramTestToken, "sendMessage", `{"chat_id":-1001234567890,"text":"x"}`); status != 403 ||
		!strings.Contains(ans["description"].(string), "bot was kicked") {
		t.Errorf("after a kick: HTTP %d %v, want 403 bot was kicked", status, ans)
	}
}

func TestTelegramFakeAnswers429WithRetryAfterOver20MessagesAMinuteToAGroup(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	g := newTelegramForTest(t, &now)
	for i := range 20 {
		if status, ans := callTelegram(t, g.URL(), telegramTestToken, "sendMessage", `{"chat_id":-1001234567890,"text":"x"}`); status != 200 {
			t.Fatalf("message %d: HTTP %d %v", i+1, status, ans)
		}
		now = now.Add(time.Second)
	}
	status, ans := callTelegram(t, g.URL(), telegramTestToken, "sendMessage", `{"chat_id":-1001234567890,"text":"x"}`)
	params, _ := ans["parameters"].(map[string]any)
	if status != 429 || params["retry_after"] != float64(40) || ans["description"] != "Too Many Requests: retry after 40" {
		t.Fatalf("message 21 within a minute: HTTP %d %v, want 429 and retry_after 40", status, ans)
	}
	now = now.Add(40 * time.Second)
	if status, ans := callTelegram(t, g.URL(), telegramTestToken, "sendMessage", `{"chat_id":-1001234567890,"text":"x"}`); status != 200 {
		t.Fatalf("after retry_after: HTTP %d %v", status, ans)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
