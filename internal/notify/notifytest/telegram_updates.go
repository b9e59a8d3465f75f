package notifytest

import (
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The Bot API's getUpdates and callback queries, as the fake serves them
// (core.telegram.org/bots/api, "Getting updates", getUpdates, CallbackQuery,
// answerCallbackQuery):
//
//   - getUpdates: "offset: Identifier of the first update to be returned.
//     Must be greater by one than the highest among the identifiers of
//     previously received updates. By default, updates starting with the
//     earliest unconfirmed update are returned. An update is considered
//     confirmed as soon as getUpdates is called with an offset higher than
//     its update_id." "limit: ... Values between 1-100 are accepted.
//     Defaults to 100." "timeout: Timeout in seconds for long polling."
//   - A second poller ends the first with 409 "Conflict: terminated by other
//     getUpdates request; make sure that only one bot instance is running",
//     and a bot with a webhook answers getUpdates 409 "Conflict: can't use
//     getUpdates method while webhook is active; use deleteWebhook to delete
//     the webhook first" (both as Telegram words them in the issues of
//     every Bot API client).
//   - answerCallbackQuery(callback_query_id, text "0-200 characters",
//     show_alert): a query answered twice or unknown is 400 "query is too
//     old and response timeout expired or query ID is invalid".
//   - InlineKeyboardButton.callback_data: "1-64 bytes"; Telegram refuses
//     other lengths with 400 BUTTON_DATA_INVALID.
//
// After a week without updates (QuietWeek), "identifier of the next update
// will be chosen randomly instead of sequentially" (Update.update_id); the
// fake chooses a lower one. Telegram's server (tdlib's telegram-bot-api, its
// update queue) takes an offset more than 10 past the next update's id for
// none ("Specified from_id is in the future"): it confirms nothing and
// answers from the earliest unconfirmed update, as the fake does.
//
// And on a bad day (FailPolls, CutPolls, FailAnswers): a long poll whose
// connection ends before its timeout, a 502 "Bad Gateway" (the Bot API's
// JSON, or its front's HTML page, both reported by Bot API clients), an
// answer lost on the way, so that the updates it held, not confirmed, come
// again, and an update delivered twice ("update_id ... allows you to ignore
// repeated updates").

// telegramMaxAnswerText is the most characters of answerCallbackQuery's
// text.
const telegramMaxAnswerText = 200

// telegramOffsetAhead is how far past the next update's id an offset may
// be before Telegram's update queue takes it for none.
const telegramOffsetAhead = 10

var errNotModified = &telegramError{status: 400, description: "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"}

// TelegramUser is who clicks a button.
type TelegramUser struct {
	ID        int64
	Username  string
	FirstName string
}

// TelegramAnswer is one answerCallbackQuery the fake accepted.
type TelegramAnswer struct {
	At              time.Time
	CallbackQueryID string
	Text            string
	ShowAlert       bool
}

// TelegramPollFailure is how the fake answers one getUpdates instead of
// serving it.
type TelegramPollFailure int

// The failures of a poll FailPolls can script.
const (
	// TelegramPollDropped closes the connection without an answer, as a
	// proxy or a network failure does.
	TelegramPollDropped TelegramPollFailure = iota + 1
	// TelegramPollConflict is the 409 of another poller of the bot.
	TelegramPollConflict
	// TelegramPollWebhook is the 409 of a bot with a webhook.
	TelegramPollWebhook
	// TelegramPollRetryAfter is a 429 with parameters.retry_after of
	// TelegramPollRetryAfterSeconds.
	TelegramPollRetryAfter
	// TelegramPollBadGateway is the Bot API's 502: {"ok":false,
	// "error_code":502,"description":"Bad Gateway"}.
	TelegramPollBadGateway
	// TelegramPollGatewayPage is a 502 whose body is the HTML page of
	// Telegram's front (nginx), not the Bot API's JSON.
	TelegramPollGatewayPage
	// TelegramPollLost serves the poll (its offset confirms what is below
	// it) but ends the connection instead of answering: the updates it
	// held are not confirmed, and the next poll gets them again.
	TelegramPollLost
	// TelegramPollDuplicated answers the poll with each update twice, the
	// same update_id.
	TelegramPollDuplicated
)

// TelegramPollRetryAfterSeconds is the retry_after of
// TelegramPollRetryAfter.
const TelegramPollRetryAfterSeconds = 7

type telegramUpdate struct {
	id      int64
	queryID string
	kind    string
	body    map[string]any
}

// telegramUpdates is the bot's queue of updates, guarded by Telegram.mu.
type telegramUpdates struct {
	queue     []telegramUpdate
	nextID    int64
	nextQuery int64
	// pending are the callback queries not answered yet, answered those
	// answered.
	pending  map[string]bool
	answers  []TelegramAnswer
	failures []TelegramPollFailure
	// answerFailures counts the next answerCallbackQuery calls to answer
	// 502 without applying them.
	answerFailures int
	webhook        bool
	// gen counts the polls; a poll that sees it change was ended by a
	// newer one.
	gen int64
	// wake is closed (and replaced) when an update arrives or a newer poll
	// starts; cut when CutPolls drops the waiting polls.
	wake, cut chan struct{}
	// waiting counts the long polls waiting now; waited is closed (and
	// replaced) when it changes or a call is recorded.
	waiting int
	waited  chan struct{}
}

// record keeps call and wakes Await.
func (g *Telegram) record(call TelegramCall) {
	g.calls = append(g.calls, call)
	close(g.updates.waited)
	g.updates.waited = make(chan struct{})
}

// Await waits until cond, which may call the fake's methods, holds; it is
// checked after each call the fake answers. It fails t, saying what was
// awaited, after 10 s.
func (g *Telegram) Await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		g.mu.Lock()
		changed := g.updates.waited
		g.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("the Telegram fake waited 10s for %s", what)
		}
	}
}

