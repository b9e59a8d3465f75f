package store

import (
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
// A Backend serves one Store: open a new one for every Open.
type Backend interface {
	// Name is the backend's name, "bbolt" or "jetstream".
	Name() string
	// prepare readies the local files of the store at path before Open
	// opens them: JetStream replaces them with the replicated state.
	prepare(path string) error
	// replicates reports whether transactions must record their changes
	// for commit.
	replicates() bool
	// commit makes the changes tx recorded durable; the local commit
	// follows only if it succeeds.
	commit(tx *txn) error
	// opened hands the open store to the backend (for its snapshots).
	opened(s *Store)
	// close stops what the backend runs; the store is closing.
	close() error
}

// Bolt returns the default backend: the state lives in the local bbolt file
// and the record log beside it, on the volume of a single process.
func Bolt() Backend { return boltBackend{} }

type boltBackend struct{}

func (boltBackend) Name() string         { return "bbolt" }
func (boltBackend) prepare(string) error { return nil }
func (boltBackend) replicates() bool     { return false }
func (boltBackend) commit(*txn) error    { return nil }
func (boltBackend) opened(*Store)        {}
func (boltBackend) close() error         { return nil }
