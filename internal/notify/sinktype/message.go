package sinktype

import (
	"errors"
	"fmt"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/tmpl"
)

// Message is the optional title and text templates of a chat sink: Go
// text/templates over the same fields as NATS subjects (event.View), bounded
// as they are. A sink renders each message with its own default where a
// template is unset, and where one fails on an event: the event is sent with
// the default text, never dropped.
type Message struct {
	title, text             *tmpl.Template
	escapeTitle, escapeText func(string) string
	// ackSep, set by EndWithAckLine, ends the text of a start that people
	// can acknowledge with its AckLine after it.
	ackSep string
}

// Text is what a chat message says: a title (a card's header, a mail's
// subject) and a body.
type Text struct {
	Title, Body string
}

// Message reads the title and text keys of a chat sink. escape is applied
// to every value the templates substitute, so that an upstream name cannot
// break the channel's markup (nil substitutes values as they are). Each
// template is tried on sample events and refused at its line if it fails.
func (d *Decoder) Message(escape func(string) string) *Message {
	return d.MessageEscapes(escape, escape)
}

// MessageEscapes is Message for channels whose title is not written in the
// text's markup (a notification line, a mail subject): each template's
// values are escaped with its own function (nil for none).
func (d *Decoder) MessageEscapes(title, text func(string) string) *Message {
	none := func(s string) string { return s }
	if title == nil {
		title = none
	}
	if text == nil {
		text = none
	}
	m := &Message{escapeTitle: title, escapeText: text}
	m.title = d.template("title", m.escapeTitle)
	m.text = d.template("text", m.escapeText)
	return m
}

func (d *Decoder) template(key string, escape func(string) string) *tmpl.Template {
	text := d.String(key)
	if text == "" {
		return nil
	}
	t, err := tmpl.Parse(key, text)
	if err != nil {
		d.Errorf(key, "bad template: %v", err)
		return nil
	}
	for _, sample := range event.Samples() {
		if _, err := t.Execute(sample.MappedView(escape, true)); err != nil {
			d.Errorf(key, "bad template: on a sample %s event: %v", sample.Data.Transition, err)
			return nil
		}
	}
	return t
}

// Render returns the message of ev: each template that is set, rendered, and
// def's title or body for each that is not, the body ended with the
// acknowledge line where EndWithAckLine asks for it. When a template fails
// on ev, def stands in for it and the error says which failed and why.
func (m *Message) Render(ev *event.Event, def Text) (Text, error) {
	out, err := m.render(ev, def)
	out.Body = m.endWithAck(ev, out.Body)
	return out, err
}

// render is Render but for the acknowledge line.
func (m *Message) render(ev *event.Event, def Text) (Text, error) {
	if m == nil || (m.title == nil && m.text == nil) {
		return def, nil
	}
	out := def
	var errs []error
	if m.title != nil {
		if s, err := m.title.Execute(ev.MappedView(m.escapeTitle, true)); err != nil {
			errs = append(errs, fmt.Errorf("title template: %w", err))
		} else {
			out.Title = s
			if ev.Data.Note != "" {
				// A note of alarm management (a reminder, a chattering
				// count) leads the title as it leads the default one.
				out.Title = m.escapeTitle(ev.Data.Note) + ": " + s
			}
		}
	}
	if m.text != nil {
		if s, err := m.text.Execute(ev.MappedView(m.escapeText, true)); err != nil {
			errs = append(errs, fmt.Errorf("text template: %w", err))
		} else {
			out.Body = s
		}
	}
	return out, errors.Join(errs...)
}

// Templated reports whether a title or text template is set.
func (m *Message) Templated() bool { return m != nil && (m.title != nil || m.text != nil) }

// MessageOptions are the option docs of title and text, for Type.Options.
func MessageOptions(title, text string) []Option {
	return []Option{
		{Key: "title", Doc: "Go template of the " + title + " over the fields of subjects (default: the level, the alarm and the place)"},
		{Key: "text", Doc: "Go template of the " + text + " (default: level, alarm, station, device, since when, and for an end how long it lasted)"},
	}
}
