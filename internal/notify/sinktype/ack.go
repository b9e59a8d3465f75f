package sinktype

import (
	"strings"

	"github.com/relay-energy/relay/internal/event"
)

// AckLine is the line that ends the message of a start people can
// acknowledge in a channel without buttons (a webhook robot, email, the
// console): "To acknowledge: relay ack 9f8e7d… --by <you>", from the
// command alarm management put in ev (event.Data.AckCommand). It is "" for
// an event that carries no command and for anything but a start, so that a
// message without one is as it always was. The line is plain text: each
// channel escapes it for its markup like any value it substitutes.
func AckLine(ev *event.Event) string {
	cmd := OneLine(ev.Data.AckCommand)
	if cmd == "" || ev.Data.Transition != event.Start {
		return ""
	}
	return "To acknowledge: " + Truncate(cmd, MaxValue)
}

// EndWithAckLine makes Render end the text of every start that carries an
// acknowledge command with its AckLine, escaped as the text template's
// values are, after sep (the markup's paragraph break): after the default
// text and after a text template alike, since a channel without buttons
// offers no other way to acknowledge. A chat whose messages carry buttons
// does not call it.
func (m *Message) EndWithAckLine(sep string) {
	if m != nil {
		m.ackSep = sep
	}
}

// endWithAck returns body ended with ev's AckLine after the separator
// EndWithAckLine set, or body as it is.
func (m *Message) endWithAck(ev *event.Event, body string) string {
	line := AckLine(ev)
	if m == nil || m.ackSep == "" || line == "" {
		return body
	}
	if strings.TrimSpace(body) == "" {
		return m.escapeText(line)
	}
	return strings.TrimRight(body, "\n") + m.ackSep + m.escapeText(line)
}
