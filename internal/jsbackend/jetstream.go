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
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/klauspost/compress/s2"
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

// restore replaces the local files of the store at path by the latest
// snapshot and the changesets after it.
func (b *jsBackend) restore(path string) error {
	ctx, cancel := b.ctx()
	snap, err := b.lastMsg(ctx, b.snapSubj)
	var lastLog *jetstream.RawStreamMsg
	if err == nil {
		lastLog, err = b.lastMsg(ctx, b.logSubj)
	}
	cancel()
	if err != nil {
		return fmt.Errorf("reading the state of tenant %s: %w", b.opts.Tenant, err)
	}
	gen, own, err := store.LocalState(path)
	if err != nil {
		return err
	}
	if own {
		// A state file of the bbolt backend, not a cache: its state is
		// the tenant's, unless JetStream holds one already.
		if snap != nil || lastLog != nil {
			return fmt.Errorf("%s is the state file of a relay that kept its state in it (RELAY_STATE_BACKEND=bbolt), and "+
				"JetStream already holds the state of tenant %s: move the file and its record log away to go on with "+
				"JetStream's state (or start the tenant under another id to keep both)", path, b.opts.Tenant)
		}
		return b.importFile(path, gen)
	}
	if err := store.RemoveLocal(path); err != nil {
		return err
	}
	var n, after uint64
	if snap != nil {
		if n, after, err = b.readSnapshot(path, snap); err != nil {
			return fmt.Errorf("restoring the snapshot of tenant %s: %w", b.opts.Tenant, err)
		}
	}
	if lastLog != nil && lastLog.Sequence > after {
		if n, err = b.replay(path, n, after, lastLog.Sequence); err != nil {
			return fmt.Errorf("replaying the changesets of tenant %s: %w", b.opts.Tenant, err)
		}
	}
	b.n = n
	b.seqs = map[uint64]uint64{n: after}
	if lastLog != nil && lastLog.Sequence > after {
		b.seqs = map[uint64]uint64{n: lastLog.Sequence}
	}
	return nil
}

// importFile makes the bbolt state file at path, and the record log of
// generation gen beside it, the tenant's first snapshot: a relay that moves
// from bbolt to JetStream keeps its state.
func (b *jsBackend) importFile(path string, gen uint64) error {
	var content bytes.Buffer
	w := s2.NewWriter(&content)
	err := store.WriteFileSnapshot(path, gen, w)
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		return fmt.Errorf("importing the state file %s into JetStream: %w", path, err)
	}
	if _, _, err := b.publishSnapshot(content.Bytes(), 0, 0); err != nil {
		return fmt.Errorf("importing the state file %s into JetStream: %w", path, err)
	}
	b.opts.Logger.Info("the bbolt state file is now the tenant's state in JetStream", "tenant", b.opts.Tenant, "file", path)
	b.n, b.seqs = 0, map[uint64]uint64{0: 0}
	return nil
}

// readSnapshot writes the snapshot whose last part is last to the files of
// the store at path, and returns the changeset it holds up to and the
// stream sequence of that changeset.
func (b *jsBackend) readSnapshot(path string, last *jetstream.RawStreamMsg) (n, after uint64, err error) {
	parts, err := headerUint(last, hdrParts)
	if err != nil {
		return 0, 0, err
	}
	if n, err = headerUint(last, hdrSeq); err != nil {
		return 0, 0, err
	}
	if after, err = headerUint(last, hdrLogAfter); err != nil {
		return 0, 0, err
	}
	id := last.Header.Get(hdrSnapID)
	if parts == 0 || parts > last.Sequence {
		return 0, 0, fmt.Errorf("snapshot %s has %d parts: %w", id, parts, store.ErrBadChangeset)
	}
	var content bytes.Buffer
	for i := uint64(1); i <= parts; i++ {
		// An atomic batch is stored as consecutive messages.
		seq := last.Sequence - parts + i
		m := last
		if i < parts {
			ctx, cancel := b.ctx()
			m, err = b.stream.GetMsg(ctx, seq)
			cancel()
			if err != nil {
				return 0, 0, fmt.Errorf("part %d of snapshot %s (stream sequence %d): %w", i, id, seq, err)
			}
		}
		if m.Subject != b.snapSubj || m.Header.Get(hdrSnapID) != id || m.Header.Get(hdrPart) != strconv.FormatUint(i, 10) {
			return 0, 0, fmt.Errorf("stream sequence %d is not part %d of snapshot %s: %w", seq, i, id, store.ErrBadChangeset)
		}
		content.Write(m.Data)
	}
	return n, after, store.RestoreSnapshot(path, s2.NewReader(&content))
}

