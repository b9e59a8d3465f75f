// Package wecom is the wecom sink type: it posts each event as a Markdown
// message to a WeCom (企业微信) group through the group's robot webhook,
// paced so that the robot never takes more than 20 messages a minute.
package wecom

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/redact"
)

// The robot's limits, as WeCom documents them for group robots.
const (
	// PerWindow and Window are the pace the sink keeps per robot: 20
	// messages in any 61 s, a second of margin over WeCom's "20 messages a
	// minute".
	PerWindow = 20
	Window    = 61 * time.Second
	// MaxContent is the most bytes of markdown content WeCom takes (UTF-8);
	// longer content is refused with errcode 40058.
	MaxContent = 4096
	// maxMentions bounds the bytes the mentions take at the end of the
	// content, so that the alarm always keeps most of the message.
	maxMentions = 1024
)

// WeCom's answers the sink tells apart (HTTP 200, errcode in the body), from
// its global error codes.
const (
	codeOK = 0
	// codeBusy: "系统繁忙", the server is not available; retry.
	codeBusy = -1
	// codeTooFast: 45009, "api freq out of limit": more than 20 messages in
	// a minute. WeCom documents no block beyond the minute.
	codeTooFast = 45009
	// codeBadURL: 93000, "invalid webhook url": no robot has the key.
	codeBadURL = 93000
	// codeBadParam: 40058, a parameter out of bounds, such as
	// "markdown.content exceed max length 4096".
	codeBadParam = 40058
	// codeEmpty: 44004, "empty content".
	codeEmpty = 44004
)

// Config configures a wecom sink.
type Config struct {
	// Name is the sink's name from the rules file.
	Name string
	// URL is the robot's webhook URL, with its key. It is a secret: it never
	// appears in errors or logs.
	URL string
	// Message holds the title and text templates (nil: the defaults).
	Message *sinktype.Message
	// Mentions are the WeCom user ids each message mentions (<@userid>).
	Mentions []string
	// HTTPClient makes the requests (default a new client). The sink uses
	// a copy that does not follow redirects.
	HTTPClient *http.Client
	// Clock paces (default the real clock).
	Clock clock.Clock
	// Limiter paces the messages to the robot; sinks posting to the same
	// robot must share one (default a limiter of the sink's own, of
	// PerWindow messages per Window).
	Limiter *notify.Limiter
	// Timeout bounds one request (default 10 s).
	Timeout time.Duration
	// TemplateFailed is told when a template failed on an event and the
	// default was sent instead (nil: nobody is told).
	TemplateFailed func(sink string, ev *event.Event, err error)
}

// Sink posts each event as a Markdown message to one WeCom group robot: the
// start of an alarm, and its end or cancellation as a message of its own (a
// group robot cannot reply in a thread or edit what it sent).
//
// Messages wait for the robot's pace (20 in any 61 s). If WeCom refuses one
// as too frequent all the same (another sender shares the robot), it is
// retried after a window, and every sink of the robot holds back that long.
// A key WeCom does not know dead-letters the message at once, naming
// url_env; so does any errcode the sink does not know.
type Sink struct {
	cfg     Config
	poster  *notify.Poster
	limiter *notify.Limiter
}

// New returns a wecom sink.
func New(cfg Config) (*Sink, error) {
	if cfg.Name == "" {
		return nil, errors.New("wecom sink: no name")
	}
	if _, err := Key(cfg.URL); err != nil {
		return nil, fmt.Errorf("wecom sink %q: %w", cfg.Name, err)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Limiter == nil {
		cfg.Limiter = notify.NewLimiter(cfg.Clock, notify.Window{N: PerWindow, Per: Window})
	}
	if cfg.TemplateFailed == nil {
		cfg.TemplateFailed = func(string, *event.Event, error) {}
	}
	secrets := redact.New()
	secrets.AddURL(cfg.URL, false)
	return &Sink{
		cfg:     cfg,
		poster:  notify.NewPoster(cfg.HTTPClient, cfg.Limiter, cfg.Clock, cfg.Timeout, secrets),
		limiter: cfg.Limiter,
	}, nil
}

// Key returns the key of a robot's webhook URL, which identifies the robot.
func Key(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("the webhook URL is not an absolute http(s) URL")
	}
	key := u.Query().Get("key")
	if key == "" {
		return "", errors.New("the webhook URL has no key: copy the robot's whole webhook URL, https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=...")
	}
	return key, nil
}

