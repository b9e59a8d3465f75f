package feishu

import (
	"fmt"
	"strings"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// A custom bot can neither edit a card nor reply in a thread, so a storm
// digest is cards that stand on their own: the first holds the counts, the
// most urgent alarms and, in a collapsible_panel (closed at first), every
// alarm it can hold within MaxBody; each later card, posted when alarms
// join the digest or end, holds the digest's counts as they stand and, in
// the same kind of panel, the alarms that joined or ended. Feishu and Lark
// clients older than 7.9 show a panel as a prompt to upgrade.

// Digest is the digest's card: its headline, coloured by its most urgent
// ongoing level, the counts per level and per station, the most urgent
// alarms still ongoing, and as many of its alarms as fit in a collapsible
// panel.
func (cards) Digest(dg *notify.Digest) ([]byte, int, error) {
	n := sinktype.DigestFit(len(dg.Items), func(k int) bool { return fits(digestCard(dg, k)) })
	body, err := encode(digestCard(dg, n))
	return body, n, err
}

// List is a card with the digest's counts as they stand and, in a
// collapsible panel, items.
func (cards) List(dg *notify.Digest, items []notify.DigestItem) ([]byte, error) {
	var msg message
	sinktype.DigestLines(items, Escape, func(lines []string) bool {
		msg = listCard(dg, items, lines)
		return fits(msg)
	})
	return encode(msg)
}

// fits reports whether msg, once signed, stays within MaxBody.
func fits(msg message) bool {
	b, err := encode(msg)
	return err == nil && len(b) <= MaxBody-signRoom
}

// digestCard is the digest's first card, listing its first n alarms.
func digestCard(dg *notify.Digest, n int) message {
	sum := sinktype.Summarize(dg, Escape)
	var b strings.Builder
	b.WriteString(sum.Levels + sinktype.Bulleted(sum.Stations, "\n- ", ""))
	if len(sum.Urgent) > 0 {
		b.WriteString("\n**Most urgent, still ongoing:**" + sinktype.Bulleted(sinktype.DigestMarked(sum.UrgentItems, sum.Urgent), "\n", ""))
	}
	b.WriteString("\n" + sinktype.DigestFolded(dg, n, "in the panel below"))
	elements := []element{{Tag: "div", Text: &cardText{Tag: "lark_md", Content: b.String()}}}
	if n > 0 {
		items := dg.Items[:n]
		lines := make([]string, n)
		for i := range items {
			lines[i] = sinktype.DigestLine(&items[i], Escape)
		}
		elements = append(elements, panel(fmt.Sprintf("Show the %d alarms", n), items, lines))
	}
	return cardOf(dg, elements)
}

// listCard is a later card of the digest: its counts as they stand, and
// items, worded as lines, in a collapsible panel.
func listCard(dg *notify.Digest, items []notify.DigestItem, lines []string) message {
	text := sinktype.DigestLevels(dg) + "\n" + sinktype.DigestListHead(dg, items) + ", listed in the panel below."
	return cardOf(dg, []element{
		{Tag: "div", Text: &cardText{Tag: "lark_md", Content: text}},
		panel(fmt.Sprintf("Show the %d alarms", len(items)), items, lines),
	})
}

// cardOf is an interactive card headed by the digest's title.
func cardOf(dg *notify.Digest, elements []element) message {
	return message{MsgType: "interactive", Card: card{
		Config:   cardConfig{WideScreenMode: true},
		Header:   header{Template: digestTemplate(dg), Title: cardText{Tag: "plain_text", Content: sinktype.DigestIcon(dg) + " " + sinktype.DigestTitle(dg)}},
		Elements: elements,
	}}
}

// panel is a collapsible panel titled title holding lines, each marked by
// its item's level or outcome.
func panel(title string, items []notify.DigestItem, lines []string) element {
	marked := sinktype.DigestMarked(items, lines)
	return element{
		Tag:      "collapsible_panel",
		Header:   &panelHeader{Title: cardText{Tag: "plain_text", Content: title}},
		Elements: []element{{Tag: "div", Text: &cardText{Tag: "lark_md", Content: strings.Join(marked, "\n")}}},
	}
}

// digestTemplate is the colour of the digest's header: that of its most
// urgent alarm still ongoing, green when none is.
func digestTemplate(dg *notify.Digest) string {
	urgent := dg.Urgent(1)
	if len(urgent) == 0 {
		return "green"
	}
	return Template(urgent[0].Event())
}
