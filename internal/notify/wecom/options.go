package wecom

import (
	"fmt"
	"strings"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/robot"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

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
