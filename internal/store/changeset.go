package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
)

// A changeset is what one read-write transaction wrote, in the order it
// wrote it: bucket creations and deletions, puts and deletes of keys,
// bucket sequences, and the frames it appended to the record log (with
// their offsets, so that replaying is idempotent). A replicating backend
// makes it durable before the transaction commits; replaying the
// changesets in order on a copy of the state reproduces the state, bit for
// bit in the buckets and frame for frame in the record log.
//
// Encoding: a sequence of operations, each an op byte and its fields;
// byte strings are a uvarint length and the bytes, numbers uvarints. A
// bucket path is a byte string holding the names from the root, each a
// byte string.
type changeset struct {
	b []byte
	// ops counts the operations.
	ops int
}

// The operations of a changeset.
const (
	opCreateBucket byte = 1 + iota // path: the bucket exists afterwards
	opDeleteBucket                 // path
	opPut                          // path, key, value
	opDelete                       // path, key
	opSetSequence                  // path, sequence
	opLogCreate                    // generation: a new, empty record log
	opLogWrite                     // generation, offset, bytes
)

// ErrBadChangeset says that a replicated changeset or snapshot cannot be
// decoded or replayed: a replicating backend wraps it too when what it reads
// back is not what it wrote.
var ErrBadChangeset = errors.New("dedupe: a replicated changeset does not apply to the state")

// appendPath appends name to an encoded bucket path.
func appendPath(path, name []byte) []byte {
	path = binary.AppendUvarint(path, uint64(len(name)))
	return append(path, name...)
}

func (c *changeset) op(op byte) {
	c.b = append(c.b, op)
	c.ops++
}

func (c *changeset) bytes(v []byte) {
	c.b = binary.AppendUvarint(c.b, uint64(len(v)))
	c.b = append(c.b, v...)
}

func (c *changeset) uint(v uint64) { c.b = binary.AppendUvarint(c.b, v) }

func (c *changeset) createBucket(path []byte) {
	c.op(opCreateBucket)
	c.bytes(path)
}

func (c *changeset) deleteBucket(path []byte) {
	c.op(opDeleteBucket)
	c.bytes(path)
}

func (c *changeset) put(path, key, value []byte) {
	c.op(opPut)
	c.bytes(path)
	c.bytes(key)
	c.bytes(value)
}

func (c *changeset) delete(path, key []byte) {
	c.op(opDelete)
	c.bytes(path)
	c.bytes(key)
}

func (c *changeset) setSequence(path []byte, seq uint64) {
	c.op(opSetSequence)
	c.bytes(path)
	c.uint(seq)
}

func (c *changeset) logCreate(gen uint64) {
	c.op(opLogCreate)
	c.uint(gen)
}

func (c *changeset) logWrite(gen uint64, off int64, data []byte) {
	c.op(opLogWrite)
	c.uint(gen)
	c.uint(uint64(off))
	c.bytes(data)
}

// csReader decodes a changeset.
type csReader struct {
	b   []byte
	err error
}

func (r *csReader) uint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("a truncated number: %w", ErrBadChangeset)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *csReader) bytes() []byte {
	n := r.uint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("a string of %d bytes where %d remain: %w", n, len(r.b), ErrBadChangeset)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// pathNames splits an encoded bucket path.
func pathNames(path []byte) ([][]byte, error) {
	r := csReader{b: path}
	var names [][]byte
	for len(r.b) > 0 && r.err == nil {
		names = append(names, r.bytes())
	}
	if r.err == nil && len(names) == 0 {
		r.err = fmt.Errorf("an empty bucket path: %w", ErrBadChangeset)
	}
	return names, r.err
}

// Replay applies changesets to a bbolt file and the record logs beside it,
// as they were recorded: the state a restore starts from is a snapshot
// (RestoreSnapshot), and every changeset after it is replayed in order.
type Replay struct {
	db   *bolt.DB
	path string              // the state file; record logs are beside it
	logs map[uint64]*os.File // record logs written, synced by finish
}

// OpenReplay opens the bbolt file at path (created if missing) to replay
// changesets on it. No store may have it open; Close ends the replay.
func OpenReplay(path string) (*Replay, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: DefaultLockTimeout, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, err
	}
	return &Replay{db: db, path: path, logs: make(map[uint64]*os.File)}, nil
}

// Apply replays changesets, in order, in one bbolt transaction: all of
// them are applied or none. A changeset that does not apply to the state is
// ErrBadChangeset.
func (p *Replay) Apply(changesets [][]byte) error {
	return p.db.Update(func(tx *bolt.Tx) error {
		for _, cs := range changesets {
			if err := p.apply(tx, cs); err != nil {
				return err
			}
		}
		return nil
	})
}

