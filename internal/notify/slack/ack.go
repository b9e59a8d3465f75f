package slack

import (
	"context"
	"maps"

	slackapi "github.com/slack-go/slack"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
)

// CarriesAcks reports whether the sink takes the ack and unack transitions
// of the alarms whose start it posted: with the bot token, which can edit
// the start message; not with an incoming webhook, which cannot.
func (s *Sink) CarriesAcks() bool { return s.api != nil }

// showAck edits the start message of d's alarm to show who acknowledged it
// (an ack) or who took that back (an unack): the line under the alarm, and
// the buttons that now fit (Unacknowledge after an ack, the start's own
// after an unack). The line is kept in the memory, for the end's update.
// An alarm whose start has no message here (digested, withheld, posted
// before relay kept one) is left as it is.
func (s *Sink) showAck(ctx context.Context, d notify.Delivery) (notify.Result, error) {
	ev := d.Event
	ts, channel := d.Memory[MemoryTS], d.Memory[MemoryChannel]
	if s.api == nil || ts == "" || channel == "" {
		return notify.Result{}, nil
	}
	start := *ev
	start.Data.Transition = event.Start
	start.Data.Ack = nil
	text, att := s.compose(&start)
	line := ackLine(ev)
	atts := []slackapi.Attachment{att}
	if more, ok := s.extra(att.Color, ev.Data.OriginID, line, ev.Data.Transition == event.Ack, false); ok {
		atts = append(atts, more)
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	_, _, _, err := s.api.UpdateMessageContext(rctx, channel, ts,
		slackapi.MsgOptionText(text, false),
		slackapi.MsgOptionAttachments(atts...))
	if err != nil {
		if !messageGone(err) {
			return s.fail("chat.update ("+string(ev.Data.Transition)+")", ev, err)
		}
		s.log.Warn("could not show the acknowledgement on the start message",
			"sink", s.cfg.Name, "event_id", ev.ID, "channel", channel, "ts", ts, "error", s.clean(err))
		return notify.Result{}, nil
	}
	memory := maps.Clone(d.Memory)
	memory[MemoryAck] = line
	return notify.Result{Memory: memory}, nil
}