func (u *telegramUpdates) init() {
	u.nextID, u.nextQuery = 700000000, 4100000000000000000
	u.pending = map[string]bool{}
	u.wake, u.cut, u.waited = make(chan struct{}), make(chan struct{}), make(chan struct{})
}

func (u *telegramUpdates) setWaiting(delta int) {
	u.waiting += delta
	close(u.waited)
	u.waited = make(chan struct{})
}

// WaitPolling waits until n long polls are waiting for updates, and fails
// t after 10 s.
func (g *Telegram) WaitPolling(t testing.TB, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		g.mu.Lock()
		waiting, changed := g.updates.waiting, g.updates.waited
		g.mu.Unlock()
		if waiting >= n {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%d long polls waiting after 10s, want %d", waiting, n)
		}
	}
}

func (u *telegramUpdates) wakeAll() {
	close(u.wake)
	u.wake = make(chan struct{})
}

// PushCallback queues the callback query of from clicking the button with
// data on the message messageID of the chat chatID, and returns its
// update_id and callback query id. A message the fake does not hold is an
// inaccessible one (date 0), as Telegram sends for old messages.
func (g *Telegram) PushCallback(from TelegramUser, chatID int64, messageID int, data string) (int64, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	u := &g.updates
	u.nextID++
	u.nextQuery++
	id, qid := u.nextID, strconv.FormatInt(u.nextQuery, 10)
	user := map[string]any{"id": from.ID, "is_bot": false, "first_name": from.FirstName}
	if from.Username != "" {
		user["username"] = from.Username
	}
	chat := g.chats[chatID]
	if chat == nil {
		chat = &TelegramChat{ID: chatID, Type: "supergroup"}
	}
	msg := map[string]any{"message_id": messageID, "date": 0, "chat": chatJSON(chat)}
	if m := g.message(chatID, messageID); m != nil {
		msg = messageJSON(chat, m, g.now())
		if len(m.Keyboard) > 0 {
			msg["reply_markup"] = map[string]any{"inline_keyboard": m.Keyboard}
		}
	}
	cq := map[string]any{"id": qid, "from": user, "message": msg, "chat_instance": strconv.FormatInt(-chatID*7, 10), "data": data}
	u.queue = append(u.queue, telegramUpdate{id: id, queryID: qid, kind: "callback_query", body: map[string]any{"update_id": id, "callback_query": cq}})
	u.pending[qid] = true
	u.wakeAll()
	return id, qid
}

// PushMessage queues an update of another kind than callback_query (a
// message to the bot), which a poller that asks for callback queries only
// is not given.
func (g *Telegram) PushMessage(chatID int64, text string) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	u := &g.updates
	u.nextID++
	body := map[string]any{"update_id": u.nextID, "message": map[string]any{"message_id": 1, "date": 0, "text": text,
		"chat": map[string]any{"id": chatID, "type": "supergroup"}}}
	u.queue = append(u.queue, telegramUpdate{id: u.nextID, kind: "message", body: body})
	u.wakeAll()
	return u.nextID
}

// QuietWeek gives the next updates ids lower than the last ones, as
// Telegram chooses the next id at random after a week without updates.
func (g *Telegram) QuietWeek() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.updates.nextID /= 2
}

// FailPolls makes the next getUpdates calls fail, one failure each, in
// order.
func (g *Telegram) FailPolls(failures ...TelegramPollFailure) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.updates.failures = append(g.updates.failures, failures...)
}

// FailAnswers makes the next n answerCallbackQuery calls fail with the Bot
// API's 502 Bad Gateway, the queries left unanswered.
func (g *Telegram) FailAnswers(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.updates.answerFailures += n
}

