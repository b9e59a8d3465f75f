// Package jsbackend is the store's JetStream backend (store.Backend): it
// keeps each tenant's state in one stream shared by every tenant
// (docs/design.md §5, "The JetStream backend"), on three subjects:
//
//   - <prefix>.<tenant>.log: one changeset per committed transaction, in
//     commit order, numbered by the header Relay-Seq from 1; a changeset
//     larger than one message is an atomic batch of parts;
//   - <prefix>.<tenant>.snap: snapshots (the bbolt file and the record
//     log as of changeset n), each an atomic batch of parts, after which
//     the changesets and snapshots they cover are purged;
//   - <prefix>.<tenant>.fence: one message per lease holder, written before
//     it reads the state. Every later write of the holder expects the last
//     message of the fence subject to be its own (the server checks
//     Nats-Expected-Last-Subject-Sequence against the fence subject), so
//     once a newer holder fenced, every write of an older one is refused.
//
// store.Open restores the local file from the latest snapshot and the
// changesets after it; the file is a cache, and no volume needs to survive
// the pod. The store owns the files and their formats (the changesets, the
// snapshots' content); this package moves their bytes: the stream, the
// fence records, the messages' parts and headers, s2 compression, publishes
// and their retries, when to snapshot, and the purges.
package jsbackend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relay-energy/relay/internal/store"
)

// Headers of the state stream's messages.
const (
	hdrSeq       = "Relay-Seq"       // the changeset's number, or the last one a snapshot holds
	hdrPart      = "Relay-Part"      // the part's number, from 1
	hdrParts     = "Relay-Parts"     // how many parts the changeset or snapshot has
	hdrLogAfter  = "Relay-Log-After" // a snapshot's: the stream sequence of changeset Relay-Seq
	hdrSnapID    = "Relay-Snapshot"  // a snapshot's id, on every part
	hdrFence     = "Relay-Fence"     // the lease revision of the writer
	hdrBatchID   = "Nats-Batch-Id"   // atomic batch publish
	hdrBatchSeq  = "Nats-Batch-Sequence"
	hdrBatchDone = "Nats-Batch-Commit"
)

// Defaults of Options.
const (
	DefaultStateStream   = "RELAY_STATE"
	DefaultStatePrefix   = "relay.state"
	DefaultStateTimeout  = 10 * time.Second
	DefaultSnapshotAfter = 32 << 20
)

// maxBatchParts is the most messages the server takes in one atomic batch.
const maxBatchParts = 1000

// tokenRE is what a tenant id must look like to be one subject token.
var tokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Options configure the JetStream backend of one tenant's store.
type Options struct {
	// Tenant names the state: one subject token, [A-Za-z0-9_-]{1,64}.
	Tenant string
	// Fence is the revision of the tenant's lease this replica holds. It
	// must be greater than the fence of every earlier holder (lease
	// revisions grow).
	Fence uint64
	// Holder names this replica, for the fence record and errors.
	Holder string
	// Stream names the stream of every tenant's state (default
	// RELAY_STATE); Prefix is its subject prefix (default relay.state).
	Stream, Prefix string
	// Replicas is the stream's replication factor (default 1); an existing
	// stream keeps its own.
	Replicas int
	// Timeout bounds each request to the servers (default 10s); a commit
	// retries within three of them.
	Timeout time.Duration
	// SnapshotAfter is how many bytes of changesets the stream may hold
	// before a snapshot replaces them (default 32 MiB).
	SnapshotAfter int64
	// Logger receives the backend's log lines (default none).
	Logger *slog.Logger
	// Context, when set, bounds every request: once it is done (the
	// holder's lease ended), a write that JetStream has not acknowledged
	// is given up at once, with store.ErrDiverged, instead of retried.
	Context context.Context
}

