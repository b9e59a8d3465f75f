// Package telegram is the telegram sink type: a Telegram bot posts the start
// of each alarm to a chat (a group, a forum topic, a channel), and when the
// alarm ends edits that message to show it resolved or cancelled and
// replies to it, so that the chat is told and the alarm reads as one thread.
// With buttons, the start carries Acknowledge and Shelve buttons whose
// clicks the sink reads by long polling getUpdates (listen.go), and an
// acknowledgement edits the start to say who took the alarm.
package telegram

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
)

// DefaultAPIURL is the Bot API's base URL.
const DefaultAPIURL = "https://api.telegram.org"

// The Bot API's bounds and limits, as Telegram documents them
// (core.telegram.org/bots/api and the Bots FAQ on broadcasting).
const (
	// MaxText is the most characters of a message's text after entities
	// parsing.
	MaxText = 4096
	// PerGroup and Window are the pace the sink keeps per bot and chat
	// besides one message a second: Telegram asks bots to send at most one
	// message a second to a chat and 20 a minute to a group; a second of
	// margin on the minute.
	PerGroup = 20
	Window   = 61 * time.Second
	// DefaultRetryAfter is the wait after a 429 that names none (Telegram's
	// answers carry parameters.retry_after; this is for those that do not).
	DefaultRetryAfter = 30 * time.Second
)

// Windows returns the limiter windows of one bot in one chat: 1 message a
// second and PerGroup per Window.
func Windows() []notify.Window {
	return []notify.Window{{N: 1, Per: time.Second}, {N: PerGroup, Per: Window}}
}

// Keys of the sink's memory of an alarm.
const (
	// MemoryMessageID is the message_id of the start's message.
	MemoryMessageID = "message_id"
	// MemoryChatID is the numeric id of the chat it was sent to.
	MemoryChatID = "chat_id"
)

// Config configures a telegram sink.
type Config struct {
	// Name is the sink's name from the rules file.
	Name string
	// APIURL is the Bot API's base URL (default DefaultAPIURL).
	APIURL string
	// Token is the bot's token. It is a secret and sits in every request's
	// path: it never appears in errors or logs.
	Token string
	// TokenEnv names the variable holding Token, for errors that say what
	// to fix.
	TokenEnv string
	// Chat is where messages go.
	Chat Chat
	// Message holds the title and text templates (nil: the defaults).
	Message *sinktype.Message
	// HTTPClient makes the requests (default a new client). The sink uses
	// a copy that does not follow redirects.
	HTTPClient *http.Client
	// Clock paces and reads Retry-After dates (default the real clock).
	Clock clock.Clock
	// Limiter paces the bot's messages to the chat; sinks of the same bot
	// and chat must share one (default a limiter of the sink's own, of
	// Windows).
	Limiter *notify.Limiter
	// Timeout bounds one request (default 10 s).
	Timeout time.Duration
	// Logger receives a line when a start message cannot be edited (default
	// a logger that discards).
	Logger *slog.Logger
	// TemplateFailed is told when a template failed on an event and the
	// default was sent instead (nil: nobody is told).
	TemplateFailed func(sink string, ev *event.Event, err error)
	// Buttons puts Acknowledge and Shelve buttons on each start (and
	// Acknowledge all on digests), makes the sink carry acks, and makes it
	// a notify.Listener that polls getUpdates for the bot: only one
	// consumer may, so the bot must have no webhook and no other poller.
	Buttons bool
	// PollTimeout is the long poll's timeout of getUpdates, in whole
	// seconds (default DefaultPollTimeout).
	PollTimeout time.Duration
}

// Chat is where a sink's messages go.
type Chat struct {
	// ID is the chat's numeric id (-100... for a supergroup or channel) or
	// @username.
	ID string
	// ThreadID is the forum topic (message_thread_id), 0 for none.
	ThreadID int
	// Silent sends messages without sound (disable_notification).
	Silent bool
}

