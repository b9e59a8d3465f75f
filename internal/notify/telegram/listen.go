package telegram

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// The listener's timing. Telegram documents getUpdates' timeout as the
// seconds a long poll waits for an update; relay waits 30 s, and its HTTP
// request pollMargin longer, so that a quiet poll ends with Telegram's empty
// answer, not with a timeout of relay's own.
const (
	// DefaultPollTimeout is how long one getUpdates waits for a click.
	DefaultPollTimeout = 30 * time.Second
	pollMargin         = 15 * time.Second
	// listenBackoffMin and listenBackoffMax bound the wait after a failed
	// poll, doubled at each failure in a row and jittered.
	listenBackoffMin = time.Second
	listenBackoffMax = time.Minute
	// answerTimeout bounds an answerCallbackQuery: Telegram's clients stop
	// waiting for it after about 15 s.
	answerTimeout = 10 * time.Second
	// answerParallel is how many answers are in flight at once while the
	// next clicks of a batch are handled.
	answerParallel = 8
	// rememberHandled is how many of the latest callback queries handled
	// the listener remembers, to pass over an update delivered again.
	rememberHandled = 1000
	// retryMin is the first wait before an answer or a confirmation that
	// failed is tried again, doubled at each failure in a row.
	retryMin = 500 * time.Millisecond
	// MaxAnswerText is the most characters of answerCallbackQuery's text
	// ("Text of the notification ... 0-200 characters").
	MaxAnswerText = 200
)

// ListenKey names the bot whose clicks the sink reads: sinks of one bot
// share one poller, as Telegram lets one consumer read a bot's updates. It
// is "telegram-bot:" and a short hash of the token (never the token), or ""
// without buttons.
func (s *Sink) ListenKey() string {
	if !s.cfg.Buttons {
		return ""
	}
	sum := sha256.Sum256([]byte(s.cfg.Token))
	return "telegram-bot:" + hex.EncodeToString(sum[:6])
}

// Listen is ListenFor for the clicks on this sink's messages alone.
func (s *Sink) Listen(ctx context.Context, acts notify.Actions) error {
	return s.ListenFor(ctx, acts, nil)
}

// ListenFor long polls getUpdates for the bot's callback queries (button
// clicks) until ctx ends, hands each to acts and answers it
// (answerCallbackQuery) with the result's text, as an alert when the
// person may not act. A click names the sink, among this one and the sinks
// of the bot in sinks, that posts to the chat (and forum topic) of the
// message that carried the button, or none. A click is handled once,
// however often Telegram delivers its update, and confirmed to Telegram
// (the next poll's offset) only once it was handled, so a restart reads
// again what it had not handled. A poll that fails (a connection ended, a
// 502) is tried again after a backoff (capped, jittered); a 429 after
// Telegram's retry_after; a 409 (another poller, or a webhook, holds the
// bot) is logged saying what to do and tried again. An answer, or the
// confirmation as the listener stops, is tried again after such a failure.
// ListenFor returns an error only when Telegram refuses the token or the
// address (401, 404), which no retry cures.
func (s *Sink) ListenFor(ctx context.Context, acts notify.Actions, sinks []notify.Listener) error {
	if !s.cfg.Buttons {
		return fmt.Errorf("telegram sink %q: not listening: buttons is off", s.cfg.Name)
	}
	chats := s.chatsOf(sinks)
	var done handledQueries
	var offset, polled int64
	fails := 0
	for {
		polled = offset
		ups, err := s.getUpdates(ctx, offset, s.cfg.PollTimeout)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			var pe *pollError
			if errors.As(err, &pe) && pe.fatal {
				return err
			}
			fails++
			wait := backoff(fails)
			if pe != nil && pe.retryAfter > 0 {
				wait = pe.retryAfter
			}
			s.logPollFailure(err, pe, wait)
			if !s.sleep(ctx, wait) {
				return nil
			}
			continue
		}
		fails = 0
		offset = s.handle(ctx, acts, chats, &done, ups, offset)
		if ctx.Err() != nil {
			if offset != polled {
				s.confirm(ctx, offset)
			}
			return nil
		}
	}
}

