// Package feishu is the feishu sink type: it posts each event as an
// interactive card to a Feishu (or Lark) group through the group's custom
// bot, its header coloured by the alarm's level, signed when the bot's
// signature verification is on, and paced so that the bot never takes more
// than Feishu allows. The start of an alarm, and its end or cancellation,
// are cards of their own: a custom bot cannot reply in a thread or update
// what it sent.
//
// In app mode (app_id_env, app_secret_env, chat_id; app.go) the cards are
// sent by a Feishu app's bot instead: the start's card carries Acknowledge
// and Shelve buttons, whose clicks come back over the app's long
// connection (listen.go, frame.go), and the card is updated in place on
// acknowledgement and end. Only an app's cards can call back: Feishu's
// cards of custom bots are static.
package feishu

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/robot"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// HookPath is the path of a custom bot's webhook, on open.feishu.cn for
// Feishu and open.larksuite.com for Lark alike; the bot's token follows it.
const HookPath = "/open-apis/bot/v2/hook/"

// The bot's limits, as Feishu's custom bot guide gives them: 100 messages a
// minute and 5 a second per bot, and a request body of at most 20 KB.
const (
	// PerSecond and Second, PerMinute and Minute are the pace the sink
	// keeps per bot, with a margin over Feishu's 5 a second and 100 a
	// minute, since the bot refuses what exceeds them (code 11232).
	PerSecond = 5
	Second    = 1100 * time.Millisecond
	PerMinute = 100
	Minute    = 61 * time.Second
	// Block is how long every sink of a bot holds back after Feishu
	// answered 11232 (frequency limited). Feishu says no wait; a minute
	// clears both of its windows.
	Block = time.Minute
	// MaxBody bounds the JSON body in bytes, signature included: Feishu
	// refuses a body over 20 KB (code 9499), and its guide does not say
	// whether a KB is 1000 or 1024 bytes, so the bound keeps under both
	// with room to spare.
	MaxBody = 19000
	// MaxTitle bounds the card's title in bytes: a header is a line or two,
	// and Feishu documents no bound of its own.
	MaxTitle = 500
	// maxValue bounds each value of the default text (a description, a
	// device name), so that the alarm's facts, its originId among them,
	// survive an upstream value of any length.
	maxValue = 2000
	// signRoom is what timestamp and sign add to a body.
	signRoom = 128
)

// Feishu's answers the sink tells apart: HTTP 200 with code and msg in the
// JSON body (StatusCode and StatusMessage in answers of the older format).
const (
	codeOK = 0
	// codeTooFast: 11232, "frequency limited": over 5 a second or 100 a
	// minute, or Feishu under load at busy times of day.
	codeTooFast = 11232
	// codeAppTooFast: 99991400, the open platform's frequency limit of its
	// generic error code table; not seen from custom bots, handled as 11232.
	codeAppTooFast = 99991400
	// codeInternal: 1500, "internal error", retry later (the open
	// platform's generic error code table).
	codeInternal = 1500
	// codeBadRequest: 9499, "Bad Request": not JSON, or over 20 KB.
	codeBadRequest = 9499
	// codeBadToken: 19001, "param invalid: incoming webhook access token
	// invalid": no bot has this webhook (removed, or the URL is wrong).
	codeBadToken = 19001
	// codeBadParam: 19002, "param invalid: ...": the message has a field
	// the bot does not take. Seen in public clients; not in Feishu's guide.
	codeBadParam = 19002
	// codeBadSign: 19021, "sign match fail or timestamp is not within one
	// hour from current time".
	codeBadSign = 19021
	// codeIPNotAllowed: 19022, "Ip Not Allowed": the bot's IP allowlist.
	codeIPNotAllowed = 19022
	// codeNoKeyword: 19024, "Key Words Not Found": the bot's custom keywords.
	codeNoKeyword = 19024
)