// Sink posts alarms to a Telegram chat through the Bot API, in HTML. A start
// is a message (sendMessage) remembered by its message_id; its end (or
// invalid) edits that message to show it resolved (or cancelled), then
// replies to it. The edit goes first because repeating it is harmless: a
// retry after a failed reply does not send the reply twice. A start message
// that cannot be edited any more (deleted, too old, already edited) does
// not hold the reply back. Without a remembered message, the end is sent on
// its own.
//
// Every request waits for the chat's pace (1 a second, 20 in any 61 s). A
// 429 is retried after Telegram's retry_after, and every sink of the bot
// and chat holds back that long; a 5xx or network failure is retried. An
// unknown chat, a bot blocked, kicked or without rights, a refused token,
// HTML Telegram cannot parse, or a group moved to a supergroup
// dead-letters the event with what to fix.
type Sink struct {
	cfg     Config
	poster  *notify.Poster
	limiter *notify.Limiter
	// poller makes the requests of the listener: not paced by the chat's
	// limiter, and bounded by the long poll's timeout and a margin.
	poller *notify.Poster
}

// New returns a telegram sink.
func New(cfg Config) (*Sink, error) {
	if cfg.Name == "" {
		return nil, errors.New("telegram sink: no name")
	}
	if cfg.Token == "" {
		return nil, fmt.Errorf("telegram sink %q: no bot token", cfg.Name)
	}
	if cfg.Chat.ID == "" {
		return nil, fmt.Errorf("telegram sink %q: no chat_id", cfg.Name)
	}
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	cfg.APIURL = strings.TrimRight(cfg.APIURL, "/")
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Limiter == nil {
		cfg.Limiter = notify.NewLimiter(cfg.Clock, Windows()...)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TemplateFailed == nil {
		cfg.TemplateFailed = func(string, *event.Event, error) {}
	}
	if cfg.TokenEnv == "" {
		cfg.TokenEnv = "token_env"
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = DefaultPollTimeout
	}
	cfg.PollTimeout = max(cfg.PollTimeout.Truncate(time.Second), time.Second)
	secrets := redact.New(cfg.Token)
	secrets.AddURL(cfg.APIURL, false)
	return &Sink{
		cfg:     cfg,
		poster:  notify.NewPoster(cfg.HTTPClient, cfg.Limiter, cfg.Clock, cfg.Timeout, secrets),
		limiter: cfg.Limiter,
		poller:  notify.NewPoster(pollClient(cfg.HTTPClient, cfg.PollTimeout+pollMargin), nil, cfg.Clock, cfg.PollTimeout+pollMargin, secrets),
	}, nil
}

// pollClient returns c, or a copy of it whose Timeout is at least timeout,
// so that a long poll is not cut by a client timeout shorter than it.
func pollClient(c *http.Client, timeout time.Duration) *http.Client {
	if c == nil || c.Timeout == 0 || c.Timeout >= timeout {
		return c
	}
	cp := *c
	cp.Timeout = timeout
	return &cp
}

// Name returns the sink's name.
func (s *Sink) Name() string { return s.cfg.Name }

// CarriesAcks reports that a sink with buttons takes the ack and unack
// transitions of the alarms it posted, to show them on their messages.
func (s *Sink) CarriesAcks() bool { return s.cfg.Buttons }

// Send makes one delivery of the event: one message for a start or an end
// without memory, the edit of the start and a reply for an end with it, the
// edit of the start for an ack or unack (nothing without memory of it).
func (s *Sink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	ev, err := d.Decoded()
	if err != nil {
		return notify.Result{}, fmt.Errorf("telegram sink %q: %w", s.cfg.Name, err)
	}
	var start *Start
	if ev.Data.Transition != event.Start {
		id, err := strconv.Atoi(d.Memory[MemoryMessageID])
		if chat := d.Memory[MemoryChatID]; err == nil && id > 0 && chat != "" {
			start = &Start{ChatID: chat, MessageID: id, Ack: d.Memory[MemoryAck]}
		}
	}
	reqs, err := Requests(ev, s.cfg.Message, s.cfg.Chat, start, s.cfg.Buttons)
	if err != nil {
		if reqs == nil {
			return notify.Result{}, fmt.Errorf("telegram sink %q: event %s: %w", s.cfg.Name, ev.ID, err)
		}
		s.cfg.TemplateFailed(s.cfg.Name, ev, err)
	}
	var res notify.Result
	for _, r := range reqs {
		var msg message
		var desc string
		msg, res, desc, err = s.call(ctx, r, ev.ID)
		if err != nil {
			if r.Method == methodEdit && messageGone(desc) {
				// An ack's edit repeated after a lost answer is not
				// modified: nothing worth a line.
				acking := len(reqs) == 1
				if !acking || !strings.Contains(strings.ToLower(desc), "not modified") {
					msg := "could not edit the start message, replying to it only"
					if acking {
						msg = "could not edit the start message to show its acknowledgement"
					}
					s.cfg.Logger.Warn(msg, "sink", s.cfg.Name, "event_id", ev.ID, "chat_id", start.ChatID,
						"message_id", start.MessageID, "error", err.Error())
				}
				continue
			}
			return res, err
		}
		if ev.Data.Transition == event.Start && msg.MessageID > 0 {
			res.Memory = map[string]string{MemoryMessageID: strconv.Itoa(msg.MessageID), MemoryChatID: strconv.FormatInt(msg.Chat.ID, 10)}
		}
	}
	if start != nil && (ev.Data.Transition == event.Ack || ev.Data.Transition == event.Unack) {
		res.Memory = ackMemory(d.Memory, ev)
	}
	return res, nil
}

// ackMemory is the memory of an alarm after its ack (the line shown, kept
// for its end) or unack (the line dropped).
func ackMemory(memory map[string]string, ev *event.Event) map[string]string {
	out := make(map[string]string, len(memory)+1)
	for k, v := range memory {
		out[k] = v
	}
	delete(out, MemoryAck)
	if ev.Data.Transition == event.Ack {
		out[MemoryAck] = ackLine(ev)
	}
	return out
}

// Remind replies to the start's message, from its memory, that the alarm is
// still ongoing: the note (such as "Reminder, ongoing for 4h"), the alarm's
// name and place, and its id. An alarm whose start left no message in the
// memory gets no reminder. Like Send, it makes one attempt.
func (s *Sink) Remind(ctx context.Context, ev *event.Event, memory map[string]string) (notify.Result, error) {
	id, err := strconv.Atoi(memory[MemoryMessageID])
	chat := memory[MemoryChatID]
	if err != nil || id <= 0 || chat == "" {
		return notify.Result{}, nil
	}
	name := sinktype.What(&event.Event{Data: event.Data{EventCode: ev.Data.EventCode, EventDesc: ev.Data.EventDesc}})
	text := fmt.Sprintf("⏰ <b>%s</b>: %s at %s is still ongoing · alarm <code>%s</code>", Escape(ev.Data.Note), Escape(name),
		Escape(sinktype.Where(ev)), Escape(ev.Data.OriginID))
	body, err := sinktype.JSON(sendBody{ChatID: chatID(chat), MessageThreadID: s.cfg.Chat.ThreadID, Text: Truncate(text, MaxText),
		ParseMode: "HTML", LinkPreviewOptions: linkPreview{IsDisabled: true}, Silent: s.cfg.Chat.Silent,
		ReplyParameters: &replyParameters{MessageID: id, AllowSendingWithoutReply: true}})
	if err != nil {
		return notify.Result{}, fmt.Errorf("telegram sink %q: reminder of %s: %w", s.cfg.Name, ev.Data.OriginID, err)
	}
	_, res, _, err := s.call(ctx, Request{Method: methodSend, ChatID: chat, Body: body}, "reminder of "+ev.Data.OriginID)
	return res, err
}

// messageGone reports an edit failure that no retry can fix and that must
// not hold the reply back.
func messageGone(desc string) bool {
	d := strings.ToLower(desc)
	return strings.Contains(d, "message is not modified") || strings.Contains(d, "message to edit not found") ||
		strings.Contains(d, "message can't be edited")
}

// answer is the Bot API's answer: ok and a result, or an error code, a
// description and parameters.
type answer struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  *struct {
		RetryAfter      int   `json:"retry_after"`
		MigrateToChatID int64 `json:"migrate_to_chat_id"`
	} `json:"parameters"`
}