// replay applies the changesets after changeset n, from stream sequence
// after+1 up to last, to the files of the store at path, and returns the
// number of the last one.
func (b *jsBackend) replay(path string, n, after, last uint64) (uint64, error) {
	rp, err := store.OpenReplay(path)
	if err != nil {
		return 0, err
	}
	defer rp.Close() //nolint:errcheck // the error path; Close is called below

	ctx, cancel := b.ctx()
	cons, err := b.stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Description:       "relay: restoring the state of tenant " + b.opts.Tenant,
		FilterSubject:     b.logSubj,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       after + 1,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
		Replicas:          1,
		MemoryStorage:     true,
	})
	cancel()
	if err != nil {
		return 0, fmt.Errorf("reading the changesets: %w", err)
	}
	defer func() {
		ctx, cancel := b.ctx()
		defer cancel()
		_ = b.stream.DeleteConsumer(ctx, cons.CachedInfo().Name)
	}()
	var queue []jetstream.Msg
	var (
		pending [][]byte // changesets decoded, not yet applied
		size    int
		parts   []byte // the parts of the changeset being read
		part    uint64
	)
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		err := rp.Apply(pending)
		pending, size = pending[:0], 0
		return err
	}
	for {
		if len(queue) == 0 {
			if queue, err = fetch(cons, b.opts.Timeout); err != nil {
				return 0, fmt.Errorf("reading changeset %d: %w", n+1, err)
			}
		}
		msg := queue[0]
		queue = queue[1:]
		md, err := msg.Metadata()
		if err != nil {
			return 0, err
		}
		raw := &jetstream.RawStreamMsg{Subject: msg.Subject(), Sequence: md.Sequence.Stream, Header: msg.Headers(), Data: msg.Data()}
		seq, err := headerUint(raw, hdrSeq)
		if err != nil {
			return 0, err
		}
		if seq <= n {
			// Written by a holder whose later writes were refused, or
			// covered by the snapshot.
			if md.Sequence.Stream >= last {
				break
			}
			continue
		}
		if seq != n+1 {
			return 0, fmt.Errorf("changeset %d follows changeset %d (stream sequence %d): the changesets between were purged or lost: %w",
				seq, n, md.Sequence.Stream, store.ErrBadChangeset)
		}
		p, err := headerUint(raw, hdrPart)
		if err != nil {
			return 0, err
		}
		total, err := headerUint(raw, hdrParts)
		if err != nil {
			return 0, err
		}
		if p != part+1 {
			return 0, fmt.Errorf("changeset %d: part %d follows part %d: %w", seq, p, part, store.ErrBadChangeset)
		}
		parts = append(parts, raw.Data...)
		// The stream holds it until the next snapshot, whoever wrote it.
		b.since += int64(len(raw.Data))
		part = p
		if p == total {
			cs, err := s2.Decode(nil, parts)
			if err != nil {
				return 0, fmt.Errorf("changeset %d: %v: %w", seq, err, store.ErrBadChangeset)
			}
			pending = append(pending, cs)
			size += len(cs)
			n, parts, part = seq, nil, 0
			if size >= 16<<20 || len(pending) >= 1024 {
				if err := flush(); err != nil {
					return 0, fmt.Errorf("changeset %d: %w", n, err)
				}
			}
		}
		if md.Sequence.Stream >= last {
			break
		}
	}
	if part != 0 {
		return 0, fmt.Errorf("changeset %d is incomplete: %w", n+1, store.ErrBadChangeset)
	}
	if err := flush(); err != nil {
		return 0, fmt.Errorf("changeset %d: %w", n, err)
	}
	return n, rp.Close()
}

