package notifytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// Telegram Bot API facts the fake enforces, from core.telegram.org/bots/api
// and its FAQ on limits.
const (
	telegramMaxText = 4096 // characters of a message's text after entities parsing
	// telegramGroupPerMinute is how many messages a bot may send to one
	// group in a minute ("no more than 20 messages per minute").
	telegramGroupPerMinute = 20
	// Method names, as the fake records them.
	TelegramSendMessage     = "sendMessage"
	TelegramEditMessageText = "editMessageText"
	TelegramGetMe           = "getMe"
	TelegramGetChat         = "getChat"
	// TelegramEditMessageReplyMarkup, TelegramGetUpdates and
	// TelegramAnswerCallbackQuery are the methods of buttons and their
	// clicks (telegram_updates.go).
	TelegramEditMessageReplyMarkup = "editMessageReplyMarkup"
	TelegramGetUpdates             = "getUpdates"
	TelegramAnswerCallbackQuery    = "answerCallbackQuery"
	// telegramMaxCallbackData is the most bytes of a button's
	// callback_data ("1-64 bytes", InlineKeyboardButton).
	telegramMaxCallbackData = 64
)

// TelegramChat is a chat the fake bot is a member of.
type TelegramChat struct {
	ID int64
	// Username, without @, makes the chat reachable as @Username (a
	// public channel or group).
	Username string
	// Type is group, supergroup, channel or private (default supergroup).
	Type  string
	Title string
	// Topics are the message_thread_ids of a forum supergroup's topics.
	Topics []int
}

// TelegramMessage is a message the fake bot sent, as it stands.
type TelegramMessage struct {
	ID       int
	ChatID   int64
	ThreadID int
	// ReplyTo is the message it replies to, 0 for none.
	ReplyTo int
	// HTML is the text as sent, Text the text after entities parsing.
	HTML, Text string
	Silent     bool
	// Edits counts the editMessageText calls that changed it.
	Edits int
	// Keyboard is its inline keyboard, nil for none.
	Keyboard [][]TelegramButton
}

// TelegramButton is a button of an inline keyboard.
type TelegramButton struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

// TelegramCall is one request the fake got, with its answer.
type TelegramCall struct {
	At     time.Time
	Method string
	ChatID int64
	// MessageID is the message sent or edited.
	MessageID int
	ThreadID  int
	ReplyTo   int
	// Text is the text after entities parsing.
	Text string
	// Status is the HTTP status answered, and Description Telegram's
	// description of an error.
	Status      int
	Description string
	RetryAfter  int
	// Keyboard is the inline keyboard the call set (reply_markup), nil
	// for none.
	Keyboard [][]TelegramButton
	// Offset is the offset of a getUpdates.
	Offset int64
}

// Telegram is a fake of the Telegram Bot API for one bot. It checks each
// request as Telegram does: the token in the path /bot<token>/<method> (401
// Unauthorized otherwise, 404 Not Found for a method it does not know), the
// chat (400 "chat not found"; 403 once the bot was kicked), the HTML of
// parse_mode HTML (400 "can't parse entities" for an unknown tag, an
// unbalanced one, or a <, > or & not part of a tag or entity), the text's
// length (4096 characters after parsing), message_thread_id (a topic of a
// forum), reply_parameters (an existing message, unless
// allow_sending_without_reply), and editMessageText (an existing message,
// 400 "message is not modified" for the same text). Over 20 messages (sent
// or edited) in a minute to a group, it answers 429 with
// parameters.retry_after, as Telegram does. It also keeps the inline
// keyboards of messages, and serves getUpdates and answerCallbackQuery for
// the callback queries a test pushes (telegram_updates.go).
type Telegram struct {
	server *httptest.Server
	token  string
	now    func() time.Time

	mu     sync.Mutex
	chats  map[int64]*TelegramChat
	kicked map[int64]bool
	msgs   map[int64][]*TelegramMessage
	sent   map[int64][]time.Time
	calls  []TelegramCall
	nextID int
	// updates is the bot's queue of updates: callback queries pushed,
	// their answers, and the long polls waiting for them.
	updates telegramUpdates
}

// NewTelegram starts a fake Bot API for the bot with token, telling time
// with now (a fake clock in tests). It is closed when the test ends.
func NewTelegram(t testing.TB, token string, now func() time.Time) *Telegram {
	t.Helper()
	g := &Telegram{token: token, now: now, chats: map[int64]*TelegramChat{}, kicked: map[int64]bool{},
		msgs: map[int64][]*TelegramMessage{}, sent: map[int64][]time.Time{}, nextID: 100}
	g.updates.init()
	g.server = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.server.Close)
	return g
}

// URL returns the fake's base URL, what api_url is set to.
func (g *Telegram) URL() string { return g.server.URL }