// Name returns the sink's name.
func (s *Sink) Name() string { return s.cfg.Name }

// Send posts one message about the event, once the robot's pace allows it,
// and reads WeCom's errcode.
func (s *Sink) Send(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	what := fmt.Sprintf("wecom sink %q: post of %s", s.cfg.Name, d.EventID)
	ev, err := d.Decoded()
	if err != nil {
		return notify.Result{}, fmt.Errorf("%s: %w", what, err)
	}
	body, err := Body(ev, s.cfg.Message, s.cfg.Mentions)
	if err != nil {
		s.cfg.TemplateFailed(s.cfg.Name, ev, err)
	}
	return s.post(ctx, what, body)
}

// Remind posts the start's message again, the reminder's note (such as
// "Reminder, ongoing for 4h") in its title: a group robot cannot reply to a
// message. Like Send, it makes one attempt.
func (s *Sink) Remind(ctx context.Context, ev *event.Event, _ map[string]string) (notify.Result, error) {
	body, err := Body(ev, s.cfg.Message, s.cfg.Mentions)
	if err != nil {
		s.cfg.TemplateFailed(s.cfg.Name, ev, err)
	}
	return s.post(ctx, fmt.Sprintf("wecom sink %q: reminder of %s", s.cfg.Name, ev.Data.OriginID), body)
}

// KeepsNoMemory reports that a wecom sink remembers nothing of its starts,
// so that alarm management reminds it of alarms it has no memory of.
func (s *Sink) KeepsNoMemory() bool { return true }

// post posts body once the robot's pace allows it and reads WeCom's
// errcode.
func (s *Sink) post(ctx context.Context, what string, body []byte) (notify.Result, error) {
	answer, res, err := s.poster.PostJSON(ctx, what, s.cfg.URL, body, nil)
	if err != nil {
		return res, err
	}
	res, err = s.answer(what, answer)
	return res, s.poster.Clean(err)
}

