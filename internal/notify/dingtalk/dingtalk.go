// Package dingtalk is the dingtalk sink type: it posts each event as a
// Markdown message to a DingTalk group through the group's custom robot,
// signed when the robot's "Additional Signature" (加签) secret is set, and
// paced so that the robot never takes more than 20 messages a minute. The
// start of an alarm, and its end or cancellation, are messages of their own:
// a robot cannot reply in a thread or edit what it sent.
package dingtalk

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/robot"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// The robot's limits, as DingTalk documents them: 20 messages a minute per
// robot, and a robot that sends more is refused everything for 10 minutes.
const (
	// PerWindow and Window are the pace the sink keeps per robot: 20
	// messages in any 61 s, a second of margin over DingTalk's minute,
	// since exceeding it silences the robot for Block.
	PerWindow = 20
	Window    = 61 * time.Second
	// Block is how long DingTalk refuses a robot's messages after it sent
	// more than 20 in a minute (errcode 130101).
	Block = 10 * time.Minute
	// MaxText bounds the Markdown text in bytes. DingTalk refuses a message
	// over 20000 bytes (errcode 460101, "message too long, exceed 20000
	// bytes", as robots answer it; the vendor's pages we could read give no
	// figure); the margin leaves room for the title and the JSON around it.
	MaxText = 18000
	// MaxTitle bounds the title in bytes: it is the line shown in the
	// conversation list and the notification, so a long one is cut there
	// anyway. DingTalk documents no bound of its own.
	MaxTitle = 500
	// MaxBody bounds the whole JSON body in bytes, below DingTalk's 20000
	// whether it counts the text or the body.
	MaxBody = 19500
)

// DingTalk's answers the sink tells apart (HTTP 200, errcode in the body).
const (
	// codeBusy is DingTalk's "system busy" (系统繁忙) of its open API; not
	// seen documented for robots, but worth a retry wherever it comes from.
	codeBusy = -1
	// codeTooFast: "send too fast, exceed 20 times per minute"; the robot
	// is refused everything for 10 minutes.
	codeTooFast = 130101
	// codeLimited: 410100, "发送速度太快而限流" (throttled for sending too
	// fast), answered by robots too as public clients show; handled as
	// 130101.
	codeLimited = 410100
	// codeSecurity: 310000, the robot's security settings refused the
	// message: "sign not match", "invalid timestamp", "keywords not in
	// content", "ip X not in whitelist".
	codeSecurity = 310000
	// codeNoToken, codeNoToken2: "token is not exist" (both are answered,
	// the second by robots whose webhook was removed).
	codeNoToken  = 300001
	codeNoToken2 = 300005
	// codeTooLong: "message too long, exceed 20000 bytes".
	codeTooLong = 460101
)

// At is whom a message mentions. DingTalk shows a mention only where the
// text holds "@" and the mobile number or user id, so the sink appends them.
type At struct {
	Mobiles []string
	UserIDs []string
	All     bool
}

// vendor is what a dingtalk sink is of its own: a robot of 20 messages in
// any 61 s, named by the access_token of its URL, signed in the URL when
// the robot's "Additional Signature" secret is set, that answers errcode.
//
// Messages wait for the robot's pace, so that DingTalk never blocks the
// robot; if it does all the same (another sender shares the robot), the
// message is retried after the 10-minute block, and every sink of the
// robot holds back until then. An answer that says the robot's security
// settings or token refused the message dead-letters it at once with what
// to fix; so does any errcode the sink does not know.
var vendor = robot.Vendor{
	Name:      "dingtalk",
	Doc:       "posts each event as a Markdown message to a DingTalk group's custom robot, signed when its secret is set, at most 20 a minute",
	URLDoc:    "variable holding the robot's webhook URL, https://oapi.dingtalk.com/robot/send?access_token=... (required; a secret)",
	SecretDoc: "variable holding the robot's signing secret, SEC... (Security Settings: Additional Signature); unsigned when absent",
	Options: append([]sinktype.Option{
		{Key: "at_mobiles", Doc: "mobile numbers of group members to mention in every message"},
		{Key: "at_user_ids", Doc: "DingTalk user ids of group members to mention in every message"},
		{Key: "at_all", Doc: "true mentions everyone in the group (default false)"},
	}, sinktype.MessageOptions("title (the line shown in the conversation list and notifications)", "Markdown text")...),
	Robot:   "robot",
	Windows: []notify.Window{{N: PerWindow, Per: Window}},
	Key:     func(url, _ string) (string, error) { return AccessToken(url) },
	Own:     decodeAt,
	URLHint: signedURLHint,
	SecretHint: func(secret string) string {
		if strings.HasPrefix(secret, "SEC") {
			return ""
		}
		return "does not hold a DingTalk signing secret (they start with SEC): copy it from the robot's Security Settings, Additional Signature"
	},
	// The title is the line of the conversation list and notifications,
	// plain text: only the text is Markdown.
	TitleEscape: sinktype.PlainLine,
	TextEscape:  Escape,
	Sign:        sign,
	Pace:        fmt.Sprintf("the robot's pace of %d messages in %s", PerWindow, Window),
	Codes:       &codes,
}

