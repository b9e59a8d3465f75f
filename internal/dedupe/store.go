package dedupe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
)

// schemaVersion is the layout of the buckets below. Open refuses a file
// written with a newer one.
const schemaVersion = 1

// The root buckets.
var (
	// bucketMeta holds the schema version, the first run and the bootstrap.
	bucketMeta = []byte("meta")
	// bucketMarks holds the named watermarks of the poller.
	bucketMarks = []byte("marks")
	// bucketAlarms maps originId to the compact state of the alarm, which
	// holds its dedupe keys (the statuses seen) as flags.
	bucketAlarms = []byte("alarms")
	// bucketRecords maps the originId of an ongoing alarm to its latest
	// upstream record, from which its inferred end would be built.
	bucketRecords = []byte("records")
	// bucketOngoing is the set of originIds of ongoing alarms.
	bucketOngoing = []byte("ongoing")
	// bucketEnded indexes terminal alarms by prune time (endedKey).
	bucketEnded = []byte("ended")
	// bucketOutbox holds one bucket per sink of entries keyed by seqKey.
	bucketOutbox = []byte("outbox")
	// bucketDead holds one bucket per sink of dead letters keyed by seqKey.
	bucketDead = []byte("dead")
	// bucketMemory holds one bucket per sink mapping originId to memory.
	bucketMemory = []byte("memory")

	// bucketSuppressed holds one bucket per sink of the entries alarm
	// management withheld from it, keyed by seqKey, encoded as dead letters.
	bucketSuppressed = []byte("suppressed")

	rootBuckets = [][]byte{bucketMeta, bucketMarks, bucketAlarms, bucketRecords, bucketOngoing,
		bucketEnded, bucketOutbox, bucketDead, bucketMemory, bucketSuppressed, bucketKV, bucketJournal}
)

// Keys of the meta bucket.
var (
	metaVersion      = []byte("version")         // uint64
	metaFirstRun     = []byte("firstRun")        // Unix nanoseconds
	metaAligned      = []byte("firstRunAligned") // present once FirstRun is in the upstream's time
	metaBootstrapped = []byte("bootstrapped")    // Unix nanoseconds of the batch's detection
	metaJournal      = []byte("journal")         // present once every ongoing alarm has a journal entry
)

// Defaults of Options.
const (
	DefaultLockTimeout = 5 * time.Second
	DefaultRetention   = 2160 * time.Hour
)

// initialMmapSize is the address space mapped for the file from the start.
const initialMmapSize = 256 << 20

// errUnchanged rolls back a read-write transaction that wrote nothing, which
// saves the two fdatasyncs of a commit.
var errUnchanged = errors.New("dedupe: nothing to write")

// Store is the bbolt-backed state of one relay. It is safe for concurrent use.
type Store struct {
	db        *bolt.DB
	path      string
	clock     clock.Clock
	bootstrap Bootstrap
	retention time.Duration
	// firstRun is FirstRun in Unix nanoseconds; AlignFirstRun may move it
	// once, while other goroutines read it.
	firstRun atomic.Int64

	bootstrapped atomic.Bool

	// events holds the events Apply built while their entries wait.
	events eventCache

	mu    sync.Mutex
	depth map[string]int           // entries per sink outbox, in commit order
	wake  map[string]chan struct{} // per sink, buffered 1
}

// lockedError is ErrLocked with the path of the file.
type lockedError struct {
	path    string
	timeout time.Duration
}

func (e *lockedError) Error() string {
	return fmt.Sprintf("dedupe: %s is locked by another process (is another relay running?); gave up after %s",
		e.path, e.timeout)
}

func (e *lockedError) Is(target error) bool { return target == ErrLocked }

