package email

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// Limits of what a message holds. RFC 5322 §2.1.1 bounds a header line at
// 998 characters; a subject past 200 bytes is cut long before any client
// shows it. Bodies come from the defaults or from templates, whose output
// is bounded at 64 KiB.
const (
	maxSubject = 200
	maxBody    = 64 << 10
)

// message is one mail as the sink composes it, before MIME encoding: Send
// writes it with go-mail, Render shows it.
type message struct {
	// Subject is the decoded subject.
	Subject string
	// ID is the Message-ID, with its angle brackets.
	ID string
	// Parent is the Message-ID of the start this message follows (for an
	// end or an invalid), written as In-Reply-To and References; "" for a
	// start.
	Parent string
	// Date is the Date header.
	Date time.Time
	// Plain and HTML are the two alternative bodies.
	Plain, HTML string
}

// composer composes the messages of one sink.
type composer struct {
	from    *mail.Address
	to, cc  []*mail.Address
	message *sinktype.Message
	// seed makes the Message-IDs of this sink's messages its own.
	seed string
}

func newComposer(from *mail.Address, to, cc []*mail.Address, m *sinktype.Message) *composer {
	c := &composer{from: from, to: to, cc: cc, message: m}
	c.seed = idSeed(from, to, cc)
	return c
}

// idSeed is the hash that sets the Message-IDs of a sink apart from those
// of another sink sending the same alarm: a hash of the sender and the
// sorted recipients. It is not the sink's name, which relay route --render
// does not know and a rename changes; two sinks that send the same alarm
// from the same address to the same people send the same mail, and may
// share its Message-ID.
func idSeed(from *mail.Address, to, cc []*mail.Address) string {
	var rcpts []string
	for _, a := range slices.Concat(to, cc) {
		rcpts = append(rcpts, strings.ToLower(a.Address))
	}
	slices.Sort(rcpts)
	sum := sha256.Sum256([]byte(strings.ToLower(from.Address) + "\x00" + strings.Join(rcpts, "\x00")))
	return hex.EncodeToString(sum[:6])
}

// messageID returns the Message-ID of the mail about transition tr of the
// alarm origin: "<origin.start.<seed>@<the sender's domain>>". It is the
// same on every attempt, so that a mail sent twice (a retry after an answer
// that was lost) is one message to the clients, and an end can refer to its
// start without having stored anything.
func (c *composer) messageID(origin string, tr event.Transition) string {
	_, domain, _ := strings.Cut(c.from.Address, "@")
	return "<" + idLocal(origin) + "." + string(tr) + "." + c.seed + "@" + domain + ">"
}

// idLocal is origin as the start of a Message-ID's left part (RFC 5322
// §3.6.4, dot-atom-text), or a hash of it when it holds other characters.
func idLocal(origin string) string {
	ok := origin != "" && len(origin) <= 64
	for _, r := range origin {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			ok = false
		}
	}
	if ok {
		return origin
	}
	sum := sha256.Sum256([]byte(origin))
	return "h" + hex.EncodeToString(sum[:12])
}

// validID reports whether id looks like a Message-ID that can go into a
// header as it is: "<left@right>" in printable ASCII without spaces.
func validID(id string) bool {
	if len(id) < 5 || len(id) > 250 || id[0] != '<' || id[len(id)-1] != '>' || !strings.Contains(id, "@") {
		return false
	}
	for _, r := range id[1 : len(id)-1] {
		if r <= ' ' || r > '~' || r == '<' || r == '>' {
			return false
		}
	}
	return true
}

