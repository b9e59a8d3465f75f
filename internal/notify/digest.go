package notify

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// Digester is a sink that can show a storm digest (docs/design.md §8, "Alarm
// management"): one message standing for many alarms, the full list
// reachable from it, kept up to date as they end. Alarm management calls
// these instead of Send for the entries it digests; each makes one attempt,
// as Send does, and says with Result whether a failure is worth retrying.
type Digester interface {
	Sink
	// CanDigest reports whether this sink, as configured, can show digests
	// (a Slack sink can with its bot token, not with an incoming webhook).
	CanDigest() bool
	// PostDigest posts dg as a new message and returns the sink's memory
	// of it (such as the message's ts), which the other calls are given.
	PostDigest(ctx context.Context, dg *Digest) (map[string]string, Result, error)
	// UpdateDigest shows dg as it now stands: an edit of the message where
	// the channel can. A channel that cannot edit may post nothing here
	// and head each ListDigest message with the counts instead: a
	// follow-up posted here would be posted again each time a later list
	// fails and the digest is retried.
	UpdateDigest(ctx context.Context, dg *Digest, memory map[string]string) (Result, error)
	// ListDigest posts items, alarms of dg that started or ended since the
	// last list, where the message's readers find them: a thread reply
	// where the channel has threads.
	ListDigest(ctx context.Context, dg *Digest, memory map[string]string, items []DigestItem) (Result, error)
}

// Digest is a storm digest: the alarms of one sink that started while it
// was open, and what became of them. The daily summary of stale alarms is a
// digest too, with a Title of its own.
type Digest struct {
	// ID is unique per sink.
	ID string `json:"id"`
	// Title, when set, is the digest's headline instead of the storm's
	// (the daily summary of stale alarms).
	Title string `json:"title,omitempty"`
	// Opened is when the digest was opened; starts join it until Until.
	Opened time.Time `json:"opened"`
	Until  time.Time `json:"until"`
	// Threshold and Window are the flood threshold that opened it.
	Threshold int           `json:"threshold"`
	Window    time.Duration `json:"window"`
	// Items are its alarms, in the order they joined.
	Items []DigestItem `json:"items"`
}

// DigestItem is one alarm of a digest.
type DigestItem struct {
	OriginID    string    `json:"origin_id"`
	Level       int       `json:"level"`
	StationID   string    `json:"station_id,omitempty"`
	StationName string    `json:"station_name,omitempty"`
	DeviceSN    string    `json:"device_sn,omitempty"`
	DeviceName  string    `json:"device_name,omitempty"`
	EventCode   string    `json:"event_code,omitempty"`
	EventDesc   string    `json:"event_desc,omitempty"`
	OccurredAt  time.Time `json:"occurred_at"`
	// Note is what alarm management said of its start (a chattering
	// count).
	Note string `json:"note,omitempty"`
	// Outcome is "" while the alarm is ongoing, then its terminal
	// transition (end or invalid).
	Outcome     event.Transition `json:"outcome,omitempty"`
	RecoveredAt time.Time        `json:"recovered_at,omitzero"`
}

// NewDigestItem returns the item of ev's alarm.
func NewDigestItem(ev *event.Event) DigestItem {
	d := &ev.Data
	it := DigestItem{
		OriginID: d.OriginID, Level: d.Level, StationID: d.StationID, StationName: d.StationName,
		DeviceSN: d.DeviceSN, DeviceName: d.DeviceName, EventCode: d.EventCode, EventDesc: d.EventDesc,
		OccurredAt: parseTime(d.OccurredAt), Note: d.Note,
	}
	if d.Transition != event.Start {
		it.Outcome, it.RecoveredAt = d.Transition, parseTime(d.RecoveredAt)
	}
	return it
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// Event returns a start event of the item's alarm with the fields the
// sinks' texts show (names, codes, level), or its end when it is over.
func (it *DigestItem) Event() *event.Event {
	tr := event.Start
	if it.Outcome != "" {
		tr = it.Outcome
	}
	return &event.Event{Data: event.Data{
		Transition: tr, Level: it.Level, LevelName: event.LevelName(it.Level), OriginID: it.OriginID,
		EventCode: it.EventCode, EventDesc: it.EventDesc, StationID: it.StationID, StationName: it.StationName,
		DeviceSN: it.DeviceSN, DeviceName: it.DeviceName, Note: it.Note,
	}}
}

// DigestCount is how many alarms of a digest one station has at one level.
type DigestCount struct {
	StationID, StationName string
	Level                  int
	Started, Ongoing       int
}

// Counts returns the digest's alarms counted per station and level, the
// stations with most alarms first, urgent levels first within a station.
func (dg *Digest) Counts() []DigestCount {
	type key struct {
		station string
		level   int
	}
	idx := map[key]int{}
	var out []DigestCount
	perStation := map[string]int{}
	for _, it := range dg.Items {
		k := key{it.StationID, it.Level}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, DigestCount{StationID: it.StationID, StationName: it.StationName, Level: it.Level})
		}
		out[i].Started++
		if it.Outcome == "" {
			out[i].Ongoing++
		}
		perStation[it.StationID]++
	}
	slices.SortStableFunc(out, func(a, b DigestCount) int {
		return cmp.Or(-cmp.Compare(perStation[a.StationID], perStation[b.StationID]), cmp.Compare(a.StationID, b.StationID),
			cmp.Compare(a.Level, b.Level))
	})
	return out
}

// Ongoing counts the digest's alarms still ongoing.
func (dg *Digest) Ongoing() int {
	n := 0
	for _, it := range dg.Items {
		if it.Outcome == "" {
			n++
		}
	}
	return n
}

// Levels counts the digest's alarms per level, ongoing and all.
func (dg *Digest) Levels() (started, ongoing map[int]int) {
	started, ongoing = map[int]int{}, map[int]int{}
	for _, it := range dg.Items {
		started[it.Level]++
		if it.Outcome == "" {
			ongoing[it.Level]++
		}
	}
	return started, ongoing
}

// Urgent returns up to n of the digest's most urgent alarms still ongoing:
// by level, then in the order they joined.
func (dg *Digest) Urgent(n int) []DigestItem {
	var out []DigestItem
	for _, it := range dg.Items {
		if it.Outcome == "" {
			out = append(out, it)
		}
	}
	slices.SortStableFunc(out, func(a, b DigestItem) int { return cmp.Compare(a.Level, b.Level) })
	return out[:min(n, len(out))]
}

// Reminder is a sink that can remind people of an alarm still ongoing in the
// place its start went (a reply in the start's thread). Alarm management
// calls Remind from its own goroutine, beside the sink's delivery loop, so it
// must be safe alongside Send; like Send, it makes one attempt.
type Reminder interface {
	Sink
	// Remind reminds of ev's alarm, whose start the sink remembers as
	// memory; ev.Data.Note says for how long it has been ongoing.
	Remind(ctx context.Context, ev *event.Event, memory map[string]string) (Result, error)
}

// MemorylessReminder is a Reminder whose starts leave no memory (a channel
// without threads, where a reminder is a message of its own). Alarm
// management reminds such a sink of an alarm it holds no memory of, counting
// the first repeat from the end of the start's hold-down, and still never of
// one whose start was withheld or digested (which leaves a memory of why).
type MemorylessReminder interface {
	Reminder
	// KeepsNoMemory reports that the sink's starts leave no memory, so that
	// a missing memory does not mean the start never reached it.
	KeepsNoMemory() bool
}