// logPollFailure says why a poll failed and what to do about it.
func (s *Sink) logPollFailure(err error, pe *pollError, wait time.Duration) {
	log := s.cfg.Logger.With("sink", s.cfg.Name, "retry_in", wait.Round(time.Millisecond).String(), "error", err.Error())
	switch {
	case pe != nil && pe.status == http.StatusConflict && strings.Contains(strings.ToLower(pe.description), "webhook"):
		log.Error("telegram: the bot has a webhook, so relay cannot read its button clicks with getUpdates: " +
			"delete the webhook (deleteWebhook) or set buttons: false on every sink of this bot")
	case pe != nil && pe.status == http.StatusConflict:
		log.Error("telegram: another program polls this bot's updates (getUpdates), and Telegram allows one: " +
			"run one relay listening per bot (stop the other poller, or give this one a bot of its own), or set buttons: false on every sink of this bot")
	case pe != nil && pe.status == http.StatusTooManyRequests:
		log.Warn("telegram: Telegram asked relay to poll the bot's updates more slowly")
	default:
		log.Warn("telegram: polling the bot's button clicks failed; trying again")
	}
}

// backoff is the wait after fails polls failed in a row: from
// listenBackoffMin doubling to listenBackoffMax, a random time between
// half of it and all of it, so that relays that lost Telegram together do
// not come back together.
func backoff(fails int) time.Duration {
	d := min(listenBackoffMin<<min(fails-1, 16), listenBackoffMax)
	return d/2 + rand.N(d/2+1)
}

