package sinktype

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
)

// DigestListSize is how many alarms one list message of a digest names:
// small enough for every vendor's size limit at MaxValue bytes a value.
const DigestListSize = 25

// DigestTitle is the headline of a storm digest: "Alarm storm: 412 alarms
// since 08:00 UTC, 380 ongoing".
func DigestTitle(dg *notify.Digest) string {
	if dg.Title != "" {
		return dg.Title
	}
	return fmt.Sprintf("Alarm storm: %d alarms since %s, %d ongoing", len(dg.Items),
		dg.Opened.UTC().Format("15:04 MST"), dg.Ongoing())
}

// DigestLevels says how many alarms of each level the digest holds, urgent
// first: "urgent 12 (10 ongoing), severe 40 (40 ongoing)".
func DigestLevels(dg *notify.Digest) string {
	started, ongoing := dg.Levels()
	var parts []string
	for l := 0; l <= 3; l++ {
		if started[l] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d (%d ongoing)", event.LevelName(l), started[l], ongoing[l]))
		}
	}
	for l, n := range started {
		if l < 0 || l > 3 {
			parts = append(parts, fmt.Sprintf("%s %d (%d ongoing)", event.LevelName(l), n, ongoing[l]))
		}
	}
	return strings.Join(parts, ", ")
}

// DigestStations says, one line per station and level, how many alarms the
// digest holds there, at most n lines and a last one counting the rest.
func DigestStations(dg *notify.Digest, n int, escape func(string) string) []string {
	counts := dg.Counts()
	var out []string
	for i, c := range counts {
		if i == n {
			out = append(out, fmt.Sprintf("… and %d more stations and levels", len(counts)-n))
			break
		}
		station := Truncate(FirstNonEmpty(c.StationName, c.StationID), MaxValue)
		out = append(out, fmt.Sprintf("%s: %d %s (%d ongoing)", escape(station), c.Started, event.LevelName(c.Level), c.Ongoing))
	}
	return out
}

// DigestLine is one alarm of a digest: "URGENT E021 Grid over-voltage at
// North Park / Inverter 42, since 2026-11-21 08:00:00 UTC", or how it ended.
func DigestLine(it *notify.DigestItem, escape func(string) string) string {
	ev := it.Event()
	line := fmt.Sprintf("%s %s at %s, since %s", strings.ToUpper(event.LevelName(it.Level)), escape(What(ev)),
		escape(Where(ev)), it.OccurredAt.UTC().Format(time.DateTime+" MST"))
	switch it.Outcome {
	case event.End:
		line += ", resolved"
	case event.Invalid:
		line += ", cancelled"
	}
	if !it.RecoveredAt.IsZero() {
		line += " at " + it.RecoveredAt.UTC().Format(time.DateTime+" MST")
	}
	return line
}

// MemoryDigestShown is the key of a digest's memory that says how many of
// its alarms, from the first, its first message lists in full (in a
// collapsible section of a card, in a mail's body), so that ListDigest does
// not post them again.
const MemoryDigestShown = "shown"

// DigestShown returns the memory of a digest whose first message lists its
// first n alarms, with the sink's own keys of more. It is never empty: the
// engine takes a digest without memory for one not posted yet.
func DigestShown(n int, more map[string]string) map[string]string {
	out := map[string]string{MemoryDigestShown: strconv.Itoa(n)}
	maps.Copy(out, more)
	return out
}

// DigestUnshown returns those of items that dg's first message does not
// already show as they stand: the alarms that joined after it, and those it
// showed ongoing that have ended since. ListDigest of a sink that lists
// alarms in its first message posts only these.
func DigestUnshown(dg *notify.Digest, memory map[string]string, items []notify.DigestItem) []notify.DigestItem {
	n, _ := strconv.Atoi(memory[MemoryDigestShown])
	shown := make(map[string]bool, n)
	for _, it := range dg.Items[:min(max(n, 0), len(dg.Items))] {
		shown[it.OriginID] = true
	}
	var out []notify.DigestItem
	for _, it := range items {
		if !shown[it.OriginID] || it.Outcome != "" {
			out = append(out, it)
		}
	}
	return out
}

// DigestSummary is what the first message of a digest says under its title,
// in a channel's markup (each upstream value escaped): the counts per
// level, per station and level, and the most urgent alarms still ongoing.
type DigestSummary struct {
	// Levels is DigestLevels.
	Levels string
	// Stations are DigestStations, at most 10 lines and one counting the
	// rest.
	Stations []string
	// Urgent are the DigestLine of up to 5 alarms of Digest.Urgent, which
	// UrgentItems holds.
	Urgent      []string
	UrgentItems []notify.DigestItem
}

// Summarize returns the summary of dg with escape applied to each upstream
// value.
func Summarize(dg *notify.Digest, escape func(string) string) DigestSummary {
	s := DigestSummary{Levels: DigestLevels(dg), Stations: DigestStations(dg, 10, escape)}
	s.UrgentItems = dg.Urgent(5)
	for i := range s.UrgentItems {
		s.Urgent = append(s.Urgent, DigestLine(&s.UrgentItems[i], escape))
	}
	return s
}

// DigestMark is Mark of the item: a circle by level while it is ongoing,
// then how it ended.
func DigestMark(it *notify.DigestItem) string { return Mark(it.Event()) }