// compose returns the mail about ev, dated date. parent is the Message-ID
// of the start for an end or an invalid. When a template fails, the default
// stands in for it and the error says which failed: the mail is complete
// either way.
//
// The subject of an end is the start's prefixed by "Re: ": Gmail threads
// only mails whose subjects match but for such a prefix, and every client
// threads by In-Reply-To and References. The outcome (Resolved, Cancelled)
// opens the body.
func (c *composer) compose(ev *event.Event, parent string, date time.Time) (message, error) {
	def := sinktype.Text{Title: defaultSubject(ev), Body: defaultPlain(ev)}
	text, err := c.message.Render(ev, def)
	m := message{
		ID:      c.messageID(ev.Data.OriginID, ev.Data.Transition),
		Parent:  parent,
		Date:    date,
		Subject: sinktype.PlainLine(text.Title),
		Plain:   sinktype.Truncate(text.Body, maxBody),
	}
	if ev.Data.Transition != event.Start && !hasReplyPrefix(m.Subject) {
		m.Subject = "Re: " + m.Subject
	}
	m.Subject = sinktype.Truncate(m.Subject, maxSubject)
	custom := ""
	if text.Body != def.Body {
		custom = m.Plain
		// The default text ends with the acknowledge line already; a
		// template's text gets it after it.
		if line := sinktype.AckLine(ev); line != "" {
			m.Plain = strings.TrimRight(m.Plain, "\n") + "\n\n" + line + "\n"
		}
	}
	m.HTML = htmlBody(ev, custom)
	return m, err
}

// reminder composes the reminder of ev's alarm, whose start's mail is
// parent: under the start's subject after "Re: " (rendered without the
// note, as the start was), the note and the alarm's facts. The error, when
// not nil, says which template failed on the start's subject.
func (c *composer) reminder(ev *event.Event, parent string, date time.Time) (message, error) {
	start := *ev
	start.Data.Note = ""
	text, err := c.message.Render(&start, sinktype.Text{Title: defaultSubject(&start), Body: defaultPlain(&start)})
	subject := sinktype.PlainLine(text.Title)
	if !hasReplyPrefix(subject) {
		subject = "Re: " + subject
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s at %s is still ongoing.\n\n", ev.Data.Note, sinktype.What(&start), sinktype.Where(ev))
	width := 0
	fields := sinktype.Fields(&start)
	for _, f := range fields {
		width = max(width, len(f[0]))
	}
	for _, f := range fields {
		fmt.Fprintf(&b, "%-*s  %s\n", width+1, f[0]+":", f[1])
	}
	writeAckLine(&b, ev)
	b.WriteString("\n-- \nSent by relay, in reply to the alarm's start. When the alarm ends, a reply in this thread says so.\n")
	sum := sha256.Sum256([]byte(ev.Data.Note))
	return message{
		ID:      c.messageID(ev.Data.OriginID, event.Transition("remind-"+hex.EncodeToString(sum[:6]))),
		Parent:  parent,
		Date:    date,
		Subject: sinktype.Truncate(subject, maxSubject),
		Plain:   sinktype.Truncate(b.String(), maxBody),
		HTML:    htmlBody(ev, ""),
	}, err
}

// defaultSubject is "[SEVERE] E1023 Grid overvoltage at Station / Device".
func defaultSubject(ev *event.Event) string {
	return fmt.Sprintf("[%s] %s at %s", strings.ToUpper(ev.Data.LevelName), sinktype.What(ev), sinktype.Where(ev))
}

// defaultPlain is the headline and the alarm's facts, one per line.
func defaultPlain(ev *event.Event) string {
	var b strings.Builder
	b.WriteString(sinktype.Headline(ev) + "\n\n")
	width := 0
	fields := sinktype.Fields(ev)
	for _, f := range fields {
		width = max(width, len(f[0]))
	}
	for _, f := range fields {
		fmt.Fprintf(&b, "%-*s  %s\n", width+1, f[0]+":", f[1])
	}
	writeAckLine(&b, ev)
	if ev.Data.Transition == event.Start {
		b.WriteString("\n-- \nSent by relay. When the alarm ends, a reply in this thread says so.\n")
	} else {
		b.WriteString("\n-- \nSent by relay. This closes the alarm's thread.\n")
	}
	return b.String()
}

// writeAckLine writes, after a blank line, the acknowledge line of a start
// people can acknowledge (sinktype.AckLine): a mail carries no buttons.
// It is the last line of the text, before the signature, which some
// clients fold away.
func writeAckLine(b *strings.Builder, ev *event.Event) {
	if line := sinktype.AckLine(ev); line != "" {
		b.WriteString("\n" + line + "\n")
	}
}

func hasReplyPrefix(s string) bool {
	return len(s) >= 3 && strings.EqualFold(s[:3], "re:")
}

// Colours of the level badge, from urgent (0) to minor (3), and of the
// outcome badge.
var (
	levelColours = []string{"#b71c1c", "#e65100", "#a86400", "#1565c0"}
	outcomeColor = map[event.Transition]string{event.End: "#2e7d32", event.Invalid: "#616161"}
)

func badge(text, colour string) string {
	return `<span style="display:inline-block;padding:2px 8px;border-radius:3px;background:` + colour +
		`;color:#ffffff;font-weight:bold;font-size:12px;letter-spacing:0.5px">` + html.EscapeString(text) + `</span>`
}

// htmlBody is the HTML alternative: the level badge (and the outcome's), the
// alarm, custom (the rendered text template, "" for the default) and a table
// of the alarm's facts. Every upstream value is escaped.
func htmlBody(ev *event.Event, custom string) string {
	colour := "#616161"
	if l := ev.Data.Level; l >= 0 && l < len(levelColours) {
		colour = levelColours[l]
	}
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><body style=\"font-family:Arial,Helvetica,sans-serif;font-size:14px;color:#202124\">\n<p>")
	b.WriteString(badge(strings.ToUpper(ev.Data.LevelName), colour))
	if out := sinktype.Outcome(ev); out != "" {
		b.WriteString(" " + badge(out, outcomeColor[ev.Data.Transition]))
	}
	b.WriteString("</p>\n")
	fmt.Fprintf(&b, "<p style=\"font-size:16px\"><b>%s</b> at %s</p>\n", html.EscapeString(sinktype.What(ev)), html.EscapeString(sinktype.Where(ev)))
	if custom != "" {
		fmt.Fprintf(&b, "<div style=\"white-space:pre-wrap\">%s</div>\n", html.EscapeString(custom))
	}
	b.WriteString("<table style=\"border-collapse:collapse\">\n")
	for _, f := range sinktype.Fields(ev) {
		fmt.Fprintf(&b, "<tr><th style=\"text-align:left;padding:2px 16px 2px 0;color:#5f6368;font-weight:normal\">%s</th><td style=\"padding:2px 0\">%s</td></tr>\n",
			html.EscapeString(f[0]), html.EscapeString(f[1]))
	}
	b.WriteString("</table>\n")
	if line := sinktype.AckLine(ev); line != "" {
		fmt.Fprintf(&b, "<p style=\"font-family:Menlo,Consolas,monospace\">%s</p>\n", html.EscapeString(line))
	}
	b.WriteString("<p style=\"color:#5f6368;font-size:12px\">Sent by relay.</p>\n</body></html>\n")
	return b.String()
}