// sleep waits d on the sink's clock; false when ctx ended first.
func (s *Sink) sleep(ctx context.Context, d time.Duration) bool {
	t := s.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// update is what the listener reads of an Update.
type update struct {
	UpdateID      int64          `json:"update_id"`
	CallbackQuery *callbackQuery `json:"callback_query"`
}

// callbackQuery is what the listener reads of a CallbackQuery: who clicked
// (from), on which message, and the button's callback_data.
type callbackQuery struct {
	ID   string `json:"id"`
	From struct {
		ID        int64  `json:"id"`
		Username  string `json:"username"`
		FirstName string `json:"first_name"`
	} `json:"from"`
	Message *struct {
		MessageID int64 `json:"message_id"`
		// MessageThreadID is the forum topic when IsTopicMessage; in a
		// group that is no forum it is the thread of a reply.
		MessageThreadID int  `json:"message_thread_id"`
		IsTopicMessage  bool `json:"is_topic_message"`
		Chat            struct {
			ID       int64  `json:"id"`
			Username string `json:"username"`
		} `json:"chat"`
	} `json:"message"`
	Data string `json:"data"`
}

// pollError is a getUpdates that failed: Telegram's answer, and whether
// another poll can succeed.
type pollError struct {
	status      int
	description string
	retryAfter  time.Duration
	fatal       bool
	err         error
}

func (e *pollError) Error() string { return e.err.Error() }
func (e *pollError) Unwrap() error { return e.err }

// transient reports a failure another attempt may not meet: the connection
// ended or timed out, Telegram (or its front) failed, or asked to wait.
func (e *pollError) transient() bool {
	return !e.fatal && (e.status == 0 || e.status == http.StatusTooManyRequests || e.status >= 500)
}

// getUpdates makes one long poll of timeout for callback queries from
// offset (0: from the earliest update not confirmed), as the Bot API
// documents it: "An update is considered confirmed as soon as getUpdates is
// called with an offset higher than its update_id."
func (s *Sink) getUpdates(ctx context.Context, offset int64, timeout time.Duration) ([]update, error) {
	body, err := json.Marshal(getUpdatesBody{Offset: offset, Timeout: int(timeout / time.Second), AllowedUpdates: []string{"callback_query"}})
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("telegram sink %q: getUpdates", s.cfg.Name)
	got, err := s.apiCall(ctx, s.poller, what, "getUpdates", body)
	if err != nil {
		return nil, err
	}
	var ups []update
	if err := json.Unmarshal(got, &ups); err != nil {
		return nil, fmt.Errorf("%s: the result is not a list of updates: %s", what, sinktype.Truncate(s.poller.CleanText(string(got)), 200))
	}
	return ups, nil
}

// getUpdatesBody is the JSON body of getUpdates.
type getUpdatesBody struct {
	Offset         int64    `json:"offset,omitempty"`
	Limit          int      `json:"limit,omitempty"`
	Timeout        int      `json:"timeout"`
	AllowedUpdates []string `json:"allowed_updates"`
}

// apiCall makes one Bot API call outside the chat's pace and returns its
// result, or a *pollError that says what Telegram answered.
func (s *Sink) apiCall(ctx context.Context, p *notify.Poster, what, method string, body []byte) (json.RawMessage, error) {
	got, res, err := p.PostJSON(ctx, what, s.cfg.APIURL+"/bot"+s.cfg.Token+"/"+method, body, nil)
	var ans answer
	status := http.StatusOK
	if err != nil {
		var se *notify.StatusError
		if !errors.As(err, &se) || json.Unmarshal(se.Answer, &ans) != nil || ans.OK {
			pe := &pollError{err: err, retryAfter: res.RetryAfter}
			if se != nil {
				pe.status = se.Status
				pe.fatal = se.Status == http.StatusUnauthorized || se.Status == http.StatusNotFound
			}
			return nil, pe
		}
		status = se.Status
	} else if json.Unmarshal(got, &ans) != nil {
		return nil, p.Clean(fmt.Errorf("%s: the answer is not the Bot API's (no JSON with ok): %s: check api_url",
			what, sinktype.Truncate(strings.Join(strings.Fields(p.CleanText(string(got))), " "), 200)))
	}
	if ans.OK {
		return ans.Result, nil
	}
	code := cmp.Or(ans.ErrorCode, status)
	desc := sinktype.Truncate(strings.Join(strings.Fields(p.CleanText(ans.Description)), " "), 300)
	pe := &pollError{status: code, description: desc}
	said := fmt.Sprintf("%s: Telegram answered %d (%s)", what, code, desc)
	switch code {
	case http.StatusUnauthorized:
		pe.fatal = true
		pe.err = fmt.Errorf("%s: Telegram refused the bot token: check that %s holds the token BotFather gave, and that it was not revoked", said, s.cfg.TokenEnv)
	case http.StatusNotFound:
		pe.fatal = true
		pe.err = fmt.Errorf("%s: check api_url and that %s holds a whole bot token (123456789:AA...)", said, s.cfg.TokenEnv)
	case http.StatusTooManyRequests:
		pe.retryAfter = max(res.RetryAfter, DefaultPollRetryAfter)
		if ans.Parameters != nil && ans.Parameters.RetryAfter > 0 {
			pe.retryAfter = time.Duration(ans.Parameters.RetryAfter) * time.Second
		}
		pe.err = errors.New(said)
	default:
		pe.err = errors.New(said)
	}
	pe.err = p.Clean(pe.err)
	return nil, pe
}

// DefaultPollRetryAfter is the wait after a 429 to a poll or an answer that
// names no retry_after.
const DefaultPollRetryAfter = 5 * time.Second

// handle hands each click of ups to acts in order and answers it, and
// returns the offset that confirms what was handled: past the highest
// update of ups handled, offset itself when none was. It is reckoned from
// ups alone, not from the offset polled with, which Telegram may not have
// taken: after a week without updates it chooses the next update's id at
// random, and takes an offset past its queue for none. A callback query
// handled already (an update Telegram delivered again) is passed over,
// neither handed to acts nor answered twice. Answers go out while the next
// clicks are handled; handle returns once every answer is done. When ctx
// ends during a click, that click and the ones after it are left to be read
// again.
func (s *Sink) handle(ctx context.Context, acts notify.Actions, chats []chatSink, done *handledQueries, ups []update, offset int64) int64 {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, answerParallel)
	next := int64(0)
	for _, u := range ups {
		if cq := u.CallbackQuery; cq != nil && cq.ID != "" && !done.has(cq.ID) {
			reply, ok := s.act(ctx, acts, chats, cq)
			if !ok {
				break
			}
			done.add(cq.ID)
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				s.answer(context.WithoutCancel(ctx), reply)
			})
		}
		next = max(next, u.UpdateID+1)
	}
	return cmp.Or(next, offset)
}