// message is what the sink reads of a sent Message.
type message struct {
	MessageID int `json:"message_id"`
	Chat      struct {
		ID int64 `json:"id"`
	} `json:"chat"`
}

// call makes one request of the Bot API about subject (an event's id, a
// digest) and reads its answer, returning Telegram's description of an
// error besides the error.
func (s *Sink) call(ctx context.Context, r Request, subject string) (message, notify.Result, string, error) {
	what := fmt.Sprintf("telegram sink %q: %s of %s to chat %s", s.cfg.Name, r.Method, subject, r.ChatID)
	got, res, err := s.poster.PostJSON(ctx, what, s.cfg.APIURL+"/bot"+s.cfg.Token+"/"+r.Method, r.Body, nil)
	var ans answer
	status := http.StatusOK
	if err != nil {
		var se *notify.StatusError
		if !errors.As(err, &se) || json.Unmarshal(se.Answer, &ans) != nil || ans.OK {
			if se != nil && se.Status == http.StatusTooManyRequests {
				// A 429 that is not the Bot API's own (a gateway's page)
				// still holds every sink of the bot and chat back.
				res.RetryAfter = cmp.Or(res.RetryAfter, DefaultRetryAfter)
				s.limiter.Block(res.RetryAfter)
			}
			return message{}, res, "", err
		}
		status = se.Status
	} else if json.Unmarshal(got, &ans) != nil {
		return message{}, notify.Result{}, "", s.poster.Clean(fmt.Errorf("%s: the answer is not the Bot API's (no JSON with ok): %s: check api_url",
			what, sinktype.Truncate(strings.Join(strings.Fields(s.poster.CleanText(string(got))), " "), 200)))
	}
	if ans.OK {
		var msg message
		_ = json.Unmarshal(ans.Result, &msg)
		return msg, notify.Result{}, "", nil
	}
	code := ans.ErrorCode
	if code == 0 {
		code = status
	}
	ans.Description = s.poster.CleanText(ans.Description)
	res, err = s.refused(what, code, ans, res)
	return message{}, res, ans.Description, s.poster.Clean(err)
}

