package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// The files of a store whose backend replicates its state: the backend
// restores them from its snapshots and changesets, and writes snapshots of
// them, through the functions below; their formats are the store's.
//
// A snapshot's content is snapMagic, the generation of the record log
// (uvarint), then the bbolt file and the record log, each as its length
// (uvarint) and its bytes. Generation 0 is a file of schema version 1,
// which has no record log: its length is 0.

// snapMagic starts the content of a snapshot.
const snapMagic = "relaysnap\x01"

// LocalState reports whether the file at path is the state of the bbolt
// backend (a relay store whose meta has no replicaSeq), and the generation
// of its record log. A missing file, a replicating backend's cache and a
// file that is no relay store are not (Open says what is wrong with the
// last).
func LocalState(path string) (gen uint64, own bool, err error) {
	if st, err := os.Stat(path); errors.Is(err, os.ErrNotExist) || (err == nil && st.Size() == 0) {
		return 0, false, nil
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: DefaultLockTimeout})
	if err != nil {
		return 0, false, fmt.Errorf("the local state file %s: %w", path, err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil || meta.Get(metaReplicaSeq) != nil {
			return nil
		}
		own = true
		v := meta.Get(metaRecordsGen)
		if len(v) == 8 {
			gen = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return gen, own, err
}

// RemoveLocal deletes the file at path and every record log beside it: a
// replicating backend's cache, before a restore.
func RemoveLocal(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the local cache of the state: %w", err)
	}
	return removeOtherRecordLogs(path, 0)
}

// WriteFileSnapshot writes to w the content of a snapshot of the bbolt
// file at path and the record log of generation gen beside it, as they are
// on disk: a state of the bbolt backend (LocalState) becomes a replicating
// backend's first snapshot. No store may have the files open.
func WriteFileSnapshot(path string, gen uint64, w io.Writer) error {
	if _, err := w.Write(append([]byte(snapMagic), binary.AppendUvarint(nil, gen)...)); err != nil {
		return err
	}
	paths := []string{path}
	if gen != 0 {
		paths = append(paths, recordLogPath(path, gen))
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if _, err := w.Write(binary.AppendUvarint(nil, uint64(len(data)))); err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	if gen == 0 {
		// A schema-1 file has no record log.
		if _, err := w.Write(binary.AppendUvarint(nil, 0)); err != nil {
			return err
		}
	}
	return nil
}

// WriteSnapshot writes to w the content of a snapshot of the state as of
// the last committed transaction, from one read transaction (writes go on
// meanwhile), and returns the number of the last changeset it holds
// (Changeset.Number). A store none of whose transactions was numbered (one
// of the bbolt backend) has no snapshot.
func (s *Store) WriteSnapshot(w io.Writer) (n uint64, err error) {
	err = s.view(func(tx *txn) error {
		meta := tx.Bucket(bucketMeta)
		v := meta.Get(metaReplicaSeq)
		if len(v) != 8 {
			return fmt.Errorf("meta %q: %w", metaReplicaSeq, errCorrupt)
		}
		n = binary.BigEndian.Uint64(v)
		l, err := s.acquireTxLog(tx)
		if err != nil {
			return err
		}
		defer s.releaseLog(l)
		end := l.end.Load()
		hdr := append([]byte(snapMagic), binary.AppendUvarint(nil, l.gen)...)
		hdr = binary.AppendUvarint(hdr, uint64(tx.tx.Size()))
		if _, err := w.Write(hdr); err != nil {
			return err
		}
		if _, err := tx.tx.WriteTo(w); err != nil {
			return err
		}
		if _, err := w.Write(binary.AppendUvarint(nil, uint64(end))); err != nil {
			return err
		}
		_, err = io.Copy(w, io.NewSectionReader(l.f, 0, end))
		return err
	})
	return n, err
}

// RestoreSnapshot writes the bbolt file at path and its record log from
// the content of a snapshot read from r, replacing what they held, and
// syncs them. Content that is not a whole snapshot is ErrBadChangeset.
func RestoreSnapshot(path string, r io.Reader) error {
	br := bufio.NewReader(r)
	magic := make([]byte, len(snapMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != snapMagic {
		return fmt.Errorf("not a relay snapshot (%v): %w", err, ErrBadChangeset)
	}
	gen, err := binary.ReadUvarint(br)
	if err != nil {
		return fmt.Errorf("snapshot header: %w", ErrBadChangeset)
	}
	for i, p := range []string{path, recordLogPath(path, gen)} {
		size, err := binary.ReadUvarint(br)
		if err != nil {
			return fmt.Errorf("snapshot header: %w", ErrBadChangeset)
		}
		if i == 1 && gen == 0 {
			// The file of schema version 1 of an import: no record log.
			break
		}
		if err := writeFileFrom(p, io.LimitReader(br, int64(size)), int64(size)); err != nil {
			return err
		}
	}
	return syncDir(filepath.Dir(path))
}

func writeFileFrom(p string, r io.Reader, size int64) error {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, r)
	if err == nil && n != size {
		err = fmt.Errorf("%s: the snapshot holds %d of its %d bytes: %w", p, n, size, ErrBadChangeset)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