// DigestMarked returns each of lines, the lines of items, after its item's
// DigestMark.
func DigestMarked(items []notify.DigestItem, lines []string) []string {
	out := make([]string, len(lines))
	for i, line := range lines {
		out[i] = DigestMark(&items[i]) + " " + line
	}
	return out
}

// DigestList returns the DigestLine of each of items, escaped with escape,
// after its DigestMark.
func DigestList(items []notify.DigestItem, escape func(string) string) []string {
	lines := make([]string, len(items))
	for i := range items {
		lines[i] = DigestLine(&items[i], escape)
	}
	return DigestMarked(items, lines)
}

// Bulleted returns lines, each between before and after: a list in a
// channel's markup, such as "- " and "\n" in Markdown.
func Bulleted(lines []string, before, after string) string {
	var b strings.Builder
	for _, line := range lines {
		b.WriteString(before + line + after)
	}
	return b.String()
}

// DigestStorm reports whether dg is a storm digest, not one with a title
// of its own (the daily summary of stale alarms).
func DigestStorm(dg *notify.Digest) bool { return dg.Title == "" }

// DigestIcon is the mark a digest's headline starts with: 🚨 for a storm,
// 🕒 for the daily summary.
func DigestIcon(dg *notify.Digest) string {
	if DigestStorm(dg) {
		return "🚨"
	}
	return "🕒"
}

// DigestResume says when per-alarm messages come back after a storm: "Per-alarm
// messages resume when fewer than 10 alarms start in 10m."; "" for a digest
// that is no storm.
func DigestResume(dg *notify.Digest) string {
	if !DigestStorm(dg) || dg.Threshold <= 0 {
		return ""
	}
	return fmt.Sprintf("Per-alarm messages resume when fewer than %d alarms start in %s.", dg.Threshold, HumanDuration(dg.Window))
}

// DigestListHead says what one list message of dg holds, for channels whose
// list messages stand on their own: "25 alarms of this storm: 15 ongoing,
// 10 ended" (without "of this storm" for a digest that is no storm).
func DigestListHead(dg *notify.Digest, items []notify.DigestItem) string {
	ended := 0
	for _, it := range items {
		if it.Outcome != "" {
			ended++
		}
	}
	noun := "alarms"
	if len(items) == 1 {
		noun = "alarm"
	}
	if DigestStorm(dg) {
		noun += " of this storm"
	}
	switch {
	case ended == 0:
		return fmt.Sprintf("%d %s, ongoing", len(items), noun)
	case ended == len(items):
		return fmt.Sprintf("%d %s ended", len(items), noun)
	}
	return fmt.Sprintf("%d %s: %d ongoing, %d ended", len(items), noun, len(items)-ended, ended)
}

// digestCuts are the bounds, in bytes, that DigestLines tries on the
// upstream values of a line: on the description and the station, and on
// the device and the code, which tell the alarms apart and are cut last.
var digestCuts = []struct{ other, device int }{
	{MaxValue, MaxValue}, {128, 128}, {64, 96}, {40, 64}, {24, 48}, {16, 32}, {8, 16},
}

// DigestLines returns the DigestLine of each item, escaped with escape,
// with its upstream values cut to the largest bounds that fits accepts, so
// that a list message stays within its vendor's size limit whatever the
// names; at the smallest bounds the lines are returned whether fits
// accepts them or not.
func DigestLines(items []notify.DigestItem, escape func(string) string, fits func(lines []string) bool) []string {
	var lines []string
	for _, c := range digestCuts {
		lines = make([]string, len(items))
		for i, it := range items {
			it.EventDesc, it.StationName, it.StationID = Truncate(it.EventDesc, c.other), Truncate(it.StationName, c.other), Truncate(it.StationID, c.other)
			it.EventCode, it.DeviceName, it.DeviceSN = Truncate(it.EventCode, c.device), Truncate(it.DeviceName, c.device), Truncate(it.DeviceSN, c.device)
			lines[i] = DigestLine(&it, escape)
		}
		if fits(lines) {
			break
		}
	}
	return lines
}

// DigestListText returns text of the DigestLines of items, their values
// cut until it is at most max bytes, for a list message of a vendor's size
// limit.
func DigestListText(items []notify.DigestItem, escape func(string) string, max int, text func(lines []string) string) string {
	var out string
	DigestLines(items, escape, func(lines []string) bool {
		out = text(lines)
		return len(out) <= max
	})
	return out
}

// DigestFolded says where the first message of dg, which lists its first n
// alarms folded away (where: "in the panel below"), lists them and where
// the others are, then DigestResume.
func DigestFolded(dg *notify.Digest, n int, where string) string {
	listed := "Every alarm is listed " + where + "."
	switch {
	case n == 0:
		listed = "The alarms are listed in the cards that follow."
	case n < len(dg.Items):
		listed = fmt.Sprintf("The first %d alarms are listed %s, the others in the cards that follow.", n, where)
	}
	return strings.TrimSpace(listed + " " + DigestResume(dg))
}

// DigestFit returns the largest k ≤ n for which fits(k) holds, fits being
// true up to some k and false after it; 0 when fits(1) is false. Sinks
// that list a digest's alarms in its first message use it to list as many
// as their vendor's size limit takes.
func DigestFit(n int, fits func(k int) bool) int {
	if fits(n) {
		return n
	}
	lo, hi := 0, n // fits(lo) holds or lo is 0; fits(hi) does not
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