// handledQueries remembers, by id, the latest rememberHandled callback
// queries handled.
type handledQueries struct {
	ids   map[string]bool
	order []string
}

func (h *handledQueries) has(id string) bool { return h.ids[id] }

func (h *handledQueries) add(id string) {
	if h.ids == nil {
		h.ids = map[string]bool{}
	}
	h.ids[id] = true
	h.order = append(h.order, id)
	if len(h.order) > rememberHandled {
		delete(h.ids, h.order[0])
		h.order = h.order[1:]
	}
}

// reply is the answer to one callback query.
type reply struct {
	ID        string `json:"callback_query_id"`
	Text      string `json:"text,omitempty"`
	ShowAlert bool   `json:"show_alert,omitempty"`
}

// act hands one click to acts and returns the answer to it; false when
// ctx ended before the click was handled.
func (s *Sink) act(ctx context.Context, acts notify.Actions, chats []chatSink, cq *callbackQuery) (reply, bool) {
	a, ok := parseCallback(cq.Data)
	if !ok {
		// A button relay does not make (or a game): answered all the same,
		// as Telegram's clients show a progress bar until it is.
		return reply{ID: cq.ID, Text: "This button does nothing any more."}, true
	}
	a.Sink = sinkOf(chats, cq)
	if a.Sink == "" && cq.Message != nil {
		// A chat of the bot whose sink this listener was not given: the
		// chat says where the digest is.
		a.Destinations = append(a.Destinations, "telegram:"+strconv.FormatInt(cq.Message.Chat.ID, 10))
		if u := cq.Message.Chat.Username; u != "" {
			a.Destinations = append(a.Destinations, "telegram:@"+u)
		}
	}
	a.Actor = notify.Actor{Via: "telegram", ID: strconv.FormatInt(cq.From.ID, 10), Name: cmp.Or(cq.From.Username, cq.From.FirstName)}
	a.Ref = cq.ID
	res, err := acts.Act(ctx, a)
	if err != nil {
		if ctx.Err() != nil {
			return reply{}, false
		}
		s.cfg.Logger.Error("telegram: a button click could not be applied", "sink", cmp.Or(a.Sink, s.cfg.Name), "callback_query_id", cq.ID,
			"user_id", a.Actor.ID, "action", string(a.Kind), "error", err.Error())
		return reply{ID: cq.ID, Text: "relay could not record this; please try again.", ShowAlert: true}, true
	}
	return reply{ID: cq.ID, Text: cutUTF16(res.Text, MaxAnswerText), ShowAlert: res.NotAllowed}, true
}

// chatSink is where a sink of the bot posts: a click on a message there
// names the sink.
type chatSink struct {
	name string
	chat Chat
}

// chatsOf returns where this sink and the sinks of its bot among sinks
// post, this sink first, then sinks in order.
func (s *Sink) chatsOf(sinks []notify.Listener) []chatSink {
	out := []chatSink{{name: s.cfg.Name, chat: s.cfg.Chat}}
	key := s.ListenKey()
	for _, l := range sinks {
		o, ok := l.(*Sink)
		if ok && o.cfg.Name != s.cfg.Name && o.ListenKey() == key {
			out = append(out, chatSink{name: o.cfg.Name, chat: o.cfg.Chat})
		}
	}
	return out
}

