package telegram

import (
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
)

// MaxCallbackData is the most bytes of a button's callback_data ("Data to be
// sent in a callback query to the bot when the button is pressed, 1-64
// bytes", InlineKeyboardButton in the Bot API).
const MaxCallbackData = 64

// MemoryAck is the key of the sink's memory of an alarm that holds the line
// its start's message shows while the alarm is acknowledged ("Acknowledged
// by alice at 08:02 UTC — on my way"), so that the end keeps showing it.
const MemoryAck = "ack"

// The prefixes of a button's callback_data: what the click asks, followed
// by notify.AlarmRef of the alarm (or, for a digest, the digest's id).
const (
	dataAck       = "a:"
	dataUnack     = "u:"
	dataShelve1h  = "s1h:"
	dataShelveEnd = "sc:"
	dataDigestAck = "da:"
)

// inlineKeyboard is the Bot API's InlineKeyboardMarkup: rows of buttons.
type inlineKeyboard struct {
	InlineKeyboard [][]inlineButton `json:"inline_keyboard"`
}

// inlineButton is an InlineKeyboardButton that sends a callback query.
type inlineButton struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

// startKeyboard is what the start of an alarm carries, and carries again
// once an acknowledgement is taken back: Acknowledge, and the two shelves.
func startKeyboard(originID string) *inlineKeyboard {
	ref := notify.AlarmRef(originID)
	return &inlineKeyboard{InlineKeyboard: [][]inlineButton{
		{{Text: "Acknowledge", CallbackData: dataAck + ref}},
		{{Text: "Shelve 1h", CallbackData: dataShelve1h + ref}, {Text: "Shelve until cleared", CallbackData: dataShelveEnd + ref}},
	}}
}

// ackedKeyboard is what an acknowledged alarm's message carries: a way to
// take the acknowledgement back.
func ackedKeyboard(originID string) *inlineKeyboard {
	return &inlineKeyboard{InlineKeyboard: [][]inlineButton{{{Text: "Unacknowledge", CallbackData: dataUnack + notify.AlarmRef(originID)}}}}
}

// digestKeyboard is what a digest carries while some of its alarms are
// ongoing: one button that acknowledges them all. A digest whose id does
// not fit a button's data gets none.
func digestKeyboard(dg *notify.Digest) *inlineKeyboard {
	data := dataDigestAck + dg.ID
	if dg.ID == "" || len(data) > MaxCallbackData {
		return nil
	}
	for _, it := range dg.Items {
		if it.Outcome == "" {
			return &inlineKeyboard{InlineKeyboard: [][]inlineButton{{{Text: "Acknowledge all", CallbackData: data}}}}
		}
	}
	return nil
}

// parseCallback reads a button's callback_data into the action it asks
// for; false for data no button of relay carries.
func parseCallback(data string) (notify.Action, bool) {
	for _, p := range []struct {
		prefix string
		kind   notify.ActionKind
		shelve time.Duration
	}{
		{dataAck, notify.Acknowledge, 0},
		{dataUnack, notify.Unacknowledge, 0},
		{dataShelve1h, notify.Shelve, time.Hour},
		{dataShelveEnd, notify.Shelve, 0},
	} {
		if ref, ok := strings.CutPrefix(data, p.prefix); ok && ref != "" {
			return notify.Action{Kind: p.kind, Alarms: []string{ref}, ShelveFor: p.shelve}, true
		}
	}
	if id, ok := strings.CutPrefix(data, dataDigestAck); ok && id != "" {
		return notify.Action{Kind: notify.Acknowledge, Digest: id}, true
	}
	return notify.Action{}, false
}

// ackLine is the plain-text line an ack or unack event adds under the
// start's text: "Acknowledged by alice at 08:02 UTC — on my way", or
// "Acknowledgement withdrawn by alice at 08:10 UTC".
func ackLine(ev *event.Event) string {
	a := ev.Data.Ack
	if a == nil {
		a = &event.AckInfo{}
	}
	who := strings.TrimSpace(a.Name)
	if who == "" {
		who = strings.TrimSpace(a.By)
	}
	if who == "" {
		who = "someone"
	}
	line := "Acknowledged by " + who
	if ev.Data.Transition == event.Unack {
		line = "Acknowledgement withdrawn by " + who
	}
	if t, err := time.Parse(time.RFC3339Nano, a.At); err == nil {
		line += " at " + t.UTC().Format("15:04 UTC")
	}
	if c := strings.Join(strings.Fields(a.Comment), " "); c != "" && ev.Data.Transition == event.Ack {
		line += " — " + c
	}
	return line
}

// ackHTML is the line as the message shows it, marked.
func ackHTML(ev *event.Event, line string) string {
	mark := "✅ "
	if ev.Data.Transition == event.Unack {
		mark = "↩️ "
	}
	return mark + Escape(line)
}

// asStart returns the start event of the alarm an ack or unack event is
// about, as the start's message was rendered from: the alarm's facts are
// those of the ack event, which alarm management builds from the alarm.
func asStart(ev *event.Event) *event.Event {
	s := *ev
	s.Data.Transition, s.Data.Status = event.Start, event.Start.Status()
	s.Type, s.ID = event.Start.Type(), event.ID(ev.Data.OriginID, event.Start)
	s.Data.Ack = nil
	s.Time = ev.Data.OccurredAt
	return &s
}
