// Package wecom is the wecom sink type: it posts each event as a Markdown
// message to a WeCom (企业微信) group through the group's robot webhook,
// paced so that the robot never takes more than 20 messages a minute. The
// start of an alarm, and its end or cancellation, are messages of their own:
// a group robot cannot reply in a thread or edit what it sent.
package wecom

import (
	"fmt"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/robot"
	"github.com/relay-energy/relay/internal/notify/sinktype"
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

// vendor is what a wecom sink is of its own: a group robot of 20 messages
// in any 61 s, named by the key of its URL, that answers errcode.
//
// If WeCom refuses a message as too frequent all the same (another sender
// shares the robot), it is retried after a window, and every sink of the
// robot holds back that long. A key WeCom does not know dead-letters the
// message at once, naming url_env; so does any errcode the sink does not
// know.
var vendor = robot.Vendor{
	Name:   "wecom",
	Doc:    "posts each event as a Markdown message to a WeCom (企业微信) group robot, at most 20 a minute",
	URLDoc: "variable holding the robot's webhook URL, https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=... (required; a secret)",
	Options: append([]sinktype.Option{
		{Key: "mention_user_ids", Doc: "WeCom user ids of group members to mention in every message, as <@userid> (markdown messages cannot mention by mobile number or @all)"},
	}, sinktype.MessageOptions("heading (the first line, shown in notifications)", "Markdown text")...),
	Robot:       "robot",
	Windows:     []notify.Window{{N: PerWindow, Per: Window}},
	Key:         func(url, _ string) (string, error) { return Key(url) },
	Own:         decodeMentions,
	TitleEscape: Escape,
	TextEscape:  Escape,
	Codes: &robot.Codes{
		Vendor: "WeCom", Field: "errcode", Read: robot.ErrCode, MaxMsg: 300,
		Known: map[int]robot.Code{
			codeTooFast: {Block: Window, Hint: fmt.Sprintf(
				"the robot took more than %d messages in a minute (does another sender use it?); every sink of this robot waits %s", PerWindow, Window)},
			codeBusy:     {Retry: true, Hint: "WeCom is busy"},
			codeBadURL:   {Hint: "WeCom knows no robot with this key: check that url_env holds the robot's current webhook URL (a robot removed from its group has none)"},
			codeEmpty:    {Hint: "the message is empty: check the title and text templates"},
			codeBadParam: {Hint: "WeCom refused a field of the message (its errmsg names it)"},
		},
		Unknown: "an errcode the sink does not know, so the event is not retried: see WeCom's global error codes",
	},
}

// Type is the wecom sink type.
var Type = vendor.Type()

// Key returns the key of a robot's webhook URL, which identifies the robot.
func Key(raw string) (string, error) {
	return robot.QueryKey(raw, "key", "copy the robot's whole webhook URL, https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=...")
}

// message is the JSON body of a markdown message of WeCom's group robot.
type message struct {
	MsgType  string   `json:"msgtype"`
	Markdown markdown `json:"markdown"`
}

type markdown struct {
	Content string `json:"content"`
}

// options are what a wecom sink decodes of its own: whom it mentions.
type options struct {
	mentions []string
}

// decodeMentions reads whom the sink mentions, within maxMentions bytes.
func decodeMentions(d *sinktype.Decoder) robot.Payload {
	o := &options{mentions: d.Strings("mention_user_ids")}
	size := 0
	for _, id := range o.mentions {
		size += len(id) + 3
		switch {
		case id == "@all" || id == "all":
			d.Errorf("mention_user_ids", "WeCom's markdown messages cannot mention everyone: name the user ids")
		case strings.ContainsAny(id, " \t\r\n<>@"):
			d.Errorf("mention_user_ids", "%q is not a WeCom user id (no spaces, <, > or @)", id)
		}
	}
	if size > maxMentions {
		d.Errorf("mention_user_ids", "the mentions take %d bytes of the message, over %d: name fewer user ids", size, maxMentions)
	}
	return o
}

// Summary says how many the sink mentions.
func (o *options) Summary(*robot.Options) []string {
	if n := len(o.mentions); n > 0 {
		return []string{fmt.Sprintf("mentions %d user id(s)", n)}
	}
	return nil
}

// Body is the package's Body with the sink's templates and mentions.
func (o *options) Body(ev *event.Event, ro *robot.Options) ([]byte, error) {
	return Body(ev, ro.Message, o.mentions)
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
	if title := sinktype.OneLine(text.Title); title != "" {
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
	return sinktype.JSON(message{MsgType: "markdown", Markdown: markdown{Content: content}})
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
	return sinktype.ByLevel(level, "warning", "warning", "warning", "comment")
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
