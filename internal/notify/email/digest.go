package email

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"
	"slices"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// A mail cannot be edited, but replies thread under it: a storm digest is
// one mail with the counts, the most urgent alarms and every alarm it had
// when sent, then mails in reply to it (In-Reply-To and References, the
// subject after "Re: ") that list the alarms that joined it or ended, each
// headed by the digest's counts as they stand. Every Message-ID is derived
// from the digest (and a reply's from the alarms it lists), so that a mail
// sent twice after a lost answer is one message to the clients.

// CanDigest reports that an email sink can show storm digests.
func (s *Sink) CanDigest() bool { return true }

// PostDigest mails the digest: the counts per level and per station, the
// most urgent alarms still ongoing and every alarm it holds, in plain text
// and HTML, under a subject that names the storm by when it began (its
// replies repeat it after "Re: ", as Gmail threads them, so it holds no
// count that would be stale there). Its Message-ID and how many alarms it
// lists are the digest's memory.
func (s *Sink) PostDigest(ctx context.Context, dg *notify.Digest) (map[string]string, notify.Result, error) {
	what := fmt.Sprintf("email sink %q: mail of digest %s to %s via %s", s.cfg.Name, dg.ID, addrList(slices.Concat(s.cfg.To, s.cfg.Cc)), s.cfg.Addr)
	n := sinktype.DigestFit(len(dg.Items), func(k int) bool { return len(digestPlain(dg, k)) <= maxBody })
	m := message{
		ID:      s.composer.digestID(dg.ID, ""),
		Subject: digestSubject(dg),
		Plain:   digestPlain(dg, n),
		HTML:    digestHTML(dg, n),
	}
	res, err := s.mail(ctx, what, func(now time.Time) message { m.Date = now; return m }, "digest", dg.ID)
	if err != nil {
		return nil, res, s.secrets.Error(err)
	}
	return sinktype.DigestShown(n, map[string]string{MemoryMessageID: m.ID}), notify.Result{}, nil
}

// UpdateDigest sends nothing: a mail cannot be edited, and the counts as
// they stand head each reply ListDigest sends for the alarms that joined
// or ended, so that a retry never mails the same counts twice.
func (s *Sink) UpdateDigest(context.Context, *notify.Digest, map[string]string) (notify.Result, error) {
	return notify.Result{}, nil
}

// ListDigest mails, in reply to the digest, the digest's counts as they
// stand and those of items its mail does not already list; nothing when it
// lists them all.
func (s *Sink) ListDigest(ctx context.Context, dg *notify.Digest, memory map[string]string, items []notify.DigestItem) (notify.Result, error) {
	parent := memory[MemoryMessageID]
	if !validID(parent) {
		return notify.Result{}, fmt.Errorf("email sink %q: digest %s has no mail to reply to", s.cfg.Name, dg.ID)
	}
	items = sinktype.DigestUnshown(dg, memory, items)
	if len(items) == 0 {
		return notify.Result{}, nil
	}
	what := fmt.Sprintf("email sink %q: mail of digest %s list to %s via %s", s.cfg.Name, dg.ID, addrList(slices.Concat(s.cfg.To, s.cfg.Cc)), s.cfg.Addr)
	lines := sinktype.DigestList(items, noEscape)
	m := message{
		ID:      s.composer.digestID(dg.ID, listKey(items)),
		Parent:  parent,
		Subject: "Re: " + digestSubject(dg),
		Plain: sinktype.DigestTitle(dg) + "\n" + sinktype.DigestLevels(dg) + "\n\n" + sinktype.DigestListHead(dg, items) + ":\n\n" +
			"  " + strings.Join(lines, "\n  ") + "\n\n-- \nSent by relay, in reply to the storm digest.\n",
		HTML: htmlPage(htmlHead(dg) + "<p>" + html.EscapeString(sinktype.DigestListHead(dg, items)) + ":</p>\n" + htmlList(items) +
			"<p style=\"color:#5f6368;font-size:12px\">Sent by relay, in reply to the storm digest.</p>\n"),
	}
	res, err := s.mail(ctx, what, func(now time.Time) message { m.Date = now; return m }, "digest", dg.ID)
	return res, s.secrets.Error(err)
}

// digestSubject is the subject of a digest's mail: "[STORM] Alarm storm
// since 2026-11-21 08:00 UTC", or the title of a digest that is no storm.
func digestSubject(dg *notify.Digest) string {
	if !sinktype.DigestStorm(dg) {
		return sinktype.Truncate(sinktype.PlainLine(dg.Title), maxSubject)
	}
	return "[STORM] Alarm storm since " + dg.Opened.UTC().Format("2006-01-02 15:04 MST")
}

