// Package store is relay's memory: one bbolt file holding what is known of
// every alarm (keyed originId/status), the watermarks of the poller, an
// ordered outbox per sink, per-alarm sink memory (such as the Slack message a
// recovery must thread under) and dead letters, and beside it a record log
// holding the upstream records of ongoing alarms and the journal's strings.
// Everything one poll result causes is written in one transaction, so a
// crash loses nothing and repeats nothing (docs/design.md §5).
package store

import (
	"errors"
	"log/slog"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/plant"
	"github.com/relay-energy/relay/internal/tracing"
)

// ErrLocked is returned by Open when another process holds the store file
// past the lock timeout.
var ErrLocked = errors.New("dedupe: store file is locked by another process")

// ErrNotPending is returned by Delivered, DeliveredBatch and DeadLetter when
// the entry is no longer in its outbox (it was already delivered or
// dead-lettered) or its sequence number holds another event.
var ErrNotPending = errors.New("entry is not pending")

// Bootstrap says what the first complete snapshot on an empty store does with
// the alarms that are already ongoing.
type Bootstrap string

// The bootstrap modes of RELAY_BOOTSTRAP.
const (
	// BootstrapNotify emits a start for every alarm ongoing at the first run.
	BootstrapNotify Bootstrap = "notify"
	// BootstrapRecord stores them silently; only later transitions are sent.
	BootstrapRecord Bootstrap = "record"
)

// Options configure a Store. Zero values take the defaults.
type Options struct {
	// LockTimeout bounds the wait for another process's lock (default 5s).
	LockTimeout time.Duration
	// Bootstrap is the first-run mode (default BootstrapNotify).
	Bootstrap Bootstrap
	// Retention is how long ended alarms are kept (default 2160h).
	Retention time.Duration
	// Clock tells the time (default the real clock).
	Clock clock.Clock
	// Backend keeps the state durable: the local file (nil or Bolt(), the
	// default) or JetStream, which the local file then caches.
	Backend Backend
	// CompactFloor is the garbage the record log must hold, besides more
	// than its live bytes, before Prune compacts it (default
	// DefaultCompactFloor).
	CompactFloor int64
	// EndsByRules turns the delivery ledger off, giving back what relay did
	// before it: an alarm's end and invalid are routed by the rules in
	// force instead of to the sinks its start went to, and sent whatever
	// became of the start (no parking beside a dead start, no drop after a
	// dropped one); a replay refuses nothing and moves the waiting entries
	// of its alarms behind the replayed dead letters; a rename leaves dead
	// letters under the old name, and a removed sink's entries wait in its
	// outbox. It exists for tests that prove the ledger matters (the
	// whole-relay simulation); a relay never sets it.
	EndsByRules bool
	// Plant switches on faults for the whole-relay simulation's proof that
	// its invariants catch them (internal/plant); nil everywhere else.
	Plant plant.Set
	// DeadLetterLimit bounds the dead letters one sink holds (default
	// DefaultDeadLetterLimit). Past it, the dead letters of the alarm whose
	// dead letter is the sink's oldest are discarded together, a start with
	// the entries parked beside it, and each discard is recorded: in the
	// sink's suppressed log (without the body), in DroppedCounts
	// (DropDeadLetterLimit) and in a warning to Logger.
	DeadLetterLimit int
	// Logger receives the store's warnings; nil discards them.
	Logger *slog.Logger
	// Tracer, when on, starts the trace of every transition Apply records
	// (a root span and a "store commit" child) and writes its trace context
	// into the event before it is stored; nil records none.
	Tracer *tracing.Tracer
}

// Router returns the names of the sinks an event is delivered to. The store
// calls it inside Apply, once per produced event.
type Router func(ev *event.Event) []string

// Batch is everything one poll result says, applied in one transaction.
type Batch struct {
	// Observed are alarm records as read upstream, with status 1, 0 or -1.
	Observed []event.Alarm
	// Inferred are ends of known ongoing alarms whose recovered record was
	// never found within the confirm timeout.
	Inferred []Inferred
	// CompleteCurrent says Observed holds a complete current snapshot. The
	// first one applied to an empty store ends the bootstrap.
	CompleteCurrent bool
	// FirstContact says Observed are what the upstream listed as recovered
	// at relay's first contact with it: an alarm among them that the store
	// has never seen is history, recorded without events whatever its
	// stamps say (docs/design.md §5, "History").
	FirstContact bool
	// HistoryBefore, when set, makes an unknown alarm that recovered before
	// it history too: the rule of stores written before first contacts
	// existed, whose history was what recovered before their first run.
	HistoryBefore time.Time
	// FirstListing says Observed are pages of the first snapshot of the
	// ongoing alarms read to its end since the store was created: with
	// BootstrapRecord, until a CompleteCurrent batch was applied, an alarm
	// first seen ongoing in such a batch was ongoing at the first run and is
	// recorded without a start, whatever its stamp says.
	FirstListing bool
	// DetectedAt is when the poll that produced the batch was answered.
	DetectedAt time.Time
	// Marks are named watermarks (such as "sweep") stored with the batch.
	Marks map[string]time.Time
}

// Inferred is the inferred end of an ongoing alarm that vanished at At.
type Inferred struct {
	OriginID string
	At       time.Time
}

// Result is what Apply produced.
type Result struct {
	// Events are the transitions produced, in the order they were produced
	// (for one alarm, start before end).
	Events []event.Event
	// Enqueued is how many outbox entries were written.
	Enqueued int
	// Ignored says, one line each, which observed records and inferred ends
	// changed nothing because they could not be used: a record without
	// originId or with a status other than 1, 0 and -1, an inferred end of an
	// alarm the store does not know. The caller should log them.
	Ignored []string
}

// Tracked is what the store knows of one alarm.
type Tracked struct {
	OriginID  string
	DeviceSN  string
	StationID string
	Level     int
	// Status is 1 while the alarm is ongoing, then the status of its first
	// terminal transition: 0 ended, -1 invalid. A later conflicting terminal
	// record is kept but changes neither the status nor the events.
	Status     int
	OccurredAt time.Time
	// RecoveredAt is zero while the alarm is ongoing. For an inferred end it
	// is the vanish time until the real recovery record is found.
	RecoveredAt time.Time
	// FirstSeen is the detection time of the first record of the alarm.
	FirstSeen time.Time
	// LastSeen is the detection time of the latest record of the alarm, to
	// within LastSeenResolution: an unchanged record is written back at most
	// that often, so that a poll that changes nothing writes nothing.
	LastSeen time.Time
}

// LastSeenResolution is how stale Tracked.LastSeen (and the stored upstream
// record of an ongoing alarm) may be. A record whose level changed is written
// at once.
const LastSeenResolution = 10 * time.Minute

// Entry is one event waiting in one sink's outbox.
type Entry struct {
	Sink       string
	Seq        uint64
	EventID    string
	OriginID   string
	Transition event.Transition
	Level      int
	// Body is the event's JSON, the exact bytes every sink sends. It may be
	// shared with other entries of the event: it must not be modified.
	Body       []byte
	EnqueuedAt time.Time
}

// DeadLetter is an outbox entry that was given up on.
type DeadLetter struct {
	Entry
	Reason string
	At     time.Time
}