// AddChat makes the bot a member of c.
func (g *Telegram) AddChat(c TelegramChat) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c.Type == "" {
		c.Type = "supergroup"
	}
	g.chats[c.ID] = &c
}

// Kick removes the bot from the chat id: Telegram then answers 403.
func (g *Telegram) Kick(id int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.kicked[id] = true
}

// Calls returns every request so far, with its answer.
func (g *Telegram) Calls() []TelegramCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.calls)
}

// Messages returns the messages of the chat id, oldest first, as they
// stand.
func (g *Telegram) Messages(id int64) []TelegramMessage {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []TelegramMessage
	for _, m := range g.msgs[id] {
		out = append(out, *m)
	}
	return out
}

// telegramError is an answer of ok false.
type telegramError struct {
	status      int
	description string
	retryAfter  int
}

func (g *Telegram) serve(w http.ResponseWriter, r *http.Request) {
	raw := readBody(r)
	if g.isPoll(r) {
		g.servePoll(w, r, raw)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	call := TelegramCall{At: g.now()}
	result, terr := g.handle(r, raw, &call)
	w.Header().Set("Content-Type", "application/json")
	if terr != nil {
		call.Status, call.Description, call.RetryAfter = terr.status, terr.description, terr.retryAfter
		ans := map[string]any{"ok": false, "error_code": terr.status, "description": terr.description}
		if terr.retryAfter > 0 {
			ans["parameters"] = map[string]any{"retry_after": terr.retryAfter}
		}
		w.WriteHeader(terr.status)
		_ = json.NewEncoder(w).Encode(ans)
	} else {
		call.Status = http.StatusOK
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
	}
	g.record(call)
}

// telegramRequest is what the fake reads of a request's body.
type telegramRequest struct {
	ChatID          json.RawMessage `json:"chat_id"`
	MessageID       int             `json:"message_id"`
	MessageThreadID int             `json:"message_thread_id"`
	Text            *string         `json:"text"`
	ParseMode       string          `json:"parse_mode"`
	Silent          bool            `json:"disable_notification"`
	ReplyParameters *struct {
		MessageID                int  `json:"message_id"`
		AllowSendingWithoutReply bool `json:"allow_sending_without_reply"`
	} `json:"reply_parameters"`
	ReplyMarkup *struct {
		InlineKeyboard [][]TelegramButton `json:"inline_keyboard"`
	} `json:"reply_markup"`
	CallbackQueryID string `json:"callback_query_id"`
	ShowAlert       bool   `json:"show_alert"`
}

func (g *Telegram) handle(r *http.Request, raw []byte, call *TelegramCall) (any, *telegramError) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || r.Method != http.MethodPost && r.Method != http.MethodGet {
		return nil, &telegramError{status: 404, description: "Not Found"}
	}
	if token != g.token {
		return nil, &telegramError{status: 401, description: "Unauthorized"}
	}
	for _, m := range []string{TelegramSendMessage, TelegramEditMessageText, TelegramGetMe, TelegramGetChat,
		TelegramEditMessageReplyMarkup, TelegramAnswerCallbackQuery} {
		if strings.EqualFold(method, m) {
			call.Method = m
		}
	}
	if call.Method == "" {
		return nil, &telegramError{status: 404, description: "Not Found: method not found"}
	}
	if call.Method == TelegramGetMe {
		return map[string]any{"id": 7000001, "is_bot": true, "first_name": "Relay", "username": "relay_alarm_bot"}, nil
	}
	var req telegramRequest
	if len(raw) > 0 && json.Unmarshal(raw, &req) != nil {
		return nil, &telegramError{status: 400, description: "Bad Request: can't parse JSON object"}
	}
	if call.Method == TelegramAnswerCallbackQuery {
		return g.answerCallback(req, call)
	}
	var keyboard [][]TelegramButton
	if req.ReplyMarkup != nil {
		if terr := checkKeyboard(req.ReplyMarkup.InlineKeyboard); terr != nil {
			return nil, terr
		}
		keyboard = req.ReplyMarkup.InlineKeyboard
		call.Keyboard = keyboard
	}
	chat, terr := g.chat(req.ChatID)
	if terr != nil {
		return nil, terr
	}
	call.ChatID = chat.ID
	if call.Method == TelegramGetChat {
		return chatJSON(chat), nil
	}
	if call.Method == TelegramEditMessageReplyMarkup {
		return g.editKeyboard(chat, req.MessageID, keyboard, call)
	}
	if req.Text == nil || *req.Text == "" {
		return nil, &telegramError{status: 400, description: "Bad Request: message text is empty"}
	}
	text := *req.Text
	switch req.ParseMode {
	case "":
	case "HTML":
		var err error
		if text, err = TelegramParseHTML(text); err != nil {
			return nil, &telegramError{status: 400, description: "Bad Request: can't parse entities: " + err.Error()}
		}
	default:
		return nil, &telegramError{status: 400, description: "Bad Request: unsupported parse_mode"}
	}
	call.Text = text
	if strings.TrimSpace(text) == "" {
		return nil, &telegramError{status: 400, description: "Bad Request: message text is empty"}
	}
	if utf16Len(text) > telegramMaxText {
		return nil, &telegramError{status: 400, description: "Bad Request: message is too long"}
	}
	if terr := g.flood(chat, call.At); terr != nil {
		return nil, terr
	}
	if call.Method == TelegramEditMessageText {
		m := g.message(chat.ID, req.MessageID)
		if m == nil {
			return nil, &telegramError{status: 400, description: "Bad Request: message to edit not found"}
		}
		call.MessageID = m.ID
		if m.HTML == *req.Text && sameKeyboard(m.Keyboard, keyboard) {
			return nil, errNotModified
		}
		// Without reply_markup, editMessageText removes the keyboard, as
		// Telegram does (see editBody in the telegram sink).
		m.HTML, m.Text, m.Keyboard = *req.Text, text, keyboard
		m.Edits++
		g.sent[chat.ID] = append(g.sent[chat.ID], call.At)
		return messageJSON(chat, m, call.At), nil
	}
	msg := &TelegramMessage{ChatID: chat.ID, HTML: *req.Text, Text: text, Silent: req.Silent, Keyboard: keyboard}
	if req.MessageThreadID != 0 {
		if !slices.Contains(chat.Topics, req.MessageThreadID) {
			return nil, &telegramError{status: 400, description: "Bad Request: message thread not found"}
		}
		msg.ThreadID = req.MessageThreadID
	}
	if rp := req.ReplyParameters; rp != nil {
		switch {
		case g.message(chat.ID, rp.MessageID) != nil:
			msg.ReplyTo = rp.MessageID
		case !rp.AllowSendingWithoutReply:
			return nil, &telegramError{status: 400, description: "Bad Request: message to be replied not found"}
		}
	}
	g.nextID++
	msg.ID = g.nextID
	call.MessageID, call.ThreadID, call.ReplyTo = msg.ID, msg.ThreadID, msg.ReplyTo
	g.msgs[chat.ID] = append(g.msgs[chat.ID], msg)
	g.sent[chat.ID] = append(g.sent[chat.ID], call.At)
	return messageJSON(chat, msg, call.At), nil
}

