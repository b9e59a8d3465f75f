package jsbackend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relay-energy/relay/internal/store"
)

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
