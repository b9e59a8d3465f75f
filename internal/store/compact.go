package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
)

// compactChunk is how many bytes of frames compaction writes at once.
const compactChunk = 1 << 20

// compactRecords compacts the record log when its garbage (the frames of
// records replaced or of alarms that ended, and bytes of failed commits)
// exceeds both its live bytes and s.compactFloor: the live frames are
// copied to the log of the next generation, and one transaction points
// every state at its copy and moves the generation; the old log is deleted
// after the commit. Copying happens outside bbolt's writer lock, so Apply
// waits only for the final transaction, which rewrites the state of every
// ongoing alarm (and copies the few frames appended meanwhile). It reports
// whether it compacted.
func (s *Store) compactRecords(ctx context.Context) (bool, error) {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()

	var gen, live uint64
	var refs []recordRef
	var old *recordLog
	err := s.view(func(tx *txn) error {
		meta := tx.Bucket(bucketMeta)
		var err error
		if gen, err = metaUint(meta, metaRecordsGen); err != nil {
			return err
		}
		if live, err = metaUint(meta, metaRecordsLive); err != nil {
			return err
		}
		if old, err = s.acquireLog(gen); err != nil {
			return err
		}
		if !s.compactDue(old, live) {
			return nil
		}
		if err := walkOngoing(tx, func(_ []byte, st *state) error {
			if st.rec.n != 0 {
				refs = append(refs, st.rec)
			}
			return nil
		}); err != nil {
			return err
		}
		jc := tx.Bucket(bucketJournal).Cursor()
		for k, v := jc.First(); k != nil; k, v = jc.Next() {
			ref, _, err := journalRef(k, v)
			if err != nil {
				return fmt.Errorf("journal entry of %q: %w", k[min(8, len(k)):], err)
			}
			if ref.n != 0 {
				refs = append(refs, ref)
			}
		}
		return nil
	})
	if old != nil {
		defer s.releaseLog(old)
	}
	if err != nil || !s.compactDue(old, live) {
		return false, err
	}

	// The live frames, in the order of the old log, into the next one.
	next, err := createRecordLog(s.path, gen+1)
	if err != nil {
		return false, err
	}
	moved, err := copyFrames(ctx, old, next, refs)
	if err == nil {
		err = next.f.Sync()
	}
	if err != nil {
		discardLog(next)
		return false, fmt.Errorf("copying to %s: %w", next.path, err)
	}
	s.logMu.Lock()
	s.logs[next.gen] = next
	s.logMu.Unlock()

	err = s.update(func(tx *txn, _ map[string]int) error {
		meta := tx.Bucket(bucketMeta)
		if g, err := metaUint(meta, metaRecordsGen); err != nil || g != gen {
			return fmt.Errorf("the generation moved from %d to %d meanwhile (%v): %w", gen, g, err, errCorrupt)
		}
		lt := &logTx{log: next, rec: tx.rec}
		if tx.rec != nil {
			// The copy was made outside the transaction: a replica
			// replaying it gets the whole new log from the changeset.
			if err := recordLogCopy(tx.rec, next); err != nil {
				return err
			}
		}
		var total uint64
		// move points ref at the copy of its frame in next.
		move := func(id []byte, ref *recordRef) error {
			total += uint64(ref.n)
			if off, ok := moved[ref.off]; ok {
				ref.off = off
				return nil
			}
			// Appended after the copy began.
			frame, err := old.readFrame(*ref)
			if err == nil {
				err = checkFrame(frame)
			}
			if err != nil {
				return recordError(old, id, *ref, err)
			}
			lt.putFrame(ref, frame)
			return nil
		}
		if err := updateOngoing(tx, func(k []byte, st *state) (bool, error) {
			if st.rec.n == 0 {
				return false, nil
			}
			return true, move(k, &st.rec)
		}); err != nil {
			return err
		}
		// Journal values change length with their offsets: collected, then
		// written, since a cursor does not survive a write to its bucket.
		journal := tx.Bucket(bucketJournal)
		type jput struct{ k, v []byte }
		var puts []jput
		jc := journal.Cursor()
		for k, v := jc.First(); k != nil; k, v = jc.Next() {
			ref, at, err := journalRef(k, v)
			if err != nil {
				return fmt.Errorf("journal entry of %q: %w", k[min(8, len(k)):], err)
			}
			if ref.n == 0 {
				continue
			}
			if err := move(k[8:], &ref); err != nil {
				return err
			}
			puts = append(puts, jput{k: bytes.Clone(k), v: appendJournalRef(append([]byte(nil), v[:at]...), ref)})
		}
		for _, p := range puts {
			if err := journal.Put(p.k, p.v); err != nil {
				return err
			}
		}
		if err := meta.Put(metaRecordsGen, binary.BigEndian.AppendUint64(nil, gen+1)); err != nil {
			return err
		}
		if err := meta.Put(metaRecordsLive, binary.BigEndian.AppendUint64(nil, total)); err != nil {
			return err
		}
		return lt.flush()
	})
	if err != nil {
		s.retireLog(next)
		_ = os.Remove(next.path)
		return false, err
	}
	s.logMu.Lock()
	s.logGen = next.gen
	s.logMu.Unlock()
	s.retireLog(old)
	// Open deletes it if this fails or a crash comes first.
	if err := os.Remove(old.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return true, fmt.Errorf("removing the compacted record log: %w", err)
	}
	return true, nil
}

// compactDue says whether the garbage of l, which holds live bytes of
// frames that states reference, calls for a compaction.
func (s *Store) compactDue(l *recordLog, live uint64) bool {
	if l == nil {
		return false
	}
	garbage := l.end.Load() - int64(len(recordLogMagic)) - int64(live)
	return garbage > int64(live) && garbage >= s.compactFloor
}

// copyFrames appends the frames refs point at in from to to, checked, in
// the order of from, and returns their new offsets by old offset.
func copyFrames(ctx context.Context, from, to *recordLog, refs []recordRef) (map[uint64]uint64, error) {
	slices.SortFunc(refs, func(a, b recordRef) int {
		switch {
		case a.off < b.off:
			return -1
		case a.off > b.off:
			return 1
		}
		return 0
	})
	moved := make(map[uint64]uint64, len(refs))
	end := to.end.Load()
	buf := make([]byte, 0, 2*compactChunk)
	flush := func() error {
		if _, err := to.f.WriteAt(buf, end); err != nil {
			return err
		}
		end += int64(len(buf))
		buf = buf[:0]
		return nil
	}
	for i, ref := range refs {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		frame, err := from.readFrame(ref)
		if err == nil {
			err = checkFrame(frame)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: frame at %d of %d bytes: %w", from.path, ref.off, ref.n, err)
		}
		moved[ref.off] = uint64(end) + uint64(len(buf))
		buf = append(buf, frame...)
		if len(buf) >= compactChunk {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	to.end.Store(end)
	return moved, nil
}

// discardLog closes and deletes a record log nothing references.
func discardLog(l *recordLog) {
	_ = l.f.Close()
	_ = os.Remove(l.path)
}

// recordLogCopy records in rec the creation of l and its frames so far.
func recordLogCopy(rec *changeset, l *recordLog) error {
	rec.logCreate(l.gen)
	end := l.end.Load()
	for off := int64(len(recordLogMagic)); off < end; off += compactChunk {
		buf := make([]byte, min(compactChunk, end-off))
		if _, err := l.f.ReadAt(buf, off); err != nil {
			return fmt.Errorf("record log %s: %w", l.path, err)
		}
		rec.logWrite(l.gen, off, buf)
	}
	return nil
}