// fetch returns the next messages of cons, at least one, without waiting
// for a full batch.
func fetch(cons jetstream.Consumer, timeout time.Duration) ([]jetstream.Msg, error) {
	deadline := time.Now().Add(timeout)
	for {
		batch, err := cons.FetchNoWait(256)
		var out []jetstream.Msg
		if err == nil {
			for m := range batch.Messages() {
				out = append(out, m)
			}
			err = batch.Error()
		}
		if len(out) > 0 {
			return out, nil
		}
		// A consumer just created on a cluster may not answer yet.
		if err != nil && !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no message within %s (%v)", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Commit publishes changeset c, numbered after the last one, fenced.
func (b *jsBackend) Commit(c store.Changeset) error {
	b.mu.Lock()
	n := b.n + 1
	b.mu.Unlock()
	if err := c.Number(n); err != nil {
		return err
	}
	payload := s2.Encode(nil, c.Bytes())
	msgs := b.messages(b.logSubj, payload, func(m *nats.Msg, part, parts int) {
		m.Header.Set(hdrSeq, strconv.FormatUint(n, 10))
		// Unique per fence write, so a holder that fenced again never
		// collides with what it wrote before.
		m.Header.Set(jetstream.MsgIDHeader, b.opts.Tenant+"."+strconv.FormatUint(b.fenceSeq, 10)+"."+
			strconv.FormatUint(n, 10)+"."+strconv.Itoa(part))
	})
	if len(msgs) > maxBatchParts {
		return fmt.Errorf("a transaction of %d bytes compressed needs %d messages, over the %d of one atomic batch",
			len(payload), len(msgs), maxBatchParts)
	}
	seq, err := b.publish(msgs)
	if err != nil {
		return fmt.Errorf("recording changeset %d of tenant %s in JetStream: %w", n, b.opts.Tenant, err)
	}
	b.mu.Lock()
	b.n = n
	b.seqs[n] = seq
	b.since += int64(len(payload))
	due := b.since >= b.opts.SnapshotAfter
	b.mu.Unlock()
	if due {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// messages cuts payload into the parts of one atomic batch on subj, each
// marked by mark; the first carries the fence check.
func (b *jsBackend) messages(subj string, payload []byte, mark func(m *nats.Msg, part, parts int)) []*nats.Msg {
	parts := max(1, (len(payload)+b.part-1)/b.part)
	msgs := make([]*nats.Msg, parts)
	for i := range parts {
		m := nats.NewMsg(subj)
		m.Data = payload[i*b.part : min(len(payload), (i+1)*b.part)]
		m.Header.Set(hdrPart, strconv.Itoa(i+1))
		m.Header.Set(hdrParts, strconv.Itoa(parts))
		m.Header.Set(hdrFence, strconv.FormatUint(b.opts.Fence, 10))
		if i == 0 {
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(b.fenceSeq, 10))
			m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, b.fenceSubj)
		}
		mark(m, i+1, parts)
		msgs[i] = m
	}
	return msgs
}

// publish stores msgs in the stream together, retrying on timeouts, and
// returns the stream sequence of the last. A fence check that fails is
// store.ErrFenced.
func (b *jsBackend) publish(msgs []*nats.Msg) (uint64, error) {
	deadline := time.Now().Add(3 * b.opts.Timeout)
	for {
		seq, err := b.publishOnce(msgs)
		switch {
		case err == nil:
			return seq, nil
		case wrongLastSeq(err):
			// On a replicated stream the server gives the same answer
			// while another write that checks the fence is in flight (a
			// snapshot beside a commit): only a fence that moved is one.
			fenced, ferr := b.fenceMoved()
			if ferr == nil && !fenced && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if ferr != nil {
				return 0, fmt.Errorf("%w: JetStream refused the write (%v) and the fence cannot be read: %v", store.ErrDiverged, err, ferr)
			}
			if !fenced {
				return 0, fmt.Errorf("%w: JetStream kept refusing the write as out of sequence although the fence is this holder's: %v", store.ErrDiverged, err)
			}
			return 0, fmt.Errorf("%w: tenant %s was fenced by a newer lease than revision %d held by %q (%v)",
				store.ErrFenced, b.opts.Tenant, b.opts.Fence, b.opts.Holder, err)
		case apiCode(err) != 0 && apiCode(err) != jsErrCodeBatchTooManyInflight:
			return 0, err
		case time.Now().After(deadline) || b.opts.Context.Err() != nil:
			// They may have landed or not: only a restore can tell.
			return 0, fmt.Errorf("%w: JetStream did not answer: %v", store.ErrDiverged, err)
		}
		// A timeout or a lost connection: the messages may have landed.
		// Sending them again with the same ids stores them once.
		b.opts.Logger.Warn("recording state in JetStream failed; retrying", "tenant", b.opts.Tenant, "err", err)
		time.Sleep(200 * time.Millisecond)
	}
}

// fenceMoved reports whether the last fence of the tenant is another
// holder's.
func (b *jsBackend) fenceMoved() (bool, error) {
	ctx, cancel := b.ctx()
	defer cancel()
	m, err := b.lastMsg(ctx, b.fenceSubj)
	if err != nil {
		return false, err
	}
	return m == nil || m.Sequence != b.fenceSeq, nil
}

// randomID returns 32 random hex digits: a batch or snapshot id.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Error codes of the server's atomic batch publish.
const (
	jsErrCodeBatchDuplicate       jetstream.ErrorCode = 10201
	jsErrCodeBatchTooManyInflight jetstream.ErrorCode = 10210
)

func (b *jsBackend) publishOnce(msgs []*nats.Msg) (uint64, error) {
	if len(msgs) == 1 {
		ctx, cancel := b.ctx()
		defer cancel()
		ack, err := b.js.PublishMsg(ctx, msgs[0])
		if err != nil {
			return 0, err
		}
		return ack.Sequence, nil
	}
	id := randomID()
	for i, m := range msgs {
		m.Header.Set(hdrBatchID, id)
		m.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
		if i == len(msgs)-1 {
			m.Header.Set(hdrBatchDone, "1")
		}
		// Each part has the request timeout: the server ends a batch whose
		// next part does not come within its own timeout (10 s).
		seq, landed, err := b.publishPart(m, i == len(msgs)-1, msgs)
		if err != nil || landed || i == len(msgs)-1 {
			return seq, err
		}
	}
	return 0, errors.New("an empty batch")
}

// publishPart sends one part of a batch; for the last it returns the
// stream sequence the server stored it at. landed says that an earlier
// attempt stored the whole batch, whose last sequence is seq.
func (b *jsBackend) publishPart(m *nats.Msg, last bool, msgs []*nats.Msg) (seq uint64, landed bool, err error) {
	ctx, cancel := b.ctx()
	defer cancel()
	if last {
		ack, err := b.js.PublishMsg(ctx, m)
		if apiCode(err) == jsErrCodeBatchDuplicate {
			seq, err := b.landedSeq(ctx, msgs)
			return seq, true, err
		}
		if err != nil {
			return 0, false, err
		}
		return ack.Sequence, false, nil
	}
	// The server answers each part it staged with an empty message, or
	// with an error.
	resp, err := b.nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return 0, false, err
	}
	if len(resp.Data) > 0 {
		var r struct {
			Error *jetstream.APIError `json:"error"`
		}
		if json.Unmarshal(resp.Data, &r) == nil && r.Error != nil {
			if r.Error.ErrorCode == jsErrCodeBatchDuplicate {
				seq, err := b.landedSeq(ctx, msgs)
				return seq, true, err
			}
			return 0, false, r.Error
		}
	}
	return 0, false, nil
}

// landedSeq returns the stream sequence of the last of msgs, which an
// earlier attempt stored: the last message of their subject is theirs.
func (b *jsBackend) landedSeq(ctx context.Context, msgs []*nats.Msg) (uint64, error) {
	last := msgs[len(msgs)-1]
	m, err := b.lastMsg(ctx, last.Subject)
	if err != nil {
		return 0, err
	}
	if m == nil || m.Header.Get(jetstream.MsgIDHeader) != last.Header.Get(jetstream.MsgIDHeader) {
		return 0, fmt.Errorf("an earlier attempt stored part of this batch, and its last message is not the subject's last: %w", store.ErrBadChangeset)
	}
	return m.Sequence, nil
}

// Opened starts the snapshots of s.
func (b *jsBackend) Opened(s *store.Store) {
	b.store = s
	b.wg.Add(1)
	go b.snapshots()
}

func (b *jsBackend) Close() error {
	select {
	case <-b.stop:
	default:
		close(b.stop)
	}
	b.wg.Wait()
	return nil
}

func (b *jsBackend) snapshots() {
	defer b.wg.Done()
	for {
		select {
		case <-b.stop:
			return
		case <-b.kick:
		}
		if err := b.snapshot(); err != nil {
			b.opts.Logger.Warn("snapshot of the state failed; the stream keeps the changesets, and the next one tries again",
				"tenant", b.opts.Tenant, "err", err)
		}
	}
}

// snapshot writes the state as of the last committed changeset to the
// stream and purges the changesets and snapshots it replaces.
func (b *jsBackend) snapshot() error {
	var content bytes.Buffer
	w := s2.NewWriter(&content)
	n, err := b.store.WriteSnapshot(w)
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		return err
	}
	b.mu.Lock()
	after, ok := b.seqs[n]
	b.mu.Unlock()
	if !ok {
		return fmt.Errorf("the stream sequence of changeset %d is unknown", n)
	}
	last, parts, err := b.publishSnapshot(content.Bytes(), n, after)
	if err != nil {
		return err
	}
	b.mu.Lock()
	for k := range b.seqs {
		if k < n {
			delete(b.seqs, k)
		}
	}
	b.since = 0
	b.mu.Unlock()
	ctx, cancel := b.ctx()
	defer cancel()
	if err := b.stream.Purge(ctx, jetstream.WithPurgeSubject(b.logSubj), jetstream.WithPurgeSequence(after+1)); err != nil {
		return fmt.Errorf("purging the changesets before the snapshot: %w", err)
	}
	first := last - uint64(parts) + 1
	if err := b.stream.Purge(ctx, jetstream.WithPurgeSubject(b.snapSubj), jetstream.WithPurgeSequence(first)); err != nil {
		return fmt.Errorf("purging the snapshots before the new one: %w", err)
	}
	return nil
}

// publishSnapshot stores content, the snapshot of the state as of
// changeset n (stream sequence after), fenced, and returns the stream
// sequence of its last part and its number of parts.
func (b *jsBackend) publishSnapshot(content []byte, n, after uint64) (last uint64, parts int, err error) {
	id := randomID()
	msgs := b.messages(b.snapSubj, content, func(m *nats.Msg, part, parts int) {
		m.Header.Set(hdrSeq, strconv.FormatUint(n, 10))
		m.Header.Set(hdrLogAfter, strconv.FormatUint(after, 10))
		m.Header.Set(hdrSnapID, id)
	})
	if len(msgs) > maxBatchParts {
		return 0, 0, fmt.Errorf("the snapshot is %d bytes compressed, over the %d messages of one atomic batch", len(content), maxBatchParts)
	}
	last, err = b.publish(msgs)
	return last, len(msgs), err
}