// sinkOf names the sink whose message carried the button: the first of
// chats posting to the message's chat and forum topic, else the first
// posting to its chat (sinks of one chat share its digests), else none (a
// chat no sink of the bot posts to now).
func sinkOf(chats []chatSink, cq *callbackQuery) string {
	m := cq.Message
	if m == nil {
		return ""
	}
	topic := 0
	if m.IsTopicMessage {
		topic = m.MessageThreadID
	}
	name := ""
	for _, c := range chats {
		if strconv.FormatInt(m.Chat.ID, 10) != c.chat.ID && (m.Chat.Username == "" || !strings.EqualFold("@"+m.Chat.Username, c.chat.ID)) {
			continue
		}
		if c.chat.ThreadID == topic {
			return c.name
		}
		if name == "" {
			name = c.name
		}
	}
	return name
}

// answer answers a callback query, tried again after a failure worth it
// until answerTimeout, since Telegram's clients show a progress bar until
// the query is answered. Telegram answers 400 for a query answered already
// (an answer whose reply was lost, tried again) or too old (more than about
// 15 s), which a retry cannot change: it is logged, as any other failure.
func (s *Sink) answer(ctx context.Context, r reply) {
	ctx, cancel := context.WithTimeout(ctx, answerTimeout)
	defer cancel()
	body, err := json.Marshal(r)
	if err == nil {
		err = s.callRetrying(ctx, fmt.Sprintf("telegram sink %q: answerCallbackQuery", s.cfg.Name), "answerCallbackQuery", body)
	}
	if err != nil {
		s.cfg.Logger.Warn("telegram: could not answer a button click", "sink", s.cfg.Name, "callback_query_id", r.ID, "error", err.Error())
	}
}

// confirm tells Telegram, as the listener stops, that the updates before
// offset were handled (a getUpdates from offset that does not wait), so
// that the next start does not read them again; it is tried again after a
// failure worth it until answerTimeout.
func (s *Sink) confirm(ctx context.Context, offset int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), answerTimeout)
	defer cancel()
	body, err := json.Marshal(getUpdatesBody{Offset: offset, Limit: 1, Timeout: 0, AllowedUpdates: []string{"callback_query"}})
	if err == nil {
		err = s.callRetrying(ctx, fmt.Sprintf("telegram sink %q: getUpdates", s.cfg.Name), "getUpdates", body)
	}
	if err != nil {
		s.cfg.Logger.Warn("telegram: could not confirm the handled button clicks; they will be read again", "sink", s.cfg.Name, "error", err.Error())
	}
}

// callRetrying makes a Bot API call of the listener that does not wait
// (an answer, a confirmation), tried again after a failure worth it (the
// connection ended, a 5xx, a 429) until ctx ends: after Telegram's
// retry_after, else after retryMin, doubled at each failure in a row.
func (s *Sink) callRetrying(ctx context.Context, what, method string, body []byte) error {
	wait := retryMin
	for {
		_, err := s.apiCall(ctx, s.poller, what, method, body)
		var pe *pollError
		if err == nil || !errors.As(err, &pe) || !pe.transient() {
			return err
		}
		d := wait
		if pe.retryAfter > 0 {
			d = pe.retryAfter
		}
		if !s.sleep(ctx, d) {
			return err
		}
		wait *= 2
	}
}

// cutUTF16 cuts s to at most n UTF-16 code units, as Telegram counts
// characters.
func cutUTF16(s string, n int) string {
	if len(utf16.Encode([]rune(s))) <= n {
		return s
	}
	units := 0
	for i, r := range s {
		w := utf16.RuneLen(r)
		if units+w > n-1 {
			return s[:i] + "…"
		}
		units += w
	}
	return s
}

var _ notify.GroupListener = (*Sink)(nil)
