package deliver

import (
	"context"
	"time"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/store"
)

// Gate is alarm management as a delivery loop sees it (docs/design.md §8,
// "Alarm management"): just before an entry would be sent, the gate says
// whether it goes out as it is, waits (a hold-down), is withheld from people
// (a silence, a maintenance window, inhibition, chattering), or joins the
// storm digest of its sink. A loop asks about the first entry of an alarm
// only: the later entries of an alarm wait for the earlier ones, so that an
// end never overtakes its start.
type Gate interface {
	// Manages reports whether the gate may decide anything but "send" for
	// sink under the rules in force; a loop does not ask about the entries
	// of a sink it does not manage (the bus), which keeps their pipeline as
	// fast as without a gate.
	Manages(sink string) bool
	// Decide returns the verdict on d for sink. A loop may ask again about
	// the same entry (after time passed, or while gathering a run): what
	// Decide writes of its own must leave the same verdict then. What only
	// the entry's settlement may change goes in Verdict.KV. An error (the
	// store failing) is retried with backoff.
	Decide(ctx context.Context, sink string, d *notify.Delivery) (Verdict, error)
	// Digest sends ds, entries Decide gave Verdict.Digest, through sink's
	// digest, in one attempt, and returns the memory each keeps and the
	// values to write with them; on failure, Result says whether to retry,
	// as Send's does.
	Digest(ctx context.Context, sink notify.Sink, ds []notify.Delivery) (DigestOutcome, notify.Result, error)
}

// RunGate is a Gate that decides on the entries of a run at once: as many
// calls of Decide would, in order, each seeing what the earlier ones wrote,
// but with what they write of their own written once. A loop gathering a run
// of hundreds of entries then pays one commit instead of one per entry.
type RunGate interface {
	Gate
	// DecideRun returns the verdicts on ds for sink, in order. It may stop
	// after the first verdict that does not send its entry as it is: the
	// loop decides on the entries after it again. On an error it returns
	// the verdicts of the entries before the one that failed, whose writes
	// are kept.
	DecideRun(ctx context.Context, sink string, ds []*notify.Delivery) ([]Verdict, error)
}

// DigestOutcome is what a successful Gate.Digest leaves: for each delivery
// the sink's memory of its alarm (nil keeps the memory as it was), and the
// state of the digest to keep.
type DigestOutcome struct {
	Memory []map[string]string
	KV     []store.KV
}

// Verdict is a Gate's decision on one entry. The zero Verdict sends the
// entry as it is.
type Verdict struct {
	// Until, when after now, leaves the entry and every later entry of its
	// alarm waiting until then, while the loop goes on with other alarms.
	Until time.Time
	// Suppress, when set, withholds the entry from the sink with this
	// reason (hold, silence, maintenance, muted, inhibited, chattering): it
	// leaves the outbox into the sink's suppressed log, counted in
	// relay_suppressed_total{sink,reason}.
	Suppress string
	// Digest hands the entry to Gate.Digest instead of the sink's Send.
	Digest bool
	// Note, when set, is shown with the event by chat sinks (a chattering
	// count, a reminder).
	Note string
	// AckCommand, when set, is the command that acknowledges the alarm,
	// shown by sinks without buttons (event.Data.AckCommand).
	AckCommand string
	// Memory is stored as the sink's memory of the alarm when the entry is
	// suppressed, or delivered by a sink that keeps no memory of its own
	// (nil: leave it).
	Memory map[string]string
	// KV are written in the transaction that settles the entry.
	KV []store.KV
}

// plain reports whether v sends the entry as it is, now.
func (v *Verdict) plain(now time.Time) bool {
	return !v.Until.After(now) && v.Suppress == "" && !v.Digest
}