// refused classifies an answer of ok false and says what to fix.
func (s *Sink) refused(what string, code int, ans answer, res notify.Result) (notify.Result, error) {
	desc := sinktype.Truncate(strings.Join(strings.Fields(ans.Description), " "), 300)
	said := fmt.Sprintf("%s: Telegram answered %d (%s)", what, code, desc)
	lower := strings.ToLower(desc)
	chat, tokenEnv := s.cfg.Chat.ID, s.cfg.TokenEnv
	switch {
	case code == http.StatusTooManyRequests:
		wait := res.RetryAfter
		if ans.Parameters != nil {
			wait = max(wait, time.Duration(ans.Parameters.RetryAfter)*time.Second)
		}
		if wait <= 0 {
			wait = DefaultRetryAfter
		}
		s.limiter.Block(wait)
		return notify.Result{Retry: true, RetryAfter: wait}, fmt.Errorf(
			"%s: over Telegram's pace for the chat (does another sender use this bot there?); every sink of this bot and chat waits %s", said, wait)
	case ans.Parameters != nil && ans.Parameters.MigrateToChatID != 0:
		return notify.Result{}, fmt.Errorf("%s: the group became a supergroup: set chat_id to %d", said, ans.Parameters.MigrateToChatID)
	case code == http.StatusUnauthorized:
		return notify.Result{}, fmt.Errorf("%s: Telegram refused the bot token: check that %s holds the token BotFather gave, and that it was not revoked", said, tokenEnv)
	case code == http.StatusNotFound:
		return notify.Result{}, fmt.Errorf("%s: check api_url and that %s holds a whole bot token (123456789:AA...)", said, tokenEnv)
	case code == http.StatusForbidden:
		return notify.Result{}, fmt.Errorf("%s: the bot of %s cannot post to chat_id %s: add it back to the chat (or unblock it) with the right to post, or fix chat_id", said, tokenEnv, chat)
	case strings.Contains(lower, "chat not found"):
		return notify.Result{}, fmt.Errorf("%s: no chat %s is known to the bot of %s: check chat_id (a group's id is negative, a supergroup's or channel's -100..., or @name of a public one) and that the bot was added to the chat", said, chat, tokenEnv)
	case strings.Contains(lower, "thread not found") || strings.Contains(lower, "topic"):
		return notify.Result{}, fmt.Errorf("%s: check message_thread_id: it must be an open topic of the forum chat %s", said, chat)
	case strings.Contains(lower, "can't parse entities"):
		return notify.Result{}, fmt.Errorf("%s: check the title and text templates: they write Telegram HTML (b, i, u, s, a, code, pre, blockquote only; write &lt; &gt; &amp; for < > &)", said)
	case strings.Contains(lower, "not enough rights") || strings.Contains(lower, "have no rights"):
		return notify.Result{}, fmt.Errorf("%s: give the bot of %s the right to post in chat %s", said, tokenEnv, chat)
	case code >= 500 || res.Retry:
		return notify.Result{Retry: true, RetryAfter: res.RetryAfter}, errors.New(said)
	}
	return notify.Result{}, fmt.Errorf("%s: the event is not retried", said)
}

