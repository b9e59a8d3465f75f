package console

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/termtext"
)

// digestStations and digestUrgent bound how many station lines and urgent
// alarms a digest's block names; every alarm is listed after it anyway.
const (
	digestStations = 10
	digestUrgent   = 5
)

// CanDigest reports that a console sink can show storm digests: a block of
// lines for the digest, a line for each change of its counts, and an
// indented line per alarm.
func (s *Sink) CanDigest() bool { return true }

// PostDigest writes the digest as a block of lines, such as
//
//	2026-11-21T08:00:00Z DIGEST Alarm storm: 12 alarms since 08:00 UTC, 12 ongoing  (digest 20261121T080000Z-1)
//	  urgent 2 (2 ongoing), severe 3 (3 ongoing), major 3 (3 ongoing), minor 4 (4 ongoing)
//	  North Park: 5 minor (5 ongoing)
//	  most urgent, still ongoing:
//	    URGENT E1023 Grid overvoltage at North Park / SN0001, since 2026-11-21 08:00:00 UTC
//	  every alarm is listed below. Per-alarm messages resume when fewer than 10 alarms start in 1m.
//
// The console keeps no message to edit, so the memory it returns only names
// the digest.
func (s *Sink) PostDigest(_ context.Context, dg *notify.Digest) (map[string]string, notify.Result, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s DIGEST %s  (digest %s)\n", dg.Opened.UTC().Format(time.RFC3339), sinktype.DigestTitle(dg), termtext.Escape(dg.ID))
	fmt.Fprintf(&b, "  %s\n", sinktype.DigestLevels(dg))
	for _, line := range sinktype.DigestStations(dg, digestStations, termtext.Escape) {
		fmt.Fprintf(&b, "  %s\n", line)
	}
	if urgent := dg.Urgent(digestUrgent); len(urgent) > 0 {
		b.WriteString("  most urgent, still ongoing:\n")
		for i := range urgent {
			fmt.Fprintf(&b, "    %s\n", sinktype.DigestLine(&urgent[i], termtext.Escape))
		}
	}
	b.WriteString("  every alarm is listed below")
	if resume := sinktype.DigestResume(dg); resume != "" {
		b.WriteString(". " + resume)
	}
	b.WriteString("\n")
	if res, err := s.write(dg, "the digest", b.String()); err != nil {
		return nil, res, err
	}
	return map[string]string{"digest": dg.ID}, notify.Result{}, nil
}

// UpdateDigest writes one line with the digest's counts as they stand,
// stamped with its latest start or end:
//
//	2026-11-21T08:03:10Z DIGEST Alarm storm: 12 alarms since 08:00 UTC, 9 ongoing: urgent 2 (1 ongoing), ...  (digest 20261121T080000Z-1)
func (s *Sink) UpdateDigest(_ context.Context, dg *notify.Digest, _ map[string]string) (notify.Result, error) {
	line := fmt.Sprintf("%s DIGEST %s: %s  (digest %s)\n", latestChange(dg).UTC().Format(time.RFC3339), sinktype.DigestTitle(dg),
		sinktype.DigestLevels(dg), termtext.Escape(dg.ID))
	return s.write(dg, "the digest's counts", line)
}

// ListDigest writes one line per item, indented under the digest's block
// with "  - ", saying how the alarm ended when it did ("..., resolved at
// 2026-11-21 08:03:10 UTC").
func (s *Sink) ListDigest(_ context.Context, dg *notify.Digest, _ map[string]string, items []notify.DigestItem) (notify.Result, error) {
	var b strings.Builder
	for i := range items {
		fmt.Fprintf(&b, "  - %s\n", sinktype.DigestLine(&items[i], termtext.Escape))
	}
	return s.write(dg, "the digest's list", b.String())
}

// write writes text, what of the digest, as writeText does.
func (s *Sink) write(dg *notify.Digest, what, text string) (notify.Result, error) {
	return s.writeText(text, what+" of digest "+dg.ID)
}

// latestChange is the time of the digest's latest start or end, or when it
// opened if that is later.
func latestChange(dg *notify.Digest) time.Time {
	t := dg.Opened
	for _, it := range dg.Items {
		if it.OccurredAt.After(t) {
			t = it.OccurredAt
		}
		if it.RecoveredAt.After(t) {
			t = it.RecoveredAt
		}
	}
	return t
}