// readable writes m as Render shows it: the headers that matter and both
// bodies, in place of the MIME message, whose part boundaries go-mail draws
// at random and whose bodies are quoted-printable.
func (c *composer) readable(m message) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "From: %s\n", c.from)
	fmt.Fprintf(&b, "To: %s\n", addrList(c.to))
	if len(c.cc) > 0 {
		fmt.Fprintf(&b, "Cc: %s\n", addrList(c.cc))
	}
	fmt.Fprintf(&b, "Subject: %s\n", m.Subject)
	fmt.Fprintf(&b, "Date: %s\n", m.Date.Format(time.RFC1123Z))
	fmt.Fprintf(&b, "Message-ID: %s\n", m.ID)
	if m.Parent != "" {
		fmt.Fprintf(&b, "In-Reply-To: %s\nReferences: %s\n", m.Parent, m.Parent)
	}
	b.WriteString("Auto-Submitted: auto-generated\n")
	b.WriteString("Content-Type: multipart/alternative (text/plain, text/html; UTF-8, quoted-printable)\n")
	b.WriteString("\n--- text/plain\n" + m.Plain)
	if !strings.HasSuffix(m.Plain, "\n") {
		b.WriteString("\n")
	}
	b.WriteString("--- text/html\n" + m.HTML)
	return []byte(b.String())
}

func addrList(as []*mail.Address) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}