// New returns a backend that keeps the state of one tenant in JetStream
// over nc. store.Open then fences the tenant, restores the local file from
// the stream (creating the stream if needed) and records every later
// transaction there before it commits locally.
func New(nc *nats.Conn, opts Options) (store.Backend, error) {
	if !tokenRE.MatchString(opts.Tenant) {
		return nil, fmt.Errorf("dedupe: jetstream backend: tenant %q must be 1 to 64 of A-Z a-z 0-9 _ -", opts.Tenant)
	}
	if opts.Fence == 0 {
		return nil, errors.New("dedupe: jetstream backend: a fence (the lease revision held) is required")
	}
	if opts.Stream == "" {
		opts.Stream = DefaultStateStream
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultStatePrefix
	}
	if opts.Replicas == 0 {
		opts.Replicas = 1
	}
	if opts.Replicas < 1 || opts.Replicas > 5 {
		return nil, fmt.Errorf("dedupe: jetstream backend: %d replicas: want 1 to 5", opts.Replicas)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultStateTimeout
	}
	if opts.SnapshotAfter <= 0 {
		opts.SnapshotAfter = DefaultSnapshotAfter
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("dedupe: jetstream backend: %w", err)
	}
	base := opts.Prefix + "." + opts.Tenant
	// Leave room for the headers under the server's payload limit.
	part := int(min(nc.MaxPayload()-8<<10, 1<<20))
	if part < 64<<10 {
		part = 64 << 10
	}
	return &jsBackend{
		nc: nc, js: js, opts: opts,
		logSubj: base + ".log", snapSubj: base + ".snap", fenceSubj: base + ".fence",
		part: part,
		kick: make(chan struct{}, 1),
		stop: make(chan struct{}),
	}, nil
}

type jsBackend struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	opts   Options

	logSubj, snapSubj, fenceSubj string
	part                         int // the largest message payload
	fenceSeq                     uint64

	mu sync.Mutex
	// n is the number of the last changeset; commits move it under
	// bbolt's writer lock.
	n uint64
	// seqs maps the numbers of changesets since the last snapshot to
	// their stream sequences, for the next snapshot's Relay-Log-After.
	seqs map[uint64]uint64
	// since is the bytes of changesets since the last snapshot.
	since int64

	store *store.Store
	kick  chan struct{}
	stop  chan struct{}
	wg    sync.WaitGroup
}

func (b *jsBackend) Name() string     { return "jetstream" }
func (b *jsBackend) Replicates() bool { return true }

func (b *jsBackend) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.opts.Context, b.opts.Timeout)
}

// Prepare makes sure the stream exists, fences the tenant and restores the
// local files at path from the stream.
func (b *jsBackend) Prepare(path string) error {
	if err := b.ensureStream(); err != nil {
		return err
	}
	if err := b.fence(); err != nil {
		return err
	}
	return b.restore(path)
}

func (b *jsBackend) ensureStream() error {
	ctx, cancel := b.ctx()
	defer cancel()
	st, err := b.js.Stream(ctx, b.opts.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = b.js.CreateStream(ctx, jetstream.StreamConfig{
			Name:        b.opts.Stream,
			Description: "relay: the state of every tenant (changesets, snapshots, fences)",
			Subjects:    []string{b.opts.Prefix + ".>"},
			Storage:     jetstream.FileStorage,
			Replicas:    b.opts.Replicas,
			// A changeset retried after a lost answer is stored once.
			Duplicates:         2 * time.Minute,
			AllowAtomicPublish: true,
		})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			st, err = b.js.Stream(ctx, b.opts.Stream)
		}
	}
	if err != nil {
		return fmt.Errorf("state stream %s: %w", b.opts.Stream, err)
	}
	cfg := st.CachedInfo().Config
	if err := b.checkStream(cfg); err != nil {
		return fmt.Errorf("state stream %s %w", b.opts.Stream, err)
	}
	if cfg.MaxMsgSize > 0 {
		// The parts of a changeset must fit the stream's own limit too.
		b.part = min(b.part, int(cfg.MaxMsgSize)-8<<10)
		if b.part < 16<<10 {
			return fmt.Errorf("state stream %s has max_msg_size %d: at least 24 KiB is needed", b.opts.Stream, cfg.MaxMsgSize)
		}
	}
	b.stream = st
	return nil
}

