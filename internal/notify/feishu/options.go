package feishu

import (
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/robot"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// Type is the feishu sink type.
var Type = sinktype.Type{
	Name: vendor.Name,
	Doc:  "posts each event as an interactive card coloured by level to a Feishu or Lark group's custom bot, signed when its secret is set, at most 5 a second and 100 a minute",
	Options: []sinktype.Option{
		{Key: "url_env", Doc: "variable holding the bot's webhook URL, https://open.feishu.cn/open-apis/bot/v2/hook/<token>, or for Lark the same path on https://open.larksuite.com (required; a secret)"},
		{Key: "secret_env", Doc: "variable holding the bot's signature verification secret (Security Settings: Set signature verification); unsigned when absent"},
		{Key: "title", Doc: "Go template of the card's header, plain text, over the fields of subjects (default: a level mark, the level, the alarm and the place)"},
		{Key: "text", Doc: "Go template of the card's text, in Feishu's lark_md (default: the alarm's description, level, since when, station, device, originId, and for an end when and after how long)"},
	},
	Decode: decode,
}

// options are what a feishu sink decodes of its own: nothing, besides the
// options every robot has.
type options struct{}

func decode(d *sinktype.Decoder) sinktype.Config {
	var o robot.Options
	vendor.DecodeURL(d, &o)
	vendor.DecodeSecret(d, &o)
	// The header's title is plain text; only the text is lark_md.
	o.Message = d.MessageEscapes(plainLine, Escape)
	return vendor.Config(o, options{})
}

// Body is the package's Body with the sink's templates.
func (options) Body(ev *event.Event, o *robot.Options) ([]byte, error) { return Body(ev, o.Message) }
