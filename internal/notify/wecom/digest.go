package wecom

import (
	"fmt"
	"strings"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// A group robot can neither edit a message nor reply in a thread, so a
// storm digest is Markdown messages that stand on their own: the first
// holds the counts and the most urgent alarms (and the sink's mentions);
// the alarms follow in messages of up to sinktype.DigestListSize lines,
// each headed by the digest's counts as they stand, and so do the alarms
// that end. Each message keeps within MaxContent: a list cuts the names in
// its lines rather than lose a line. The robot's 20 messages a minute hold
// for digests too: each message waits its turn, and one whose turn comes
// after the attempt's deadline ends the attempt, to be retried where the
// list left off.

// Digest is the digest's first message: its headline, the counts per level
// and per station, the most urgent alarms still ongoing, and the sink's
// mentions; it lists no alarm in full.
func (o *options) Digest(dg *notify.Digest) ([]byte, int, error) {
	body, err := markdownBody(digestText(dg), o.mentions)
	return body, 0, err
}

// List is a message of items, one line each, under the digest's counts as
// they stand, mentioning no one.
func (o *options) List(dg *notify.Digest, items []notify.DigestItem) ([]byte, error) {
	return markdownBody(sinktype.DigestListText(items, Escape, MaxContent, func(lines []string) string { return listText(dg, items, lines) }), nil)
}

// digestText is the Markdown of the digest's first message.
func digestText(dg *notify.Digest) string {
	sum := sinktype.Summarize(dg, Escape)
	var b strings.Builder
	b.WriteString("### " + sinktype.DigestIcon(dg) + " " + sinktype.DigestTitle(dg) + "\n" + sum.Levels + "\n" + sinktype.Bulleted(sum.Stations, ">", "\n"))
	if len(sum.Urgent) > 0 {
		b.WriteString("**Most urgent, still ongoing:**\n")
		for i, line := range sum.Urgent {
			fmt.Fprintf(&b, "%s <font color=\"%s\">%s</font>\n", sinktype.DigestMark(&sum.UrgentItems[i]), levelColor(sum.UrgentItems[i].Level), line)
		}
	}
	fmt.Fprintf(&b, "<font color=\"comment\">%s</font>", strings.TrimSpace(fmt.Sprintf("Every alarm follows in messages of up to %d. %s", sinktype.DigestListSize, sinktype.DigestResume(dg))))
	return b.String()
}

// listText is the Markdown of a list message: the digest's counts as they
// stand, then lines, each marked by its item's level or outcome.
func listText(dg *notify.Digest, items []notify.DigestItem, lines []string) string {
	head := "#### " + sinktype.DigestIcon(dg) + " " + sinktype.DigestTitle(dg) + "\n" + sinktype.DigestLevels(dg) + "\n" + sinktype.DigestListHead(dg, items) + ":\n"
	return strings.TrimRight(head+sinktype.Bulleted(sinktype.DigestMarked(items, lines), "", "\n"), "\n")
}
