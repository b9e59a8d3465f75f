package wecom

import (
	"fmt"
	"strings"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/robot"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// Type is the wecom sink type.
var Type = sinktype.Type{
	Name: vendor.Name,
	Doc:  "posts each event as a Markdown message to a WeCom (企业微信) group robot, at most 20 a minute",
	Options: append([]sinktype.Option{
		{Key: "url_env", Doc: "variable holding the robot's webhook URL, https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=... (required; a secret)"},
		{Key: "mention_user_ids", Doc: "WeCom user ids of group members to mention in every message, as <@userid> (markdown messages cannot mention by mobile number or @all)"},
	}, sinktype.MessageOptions("heading (the first line, shown in notifications)", "Markdown text")...),
	Decode: decode,
}

// options are what a wecom sink decodes of its own: whom it mentions.
type options struct {
	mentions []string
}

func decode(d *sinktype.Decoder) sinktype.Config {
	var o robot.Options
	vendor.DecodeURL(d, &o)
	own := &options{mentions: d.Strings("mention_user_ids")}
	size := 0
	for _, id := range own.mentions {
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
	o.Message = d.Message(Escape)
	return vendor.Config(o, own)
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
