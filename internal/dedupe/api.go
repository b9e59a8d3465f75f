// Package dedupe is relay's memory: one bbolt file holding what is known of
// every alarm (keyed originId/status), the watermarks of the poller, an
// ordered outbox per sink, per-alarm sink memory (such as the Slack message a
// recovery must thread under) and dead letters. Everything one poll result
// causes is written in one transaction, so a crash loses nothing and repeats
// nothing (DESIGN.md section 5).
package dedupe

import (
	"context"
	"errors"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
)

// ErrLocked is returned by Open when another process holds the store file
// past the lock timeout.
var ErrLocked = errors.New("dedupe: store file is locked by another process")

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
}

// Tracked is what the store knows of one alarm.
type Tracked struct {
	OriginID   string
	DeviceSN   string
	StationID  string
	Level      int
	Status     int // the latest status recorded: 1 ongoing, 0 ended, -1 invalid
	OccurredAt time.Time
	// RecoveredAt is zero while the alarm is ongoing.
	RecoveredAt time.Time
	FirstSeen   time.Time
	LastSeen    time.Time
}

// Entry is one event waiting in one sink's outbox.
type Entry struct {
	Sink       string
	Seq        uint64
	EventID    string
	OriginID   string
	Transition event.Transition
	Level      int
	// Body is the event's JSON, the exact bytes every sink sends.
	Body       []byte
	EnqueuedAt time.Time
}

// DeadLetter is an outbox entry that was given up on.
type DeadLetter struct {
	Entry
	Reason string
	At     time.Time
}

// Store is the bbolt-backed state of one relay. It is safe for concurrent use.
type Store struct{}

// Open opens or creates the store file at path. A file held by another
// process yields ErrLocked after opts.LockTimeout.
func Open(path string, opts Options) (*Store, error) { panic("dedupe: not built yet") }

// Close closes the file; pending outbox entries stay for the next Open.
func (s *Store) Close() error { panic("dedupe: not built yet") }

// Apply records one poll result: new alarm records, the events their
// originId/status pairs produce (an end or invalid with no start yet produces
// the start first), the outbox entries route names for each event, and the
// batch's watermarks, all in one transaction.
func (s *Store) Apply(ctx context.Context, b Batch, route Router) (Result, error) {
	panic("dedupe: not built yet")
}

// Ongoing returns the alarms whose start was recorded and whose end or
// invalid was not.
func (s *Store) Ongoing() ([]Tracked, error) { panic("dedupe: not built yet") }

// Alarm returns what the store knows of one alarm.
func (s *Store) Alarm(originID string) (Tracked, bool, error) { panic("dedupe: not built yet") }

// Mark returns the watermark stored under name.
func (s *Store) Mark(name string) (time.Time, bool, error) { panic("dedupe: not built yet") }

// FirstRun returns when this store was first opened; alarms that ended
// before it are history and produce no events.
func (s *Store) FirstRun() time.Time { panic("dedupe: not built yet") }

// Bootstrapped reports whether a complete current snapshot has been applied.
func (s *Store) Bootstrapped() bool { panic("dedupe: not built yet") }

// Prune drops alarms that ended longer than the retention ago, returning how
// many it dropped.
func (s *Store) Prune(ctx context.Context) (int, error) { panic("dedupe: not built yet") }

// Pending returns up to limit entries of sink's outbox, oldest first.
func (s *Store) Pending(sink string, limit int) ([]Entry, error) { panic("dedupe: not built yet") }

// Delivered removes e from its outbox and, in the same transaction, stores
// memory (when not nil) as the sink's memory of e's alarm.
func (s *Store) Delivered(e Entry, memory map[string]string) error {
	panic("dedupe: not built yet")
}

// DeadLetter moves e from its outbox to the sink's dead letters with reason.
func (s *Store) DeadLetter(e Entry, reason string) error { panic("dedupe: not built yet") }

// DeadLetters returns the dead letters of sink, oldest first.
func (s *Store) DeadLetters(sink string) ([]DeadLetter, error) { panic("dedupe: not built yet") }

// Memory returns the sink's memory of an alarm (nil when it has none).
func (s *Store) Memory(sink, originID string) (map[string]string, error) {
	panic("dedupe: not built yet")
}

// Depth returns the number of entries in each sink's outbox.
func (s *Store) Depth() (map[string]int, error) { panic("dedupe: not built yet") }

// Wake returns a channel that receives after entries are added to sink's
// outbox. It holds at most one pending signal.
func (s *Store) Wake(sink string) <-chan struct{} { panic("dedupe: not built yet") }