// checkStream refuses a state stream that would lose or misread state. It
// says what to change, after the stream's name.
func (b *jsBackend) checkStream(cfg jetstream.StreamConfig) error {
	switch {
	case !cfg.AllowAtomicPublish:
		return fmt.Errorf("does not allow atomic batch publish (allow_atomic): "+
			"set it (nats stream edit %s --allow-batch) or let relay create the stream; it needs nats-server 2.12 or newer", cfg.Name)
	case cfg.Storage != jetstream.FileStorage:
		return errors.New("is kept in memory: the state of every tenant would be lost when the servers restart together; use file storage")
	case cfg.AllowDirect:
		return errors.New("allows direct gets (allow_direct), which a follower that is behind may answer: " +
			"a new holder could restore without the latest changes; turn it off")
	case cfg.Sealed || cfg.DenyPurge || cfg.DenyDelete:
		return errors.New("is sealed or denies purges or deletes: snapshots could not replace the changesets they cover; allow them")
	case cfg.Mirror != nil:
		return errors.New("is a mirror: relay writes the state; use a stream of its own")
	case cfg.NoAck:
		return errors.New("does not acknowledge writes (no_ack): relay cannot know a change is stored; turn it off")
	case !slices.Contains(cfg.Subjects, b.opts.Prefix+".>"):
		return fmt.Errorf("does not take subjects %s.> (it takes %v): add them, or name the stream and prefix relay should use", b.opts.Prefix, cfg.Subjects)
	case cfg.Retention != jetstream.LimitsPolicy || cfg.MaxAge != 0 || cfg.MaxMsgs > 0 || cfg.MaxBytes > 0 || cfg.MaxMsgsPerSubject > 0:
		return fmt.Errorf("has limits (retention %s, max age %s, max msgs %d, max bytes %d, max per subject %d) "+
			"that would discard state: remove them", cfg.Retention, cfg.MaxAge, cfg.MaxMsgs, cfg.MaxBytes, cfg.MaxMsgsPerSubject)
	}
	return nil
}

// fenceRecord is the payload of a fence message.
type fenceRecord struct {
	Fence  uint64    `json:"fence"`
	Holder string    `json:"holder"`
	At     time.Time `json:"at"`
}

// fence writes this holder's fence after the last one, if that is older.
func (b *jsBackend) fence() error {
	deadline := time.Now().Add(3 * b.opts.Timeout)
	for {
		ctx, cancel := b.ctx()
		last, err := b.lastMsg(ctx, b.fenceSubj)
		if err != nil {
			cancel()
			return fmt.Errorf("reading the fence of tenant %s: %w", b.opts.Tenant, err)
		}
		var lastSeq uint64
		if last != nil {
			var rec fenceRecord
			if err := json.Unmarshal(last.Data, &rec); err != nil {
				cancel()
				return fmt.Errorf("the fence of tenant %s (stream sequence %d) is not a fence record: %w", b.opts.Tenant, last.Sequence, err)
			}
			// The same holder may fence again (it reopens its store);
			// a newer or another holder of the same revision may not.
			if rec.Fence > b.opts.Fence || (rec.Fence == b.opts.Fence && rec.Holder != b.opts.Holder) {
				cancel()
				return fmt.Errorf("%w: tenant %s was fenced by %q with lease revision %d, and this replica (%q) holds %d",
					store.ErrFenced, b.opts.Tenant, rec.Holder, rec.Fence, b.opts.Holder, b.opts.Fence)
			}
			lastSeq = last.Sequence
		}
		data, _ := json.Marshal(fenceRecord{Fence: b.opts.Fence, Holder: b.opts.Holder, At: time.Now().UTC()})
		m := nats.NewMsg(b.fenceSubj)
		m.Data = data
		m.Header.Set(hdrFence, strconv.FormatUint(b.opts.Fence, 10))
		ack, err := b.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(lastSeq))
		cancel()
		if err == nil {
			b.fenceSeq = ack.Sequence
			return nil
		}
		if !wrongLastSeq(err) || time.Now().After(deadline) {
			return fmt.Errorf("writing the fence of tenant %s: %w", b.opts.Tenant, err)
		}
		// Another holder fenced meanwhile, or (on a replicated stream) a
		// write of the previous holder that checks the fence is still in
		// flight: read the fence again.
		time.Sleep(50 * time.Millisecond)
	}
}

func wrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

func apiCode(err error) jetstream.ErrorCode {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode
	}
	return 0
}

// lastMsg returns the last message of subj, or nil.
func (b *jsBackend) lastMsg(ctx context.Context, subj string) (*jetstream.RawStreamMsg, error) {
	m, err := b.stream.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	return m, err
}

func headerUint(m *jetstream.RawStreamMsg, key string) (uint64, error) {
	v, err := strconv.ParseUint(m.Header.Get(key), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("message %d on %s: header %s %q: %w", m.Sequence, m.Subject, key, m.Header.Get(key), store.ErrBadChangeset)
	}
	return v, nil
}
