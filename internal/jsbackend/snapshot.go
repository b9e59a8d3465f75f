package jsbackend

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relay-energy/relay/internal/store"
)

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
