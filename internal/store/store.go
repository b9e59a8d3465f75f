package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/plant"
	"github.com/relay-energy/relay/internal/tracing"
)

// schemaVersion is the layout of the buckets below. Open refuses a file
// written with a newer one and migrates an older one. Version 2 moved the
// upstream records from the bucket records into the record log. Version 3
// added the delivery ledger (the sink set in an alarm's state, the buckets
// sinksets and ledger); a file of version 2 needs no rewrite: its alarms
// have no sink set, and their ends are routed by the rules as before.
// Version 4 keeps the states of the ongoing alarms in bucket ongoing
// instead of beside an empty value there (states.go). Version 5 keys them
// there by ongoingKey instead of by originId (10 bytes for a numbered id),
// and writes states of format 5; a state of format 4 reads as it is.
const schemaVersion = 5

// The root buckets.
var (
	// bucketMeta holds the schema version, the first run and the bootstrap.
	bucketMeta = []byte("meta")
	// bucketMarks holds the named watermarks of the poller.
	bucketMarks = []byte("marks")
	// bucketAlarms maps the originId of an alarm that is not ongoing to
	// its compact state, which holds its dedupe keys (the statuses seen) as
	// flags.
	bucketAlarms = []byte("alarms")
	// bucketRecords mapped the originId of an ongoing alarm to its latest
	// upstream record in schema version 1; Open moves it into the record log.
	bucketRecords = []byte("records")
	// bucketOngoing maps the key of an ongoing alarm (ongoingKey; its
	// originId before schema version 5) to its state (before schema
	// version 4, to an empty value; see findState).
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

	// bucketSinkSets interns the sink sets of the delivery ledger: "i" and a
	// big-endian id to the names, "n" and the names to the id (ledger.go).
	bucketSinkSets = []byte("sinksets")
	// bucketLedger holds one bucket per sink mapping originId to what became
	// of the alarm's start there when it is not on its way: a dead letter, or
	// dropped (ledger.go).
	bucketLedger = []byte("ledger")

	rootBuckets = [][]byte{bucketMeta, bucketMarks, bucketAlarms, bucketOngoing,
		bucketEnded, bucketOutbox, bucketDead, bucketMemory, bucketSuppressed, bucketKV, bucketJournal,
		bucketSinkSets, bucketLedger}
)