// answer reads WeCom's answer to a 2xx.
func (s *Sink) answer(what string, body []byte) (notify.Result, error) {
	var ans struct {
		ErrCode *int   `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
	}
	if json.Unmarshal(body, &ans) != nil || ans.ErrCode == nil {
		return notify.Result{}, fmt.Errorf("%s: the answer is not WeCom's (no errcode in a JSON body): check that url_env holds the robot's webhook URL", what)
	}
	code, msg := *ans.ErrCode, sinktype.Truncate(ans.ErrMsg, 300)
	said := fmt.Sprintf("%s: WeCom answered errcode %d (%s)", what, code, msg)
	switch code {
	case codeOK:
		return notify.Result{}, nil
	case codeTooFast:
		s.limiter.Block(Window)
		return notify.Result{Retry: true, RetryAfter: Window}, fmt.Errorf(
			"%s: the robot took more than %d messages in a minute (does another sender use it?); every sink of this robot waits %s", said, PerWindow, Window)
	case codeBusy:
		return notify.Result{Retry: true}, fmt.Errorf("%s: WeCom is busy", said)
	case codeBadURL:
		return notify.Result{}, fmt.Errorf("%s: WeCom knows no robot with this key: check that url_env holds the robot's current webhook URL (a robot removed from its group has none)", said)
	case codeEmpty:
		return notify.Result{}, fmt.Errorf("%s: the message is empty: check the title and text templates", said)
	case codeBadParam:
		return notify.Result{}, fmt.Errorf("%s: WeCom refused a field of the message (its errmsg names it)", said)
	}
	return notify.Result{}, fmt.Errorf("%s: an errcode the sink does not know, so the event is not retried: see WeCom's global error codes", said)
}

// message is the JSON body of a markdown message of WeCom's group robot.
type message struct {
	MsgType  string   `json:"msgtype"`
	Markdown markdown `json:"markdown"`
}

type markdown struct {
	Content string `json:"content"`
}

// Body returns the JSON body of the message about ev: a markdown message
// whose content is the title of m as a heading, its text, and the mentions
// (<@userid>, the only mention WeCom's markdown messages take), cut to
// MaxContent bytes with the mentions kept. The defaults stand in for what m
// does not set. The error, when not nil, says which template failed on ev:
// the body then holds the default in its place. Send and Render both use
// it, so that relay route --render shows exactly what is sent.
func Body(ev *event.Event, m *sinktype.Message, mentions []string) ([]byte, error) {
	text, tmplErr := m.Render(ev, defaultText(ev))
	content := strings.TrimSpace(text.Body)
	if title := oneLine(text.Title); title != "" {
		content = "### " + title + "\n" + content
	}
	body, err := markdownBody(content, mentions)
	if err != nil {
		return nil, err
	}
	return body, tmplErr
}

// markdownBody is the JSON body of a markdown message of content and the
// mentions, cut to MaxContent bytes with the mentions kept.
func markdownBody(content string, mentions []string) ([]byte, error) {
	suffix := ""
	if len(mentions) > 0 {
		var b strings.Builder
		for _, id := range mentions {
			b.WriteString("<@" + id + ">")
		}
		suffix = "\n" + sinktype.Truncate(b.String(), maxMentions)
	}
	content = sinktype.Truncate(content, MaxContent-len(suffix)) + suffix
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(message{MsgType: "markdown", Markdown: markdown{Content: content}}); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// defaultText is the default message: as title the headline (level, alarm
// and place) marked by level or outcome, and as text the alarm's facts, one
// a quoted line, the level coloured by how grave it is and the outcome by
// what it was.
func defaultText(ev *event.Event) sinktype.Text {
	var b strings.Builder
	for i, f := range sinktype.FieldsEscaped(ev, Escape) {
		if i > 0 {
			b.WriteByte('\n')
		}
		value := f[1]
		switch {
		case i == 0:
			value = fmt.Sprintf(`<font color="%s">%s</font>`, levelColor(ev.Data.Level), value)
		case f[0] == sinktype.Outcome(ev):
			value = fmt.Sprintf(`<font color="%s">%s</font>`, outcomeColor(ev), value)
		}
		fmt.Fprintf(&b, ">%s: %s", f[0], value)
	}
	return sinktype.Text{Title: sinktype.Mark(ev) + " " + Escape(sinktype.Headline(ev)), Body: b.String()}
}

// levelColor is the colour of a level among the three WeCom's markdown has:
// warning (orange-red) for urgent, severe and major alarms, comment (grey)
// for minor ones.
func levelColor(level int) string {
	if level >= 0 && level <= 2 {
		return "warning"
	}
	return "comment"
}

// outcomeColor is info (green) for a resolved alarm and comment (grey) for
// a cancelled one.
func outcomeColor(ev *event.Event) string {
	if ev.Data.Transition == event.End {
		return "info"
	}
	return "comment"
}

// Escape keeps an upstream value from changing a WeCom markdown message:
// line breaks become spaces, so that it cannot start a heading or a quote;
// < and > become ‹ and ›, so that it cannot mention anyone (<@userid>) or
// open a <font>; and, since WeCom documents no escape character, the
// characters of links, code and emphasis become look-alikes.
func Escape(s string) string {
	return wecomEscaper.Replace(s)
}

// wecomEscaper keeps upstream text from making markup in WeCom's Markdown,
// which documents no escape character: line breaks become spaces, and the
// characters that open a tag, a link, emphasis or code become look-alikes,
// so that a device named "[Acknowledge](https://evil.example)" cannot post
// a link into the group.
var wecomEscaper = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ", "<", "‹", ">", "›",
	"[", "［", "]", "］", "(", "（", ")", "）", "`", "ˋ", "*", "∗", "_", "＿")

// oneLine returns s with its line breaks turned to spaces and trimmed: the
// title is one heading line.
func oneLine(s string) string {
	return strings.TrimSpace(strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s))
}