// Type is the dingtalk sink type.
var Type = vendor.Type()

// tooFast is DingTalk's refusal of a robot over its pace.
var tooFast = robot.Code{Block: Block, Hint: fmt.Sprintf(
	"the robot took more than %d messages in a minute (does another sender use it?) and refuses messages for %s; every sink of this robot waits that long", PerWindow, Block)}

// noToken is DingTalk's answer to an access token of no robot.
var noToken = robot.Code{Hint: "DingTalk knows no robot with this access token: check that url_env holds the robot's current webhook URL (a robot removed from its group, or whose webhook was reset, has a new one)"}

// codes are the answers of DingTalk the sink tells apart.
var codes = robot.Codes{
	Vendor: "DingTalk", Field: "errcode", Read: robot.ErrCode, MaxMsg: 200,
	Known: map[int]robot.Code{
		codeTooFast:  tooFast,
		codeLimited:  tooFast,
		codeBusy:     {Retry: true, Hint: "DingTalk is busy"},
		codeSecurity: {Why: securityHint},
		codeNoToken:  noToken,
		codeNoToken2: noToken,
		codeTooLong:  {Hint: fmt.Sprintf("the message is over DingTalk's 20000 bytes although the text is cut at %d: shorten the title template", MaxText)},
	},
	Unknown: "an errcode the sink does not know, so the event is not retried: see DingTalk's custom robot documentation",
}

// AccessToken returns the access_token of a robot's webhook URL, which
// identifies the robot.
func AccessToken(raw string) (string, error) {
	return robot.QueryKey(raw, "access_token", "copy the robot's whole webhook URL")
}

// signedURLHint refuses a webhook URL that carries a signature already,
// which would be stale by the time it is sent.
func signedURLHint(hook string) string {
	u, _ := url.Parse(hook)
	if q := u.Query(); q.Has("timestamp") || q.Has("sign") {
		return "holds a URL with timestamp or sign: give the webhook URL alone and the secret in secret_env, and relay signs each message"
	}
	return ""
}

// sign adds timestamp and sign to the webhook URL: sign is the base64
// HmacSHA256, keyed with the secret, of the timestamp (Unix ms), a line
// feed and the secret.
func sign(secret string, now time.Time, hook string, body []byte) (string, []byte) {
	ts := strconv.FormatInt(now.UnixMilli(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "\n" + secret))
	sign := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	return hook + "&timestamp=" + ts + "&sign=" + url.QueryEscape(sign), body
}

// securityHint says what to fix for errcode 310000, from its errmsg.
func securityHint(a *robot.Attempt, msg string) string {
	lower := strings.ToLower(msg)
	switch {
	case strings.Contains(lower, "sign") || strings.Contains(lower, "timestamp"):
		if !a.Signed {
			return "the robot signs its messages (Security Settings: Additional Signature): set secret_env to a variable holding its SEC... secret"
		}
		return "the signature was refused: check that secret_env holds this robot's SEC... secret (Security Settings: Additional Signature) and that this host's clock is right (DingTalk allows an hour)"
	case strings.Contains(lower, "keyword"):
		return "the message holds none of the robot's custom keywords (Security Settings: Custom Keywords): put one in the title or text template"
	case strings.Contains(lower, "ip") || strings.Contains(lower, "whitelist"):
		return "this host's address is not in the robot's IP allowlist (Security Settings: IP Address): add relay's egress address"
	}
	return "the robot's security settings refused the message: check secret_env against its Additional Signature, its Custom Keywords against the title and text, and its IP allowlist"
}

// options are what a dingtalk sink decodes of its own: whom it mentions.
type options struct {
	at At
}

// decodeAt reads whom the sink mentions.
func decodeAt(d *sinktype.Decoder) robot.Payload {
	o := &options{}
	o.at.Mobiles = d.Strings("at_mobiles")
	for _, m := range o.at.Mobiles {
		if strings.Trim(m, "0123456789+-") != "" {
			d.Errorf("at_mobiles", "%q is not a mobile number (digits, + and - only)", m)
		}
	}
	o.at.UserIDs = d.Strings("at_user_ids")
	for _, id := range o.at.UserIDs {
		if strings.ContainsAny(id, " \t\r\n@") {
			d.Errorf("at_user_ids", "%q is not a DingTalk user id (no spaces or @)", id)
		}
	}
	o.at.All = d.Bool("at_all")
	return o
}

