package notifytest

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
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

// TestTelegramFakeServesUpdatesAsTheBotAPIDocumentsThem: getUpdates returns
// the updates from the earliest unconfirmed one, confirms those below its
// offset ("An update is considered confirmed as soon as getUpdates is
// called with an offset higher than its update_id"), waits up to its
// timeout for one, and hands a caller that asks for callback_query only
// nothing else.
func TestTelegramFakeServesUpdatesAsTheBotAPIDocumentsThem(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	g := newTelegramForTest(t, &now)
	_, sent := callTelegram(t, g.URL(), telegramTestToken, "sendMessage",
		`{"chat_id":-1001234567890,"text":"start","reply_markup":{"inline_keyboard":[[{"text":"Acknowledge","callback_data":"a:x1"}]]}}`)
	msgID := int(sent["result"].(map[string]any)["message_id"].(float64))
	g.PushMessage(-1001234567890, "hello")
	first, q1 := g.PushCallback(TelegramUser{ID: 42, Username: "alice"}, -1001234567890, msgID, "a:x1")
	_, q2 := g.PushCallback(TelegramUser{ID: 43, FirstName: "Bob"}, -1001234567890, msgID, "a:x1")
	ids := func(ans map[string]any) []string {
		var out []string
		for _, u := range ans["result"].([]any) {
			out = append(out, u.(map[string]any)["callback_query"].(map[string]any)["id"].(string))
		}
		return out
	}
	_, ans := callTelegram(t, g.URL(), telegramTestToken, "getUpdates", `{"timeout":0,"allowed_updates":["callback_query"]}`)
	if got := ids(ans); len(got) != 2 || got[0] != q1 || got[1] != q2 {
		t.Fatalf("getUpdates without offset: %v, want both callback queries", got)
	}
	cq := ans["result"].([]any)[0].(map[string]any)["callback_query"].(map[string]any)
	if from := cq["from"].(map[string]any); from["id"] != float64(42) || from["username"] != "alice" || cq["data"] != "a:x1" ||
		cq["message"].(map[string]any)["message_id"] != float64(msgID) {
		t.Errorf("the callback query reads %v", cq)
	}
	_, ans = callTelegram(t, g.URL(), telegramTestToken, "getUpdates", `{"offset":`+strconv.FormatInt(first+1, 10)+`,"timeout":0,"allowed_updates":["callback_query"]}`)
	if got := ids(ans); len(got) != 1 || got[0] != q2 || g.Unconfirmed(q1) || !g.Unconfirmed(q2) {
		t.Fatalf("getUpdates from the second: %v; the first confirmed %v", got, !g.Unconfirmed(q1))
	}
	// A long poll is answered when an update arrives.
	done := make(chan []string, 1)
	go func() {
		_, ans := callTelegram(t, g.URL(), telegramTestToken, "getUpdates", `{"offset":`+strconv.FormatInt(first+2, 10)+`,"timeout":20,"allowed_updates":["callback_query"]}`)
		done <- ids(ans)
	}()
	g.WaitPolling(t, 1)
	_, q3 := g.PushCallback(TelegramUser{ID: 42, Username: "alice"}, -1001234567890, msgID, "sc:x1")
	if got := <-done; len(got) != 1 || got[0] != q3 {
		t.Fatalf("the long poll answered %v, want the click pushed while it waited", got)
	}
	// Answers: once each, within 200 characters.
	cases := []struct {
		body   string
		status int
		desc   string
	}{
		{`{"callback_query_id":"` + q1 + `","text":"` + strings.Repeat("x", 201) + `"}`, 400, "MESSAGE_TOO_LONG"},
		{`{"callback_query_id":"` + q1 + `","text":"Acknowledged","show_alert":true}`, 200, ""},
		{`{"callback_query_id":"` + q1 + `","text":"again"}`, 400, "query is too old"},
		{`{"callback_query_id":"999"}`, 400, "query ID is invalid"},
	}
	for _, c := range cases {
		status, ans := callTelegram(t, g.URL(), telegramTestToken, "answerCallbackQuery", c.body)
		if desc, _ := ans["description"].(string); status != c.status || !strings.Contains(desc, c.desc) {
			t.Errorf("answerCallbackQuery %s: %d %q, want %d %q", c.body, status, desc, c.status, c.desc)
		}
	}
	if a := g.Answers(); len(a) != 1 || a[0].CallbackQueryID != q1 || a[0].Text != "Acknowledged" || !a[0].ShowAlert {
		t.Errorf("answers %+v", a)
	}
}