// Start is the start message an end refers to.
type Start struct {
	// ChatID is the chat it was sent to.
	ChatID string
	// MessageID is its message_id: an int, or for Render a placeholder.
	MessageID any
	// Ack is the line of the alarm's acknowledgement the message shows
	// (MemoryAck), which the end's edit keeps; "" for none.
	Ack string
}

// Request is one Bot API call the sink makes.
type Request struct {
	// Method is sendMessage or editMessageText.
	Method string
	// ChatID is the chat it goes to, for errors.
	ChatID string
	// Body is the JSON body.
	Body []byte
}

const (
	methodSend = "sendMessage"
	methodEdit = "editMessageText"
)

// sendBody and editBody are the JSON bodies of sendMessage and
// editMessageText.
type sendBody struct {
	ChatID             any              `json:"chat_id"`
	MessageThreadID    int              `json:"message_thread_id,omitempty"`
	Text               string           `json:"text"`
	ParseMode          string           `json:"parse_mode"`
	LinkPreviewOptions linkPreview      `json:"link_preview_options"`
	Silent             bool             `json:"disable_notification,omitempty"`
	ReplyParameters    *replyParameters `json:"reply_parameters,omitempty"`
	ReplyMarkup        *inlineKeyboard  `json:"reply_markup,omitempty"`
}

// editBody leaves reply_markup out to remove the message's buttons: the
// Bot API's editMessageText replaces the inline keyboard with the one given,
// none when none is (as Telegram behaves, though its documentation does not
// say it: github.com/TelegramBots/Telegram.Bot/issues/402, "removing
// reply_markup while editing just the text is the default behavior of tg
// API"; github.com/LasterAlex/teloxide_tests/pull/31).
type editBody struct {
	ChatID             any             `json:"chat_id"`
	MessageID          any             `json:"message_id"`
	Text               string          `json:"text"`
	ParseMode          string          `json:"parse_mode"`
	LinkPreviewOptions linkPreview     `json:"link_preview_options"`
	ReplyMarkup        *inlineKeyboard `json:"reply_markup,omitempty"`
}

type linkPreview struct {
	IsDisabled bool `json:"is_disabled"`
}

type replyParameters struct {
	MessageID                any  `json:"message_id"`
	AllowSendingWithoutReply bool `json:"allow_sending_without_reply"`
}