func (o Options) withDefaults() (Options, error) {
	if o.LockTimeout < 0 {
		return o, fmt.Errorf("dedupe: lock timeout %s is negative", o.LockTimeout)
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	switch o.Bootstrap {
	case "":
		o.Bootstrap = BootstrapNotify
	case BootstrapNotify, BootstrapRecord:
	default:
		return o, fmt.Errorf("dedupe: bootstrap mode %q: want %q or %q", o.Bootstrap, BootstrapNotify, BootstrapRecord)
	}
	if o.Retention < 0 {
		return o, fmt.Errorf("dedupe: retention %s is negative", o.Retention)
	}
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	return o, nil
}

// Open opens or creates the store file at path. A file held by another
// process yields ErrLocked after opts.LockTimeout. The first Open of a new
// file records the first run (see FirstRun).
func Open(path string, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: opts.LockTimeout,
		// The hashmap freelist allocates in constant time whatever the
		// fragmentation left by pruning and delivered entries.
		FreelistType: bolt.FreelistMapType,
		// Growing the file past the memory map remaps it, which waits for
		// every reader and copies every node the writer has touched. Reserve
		// address space (not memory: pages past the end of the file are
		// never touched) so that this is rare.
		InitialMmapSize: initialMmapSize,
	})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, &lockedError{path: path, timeout: opts.LockTimeout}
	}
	if err != nil {
		return nil, fmt.Errorf("dedupe: open %s: %w", path, err)
	}
	s := &Store{
		db:        db,
		path:      path,
		clock:     opts.Clock,
		bootstrap: opts.Bootstrap,
		retention: opts.Retention,
		depth:     make(map[string]int),
		wake:      make(map[string]chan struct{}),
	}
	if err := db.Update(s.init); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("dedupe: open %s: %w", path, err)
	}
	return s, nil
}

// init creates the buckets of a new file, checks the schema of an existing
// one and loads what the Store keeps in memory.
func (s *Store) init(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		if name, _ := tx.Cursor().First(); name != nil {
			return fmt.Errorf("not a relay store: it has bucket %q but no %q", name, bucketMeta)
		}
		var err error
		if meta, err = tx.CreateBucket(bucketMeta); err != nil {
			return err
		}
		if err := meta.Put(metaVersion, binary.BigEndian.AppendUint64(nil, schemaVersion)); err != nil {
			return err
		}
		now := s.clock.Now()
		if err := meta.Put(metaFirstRun, binary.BigEndian.AppendUint64(nil, uint64(now.UnixNano()))); err != nil {
			return err
		}
	}
	if err := s.load(meta); err != nil {
		return err
	}
	for _, name := range rootBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket %q: %w", name, err)
		}
	}
	if err := backfillJournal(tx); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	outbox := tx.Bucket(bucketOutbox)
	return outbox.ForEachBucket(func(sink []byte) error {
		s.depth[string(sink)] = outbox.Bucket(sink).Stats().KeyN
		return nil
	})
}

// load checks the schema of a store and loads its first run and bootstrap.
func (s *Store) load(meta *bolt.Bucket) error {
	v := meta.Get(metaVersion)
	if len(v) != 8 {
		return fmt.Errorf("meta %q: %w", metaVersion, errCorrupt)
	}
	if version := binary.BigEndian.Uint64(v); version > schemaVersion {
		return fmt.Errorf("schema version %d is newer than the %d this relay knows (was the file written by a newer relay?)",
			version, schemaVersion)
	}
	fr := meta.Get(metaFirstRun)
	if len(fr) != 8 {
		return fmt.Errorf("meta %q: %w", metaFirstRun, errCorrupt)
	}
	s.firstRun.Store(int64(binary.BigEndian.Uint64(fr)))
	s.bootstrapped.Store(meta.Get(metaBootstrapped) != nil)
	return nil
}

// OpenReadOnly opens the store file at path for reading only, such as a copy
// of a running relay's state: it writes nothing, creates nothing, and shares
// the file with other readers. Methods that write fail. The file of a
// running relay is locked: OpenReadOnly yields ErrLocked after
// DefaultLockTimeout.
func OpenReadOnly(path string) (*Store, error) {
	// bbolt would try to initialise an empty file, which a read-only
	// descriptor cannot.
	if st, err := os.Stat(path); err == nil && st.Size() == 0 {
		return nil, fmt.Errorf("dedupe: open %s: the file is empty: not a relay store", path)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: DefaultLockTimeout})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, &lockedError{path: path, timeout: DefaultLockTimeout}
	}
	if err != nil {
		return nil, fmt.Errorf("dedupe: open %s: %w", path, err)
	}
	s := &Store{
		db:        db,
		path:      path,
		clock:     clock.Real(),
		bootstrap: BootstrapNotify,
		retention: DefaultRetention,
		depth:     make(map[string]int),
		wake:      make(map[string]chan struct{}),
	}
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("not a relay store: it has no %q bucket", bucketMeta)
		}
		return s.load(meta)
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("dedupe: open %s: %w", path, err)
	}
	return s, nil
}

// Close closes the file; pending outbox entries stay for the next Open.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("dedupe: close %s: %w", s.path, err)
	}
	return nil
}

// FirstRun returns when this store was first opened, in the upstream's time
// once AlignFirstRun has run; alarms that ended before it are history and
// produce no events.
func (s *Store) FirstRun() time.Time { return time.Unix(0, s.firstRun.Load()).UTC() }