// chat finds the chat a chat_id names: an integer, or a string holding an
// integer or @username.
func (g *Telegram) chat(raw json.RawMessage) (*TelegramChat, *telegramError) {
	notFound := &telegramError{status: 400, description: "Bad Request: chat not found"}
	var id int64
	var name string
	if json.Unmarshal(raw, &id) != nil {
		if json.Unmarshal(raw, &name) != nil || name == "" {
			return nil, &telegramError{status: 400, description: "Bad Request: chat_id is empty"}
		}
		if u, ok := strings.CutPrefix(name, "@"); ok {
			for _, c := range g.chats {
				if c.Username != "" && strings.EqualFold(c.Username, u) {
					id = c.ID
				}
			}
		} else if n, err := strconv.ParseInt(name, 10, 64); err == nil {
			id = n
		}
	}
	c := g.chats[id]
	switch {
	case c == nil:
		return nil, notFound
	case g.kicked[id] && c.Type == "channel":
		return nil, &telegramError{status: 403, description: "Forbidden: bot is not a member of the channel chat"}
	case g.kicked[id]:
		return nil, &telegramError{status: 403, description: "Forbidden: bot was kicked from the " + c.Type + " chat"}
	}
	return c, nil
}

// flood refuses a message to a group or channel over 20 in the minute
// before at, saying when the oldest leaves the minute.
func (g *Telegram) flood(c *TelegramChat, at time.Time) *telegramError {
	if c.Type == "private" {
		return nil
	}
	var within []time.Time
	for _, t := range g.sent[c.ID] {
		if at.Sub(t) < time.Minute {
			within = append(within, t)
		}
	}
	if len(within) < telegramGroupPerMinute {
		return nil
	}
	wait := within[len(within)-telegramGroupPerMinute].Add(time.Minute).Sub(at)
	secs := int((wait + time.Second - 1) / time.Second)
	return &telegramError{status: 429, description: fmt.Sprintf("Too Many Requests: retry after %d", secs), retryAfter: secs}
}

func (g *Telegram) message(chat int64, id int) *TelegramMessage {
	for _, m := range g.msgs[chat] {
		if m.ID == id {
			return m
		}
	}
	return nil
}