// vendor is what a feishu sink is of its own: a custom bot of 5 cards a
// second and 100 a minute, named by the token its URL ends in, signed in
// the body when the bot's signature verification is on, that answers code.
//
// Cards wait for the bot's pace, so that Feishu does not refuse them; if it
// does all the same (another sender shares the bot, or Feishu is busy), the
// card is retried after Block, and every sink of the bot holds back until
// then. An answer that says the bot's token, signature, keywords or IP
// allowlist refused the card dead-letters it at once with what to fix; so
// does any code the sink does not know.
var vendor = robot.Vendor{
	Name:      "feishu",
	Doc:       "posts each event as an interactive card coloured by level to a Feishu or Lark group's custom bot, signed when its secret is set, at most 5 a second and 100 a minute",
	URLDoc:    "variable holding the bot's webhook URL, https://open.feishu.cn/open-apis/bot/v2/hook/<token>, or for Lark the same path on https://open.larksuite.com (required; a secret)",
	SecretDoc: "variable holding the bot's signature verification secret (Security Settings: Set signature verification); unsigned when absent",
	Options: []sinktype.Option{
		{Key: "title", Doc: "Go template of the card's header, plain text, over the fields of subjects (default: a level mark, the level, the alarm and the place)"},
		{Key: "text", Doc: "Go template of the card's text, in Feishu's lark_md (default: the alarm's description, level, since when, station, device, originId, and for an end when and after how long)"},
	},
	Robot:      "bot",
	Windows:    []notify.Window{{N: PerSecond, Per: Second}, {N: PerMinute, Per: Minute}},
	Key:        func(url, _ string) (string, error) { return Token(url) },
	SecretPath: true,
	// Target is the bot's host and path, without its token.
	Target: func(url string) string { return sinktype.RedactURL(url, false) + HookPath + "…" },
	Own:    func(*sinktype.Decoder) robot.Payload { return cards{} },
	// The header's title is plain text; only the text is lark_md.
	TitleEscape: sinktype.PlainLine,
	TextEscape:  Escape,
	SecretHint: func(secret string) string {
		if !strings.ContainsAny(secret, " \t\r\n/:") {
			return ""
		}
		return "does not hold a bot's signing secret (no spaces, slashes or colons): copy it from the bot's Security Settings, Set signature verification"
	},
	Sign:  sign,
	Codes: &codes,
}

// Type is the feishu sink type.
var webhookType = vendor.Type()

// tooFast is Feishu's refusal of a bot over its pace.
var tooFast = robot.Code{Block: Block, Hint: fmt.Sprintf(
	"the bot took more than %d messages in a second or %d in a minute (does another sender use it?), or Feishu is busy; every sink of this bot waits %s", PerSecond, PerMinute, Block)}

// refused is Feishu's answer to a card that no retry changes.
var refused = robot.Code{Hint: "the bot refused the card as sent, which no retry changes; check the title and text templates (relay route --render shows the body)"}

// codes are the answers of Feishu the sink tells apart.
var codes = robot.Codes{
	Vendor: "Feishu", Field: "code", Read: readCode, MaxMsg: 200,
	Known: map[int]robot.Code{
		codeTooFast:      tooFast,
		codeAppTooFast:   tooFast,
		codeInternal:     {Retry: true, Hint: "Feishu failed inside"},
		codeBadSign:      {Why: signHint},
		codeBadToken:     {Hint: "Feishu knows no bot with this webhook: check that url_env holds the bot's current webhook URL (a bot removed from its group has none)"},
		codeIPNotAllowed: {Hint: "this host's address is not in the bot's IP allowlist (Security Settings): add relay's egress address"},
		codeNoKeyword:    {Hint: "the card holds none of the bot's custom keywords (Security Settings): put one in the title or text template"},
		codeBadRequest:   refused,
		codeBadParam:     refused,
	},
	Unknown: "a code the sink does not know, so the event is not retried: see Feishu's custom bot guide",
}

