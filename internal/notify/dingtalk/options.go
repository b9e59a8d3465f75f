package dingtalk

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/robot"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// Type is the dingtalk sink type.
var Type = sinktype.Type{
	Name: vendor.Name,
	Doc:  "posts each event as a Markdown message to a DingTalk group's custom robot, signed when its secret is set, at most 20 a minute",
	Options: append([]sinktype.Option{
		{Key: "url_env", Doc: "variable holding the robot's webhook URL, https://oapi.dingtalk.com/robot/send?access_token=... (required; a secret)"},
		{Key: "secret_env", Doc: "variable holding the robot's signing secret, SEC... (Security Settings: Additional Signature); unsigned when absent"},
		{Key: "at_mobiles", Doc: "mobile numbers of group members to mention in every message"},
		{Key: "at_user_ids", Doc: "DingTalk user ids of group members to mention in every message"},
		{Key: "at_all", Doc: "true mentions everyone in the group (default false)"},
	}, sinktype.MessageOptions("title (the line shown in the conversation list and notifications)", "Markdown text")...),
	Decode: decode,
}

// options are what a dingtalk sink decodes of its own: whom it mentions.
type options struct {
	at At
}

func decode(d *sinktype.Decoder) sinktype.Config {
	var o robot.Options
	if vendor.DecodeURL(d, &o) {
		refuseSigned(d, &o)
	}
	vendor.DecodeSecret(d, &o)
	own := &options{}
	own.at.Mobiles = d.Strings("at_mobiles")
	for _, m := range own.at.Mobiles {
		if strings.Trim(m, "0123456789+-") != "" {
			d.Errorf("at_mobiles", "%q is not a mobile number (digits, + and - only)", m)
		}
	}
	own.at.UserIDs = d.Strings("at_user_ids")
	for _, id := range own.at.UserIDs {
		if strings.ContainsAny(id, " \t\r\n@") {
			d.Errorf("at_user_ids", "%q is not a DingTalk user id (no spaces or @)", id)
		}
	}
	own.at.All = d.Bool("at_all")
	// The title is the line of the conversation list and notifications,
	// plain text: only the text is Markdown.
	o.Message = d.MessageEscapes(plainLine, Escape)
	return vendor.Config(o, own)
}

// refuseSigned refuses a webhook URL that carries a signature already, which
// would be stale by the time it is sent.
func refuseSigned(d *sinktype.Decoder, o *robot.Options) {
	u, _ := url.Parse(o.URL)
	if q := u.Query(); q.Has("timestamp") || q.Has("sign") {
		d.Errorf("url_env", "environment variable %s holds a URL with timestamp or sign: give the webhook URL alone and the secret in secret_env, and relay signs each message", o.URLEnv)
		o.URL = ""
	}
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

// plainLine keeps a value substituted into the title on one line.
func plainLine(s string) string { return strings.Join(strings.Fields(s), " ") }