// Requests returns the calls the sink makes for ev, in order: sendMessage
// of the message for a start, or for an end or invalid without start;
// editMessageText of start to the end's message (keeping the line of its
// acknowledgement, removing its buttons), then sendMessage of a reply to
// it, for an end or invalid with start; editMessageText of start to its
// text and a line saying who acknowledged it (or took that back) for an ack
// or unack, nothing without start. With buttons, a start carries
// Acknowledge and Shelve buttons, an acknowledged message Unacknowledge.
// Every text is HTML, cut to MaxText characters. The error, when not nil,
// says which template failed on ev: the requests then hold the default in
// its place. Send and Render both use it, so that relay route --render
// shows exactly what is sent.
func Requests(ev *event.Event, m *sinktype.Message, chat Chat, start *Start, buttons bool) ([]Request, error) {
	acking := ev.Data.Transition == event.Ack || ev.Data.Transition == event.Unack
	if acking && start == nil {
		return []Request{}, nil
	}
	shown := ev
	if acking {
		shown = asStart(ev)
	}
	text, tmplErr := m.Render(shown, defaultText(shown))
	full := join(text.Title, text.Body)
	if full == "" {
		full = join(defaultText(shown).Title, defaultText(shown).Body)
	}
	full = Truncate(full, MaxText)
	send := sendBody{ChatID: chatID(chat.ID), MessageThreadID: chat.ThreadID, Text: full, ParseMode: "HTML",
		LinkPreviewOptions: linkPreview{IsDisabled: true}, Silent: chat.Silent}
	if start == nil || ev.Data.Transition == event.Start {
		if buttons && ev.Data.Transition == event.Start {
			send.ReplyMarkup = startKeyboard(ev.Data.OriginID)
		}
		b, err := sinktype.JSON(send)
		if err != nil {
			return nil, err
		}
		return []Request{{Method: methodSend, ChatID: chat.ID, Body: b}}, tmplErr
	}
	edit := editBody{ChatID: chatID(start.ChatID), MessageID: start.MessageID, Text: full, ParseMode: "HTML",
		LinkPreviewOptions: linkPreview{IsDisabled: true}}
	switch {
	case acking:
		edit.Text = withLine(full, ackHTML(ev, ackLine(ev)))
		if buttons && ev.Data.Transition == event.Ack {
			edit.ReplyMarkup = ackedKeyboard(ev.Data.OriginID)
		} else if buttons {
			edit.ReplyMarkup = startKeyboard(ev.Data.OriginID)
		}
	case start.Ack != "":
		edit.Text = withLine(full, "✅ "+Escape(start.Ack))
	}
	editJSON, err := sinktype.JSON(edit)
	if err != nil {
		return nil, err
	}
	if acking {
		return []Request{{Method: methodEdit, ChatID: start.ChatID, Body: editJSON}}, tmplErr
	}
	title := strings.TrimSpace(text.Title)
	if title == "" {
		title = defaultText(ev).Title
	}
	send.ChatID = chatID(start.ChatID)
	send.Text = Truncate(title+"\n"+Escape(sinktype.Ended(ev))+" · alarm <code>"+Escape(ev.Data.OriginID)+"</code>", MaxText)
	send.ReplyParameters = &replyParameters{MessageID: start.MessageID, AllowSendingWithoutReply: true}
	reply, err := sinktype.JSON(send)
	if err != nil {
		return nil, err
	}
	return []Request{{Method: methodEdit, ChatID: start.ChatID, Body: editJSON}, {Method: methodSend, ChatID: start.ChatID, Body: reply}}, tmplErr
}

// withLine puts line (HTML) below text, cutting text so that both fit
// MaxText characters.
func withLine(text, line string) string {
	return Truncate(text, MaxText-visible(line)-2) + "\n\n" + line
}

// join puts the title above the body, leaving out what is empty.
func join(title, body string) string {
	title, body = strings.TrimSpace(title), strings.TrimSpace(body)
	switch {
	case title == "":
		return body
	case body == "":
		return title
	}
	return title + "\n\n" + body
}

// chatID returns a numeric chat id as a JSON number, anything else (an
// @username) as a string.
func chatID(id string) any {
	if n, err := strconv.ParseInt(id, 10, 64); err == nil {
		return n
	}
	return id
}

// defaultText is the default message: as title the headline in bold, marked
// by level or outcome, and as text the alarm's facts, one a line, the
// alarm's id as code (easy to copy).
func defaultText(ev *event.Event) sinktype.Text {
	var b strings.Builder
	for i, f := range sinktype.Fields(ev) {
		if i > 0 {
			b.WriteByte('\n')
		}
		value := Escape(f[1])
		if f[0] == "Alarm" {
			value = "<code>" + value + "</code>"
		}
		fmt.Fprintf(&b, "<b>%s:</b> %s", f[0], value)
	}
	return sinktype.Text{Title: sinktype.Mark(ev) + " <b>" + Escape(sinktype.Headline(ev)) + "</b>", Body: b.String()}
}