// digestFooter closes a digest's mail.
func digestFooter(dg *notify.Digest) string {
	if !sinktype.DigestStorm(dg) {
		return "Sent by relay."
	}
	return "Sent by relay. Replies in this thread list the alarms that join the storm or end. " + sinktype.DigestResume(dg)
}

// digestID returns the Message-ID of the mail of digest id, or of the
// reply listing the alarms of key: "<digest.<id>[.<key>].<seed>@<the
// sender's domain>>".
func (c *composer) digestID(id, key string) string {
	_, domain, _ := strings.Cut(c.from.Address, "@")
	left := "digest." + idLocal(id)
	if key != "" {
		left += "." + key
	}
	return "<" + left + "." + c.seed + "@" + domain + ">"
}

// listKey tells a reply's alarms, as they stand, from those of another.
func listKey(items []notify.DigestItem) string {
	h := sha256.New()
	for _, it := range items {
		fmt.Fprintf(h, "%s\x00%s\x00", it.OriginID, it.Outcome)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func noEscape(s string) string { return s }

// digestPlain is the digest mail's plain text, listing its first n alarms.
func digestPlain(dg *notify.Digest, n int) string {
	sum := sinktype.Summarize(dg, noEscape)
	var b strings.Builder
	b.WriteString(sinktype.DigestTitle(dg) + "\n\n" + sum.Levels + "\n\nPer station:\n" + sinktype.Bulleted(sum.Stations, "  ", "\n"))
	if len(sum.Urgent) > 0 {
		b.WriteString("\nMost urgent, still ongoing:\n" + sinktype.Bulleted(sinktype.DigestMarked(sum.UrgentItems, sum.Urgent), "  ", "\n"))
	}
	b.WriteString("\n" + listedHead(dg, n) + "\n" + sinktype.Bulleted(sinktype.DigestList(dg.Items[:n], noEscape), "  ", "\n"))
	b.WriteString("\n-- \n" + digestFooter(dg) + "\n")
	return b.String()
}

// listedHead says which alarms the digest mail lists.
func listedHead(dg *notify.Digest, n int) string {
	if n < len(dg.Items) {
		return fmt.Sprintf("The first %d of its %d alarms (the others follow in replies):", n, len(dg.Items))
	}
	return fmt.Sprintf("All %d alarms:", n)
}

// digestHTML is the digest mail's HTML, listing its first n alarms.
func digestHTML(dg *notify.Digest, n int) string {
	sum := sinktype.Summarize(dg, html.EscapeString)
	var b strings.Builder
	b.WriteString(htmlHead(dg) + "<p>Per station:</p>\n<ul>\n" + sinktype.Bulleted(sum.Stations, "<li>", "</li>\n") + "</ul>\n")
	if len(sum.Urgent) > 0 {
		b.WriteString("<p><b>Most urgent, still ongoing:</b></p>\n" + htmlList(sum.UrgentItems))
	}
	b.WriteString("<p>" + html.EscapeString(listedHead(dg, n)) + "</p>\n" + htmlList(dg.Items[:n]))
	b.WriteString("<p style=\"color:#5f6368;font-size:12px\">" + html.EscapeString(digestFooter(dg)) + "</p>\n")
	return htmlPage(b.String())
}

// htmlHead is the digest's headline with a badge coloured by its most
// urgent ongoing level, and its counts per level.
func htmlHead(dg *notify.Digest) string {
	colour := outcomeColor[event.End]
	if urgent := dg.Urgent(1); len(urgent) > 0 && urgent[0].Level >= 0 && urgent[0].Level < len(levelColours) {
		colour = levelColours[urgent[0].Level]
	}
	return "<p>" + badge("STORM", colour) + "</p>\n<p style=\"font-size:16px\"><b>" + html.EscapeString(sinktype.DigestTitle(dg)) +
		"</b></p>\n<p>" + html.EscapeString(sinktype.DigestLevels(dg)) + "</p>\n"
}

// htmlList is items as a list, each marked by its level or outcome.
func htmlList(items []notify.DigestItem) string {
	return "<ul>\n" + sinktype.Bulleted(sinktype.DigestList(items, html.EscapeString), "<li>", "</li>\n") + "</ul>\n"
}

func htmlPage(body string) string {
	return "<!DOCTYPE html>\n<html><body style=\"font-family:Arial,Helvetica,sans-serif;font-size:14px;color:#202124\">\n" + body + "</body></html>\n"
}
