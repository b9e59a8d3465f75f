package store

import (
	"encoding/binary"
	"errors"
)

// ErrDiverged is returned by every write of a store whose local file fell
// behind the state its backend replicated: a local commit failed after the
// backend had recorded the transaction. Close the store and open it again,
// which restores the file from the backend.
var ErrDiverged = errors.New("dedupe: the local state file is behind the replicated state; reopen the store to restore it")

// ErrFenced is returned when another replica has taken the tenant whose
// state a store keeps: it holds a newer lease and wrote a fence, so this
// store's writes are refused. The replica must stop serving the tenant.
var ErrFenced = errors.New("dedupe: another replica holds this tenant's state now")

// Backend is where a Store keeps its state durable. Bolt, the default,
// keeps it in the local bbolt file and the record log beside it. JetStream
// keeps it in a JetStream stream, replicated by the NATS servers, and
// treats the local file as a cache it restores at Open. The guarantees of
// the store (what one transaction writes is recorded together or not at
// all, nothing produced twice, nothing lost across a crash) hold on both.
//
// A Backend serves one Store: open a new one for every Open. The store owns
// the files and their formats; a replicating backend moves their bytes
// (changesets, snapshots) and reads and writes the files through the
// store's functions for them: LocalState, RemoveLocal, WriteFileSnapshot,
// RestoreSnapshot, OpenReplay and (*Store).WriteSnapshot.
type Backend interface {
	// Name is the backend's name, "bbolt" or "jetstream".
	Name() string
	// Prepare readies the local files of the store at path before Open
	// opens them: JetStream replaces them with the replicated state.
	Prepare(path string) error
	// Replicates reports whether transactions must record their changes
	// for Commit.
	Replicates() bool
	// Commit makes the changes a transaction recorded durable; the local
	// commit follows only if it succeeds. It is called while the
	// transaction holds bbolt's writer lock, so commits come one at a
	// time, in commit order. An error wrapping ErrDiverged says that the
	// changes may be durable although Commit failed.
	Commit(c Changeset) error
	// Opened hands the open store to the backend (for its snapshots).
	Opened(s *Store)
	// Close stops what the backend runs; the store is closing.
	Close() error
}

// Changeset is what one read-write transaction wrote, as a replicating
// backend's Commit receives it, while the transaction is still open.
type Changeset struct{ tx *txn }

// Number records n, the changeset's number in the order of the backend, in
// the transaction's meta bucket (replicaSeq), so that a copy of the file
// says which changesets it holds. Call it before Bytes: the number is one of
// the changes.
func (c Changeset) Number(n uint64) error {
	return c.tx.Bucket(bucketMeta).Put(metaReplicaSeq, binary.BigEndian.AppendUint64(nil, n))
}

// Bytes returns the encoded changeset; replaying it (Replay.Apply) on a
// copy of the state before the transaction gives the state after it. The
// bytes are the transaction's: read them, do not change them.
func (c Changeset) Bytes() []byte { return c.tx.rec.b }

// Bolt returns the default backend: the state lives in the local bbolt file
// and the record log beside it, on the volume of a single process.
func Bolt() Backend { return boltBackend{} }

type boltBackend struct{}

func (boltBackend) Name() string           { return "bbolt" }
func (boltBackend) Prepare(string) error   { return nil }
func (boltBackend) Replicates() bool       { return false }
func (boltBackend) Commit(Changeset) error { return nil }
func (boltBackend) Opened(*Store)          {}
func (boltBackend) Close() error           { return nil }
