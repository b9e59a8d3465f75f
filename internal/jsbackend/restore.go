package jsbackend

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relay-energy/relay/internal/store"
)

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