// Keys of the meta bucket.
var (
	metaVersion      = []byte("version")         // uint64
	metaFirstRun     = []byte("firstRun")        // Unix nanoseconds
	metaAligned      = []byte("firstRunAligned") // present once FirstRun is in the upstream's time
	metaBootstrapped = []byte("bootstrapped")    // Unix nanoseconds of the batch's detection
	metaJournal      = []byte("journal")         // present once every ongoing alarm has a journal entry
	metaRecordsGen   = []byte("recordsGen")      // uint64: the generation of the record log
	metaRecordsLive  = []byte("recordsLive")     // uint64: the bytes of its frames that states reference
	// metaReplicaSeq is the number of the last changeset of a replicating
	// backend the file holds (Changeset.Number): what a snapshot of it
	// covers. A file of the bbolt backend has none.
	metaReplicaSeq = []byte("replicaSeq")
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

	readOnly bool
	// backend keeps the state durable: the file itself, or JetStream.
	backend Backend
	// diverged is set once the file fell behind the replicated state.
	diverged atomic.Pointer[error]
	// compactFloor is the garbage a record log must hold before Prune
	// compacts it (Options.CompactFloor).
	compactFloor int64
	// compactMu makes compactions one at a time.
	compactMu sync.Mutex
	logMu     sync.Mutex
	logs      map[uint64]*recordLog // open record logs by generation
	logGen    uint64                // the latest committed generation

	// endsByRules routes ends by the rules in force instead of the ledger
	// (Options.EndsByRules).
	endsByRules bool
	// plant is Options.Plant.
	plant plant.Set
	// deadLimit is Options.DeadLetterLimit; 0 (a read-only store) bounds
	// nothing.
	deadLimit int
	// log is Options.Logger.
	log *slog.Logger
	// tracer is Options.Tracer.
	tracer *tracing.Tracer

	mu    sync.Mutex
	depth map[string]int           // entries per sink outbox, in commit order
	wake  map[string]chan struct{} // per sink, buffered 1
	// current names the sinks of the rules last adopted (AdoptSinks); nil
	// until then. An end for a sink outside it is recorded as dropped.
	current map[string]bool
	// noResolved names the sinks whose rules say send_resolved: false
	// (SetResolvedOff); nil for none.
	noResolved map[string]bool
	// dropped counts, per sink and reason, the entries recorded as dropped
	// since Open.
	dropped map[[2]string]int
	// changes wakes the readers of Changes after each committed write.
	changes changeSignal
	// ongoingHint is the capacity Ongoing allocates: a little more than it
	// last returned.
	ongoingHint atomic.Int64
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
	if o.CompactFloor < 0 {
		return o, fmt.Errorf("dedupe: compact floor %d is negative", o.CompactFloor)
	}
	if o.CompactFloor == 0 {
		o.CompactFloor = DefaultCompactFloor
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
	if o.Backend == nil {
		o.Backend = Bolt()
	}
	if o.DeadLetterLimit < 0 {
		return o, fmt.Errorf("dedupe: dead letter limit %d is negative: want 0 for the default (%d) or a number of dead letters",
			o.DeadLetterLimit, DefaultDeadLetterLimit)
	}
	if o.DeadLetterLimit == 0 {
		o.DeadLetterLimit = DefaultDeadLetterLimit
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
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
	if err := opts.Backend.Prepare(path); err != nil {
		return nil, fmt.Errorf("dedupe: open %s: %w", path, err)
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
		db:           db,
		path:         path,
		backend:      opts.Backend,
		clock:        opts.Clock,
		bootstrap:    opts.Bootstrap,
		retention:    opts.Retention,
		compactFloor: opts.CompactFloor,
		endsByRules:  opts.EndsByRules,
		plant:        opts.Plant,
		deadLimit:    opts.DeadLetterLimit,
		log:          opts.Logger,
		tracer:       opts.Tracer,
		logs:         make(map[uint64]*recordLog),
		depth:        make(map[string]int),
		wake:         make(map[string]chan struct{}),
		dropped:      make(map[[2]string]int),
	}
	if err := s.openLog(); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("dedupe: open %s: %w", path, err)
	}
	if err := s.update(func(tx *txn, _ map[string]int) error { return s.init(tx) }); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("dedupe: open %s: %w", path, err)
	}
	s.backend.Opened(s)
	return s, nil
}

// openLog opens the record log of the store's generation, or creates the
// first one for a new store or one that init migrates, and deletes the
// record logs of other generations.
func (s *Store) openLog() error {
	var version, gen, live uint64
	err := s.view(func(tx *txn) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return nil
		}
		if err := checkVersion(meta); err != nil {
			return err
		}
		version = binary.BigEndian.Uint64(meta.Get(metaVersion))
		var err error
		if gen, err = metaUint(meta, metaRecordsGen); err != nil {
			return err
		}
		live, err = metaUint(meta, metaRecordsLive)
		return err
	})
	if err != nil {
		return err
	}
	if version >= 2 && gen == 0 {
		return fmt.Errorf("meta %q: %w", metaRecordsGen, errCorrupt)
	}
	if err := removeOtherRecordLogs(s.path, gen); err != nil {
		return err
	}
	var l *recordLog
	switch {
	case gen == 0:
		// A new store, or one in schema version 1 that init migrates.
		l, err = createRecordLog(s.path, 1)
	case live == 0:
		// Nothing references the log: a missing one is made again.
		if l, err = openRecordLog(s.path, gen, false); errors.Is(err, os.ErrNotExist) {
			l, err = createRecordLog(s.path, gen)
		}
	default:
		l, err = openRecordLog(s.path, gen, false)
	}
	if err != nil {
		return err
	}
	s.logs[l.gen] = l
	s.logGen = l.gen
	return nil
}

// metaUint reads an unsigned number of the meta bucket, 0 when absent.
func metaUint(meta *bucket, key []byte) (uint64, error) {
	v := meta.Get(key)
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("meta %q: %w", key, errCorrupt)
	}
	return binary.BigEndian.Uint64(v), nil
}