// Summary says whom the sink mentions.
func (o *options) Summary(*robot.Options) []string {
	var at []string
	if n := len(o.at.Mobiles); n > 0 {
		at = append(at, fmt.Sprintf("%d mobile(s)", n))
	}
	if n := len(o.at.UserIDs); n > 0 {
		at = append(at, fmt.Sprintf("%d user id(s)", n))
	}
	if o.at.All {
		at = append(at, "all")
	}
	if len(at) == 0 {
		return nil
	}
	return []string{"at " + strings.Join(at, ", ")}
}

// Body is the package's Body with the sink's templates and mentions.
func (o *options) Body(ev *event.Event, ro *robot.Options) ([]byte, error) {
	return Body(ev, ro.Message, o.at)
}

// Body returns the JSON body of the message about ev: a markdown message
// with the title and text of m (the defaults where m sets none), the text
// cut to MaxText bytes and ending with the mentions of at. The error, when
// not nil, says which template failed on ev: the body then holds the
// default in its place. Send and Render both use it, so that relay route
// --render shows exactly what is sent.
func Body(ev *event.Event, m *sinktype.Message, at At) ([]byte, error) {
	text, tmplErr := m.Render(ev, defaultText(ev))
	title := sinktype.Truncate(sinktype.OneLine(text.Title), MaxTitle)
	if title == "" {
		title = sinktype.Truncate(sinktype.Headline(ev), MaxTitle)
	}
	body, err := markdownBody(title, text.Body, at)
	if err != nil {
		return nil, err
	}
	return body, tmplErr
}

// markdownBody is the JSON body of a markdown message with title and text,
// the text cut to MaxText bytes and ending with the mentions of at, the
// whole within MaxBody.
func markdownBody(title, text string, at At) ([]byte, error) {
	var mentions []string
	for _, who := range append(append([]string(nil), at.Mobiles...), at.UserIDs...) {
		mentions = append(mentions, "@"+who)
	}
	suffix := ""
	if len(mentions) > 0 {
		suffix = "\n\n" + strings.Join(mentions, " ")
	}
	// JSON escapes can make the body larger than the text (a quote or a
	// backslash doubles): cut the text further until the body fits too.
	limit := MaxText - len(suffix)
	for {
		body := sinktype.Truncate(text, max(limit, 0)) + suffix
		msg := message{MsgType: "markdown", Markdown: markdown{Title: title, Text: body}}
		if len(at.Mobiles) > 0 || len(at.UserIDs) > 0 || at.All {
			msg.At = &mention{Mobiles: at.Mobiles, UserIDs: at.UserIDs, All: at.All}
		}
		out, err := sinktype.JSON(msg)
		if err != nil {
			return nil, err
		}
		if len(out) <= MaxBody || limit <= 0 {
			return out, nil
		}
		limit -= len(out) - MaxBody
	}
}

// message is the JSON body of a markdown message of DingTalk's custom robot.
type message struct {
	MsgType  string   `json:"msgtype"`
	Markdown markdown `json:"markdown"`
	At       *mention `json:"at,omitempty"`
}

type markdown struct {
	Title string `json:"title"`
	Text  string `json:"text"`
}

type mention struct {
	Mobiles []string `json:"atMobiles,omitempty"`
	UserIDs []string `json:"atUserIds,omitempty"`
	All     bool     `json:"isAtAll"`
}

// defaultText is the default message: as title the headline (level, alarm
// and place), and as text a heading with the level or outcome and the
// alarm, then the alarm's facts, one a line.
func defaultText(ev *event.Event) sinktype.Text {
	level := strings.ToUpper(ev.Data.LevelName)
	heading := fmt.Sprintf("%s %s alarm: %s", sinktype.Mark(ev), level, Escape(sinktype.What(ev)))
	if ev.Data.Transition != event.Start {
		heading = fmt.Sprintf("%s %s: %s alarm %s", sinktype.Mark(ev), sinktype.Outcome(ev), level, Escape(sinktype.What(ev)))
	}
	var b strings.Builder
	b.WriteString("### " + heading)
	for _, f := range sinktype.Fields(ev) {
		fmt.Fprintf(&b, "\n\n**%s:** %s", f[0], Escape(f[1]))
	}
	return sinktype.Text{Title: sinktype.Mark(ev) + " " + sinktype.Headline(ev), Body: b.String()}
}

// Escape makes s plain text in DingTalk's Markdown: line breaks become
// spaces (a value cannot start a heading or a quote); the characters that
// make emphasis, code and links are backslash-escaped, as every Markdown
// has it since the original; and &, < and > become HTML entities, since
// DingTalk's Markdown takes HTML (<font>) and reads entities, so that an
// upstream "&amp;" is shown as written, not as "&". DingTalk does not
// document escapes: this is what Markdown renderers do, not a vendor promise.
func Escape(s string) string {
	return sinktype.EscapeMarkup(s, "\\`*_[]", func(r rune) string { return "\\" + string(r) })
}