// SetWebhook sets (true) or deletes the bot's webhook: while one is set,
// getUpdates answers 409.
func (g *Telegram) SetWebhook(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.updates.webhook = on
}

// CutPolls drops the connection of every long poll waiting now.
func (g *Telegram) CutPolls() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.updates.cut)
	g.updates.cut = make(chan struct{})
}

// Answers returns the answerCallbackQuery calls accepted, in order.
func (g *Telegram) Answers() []TelegramAnswer {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.updates.answers)
}

// Unconfirmed reports whether the update of the callback query id is still
// in the bot's queue: no getUpdates has confirmed it.
func (g *Telegram) Unconfirmed(queryID string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.ContainsFunc(g.updates.queue, func(u telegramUpdate) bool { return u.queryID == queryID })
}

// Queued returns how many updates no getUpdates has confirmed yet.
func (g *Telegram) Queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.updates.queue)
}

// isPoll reports a getUpdates with the bot's token.
func (g *Telegram) isPoll(r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, ok2 := strings.Cut(rest, "/")
	return ok && ok2 && token == g.token && strings.EqualFold(method, TelegramGetUpdates)
}

// servePoll answers a getUpdates: at once with the updates from offset
// when there are any, else when one arrives or the timeout passes.
func (g *Telegram) servePoll(w http.ResponseWriter, r *http.Request, raw []byte) {
	var req pollRequest
	g.mu.Lock()
	call := TelegramCall{At: g.now(), Method: TelegramGetUpdates}
	reply := func(result any, terr *telegramError) {
		call.Status = http.StatusOK
		if terr != nil {
			call.Status, call.Description, call.RetryAfter = terr.status, terr.description, terr.retryAfter
		}
		g.record(call)
		g.mu.Unlock()
		writeTelegram(w, result, terr)
	}
	drop := func() {
		call.Status = 0
		g.record(call)
		g.mu.Unlock()
		dropConnection(w)
	}
	if len(raw) > 0 && json.Unmarshal(raw, &req) != nil {
		reply(nil, &telegramError{status: 400, description: "Bad Request: can't parse JSON object"})
		return
	}
	call.Offset = req.Offset
	u := &g.updates
	fail := u.nextFailure()
	switch terr := u.refuse(fail, &req); {
	case fail == TelegramPollDropped:
		drop()
		return
	case fail == TelegramPollGatewayPage:
		call.Status, call.Description = http.StatusBadGateway, "Bad Gateway"
		g.record(call)
		g.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, gatewayPage)
		return
	case terr != nil:
		reply(nil, terr)
		return
	}
	u.gen++
	gen := u.gen
	u.wakeAll()
	if req.Offset > 0 && req.Offset <= u.nextID+1+telegramOffsetAhead {
		u.queue = slices.DeleteFunc(u.queue, func(up telegramUpdate) bool { return up.id < req.Offset })
	}
	deadline := time.NewTimer(time.Duration(req.Timeout) * time.Second)
	defer deadline.Stop()
	for {
		if out := u.from(req); len(out) > 0 || req.Timeout == 0 {
			switch fail {
			case TelegramPollLost:
				drop()
				return
			case TelegramPollDuplicated:
				out = slices.Concat(out, out)
				slices.SortStableFunc(out, func(a, b map[string]any) int {
					return cmp.Compare(a["update_id"].(int64), b["update_id"].(int64))
				})
			}
			reply(out, nil)
			return
		}
		wake, cut := u.wake, u.cut
		u.setWaiting(1)
		g.mu.Unlock()
		select {
		case <-r.Context().Done():
			g.mu.Lock()
			u.setWaiting(-1)
			g.mu.Unlock()
			return
		case <-cut:
			g.mu.Lock()
			u.setWaiting(-1)
			drop()
			return
		case <-deadline.C:
			req.Timeout = 0
		case <-wake:
		}
		g.mu.Lock()
		u.setWaiting(-1)
		if u.gen != gen {
			reply(nil, errOtherPoll)
			return
		}
	}
}

// pollRequest is the body of a getUpdates.
type pollRequest struct {
	Offset         int64    `json:"offset"`
	Limit          int      `json:"limit"`
	Timeout        int      `json:"timeout"`
	AllowedUpdates []string `json:"allowed_updates"`
}

// nextFailure takes the scripted failure of a poll, 0 for none.
func (u *telegramUpdates) nextFailure() TelegramPollFailure {
	if len(u.failures) == 0 {
		return 0
	}
	f := u.failures[0]
	u.failures = u.failures[1:]
	return f
}