// AlignFirstRun moves FirstRun by offset, the upstream's clock minus the
// relay's, so that history decisions compare the upstream's own times with
// the first run in that same clock. It acts once in a store's life, and only
// before the first complete snapshot was applied: later calls, and calls on a
// store that is already bootstrapped, change nothing. It returns FirstRun.
func (s *Store) AlignFirstRun(offset time.Duration) (time.Time, error) {
	var aligned time.Time
	err := s.update(func(tx *bolt.Tx, _ map[string]int) error {
		meta := tx.Bucket(bucketMeta)
		if meta.Get(metaAligned) != nil || meta.Get(metaBootstrapped) != nil {
			return errUnchanged
		}
		aligned = s.FirstRun().Add(offset)
		if err := meta.Put(metaFirstRun, binary.BigEndian.AppendUint64(nil, uint64(aligned.UnixNano()))); err != nil {
			return err
		}
		if err := meta.Put(metaAligned, binary.BigEndian.AppendUint64(nil, uint64(offset))); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return s.FirstRun(), fmt.Errorf("dedupe: align first run: %w", err)
	}
	if !aligned.IsZero() {
		s.firstRun.Store(aligned.UnixNano())
	}
	return s.FirstRun(), nil
}

// Bootstrapped reports whether a complete current snapshot has been applied.
func (s *Store) Bootstrapped() bool { return s.bootstrapped.Load() }

// update runs fn in one read-write transaction. The outbox depth changes fn
// records in delta are applied while the transaction still holds bbolt's
// writer lock, so that they are applied in commit order, and reverted if the
// commit fails. fn returning errUnchanged rolls back and counts as success.
func (s *Store) update(fn func(tx *bolt.Tx, delta map[string]int) error) error {
	delta := make(map[string]int)
	applied := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := fn(tx, delta); err != nil {
			return err
		}
		s.addDepth(delta, 1)
		applied = true
		return nil
	})
	if err != nil && applied {
		s.addDepth(delta, -1)
	}
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

func (s *Store) addDepth(delta map[string]int, sign int) {
	if len(delta) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for sink, n := range delta {
		s.depth[sink] += sign * n
	}
}

// Mark returns the watermark stored under name.
func (s *Store) Mark(name string) (time.Time, bool, error) {
	var t time.Time
	var found bool
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketMarks).Get([]byte(name))
		if v == nil {
			return nil
		}
		found = true
		return t.UnmarshalBinary(v)
	})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("dedupe: mark %q: %w", name, err)
	}
	return t, found, nil
}

// Alarm returns what the store knows of one alarm.
func (s *Store) Alarm(originID string) (Tracked, bool, error) {
	var t Tracked
	var found bool
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketAlarms).Get([]byte(originID))
		if v == nil {
			return nil
		}
		st, err := decodeState(v)
		if err != nil {
			return err
		}
		t, found = st.tracked(originID), true
		return nil
	})
	if err != nil {
		return Tracked{}, false, fmt.Errorf("dedupe: alarm %q: %w", originID, err)
	}
	return t, found, nil
}

// Ongoing returns the alarms whose start was recorded and whose end or
// invalid was not, in originId order.
func (s *Store) Ongoing() ([]Tracked, error) {
	var out []Tracked
	err := s.db.View(func(tx *bolt.Tx) error {
		alarms := tx.Bucket(bucketAlarms)
		c := tx.Bucket(bucketOngoing).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			v := alarms.Get(k)
			if v == nil {
				return fmt.Errorf("ongoing alarm %q has no state: %w", k, errCorrupt)
			}
			st, err := decodeState(v)
			if err != nil {
				return fmt.Errorf("alarm %q: %w", k, err)
			}
			out = append(out, st.tracked(string(k)))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dedupe: ongoing alarms: %w", err)
	}
	return out, nil
}

// OngoingRecords calls fn with the latest upstream record of every ongoing
// alarm, in originId order: what alarm management rebuilds its view of
// ongoing alarms from at start (inhibition).
func (s *Store) OngoingRecords(fn func(a *event.Alarm) error) error {
	err := s.db.View(func(tx *bolt.Tx) error {
		records := tx.Bucket(bucketRecords)
		c := tx.Bucket(bucketOngoing).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			v := records.Get(k)
			if v == nil {
				continue
			}
			a, err := decodeAlarm(v)
			if err != nil {
				return fmt.Errorf("record of alarm %q: %w", k, err)
			}
			if err := fn(&a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("dedupe: ongoing records: %w", err)
	}
	return nil
}