// errLogRetired says that a compaction retired the record log a read
// transaction needs: a new transaction sees the new one.
var errLogRetired = errors.New("dedupe: the record log was compacted meanwhile")

// acquireLog returns the record log of generation gen, which stays open
// until releaseLog even if a compaction retires it meanwhile. A read-only
// store opens it at the first use.
func (s *Store) acquireLog(gen uint64) (*recordLog, error) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	l := s.logs[gen]
	if l == nil {
		if !s.readOnly && gen < s.logGen {
			return nil, errLogRetired
		}
		if !s.readOnly {
			return nil, fmt.Errorf("the record log of generation %d is not open: %w", gen, errCorrupt)
		}
		var err error
		if l, err = openRecordLog(s.path, gen, true); err != nil {
			return nil, err
		}
		s.logs[gen] = l
	}
	l.refs++
	return l, nil
}

// releaseLog ends a use of l that acquireLog began.
func (s *Store) releaseLog(l *recordLog) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	l.refs--
	if l.retired && l.refs == 0 {
		_ = l.f.Close()
	}
}

// retireLog closes l once its last user releases it; the Store no longer
// hands it out.
func (s *Store) retireLog(l *recordLog) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	if s.logs[l.gen] == l {
		delete(s.logs, l.gen)
	}
	l.retired = true
	if l.refs == 0 {
		_ = l.f.Close()
	}
}

// acquireTxLog returns the record log of the generation tx sees, as
// acquireLog does: releaseLog ends its use.
func (s *Store) acquireTxLog(tx *txn) (*recordLog, error) {
	gen, err := metaUint(tx.Bucket(bucketMeta), metaRecordsGen)
	if err != nil {
		return nil, err
	}
	return s.acquireLog(gen)
}

// txLog returns the record log of the generation tx sees, for a read-write
// transaction to append to and read from; release ends its use.
func (s *Store) txLog(tx *txn) (lt *logTx, release func(), err error) {
	l, err := s.acquireTxLog(tx)
	if err != nil {
		return nil, nil, err
	}
	return &logTx{log: l, rec: tx.rec}, func() { s.releaseLog(l) }, nil
}

// commitLog adds the change in live bytes of lt to the meta bucket and
// writes and syncs lt's frames: the last step of a transaction before its
// commit.
func commitLog(tx *txn, lt *logTx) error {
	if lt.live != 0 {
		meta := tx.Bucket(bucketMeta)
		live, err := metaUint(meta, metaRecordsLive)
		if err != nil {
			return err
		}
		if int64(live)+lt.live < 0 {
			return fmt.Errorf("meta %q: %d live bytes less %d: %w", metaRecordsLive, live, -lt.live, errCorrupt)
		}
		if err := meta.Put(metaRecordsLive, binary.BigEndian.AppendUint64(nil, uint64(int64(live)+lt.live))); err != nil {
			return err
		}
	}
	return lt.flush()
}

