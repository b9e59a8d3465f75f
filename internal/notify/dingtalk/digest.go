package dingtalk

import (
	"fmt"
	"strings"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// A robot can neither edit a message nor reply in a thread, so a storm
// digest is Markdown messages that stand on their own: the first holds the
// counts and the most urgent alarms (and the sink's mentions); the alarms
// follow in messages of up to sinktype.DigestListSize lines, each headed by
// the digest's counts as they stand, and so do the alarms that end. The
// robot's 20 messages a minute hold for digests too: each message waits its
// turn, and one whose turn comes after the attempt's deadline ends the
// attempt, to be retried where the list left off.

// Digest is the digest's first message: its headline, the counts per level
// and per station, the most urgent alarms still ongoing, and the sink's
// mentions; it lists no alarm in full.
func (o *options) Digest(dg *notify.Digest) ([]byte, int, error) {
	body, err := markdownBody(digestTitle(dg), digestText(dg), o.at)
	return body, 0, err
}

// List is a message of items, one Markdown list line each, under the
// digest's counts as they stand, mentioning no one.
func (o *options) List(dg *notify.Digest, items []notify.DigestItem) ([]byte, error) {
	text := sinktype.DigestListText(items, Escape, MaxText, func(lines []string) string { return listText(dg, items, lines) })
	return markdownBody(digestTitle(dg), text, At{})
}

// digestTitle is the line a digest's messages show in the conversation
// list and notifications.
func digestTitle(dg *notify.Digest) string {
	return sinktype.DigestIcon(dg) + " " + sinktype.DigestTitle(dg)
}

// digestText is the Markdown of the digest's first message.
func digestText(dg *notify.Digest) string {
	sum := sinktype.Summarize(dg, Escape)
	var b strings.Builder
	b.WriteString("### " + digestTitle(dg) + "\n\n" + sum.Levels + "\n\n" + sinktype.Bulleted(sum.Stations, "- ", "\n"))
	if len(sum.Urgent) > 0 {
		b.WriteString("\n**Most urgent, still ongoing:**\n\n" + sinktype.Bulleted(sinktype.DigestMarked(sum.UrgentItems, sum.Urgent), "- ", "\n"))
	}
	b.WriteString("\n" + strings.TrimSpace(fmt.Sprintf("Every alarm follows in messages of up to %d. %s", sinktype.DigestListSize, sinktype.DigestResume(dg))))
	return b.String()
}

// listText is the Markdown of a list message: the digest's counts as they
// stand, then lines, each marked by its item's level or outcome.
func listText(dg *notify.Digest, items []notify.DigestItem, lines []string) string {
	return "#### " + digestTitle(dg) + "\n\n" + sinktype.DigestLevels(dg) + "\n\n" + sinktype.DigestListHead(dg, items) + ":\n\n" +
		sinktype.Bulleted(sinktype.DigestMarked(items, lines), "- ", "\n")
}