// Token returns the token of a bot's webhook URL, which identifies the bot:
// the last segment of https://open.feishu.cn/open-apis/bot/v2/hook/<token>
// (or of the same path on open.larksuite.com, or any host, for tests and
// proxies).
func Token(raw string) (string, error) {
	u, err := robot.WebhookURL(raw)
	if err != nil {
		return "", err
	}
	token, ok := strings.CutPrefix(u.Path, HookPath)
	if !ok || token == "" || strings.Contains(token, "/") {
		return "", errors.New("the webhook URL does not end in /open-apis/bot/v2/hook/<token>: copy the bot's whole webhook address from the group's bot settings")
	}
	return token, nil
}

// sign adds timestamp (Unix seconds) and sign to the card's JSON body, as
// its first fields: where the card's own encoding would put them, before
// msg_type.
func sign(secret string, now time.Time, hook string, body []byte) (string, []byte) {
	ts := strconv.FormatInt(now.Unix(), 10)
	head := `{"timestamp":"` + ts + `","sign":"` + Sign(secret, ts) + `",`
	return hook, append([]byte(head), body[1:]...)
}

// Sign returns the signature of a message sent at timestamp (Unix seconds):
// the base64 HmacSHA256 keyed with timestamp, a line feed and the secret, of
// nothing, as Feishu's guide and sample code have it.
func Sign(secret, timestamp string) string {
	mac := hmac.New(sha256.New, []byte(timestamp+"\n"+secret))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// readCode reads Feishu's answer: code and msg, or StatusCode and
// StatusMessage in answers of the older format.
func readCode(body []byte) (int, string, bool) {
	var ans struct {
		Code          *int   `json:"code"`
		Msg           string `json:"msg"`
		StatusCode    *int   `json:"StatusCode"`
		StatusMessage string `json:"StatusMessage"`
	}
	if json.Unmarshal(body, &ans) != nil || (ans.Code == nil && ans.StatusCode == nil) {
		return 0, "", false
	}
	code := 0
	if ans.Code != nil {
		code = *ans.Code
	}
	if ans.StatusCode != nil && code == codeOK {
		code = *ans.StatusCode
	}
	return code, sinktype.FirstNonEmpty(ans.Msg, ans.StatusMessage), true
}

// signHint says what to fix for code 19021: a secret, or the right one and
// this host's clock.
func signHint(a *robot.Attempt, _ string) string {
	if !a.Signed {
		return "the bot verifies signatures (Security Settings: Set signature verification): set secret_env to a variable holding its secret"
	}
	return fmt.Sprintf("check that secret_env holds this bot's signature verification secret, and that this host's clock is right (Feishu allows an hour of skew; this host says %s)",
		a.Now().UTC().Format(time.RFC3339))
}

// cards are the payloads of a feishu sink, which has no options of its own
// besides those of every robot.
type cards struct{}

// Body is the package's Body with the sink's templates.
func (cards) Body(ev *event.Event, o *robot.Options) ([]byte, error) { return Body(ev, o.Message) }

// Body returns the JSON body of the card about ev, without the timestamp and
// sign each attempt adds: an interactive card whose header holds the title
// of m and whose one element holds its text as lark_md (the defaults where
// m sets none), the text cut so that the body with its signature stays
// within MaxBody. The error, when not nil, says which template failed on
// ev: the body then holds the default in its place. Send and Render both
// build it, so that relay route --render shows what is sent.
func Body(ev *event.Event, m *sinktype.Message) ([]byte, error) {
	msg, tmplErr := build(ev, m)
	body, err := encode(msg)
	if err != nil {
		return nil, err
	}
	return body, tmplErr
}

// build returns the unsigned card about ev, its text cut so that it stays
// within MaxBody once signed.
func build(ev *event.Event, m *sinktype.Message) (message, error) {
	text, tmplErr := m.Render(ev, defaultText(ev))
	title := sinktype.Truncate(sinktype.OneLine(text.Title), MaxTitle)
	if title == "" {
		title = sinktype.Truncate(sinktype.Headline(ev), MaxTitle)
	}
	body := text.Body
	if strings.TrimSpace(body) == "" {
		body = defaultText(ev).Body
	}
	msg := message{
		MsgType: "interactive",
		Card: card{
			Config: cardConfig{WideScreenMode: true},
			Header: header{Template: Template(ev), Title: cardText{Tag: "plain_text", Content: title}},
			Elements: []element{
				{Tag: "div", Text: &cardText{Tag: "lark_md", Content: body}},
			},
		},
	}
	fit(&msg, MaxBody-signRoom)
	return msg, tmplErr
}

// fit cuts the text of msg's card, as little as it can, so that its body
// is at most limit bytes.
func fit(msg *message, limit int) {
	sinktype.FitText(&msg.Card.Elements[0].Text.Content, limit, func() ([]byte, error) { return encode(*msg) })
}

func encode(msg message) ([]byte, error) { return sinktype.JSON(msg) }

// message is the JSON body of an interactive message of a custom bot, with
// a card in the JSON 1.0 structure of Feishu's message cards; sign adds the
// timestamp and signature.
type message struct {
	MsgType string `json:"msg_type"`
	Card    card   `json:"card"`
}

type card struct {
	Config   cardConfig `json:"config"`
	Header   header     `json:"header"`
	Elements []element  `json:"elements"`
}

type cardConfig struct {
	WideScreenMode bool `json:"wide_screen_mode"`
	// UpdateMulti makes the card shared, so that an app may update it for
	// everyone (PATCH /open-apis/im/v1/messages/:message_id needs it
	// before and after); custom bots leave it out.
	UpdateMulti bool `json:"update_multi,omitempty"`
}

type header struct {
	Template string   `json:"template"`
	Title    cardText `json:"title"`
}

type element struct {
	Tag  string    `json:"tag"`
	Text *cardText `json:"text,omitempty"`
	// Header and Elements are those of a collapsible_panel: a title that
	// folds the elements under it open (closed at first).
	Header   *panelHeader `json:"header,omitempty"`
	Elements []element    `json:"elements,omitempty"`
	// Actions are the buttons of an action module (app mode only).
	Actions []button `json:"actions,omitempty"`
}

type panelHeader struct {
	Title cardText `json:"title"`
}

type cardText struct {
	Tag     string `json:"tag"`
	Content string `json:"content"`
}

// Template is the colour of the card's header: red, orange, yellow and blue
// for a start at levels 0 to 3, green for an end and grey for a
// cancellation.
func Template(ev *event.Event) string {
	return sinktype.Shade(ev, "green", "grey", "red", "orange", "yellow", "blue")
}

// defaultText is the default card: as title the headline (level, alarm and
// place) after a mark, as text the alarm's description and facts, one a
// line, each value cut to maxValue bytes.
func defaultText(ev *event.Event) sinktype.Text {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s**", Escape(sinktype.Truncate(sinktype.What(ev), maxValue)))
	for _, f := range sinktype.Fields(ev) {
		fmt.Fprintf(&b, "\n**%s:** %s", f[0], Escape(sinktype.Truncate(f[1], maxValue)))
	}
	return sinktype.Text{Title: sinktype.Mark(ev) + " " + sinktype.Headline(ev), Body: b.String()}
}

// Escape makes s plain text in a card's lark_md: line breaks become spaces
// (a value cannot start a line of its own), < and > become &lt; and &gt;
// (lark_md takes tags: <at>, <font>), & becomes &amp; (lark_md reads
// entities, so an upstream "&amp;" would otherwise show as "&"), and the
// characters of emphasis, strikethrough, code and links become HTML
// character references, which Feishu's card Markdown documents for
// characters that would otherwise be read as syntax. (The vendor's page
// could not be read again when this was written: the references are from
// its rich-text component guide as remembered, and they stay readable text
// if a renderer ignores them.)
func Escape(s string) string {
	return sinktype.EscapeMarkup(s, "*_~`[]\\", func(r rune) string { return fmt.Sprintf("&#%d;", r) })
}
