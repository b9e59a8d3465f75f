package route

import (
	"fmt"
	"strings"

	"github.com/relay-energy/relay/internal/termtext"
)

// Options lists the alarm management options the route sets, as relay
// check and the console's System page show them: hold, repeat, escalate,
// ack_by, suppress, active_when and mute_when.
func (rt Route) Options() []string {
	var out []string
	if rt.Hold > 0 {
		out = append(out, "hold "+termtext.Duration(rt.Hold))
	}
	if rt.Repeat > 0 {
		r := "repeat " + termtext.Duration(rt.Repeat)
		if rt.RepeatUntilCleared {
			r += " until cleared"
		}
		out = append(out, r)
	}
	for _, st := range rt.Escalate {
		out = append(out, "escalate after "+termtext.Duration(st.After)+" to "+strings.Join(st.To, " "))
	}
	if len(rt.AckBy) > 0 {
		out = append(out, "ack_by "+strings.Join(rt.AckBy, " "))
	}
	if rt.Suppress != nil {
		out = append(out, fmt.Sprintf("suppress %t", *rt.Suppress))
	}
	if len(rt.ActiveWhen) > 0 {
		out = append(out, "active_when "+strings.Join(rt.ActiveWhen, " "))
	}
	if len(rt.MuteWhen) > 0 {
		out = append(out, "mute_when "+strings.Join(rt.MuteWhen, " "))
	}
	return out
}