// TestTelegramFakeRefusesAsTheBotAPIDoes: a second poller ends the first
// with 409, a webhook makes getUpdates 409, scripted failures come in
// order, callback_data over 64 bytes is refused, and editMessageText
// without reply_markup removes the keyboard.
func TestTelegramFakeRefusesAsTheBotAPIDoes(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	g := newTelegramForTest(t, &now)
	first := make(chan string, 1)
	go func() {
		_, ans := callTelegram(t, g.URL(), telegramTestToken, "getUpdates", `{"timeout":20}`)
		desc, _ := ans["description"].(string)
		first <- desc
	}()
	g.WaitPolling(t, 1)
	go func() { _, _ = callTelegram(t, g.URL(), telegramTestToken, "getUpdates", `{"timeout":0}`) }()
	if desc := <-first; !strings.Contains(desc, "Conflict: terminated by other getUpdates request") {
		t.Errorf("the first poller got %q, want the 409 of another poller", desc)
	}
	g.SetWebhook(true)
	if status, ans := callTelegram(t, g.URL(), telegramTestToken, "getUpdates", `{"timeout":0}`); status != 409 ||
		!strings.Contains(ans["description"].(string), "webhook is active") {
		t.Errorf("with a webhook: %d %v", status, ans)
	}
	g.SetWebhook(false)
	g.FailPolls(TelegramPollRetryAfter, TelegramPollDropped)
	status, ans := callTelegram(t, g.URL(), telegramTestToken, "getUpdates", `{"timeout":0}`)
	if params, _ := ans["parameters"].(map[string]any); status != 429 || params["retry_after"] != float64(TelegramPollRetryAfterSeconds) {
		t.Errorf("a scripted 429: %d %v", status, ans)
	}
	if resp, err := http.Post(g.URL()+"/bot"+telegramTestToken+"/getUpdates", "application/json", strings.NewReader(`{}`)); err == nil {
		resp.Body.Close()
		t.Errorf("a dropped poll answered %d", resp.StatusCode)
	}
	long := `{"chat_id":-1001234567890,"text":"x","reply_markup":{"inline_keyboard":[[{"text":"A","callback_data":"` + strings.Repeat("a", 65) + `"}]]}}`
	if status, ans := callTelegram(t, g.URL(), telegramTestToken, "sendMessage", long); status != 400 || ans["description"] != "Bad Request: BUTTON_DATA_INVALID" {
		t.Errorf("65 bytes of callback_data: %d %v", status, ans)
	}
	_, sent := callTelegram(t, g.URL(), telegramTestToken, "sendMessage",
		`{"chat_id":-1001234567890,"text":"x","reply_markup":{"inline_keyboard":[[{"text":"A","callback_data":"`+strings.Repeat("a", 64)+`"}]]}}`)
	id := itoa(int(sent["result"].(map[string]any)["message_id"].(float64)))
	if m := g.Messages(-1001234567890)[0]; len(m.Keyboard) != 1 {
		t.Fatalf("the message's keyboard: %+v", m.Keyboard)
	}
	if status, _ := callTelegram(t, g.URL(), telegramTestToken, "editMessageText", `{"chat_id":-1001234567890,"message_id":`+id+`,"text":"x"}`); status != 200 {
		t.Errorf("an edit of the same text without the keyboard: %d, want it to remove the keyboard", status)
	}
	if m := g.Messages(-1001234567890)[0]; m.Keyboard != nil {
		t.Errorf("after editMessageText without reply_markup the keyboard is %+v", m.Keyboard)
	}
	if status, _ := callTelegram(t, g.URL(), telegramTestToken, "editMessageReplyMarkup",
		`{"chat_id":-1001234567890,"message_id":`+id+`,"reply_markup":{"inline_keyboard":[[{"text":"U","callback_data":"u:x"}]]}}`); status != 200 {
		t.Errorf("editMessageReplyMarkup: %d", status)
	}
	if m := g.Messages(-1001234567890)[0]; len(m.Keyboard) != 1 || m.Keyboard[0][0].CallbackData != "u:x" {
		t.Errorf("after editMessageReplyMarkup the keyboard is %+v", m.Keyboard)
	}
}