// init creates the buckets of a new file, checks the schema of an existing
// one and loads what the Store keeps in memory.
func (s *Store) init(tx *txn) error {
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
		if err := meta.Put(metaRecordsGen, binary.BigEndian.AppendUint64(nil, 1)); err != nil {
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
	version := binary.BigEndian.Uint64(meta.Get(metaVersion))
	migrate := version == 1
	if migrate {
		if err := meta.Put(metaRecordsGen, binary.BigEndian.AppendUint64(nil, 1)); err != nil {
			return err
		}
	}
	lt, release, err := s.txLog(tx)
	if err != nil {
		return err
	}
	defer release()
	if migrate {
		if err := migrateRecords(tx, lt); err != nil {
			return fmt.Errorf("moving the records of schema version 1 into the record log: %w", err)
		}
	}
	if version < 5 {
		// Version 3 added the ledger's buckets, and an older state has no
		// sink set: nothing to rewrite for it.
		if err := moveOngoingStates(tx); err != nil {
			return fmt.Errorf("moving the states of the ongoing alarms into bucket %q: %w", bucketOngoing, err)
		}
		if err := meta.Put(metaVersion, binary.BigEndian.AppendUint64(nil, schemaVersion)); err != nil {
			return err
		}
	}
	if err := backfillJournal(tx, lt); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := commitLog(tx, lt); err != nil {
		return err
	}
	outbox := tx.Bucket(bucketOutbox)
	return outbox.ForEachBucket(func(sink []byte) error {
		s.depth[string(sink)] = outbox.Bucket(sink).Stats().KeyN
		return nil
	})
}

// checkVersion refuses a store whose schema this relay does not know.
func checkVersion(meta *bucket) error {
	v := meta.Get(metaVersion)
	if len(v) != 8 {
		return fmt.Errorf("meta %q: %w", metaVersion, errCorrupt)
	}
	version := binary.BigEndian.Uint64(v)
	if version == 0 {
		return fmt.Errorf("meta %q: %w", metaVersion, errCorrupt)
	}
	if version > schemaVersion {
		return fmt.Errorf("schema version %d is newer than the %d this relay knows: the file was written by a newer relay; "+
			"run that relay (or a newer one), or restore a backup of the state file that this relay wrote", version, schemaVersion)
	}
	return nil
}

// load checks the schema of a store and loads its first run and bootstrap.
func (s *Store) load(meta *bucket) error {
	if err := checkVersion(meta); err != nil {
		return err
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
// DefaultLockTimeout. OngoingRecords and the journal also read the record
// log beside the file, opened at their first use: a copy needs both files.
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
		readOnly:  true,
		backend:   Bolt(),
		logs:      make(map[uint64]*recordLog),
		depth:     make(map[string]int),
		wake:      make(map[string]chan struct{}),
		dropped:   make(map[[2]string]int),
	}
	err = s.view(func(tx *txn) error {
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
	err := s.backend.Close()
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	s.logMu.Lock()
	for gen, l := range s.logs {
		if cerr := l.f.Close(); err == nil {
			err = cerr
		}
		delete(s.logs, gen)
	}
	s.logMu.Unlock()
	if err != nil {
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
	err := s.update(func(tx *txn, _ map[string]int) error {
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

// Retention returns how long ended alarms, and their journal entries, are
// kept (Options.Retention).
func (s *Store) Retention() time.Duration { return s.retention }

// Bootstrapped reports whether a complete current snapshot has been applied.
func (s *Store) Bootstrapped() bool { return s.bootstrapped.Load() }

// update runs fn in one read-write transaction. The outbox depth changes fn
// records in delta are applied while the transaction still holds bbolt's
// writer lock, so that they are applied in commit order, and reverted if the
// commit fails. fn returning errUnchanged rolls back and counts as success.
// A replicating backend makes what fn wrote durable before the local
// commit; a local commit that fails after that leaves the file behind the
// replicated state, and the store refuses every later write (ErrDiverged).
func (s *Store) update(fn func(tx *txn, delta map[string]int) error) error {
	if err := s.diverged.Load(); err != nil {
		return *err
	}
	delta := make(map[string]int)
	applied, replicated := false, false
	var discarded []discard
	err := s.db.Update(func(btx *bolt.Tx) error {
		tx := &txn{tx: btx}
		if s.backend.Replicates() {
			tx.rec = &changeset{}
		}
		if err := fn(tx, delta); err != nil {
			return err
		}
		var err error
		if discarded, err = s.boundDead(tx); err != nil {
			return err
		}
		if tx.rec != nil && tx.rec.ops > 0 {
			if err := s.backend.Commit(Changeset{tx: tx}); err != nil {
				replicated = errors.Is(err, ErrDiverged)
				return err
			}
			replicated = true
		}
		s.addDepth(delta, 1)
		applied = true
		return nil
	})
	if err != nil && applied {
		s.addDepth(delta, -1)
	}
	if err != nil && replicated {
		derr := err
		if !errors.Is(err, ErrDiverged) {
			derr = fmt.Errorf("%w: the local commit failed after the %s backend recorded it: %v", ErrDiverged, s.backend.Name(), err)
		}
		s.diverged.CompareAndSwap(nil, &derr)
		return derr
	}
	if errors.Is(err, errUnchanged) {
		return nil
	}
	if err == nil {
		s.changes.bump()
		s.reportDiscarded(discarded)
	}
	return err
}

// view runs fn in one read-only transaction.
func (s *Store) view(fn func(tx *txn) error) error {
	return s.db.View(func(btx *bolt.Tx) error { return fn(&txn{tx: btx}) })
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
	err := s.view(func(tx *txn) error {
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
	err := s.view(func(tx *txn) error {
		v, _ := findState(tx, originID)
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
// invalid was not, in originId order: the ids the upstream sends as
// numbers first, by number, then the others (see appendOngoingKey).
func (s *Store) Ongoing() ([]Tracked, error) {
	out := make([]Tracked, 0, s.ongoingHint.Load())
	err := s.EachOngoing(func(t *Tracked) error {
		out = append(out, *t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.ongoingHint.Store(int64(len(out) + len(out)/16))
	return out, nil
}

// EachOngoing calls fn with each alarm Ongoing returns, in its order,
// in one read transaction, without holding them all: a reader that keeps a
// few of 100,000 allocates for those alone. fn may keep a copy of *t, not
// t, which the next call overwrites; it must not write to the store, and the first error it returns stops the walk and
// is returned.
func (s *Store) EachOngoing(fn func(t *Tracked) error) error {
	var t Tracked // one for the walk: a copy per alarm would be garbage
	err := s.view(func(tx *txn) error {
		return walkOngoing(tx, func(k []byte, st *state) error {
			t = st.tracked(string(k))
			return fn(&t)
		})
	})
	if err != nil {
		return fmt.Errorf("dedupe: ongoing alarms: %w", err)
	}
	return nil
}

// forEachOngoing calls fn with the originId and the state of every ongoing
// alarm. fn may write to the alarms bucket, not to ongoing, and keep the
// originId.
func forEachOngoing(tx *txn, fn func(k []byte, st *state) error) error {
	alarms, byID := tx.Bucket(bucketAlarms), keyedByID(tx)
	c := tx.Bucket(bucketOngoing).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(v) == 0 {
			// Schema version 3 or older (see findState): k is the originId.
			if v = alarms.Get(k); v == nil {
				return fmt.Errorf("ongoing alarm %q has no state: %w", k, errCorrupt)
			}
		} else if !byID {
			k = appendOngoingID(nil, k)
		}
		st, err := decodeState(v)
		if err != nil {
			return fmt.Errorf("alarm %q: %w", k, err)
		}
		if err := fn(k, &st); err != nil {
			return err
		}
	}
	return nil
}

// walkOngoing is forEachOngoing for a reader: fn must not write to the
// store, nor keep st, which the next call overwrites.
func walkOngoing(tx *txn, fn func(k []byte, st *state) error) error {
	var st state
	c := newOngoingCursor(tx)
	k, v, err := c.First()
	for ; err == nil && k != nil; k, v, err = c.Next() {
		if st, err = decodeState(v); err != nil {
			return fmt.Errorf("alarm %q: %w", k, err)
		}
		if err := fn(k, &st); err != nil {
			return err
		}
	}
	return err
}

// OngoingRecords calls fn with the latest upstream record of every ongoing
// alarm, in the order of Ongoing: what alarm management rebuilds its view of
// ongoing alarms from at start (inhibition).
func (s *Store) OngoingRecords(fn func(a *event.Alarm) error) error {
	err := errLogRetired
	for errors.Is(err, errLogRetired) {
		err = s.ongoingRecords(fn)
	}
	if err != nil {
		return fmt.Errorf("dedupe: ongoing records: %w", err)
	}
	return nil
}

// ongoingRecords is OngoingRecords in one read transaction. It fails with
// errLogRetired, before calling fn, when a compaction retired the record log
// the transaction sees.
func (s *Store) ongoingRecords(fn func(a *event.Alarm) error) error {
	return s.view(func(tx *txn) error {
		if records := tx.Bucket(bucketRecords); records != nil {
			// A copy in schema version 1, opened read-only.
			return ongoingRecordsV1(tx, records, fn)
		}
		l, err := s.acquireTxLog(tx)
		if err != nil {
			return err
		}
		defer s.releaseLog(l)
		return walkOngoing(tx, func(k []byte, st *state) error {
			if st.rec.n == 0 {
				return nil
			}
			a, err := readRecord(l, k, st.rec)
			if err != nil {
				return err
			}
			return fn(&a)
		})
	})
}
