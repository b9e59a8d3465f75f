package wecom

import (
	"context"
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

// CanDigest reports that a wecom sink can show storm digests.
func (s *Sink) CanDigest() bool { return true }

// PostDigest posts the digest's message: its headline, the counts per level
// and per station, the most urgent alarms still ongoing, and the sink's
// mentions.
func (s *Sink) PostDigest(ctx context.Context, dg *notify.Digest) (map[string]string, notify.Result, error) {
	what := fmt.Sprintf("wecom sink %q: post of digest %s", s.cfg.Name, dg.ID)
	body, err := markdownBody(digestText(dg), s.cfg.Mentions)
	if err != nil {
		return nil, notify.Result{}, fmt.Errorf("%s: %w", what, err)
	}
	if res, err := s.post(ctx, what, body); err != nil {
		return nil, res, err
	}
	return sinktype.DigestShown(0, nil), notify.Result{}, nil
}

// UpdateDigest posts nothing: a robot cannot edit the digest's message, and
// the counts as they stand head each message ListDigest posts for the
// alarms that joined or ended, so that a retry never posts the same counts
// twice and the robot's 20 a minute go to the alarms.
func (s *Sink) UpdateDigest(context.Context, *notify.Digest, map[string]string) (notify.Result, error) {
	return notify.Result{}, nil
}

// ListDigest posts items, one line each, under the digest's counts as they
// stand.
func (s *Sink) ListDigest(ctx context.Context, dg *notify.Digest, _ map[string]string, items []notify.DigestItem) (notify.Result, error) {
	if len(items) == 0 {
		return notify.Result{}, nil
	}
	what := fmt.Sprintf("wecom sink %q: post of digest %s list", s.cfg.Name, dg.ID)
	var text string
	sinktype.DigestLines(items, Escape, func(lines []string) bool {
		text = listText(dg, items, lines)
		return len(text) <= MaxContent
	})
	body, err := markdownBody(text, nil)
	if err != nil {
		return notify.Result{}, fmt.Errorf("%s: %w", what, err)
	}
	return s.post(ctx, what, body)
}

// digestText is the Markdown of the digest's first message.
func digestText(dg *notify.Digest) string {
	sum := sinktype.Summarize(dg, Escape)
	var b strings.Builder
	b.WriteString("### " + sinktype.DigestIcon(dg) + " " + sinktype.DigestTitle(dg) + "\n" + sum.Levels + "\n")
	for _, line := range sum.Stations {
		b.WriteString(">" + line + "\n")
	}
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
	var b strings.Builder
	b.WriteString("#### " + sinktype.DigestIcon(dg) + " " + sinktype.DigestTitle(dg) + "\n" + sinktype.DigestLevels(dg) + "\n" + sinktype.DigestListHead(dg, items) + ":\n")
	for i, line := range lines {
		b.WriteString(sinktype.DigestMark(&items[i]) + " " + line + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}
