package teams

import (
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/robot"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// Type is the teams sink type.
var Type = sinktype.Type{
	Name: vendor.Name,
	Doc:  "posts each event as an Adaptive Card coloured by level to a Microsoft Teams channel or chat through a Workflows webhook, at most 4 a second and 80 a minute",
	Options: []sinktype.Option{
		{Key: "url_env", Doc: "variable holding the workflow's HTTP POST URL, made with the Workflows app in Teams (\"Post to a channel when a webhook request is received\"), query included (required; a secret: its sig authorises posting)"},
		{Key: "title", Doc: "Go template of the card's heading, in Teams' Markdown subset, over the fields of subjects (default: a level mark, the level, the alarm and the place)"},
		{Key: "text", Doc: "Go template of a text under the card's facts, in Teams' Markdown subset (default: none; the facts are level, since when, station, device, originId, and for an end when and after how long)"},
	},
	Decode: decode,
}

// options are what a teams sink decodes of its own: nothing, besides the
// options every robot has.
type options struct{}

func decode(d *sinktype.Decoder) sinktype.Config {
	var o robot.Options
	vendor.DecodeURL(d, &o)
	o.Message = d.Message(Escape)
	return vendor.Config(o, options{})
}

// Body is the package's Body with the sink's templates.
func (options) Body(ev *event.Event, o *robot.Options) ([]byte, error) { return Body(ev, o.Message) }