func chatJSON(c *TelegramChat) map[string]any {
	out := map[string]any{"id": c.ID, "type": c.Type}
	if c.Title != "" {
		out["title"] = c.Title
	}
	if c.Username != "" {
		out["username"] = c.Username
	}
	if len(c.Topics) > 0 {
		out["is_forum"] = true
	}
	return out
}

func messageJSON(c *TelegramChat, m *TelegramMessage, at time.Time) map[string]any {
	out := map[string]any{"message_id": m.ID, "date": at.Unix(), "chat": chatJSON(c), "text": m.Text}
	if m.ThreadID != 0 {
		// Message: "message_thread_id: Optional. Unique identifier of a
		// message thread to which the message belongs; for supergroups
		// only", "is_topic_message: Optional. True, if the message is sent
		// to a forum topic".
		out["message_thread_id"], out["is_topic_message"] = m.ThreadID, true
	}
	if m.ReplyTo != 0 {
		out["reply_to_message"] = map[string]any{"message_id": m.ReplyTo, "chat": chatJSON(c)}
	}
	if m.Edits > 0 {
		out["edit_date"] = at.Unix()
	}
	return out
}

// telegramTags are the tags of Telegram's HTML style, and the attributes
// they must have.
var telegramTags = map[string]string{
	"b": "", "strong": "", "i": "", "em": "", "u": "", "ins": "", "s": "", "strike": "", "del": "",
	"span": "class", "tg-spoiler": "", "a": "href", "tg-emoji": "emoji-id", "code": "", "pre": "", "blockquote": "",
}

// TelegramParseHTML returns the text of s, a message in Telegram's HTML
// style, after entities parsing: the tags Telegram supports, balanced, and
// the entities &lt; &gt; &amp; &quot; and numeric ones. A <, > or & that is
// not part of a tag or an entity is refused, as the Bot API documentation
// asks them to be escaped (Telegram's own parser may take some of them;
// the fake is stricter). Error texts follow Telegram's where known.
func TelegramParseHTML(s string) (string, error) {
	var out strings.Builder
	var open []string
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			end := strings.IndexByte(s[i:], '>')
			if end < 0 {
				return "", fmt.Errorf("can't find end of the entity starting at byte offset %d", i)
			}
			tag := s[i+1 : i+end]
			if name, ok := strings.CutPrefix(tag, "/"); ok {
				name = strings.ToLower(strings.TrimSpace(name))
				if len(open) == 0 {
					return "", fmt.Errorf("unexpected end tag at byte offset %d", i)
				}
				if top := open[len(open)-1]; name != top {
					return "", fmt.Errorf("unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", i, top, name)
				}
				open = open[:len(open)-1]
			} else {
				name, attrs, _ := strings.Cut(tag, " ")
				name = strings.ToLower(name)
				need, ok := telegramTags[name]
				if !ok {
					return "", fmt.Errorf("unsupported start tag \"%s\" at byte offset %d", name, i)
				}
				if need != "" && !strings.Contains(attrs, need+"=") {
					return "", fmt.Errorf("tag \"%s\" must have attribute \"%s\" at byte offset %d", name, need, i)
				}
				open = append(open, name)
			}
			i += end + 1
		case '>':
			return "", fmt.Errorf("character '>' is reserved and must be escaped at byte offset %d", i)
		case '&':
			end := strings.IndexByte(s[i:], ';')
			if end < 0 || end > 10 {
				return "", fmt.Errorf("character '&' is reserved and must be escaped at byte offset %d", i)
			}
			r, ok := entity(s[i+1 : i+end])
			if !ok {
				return "", fmt.Errorf("unsupported HTML entity \"%s\" at byte offset %d", s[i:i+end+1], i)
			}
			out.WriteRune(r)
			i += end + 1
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			out.WriteRune(r)
			i += n
		}
	}
	if len(open) > 0 {
		return "", fmt.Errorf("can't find end tag corresponding to start tag \"%s\"", open[len(open)-1])
	}
	return out.String(), nil
}

// entity reads the name of an HTML entity Telegram supports.
func entity(name string) (rune, bool) {
	switch name {
	case "lt":
		return '<', true
	case "gt":
		return '>', true
	case "amp":
		return '&', true
	case "quot":
		return '"', true
	}
	num, ok := strings.CutPrefix(name, "#")
	if !ok || num == "" {
		return 0, false
	}
	base := 10
	if hex, ok := strings.CutPrefix(strings.ToLower(num), "x"); ok {
		num, base = hex, 16
	}
	n, err := strconv.ParseInt(num, base, 32)
	if err != nil || n <= 0 || !utf8.ValidRune(rune(n)) {
		return 0, false
	}
	return rune(n), true
}

// utf16Len is the length of s in UTF-16 code units, as Telegram counts
// characters.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}