// Close syncs and closes the record logs the replay wrote, and closes the
// file. Closing again does nothing.
func (p *Replay) Close() error {
	err := p.finish()
	if p.db != nil {
		if cerr := p.db.Close(); err == nil {
			err = cerr
		}
		p.db = nil
	}
	return err
}

// apply replays changeset cs in tx.
func (p *Replay) apply(tx *bolt.Tx, cs []byte) error {
	r := csReader{b: cs}
	for len(r.b) > 0 {
		op := r.b[0]
		r.b = r.b[1:]
		var err error
		switch op {
		case opCreateBucket:
			err = walk(tx, r.bytes(), true, func(parent *bolt.Bucket, name []byte) error { return nil })
		case opDeleteBucket:
			err = walk(tx, r.bytes(), false, func(parent *bolt.Bucket, name []byte) error {
				if parent == nil {
					return tx.DeleteBucket(name)
				}
				return parent.DeleteBucket(name)
			})
		case opPut, opDelete:
			path, key := r.bytes(), r.bytes()
			var value []byte
			if op == opPut {
				value = r.bytes()
			}
			if r.err != nil {
				return r.err
			}
			err = inBucket(tx, path, func(b *bolt.Bucket) error {
				if op == opPut {
					return b.Put(key, value)
				}
				return b.Delete(key)
			})
		case opSetSequence:
			path, seq := r.bytes(), r.uint()
			if r.err != nil {
				return r.err
			}
			err = inBucket(tx, path, func(b *bolt.Bucket) error { return b.SetSequence(seq) })
		case opLogCreate:
			gen := r.uint()
			if r.err != nil {
				return r.err
			}
			err = p.createLog(gen)
		case opLogWrite:
			gen, off, data := r.uint(), r.uint(), r.bytes()
			if r.err != nil {
				return r.err
			}
			err = p.writeLog(gen, int64(off), data)
		default:
			return fmt.Errorf("operation %d is unknown (written by a newer relay?): %w", op, ErrBadChangeset)
		}
		if r.err != nil {
			return r.err
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// walk finds the parent of the last bucket of path, creating the buckets
// on the way (and the last one) when create is set, and calls fn with it
// (nil for a root bucket) and the last name.
func walk(tx *bolt.Tx, path []byte, create bool, fn func(parent *bolt.Bucket, name []byte) error) error {
	names, err := pathNames(path)
	if err != nil {
		return err
	}
	var parent *bolt.Bucket
	for i, name := range names {
		last := i == len(names)-1
		if last && !create {
			return fn(parent, name)
		}
		var b *bolt.Bucket
		switch {
		case create && parent == nil:
			b, err = tx.CreateBucketIfNotExists(name)
		case create:
			b, err = parent.CreateBucketIfNotExists(name)
		default:
			b = bucketOf(tx, parent, name)
			if b == nil {
				err = fmt.Errorf("bucket %q is missing: %w", name, ErrBadChangeset)
			}
		}
		if err != nil {
			return err
		}
		if last {
			return fn(parent, name)
		}
		parent = b
	}
	return nil
}

// inBucket calls fn with the bucket at path, which must exist.
func inBucket(tx *bolt.Tx, path []byte, fn func(b *bolt.Bucket) error) error {
	return walk(tx, path, false, func(parent *bolt.Bucket, name []byte) error {
		b := bucketOf(tx, parent, name)
		if b == nil {
			return fmt.Errorf("bucket %q is missing: %w", name, ErrBadChangeset)
		}
		return fn(b)
	})
}

func bucketOf(tx *bolt.Tx, parent *bolt.Bucket, name []byte) *bolt.Bucket {
	if parent == nil {
		return tx.Bucket(name)
	}
	return parent.Bucket(name)
}

func (p *Replay) createLog(gen uint64) error {
	if f := p.logs[gen]; f != nil {
		_ = f.Close()
		delete(p.logs, gen)
	}
	l, err := createRecordLog(p.path, gen)
	if err != nil {
		return err
	}
	p.logs[gen] = l.f
	return nil
}

func (p *Replay) writeLog(gen uint64, off int64, data []byte) error {
	f := p.logs[gen]
	if f == nil {
		var err error
		f, err = os.OpenFile(recordLogPath(p.path, gen), os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			// The first frames of a new store: its log was made at
			// Open, outside any transaction.
			if err := p.createLog(gen); err != nil {
				return err
			}
			f = p.logs[gen]
		} else if err != nil {
			return fmt.Errorf("record log: %w", err)
		} else {
			p.logs[gen] = f
		}
	}
	if _, err := f.WriteAt(data, off); err != nil {
		return fmt.Errorf("record log %s: %w", f.Name(), err)
	}
	return nil
}

// finish syncs and closes the record logs the replay wrote.
func (p *Replay) finish() error {
	var err error
	for gen, f := range p.logs {
		if serr := f.Sync(); err == nil {
			err = serr
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		delete(p.logs, gen)
	}
	return err
}
