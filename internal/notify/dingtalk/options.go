package dingtalk

import (
	"fmt"
	"strings"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/robot"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

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