// TestTelegramFakeHasBadDays: scripted failures of polls come in order, a
// 502 as the Bot API's JSON and as its front's HTML page, an answer lost on
// the way (its updates stay unconfirmed and come again), an update twice in
// one answer; an answerCallbackQuery that fails with a 502 leaves the query
// unanswered.
func TestTelegramFakeHasBadDays(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	g := newTelegramForTest(t, &now)
	id, q := g.PushCallback(TelegramUser{ID: 42, Username: "alice"}, -1001234567890, 5, "a:x1")
	g.FailPolls(TelegramPollBadGateway, TelegramPollGatewayPage, TelegramPollLost, TelegramPollDuplicated)
	poll := func() (*http.Response, error) {
		return http.Post(g.URL()+"/bot"+telegramTestToken+"/getUpdates", "application/json", strings.NewReader(`{"timeout":0}`))
	}
	if status, ans := callTelegram(t, g.URL(), telegramTestToken, "getUpdates", `{"timeout":0}`); status != 502 ||
		ans["error_code"] != float64(502) || ans["description"] != "Bad Gateway" {
		t.Errorf("a scripted 502: %d %v", status, ans)
	}
	if resp, err := poll(); err != nil {
		t.Errorf("the gateway's page: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 502 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(body), "502 Bad Gateway") {
			t.Errorf("the gateway's page: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	if resp, err := poll(); err == nil {
		resp.Body.Close()
		t.Errorf("a lost answer arrived: %d", resp.StatusCode)
	}
	if !g.Unconfirmed(q) {
		t.Errorf("the update of a lost answer was confirmed")
	}
	_, ans := callTelegram(t, g.URL(), telegramTestToken, "getUpdates", `{"timeout":0}`)
	ups, _ := ans["result"].([]any)
	if len(ups) != 2 || ups[0].(map[string]any)["update_id"] != float64(id) || ups[1].(map[string]any)["update_id"] != float64(id) {
		t.Errorf("a duplicated update: %v, want update %d twice", ans, id)
	}
	g.FailAnswers(1)
	if status, ans := callTelegram(t, g.URL(), telegramTestToken, "answerCallbackQuery", `{"callback_query_id":"`+q+`"}`); status != 502 ||
		ans["description"] != "Bad Gateway" || len(g.Answers()) != 0 {
		t.Errorf("a scripted 502 of an answer: %d %v, answers %v", status, ans, g.Answers())
	}
	if status, ans := callTelegram(t, g.URL(), telegramTestToken, "answerCallbackQuery", `{"callback_query_id":"`+q+`"}`); status != 200 {
		t.Errorf("the answer after a 502: %d %v", status, ans)
	}
}

// TestTelegramFakeChoosesLowerIDsAfterAQuietWeek: after a week without
// updates the next update's id is lower than the last one's; a poll whose
// offset is past the queue confirms nothing and gets the update, which the
// offset it names confirms.
func TestTelegramFakeChoosesLowerIDsAfterAQuietWeek(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	g := newTelegramForTest(t, &now)
	first, _ := g.PushCallback(TelegramUser{ID: 42, Username: "alice"}, -1001234567890, 5, "a:x1")
	offset := `{"offset":` + strconv.FormatInt(first+1, 10) + `,"timeout":0}`
	callTelegram(t, g.URL(), telegramTestToken, "getUpdates", offset)
	g.QuietWeek()
	second, q := g.PushCallback(TelegramUser{ID: 42, Username: "alice"}, -1001234567890, 5, "a:x2")
	if second >= first {
		t.Fatalf("after a quiet week update %d follows %d, want a lower id", second, first)
	}
	_, ans := callTelegram(t, g.URL(), telegramTestToken, "getUpdates", offset)
	if ups, _ := ans["result"].([]any); len(ups) != 1 || ups[0].(map[string]any)["update_id"] != float64(second) || !g.Unconfirmed(q) {
		t.Fatalf("a poll from the old offset: %v, unconfirmed %v; want update %d, not confirmed", ans, g.Unconfirmed(q), second)
	}
	callTelegram(t, g.URL(), telegramTestToken, "getUpdates", `{"offset":`+strconv.FormatInt(second+1, 10)+`,"timeout":0}`)
	if g.Unconfirmed(q) {
		t.Errorf("the offset after the update did not confirm it")
	}
}