// refuse returns the error a poll is answered with instead of updates (the
// scripted failure's, a webhook's 409, a bad limit or timeout). It sets the
// default limit.
func (u *telegramUpdates) refuse(fail TelegramPollFailure, req *pollRequest) *telegramError {
	switch fail {
	case TelegramPollConflict:
		return errOtherPoll
	case TelegramPollWebhook:
		return errWebhook
	case TelegramPollRetryAfter:
		return &telegramError{status: 429, description: "Too Many Requests: retry after " + strconv.Itoa(TelegramPollRetryAfterSeconds),
			retryAfter: TelegramPollRetryAfterSeconds}
	case TelegramPollBadGateway:
		return errBadGateway
	}
	if u.webhook {
		return errWebhook
	}
	if req.Limit == 0 {
		req.Limit = 100
	}
	if req.Limit < 1 || req.Limit > 100 || req.Timeout < 0 {
		return &telegramError{status: 400, description: "Bad Request: invalid limit or timeout"}
	}
	return nil
}

// from returns the queued updates a poll is given: at most its limit, of
// the kinds it allows.
func (u *telegramUpdates) from(req pollRequest) []map[string]any {
	out := []map[string]any{}
	for _, up := range u.queue {
		if len(out) < req.Limit && (len(req.AllowedUpdates) == 0 || slices.Contains(req.AllowedUpdates, up.kind)) {
			out = append(out, up.body)
		}
	}
	return out
}

var (
	errOtherPoll  = &telegramError{status: 409, description: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}
	errWebhook    = &telegramError{status: 409, description: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"}
	errBadGateway = &telegramError{status: 502, description: "Bad Gateway"}
)

// gatewayPage is the page Telegram's front answers a 502 with when the Bot
// API behind it does not answer.
const gatewayPage = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n" +
	"<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"

// writeTelegram writes the Bot API's answer: ok and the result, or the
// error with its parameters.
func writeTelegram(w http.ResponseWriter, result any, terr *telegramError) {
	w.Header().Set("Content-Type", "application/json")
	if terr != nil {
		ans := map[string]any{"ok": false, "error_code": terr.status, "description": terr.description}
		if terr.retryAfter > 0 {
			ans["parameters"] = map[string]any{"retry_after": terr.retryAfter}
		}
		w.WriteHeader(terr.status)
		_ = json.NewEncoder(w).Encode(ans)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}

// dropConnection closes the connection of w without an answer.
func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("notifytest: the Telegram fake's server cannot hijack a connection")
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// answerCallback records an answerCallbackQuery to a query pushed and not
// answered yet.
func (g *Telegram) answerCallback(req telegramRequest, call *TelegramCall) (any, *telegramError) {
	u := &g.updates
	if u.answerFailures > 0 {
		u.answerFailures--
		return nil, errBadGateway
	}
	if !u.pending[req.CallbackQueryID] {
		return nil, &telegramError{status: 400, description: "Bad Request: query is too old and response timeout expired or query ID is invalid"}
	}
	text := ""
	if req.Text != nil {
		text = *req.Text
	}
	if utf16Len(text) > telegramMaxAnswerText {
		return nil, &telegramError{status: 400, description: "Bad Request: MESSAGE_TOO_LONG"}
	}
	delete(u.pending, req.CallbackQueryID)
	call.Text = text
	u.answers = append(u.answers, TelegramAnswer{At: call.At, CallbackQueryID: req.CallbackQueryID, Text: text, ShowAlert: req.ShowAlert})
	return true, nil
}

// editKeyboard is editMessageReplyMarkup: the message's keyboard becomes
// keyboard (none without reply_markup).
func (g *Telegram) editKeyboard(chat *TelegramChat, id int, keyboard [][]TelegramButton, call *TelegramCall) (any, *telegramError) {
	m := g.message(chat.ID, id)
	if m == nil {
		return nil, &telegramError{status: 400, description: "Bad Request: message to edit not found"}
	}
	call.MessageID = m.ID
	if sameKeyboard(m.Keyboard, keyboard) {
		return nil, errNotModified
	}
	if terr := g.flood(chat, call.At); terr != nil {
		return nil, terr
	}
	m.Keyboard = keyboard
	g.sent[chat.ID] = append(g.sent[chat.ID], call.At)
	return messageJSON(chat, m, call.At), nil
}

// checkKeyboard refuses buttons without text or with callback_data outside
// 1-64 bytes.
func checkKeyboard(rows [][]TelegramButton) *telegramError {
	for _, row := range rows {
		for _, b := range row {
			if strings.TrimSpace(b.Text) == "" {
				return &telegramError{status: 400, description: "Bad Request: text buttons are unallowed in the inline keyboard"}
			}
			if n := len(b.CallbackData); n < 1 || n > telegramMaxCallbackData || !utf8.ValidString(b.CallbackData) {
				return &telegramError{status: 400, description: "Bad Request: BUTTON_DATA_INVALID"}
			}
		}
	}
	return nil
}

// sameKeyboard reports two keyboards alike, an empty one as none.
func sameKeyboard(a, b [][]TelegramButton) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	return reflect.DeepEqual(a, b)
}
