package slack

import (
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
)

// Action ids of relay's buttons. Listen acts on clicks of these, and of no
// other button.
const (
	ActionAck           = "relay.ack"
	ActionUnack         = "relay.unack"
	ActionShelve1h      = "relay.shelve.1h"
	ActionShelveCleared = "relay.shelve.cleared"
	// ActionAckDigest is the "Acknowledge all" button of a storm digest;
	// its value is the digest's ID.
	ActionAckDigest = "relay.ack.digest"
)

// blockPrefix starts the block_id of relay's actions blocks; the sink's
// name follows, so that a listener shared by the sinks of one app knows
// whose message a click came from.
const blockPrefix = "relay/"

// MemoryAck is the key of the Slack sink's memory of an alarm that holds
// the acknowledgement line its start message shows ("Acknowledged by … at
// …"), so that the resolved message keeps it.
const MemoryAck = "ack"

// buttons reports whether the sink's messages carry buttons: only when it
// posts with the bot token and the app-level token lets Listen read the
// clicks.
func (s *Sink) buttons() bool { return s.api != nil && s.cfg.AppToken != "" }

// button returns a button of relay's.
func button(actionID, label, value, style string) *slackapi.ButtonBlockElement {
	b := slackapi.NewButtonBlockElement(actionID, value, slackapi.NewTextBlockObject(slackapi.PlainTextType, label, false, false))
	if style != "" {
		b.Style = slackapi.Style(style)
	}
	return b
}

// startButtons are the buttons of an alarm's start: acknowledge it, or
// shelve it for an hour or until it clears.
func (s *Sink) startButtons(originID string) slackapi.Block {
	ref := notify.AlarmRef(originID)
	return slackapi.NewActionBlock(blockPrefix+s.cfg.Name,
		button(ActionAck, "Acknowledge", ref, string(slackapi.StylePrimary)),
		button(ActionShelve1h, "Shelve 1h", ref, ""),
		button(ActionShelveCleared, "Shelve until cleared", ref, ""))
}

// unackButton is the button of an acknowledged alarm's start: take the
// acknowledgement back.
func (s *Sink) unackButton(originID string) slackapi.Block {
	return slackapi.NewActionBlock(blockPrefix+s.cfg.Name, button(ActionUnack, "Unacknowledge", notify.AlarmRef(originID), ""))
}

// ackContext is the line that says who acknowledged the alarm.
func ackContext(line string) slackapi.Block {
	return slackapi.NewContextBlock("relay-ack", slackapi.NewTextBlockObject(slackapi.MarkdownType, line, false, false))
}

// extra returns the attachment that follows the alarm's own under its
// start message, in its colour: the acknowledgement line when there is
// one, and the buttons that fit the alarm's state (none once it is over or
// without the app token). ok is false when there is nothing to show.
func (s *Sink) extra(color, originID, line string, acked, over bool) (slackapi.Attachment, bool) {
	var blocks []slackapi.Block
	if line != "" {
		blocks = append(blocks, ackContext(line))
	}
	if s.buttons() && !over {
		if acked {
			blocks = append(blocks, s.unackButton(originID))
		} else {
			blocks = append(blocks, s.startButtons(originID))
		}
	}
	if len(blocks) == 0 {
		return slackapi.Attachment{}, false
	}
	return slackapi.Attachment{Color: color, Blocks: slackapi.Blocks{BlockSet: blocks}}, true
}

// digestButton is the "Acknowledge all" button of a storm digest.
func (s *Sink) digestButton(dg *notify.Digest, color string) (slackapi.Attachment, bool) {
	if !s.buttons() || dg.Title != "" || dg.Ongoing() == 0 {
		return slackapi.Attachment{}, false
	}
	block := slackapi.NewActionBlock(blockPrefix+s.cfg.Name, button(ActionAckDigest, "Acknowledge all", dg.ID, string(slackapi.StylePrimary)))
	return slackapi.Attachment{Color: color, Blocks: slackapi.Blocks{BlockSet: []slackapi.Block{block}}}, true
}

// ackLine is the line an ack or unack event puts under the start: who, at
// what time (UTC), and the comment.
func ackLine(ev *event.Event) string {
	info := ev.Data.Ack
	if info == nil {
		info = &event.AckInfo{}
	}
	who := slackEscape(firstNonEmpty(info.Name, info.By, "someone"))
	if info.Via == "slack" && info.By != "" {
		who = "<@" + slackEscape(info.By) + ">"
	} else if info.Via != "" && info.Via != "slack" {
		who += " (" + slackEscape(info.Via) + ")"
	}
	var b strings.Builder
	if ev.Data.Transition == event.Unack {
		b.WriteString("Acknowledgement withdrawn by " + who)
	} else {
		b.WriteString("Acknowledged by " + who)
	}
	if at, err := time.Parse(time.RFC3339Nano, firstNonEmpty(info.At, ev.Time)); err == nil {
		b.WriteString(" at " + at.UTC().Format("15:04") + " UTC")
	}
	if c := strings.TrimSpace(info.Comment); c != "" {
		b.WriteString(" — " + slackEscape(c))
	}
	return b.String()
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
