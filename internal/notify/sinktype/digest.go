package sinktype

import (
	"fmt"
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
