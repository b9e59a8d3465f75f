package store

import (
	bolt "go.etcd.io/bbolt"
)

// txn is a bbolt transaction as the store uses it. When the store's backend
// keeps the state elsewhere than the local file (JetStream), every write
// is also recorded, in order, in a changeset, which the backend makes
// durable before the local commit; replaying the changeset on a copy of the
// state before the transaction gives the state after it. Reads go to the
// local file either way.
type txn struct {
	tx  *bolt.Tx
	rec *changeset // nil: nothing records
	// deadAdded names the sinks given dead letters in the transaction,
	// whose bound the store checks before the commit.
	deadAdded map[string]bool
}

// bucket is a bbolt bucket of a txn.
type bucket struct {
	b   *bolt.Bucket
	rec *changeset
	// path names the bucket from the root, encoded for the changeset; it
	// is only built when rec is set.
	path []byte
}

// cursor is a bbolt cursor over a bucket of a txn.
// It has no Delete: deletes go through the bucket, which records them.
type cursor struct{ c *bolt.Cursor }

func (t *txn) child(b *bolt.Bucket, name []byte) *bucket {
	if b == nil {
		return nil
	}
	nb := &bucket{b: b, rec: t.rec}
	if t.rec != nil {
		nb.path = appendPath(nil, name)
	}
	return nb
}

// Bucket returns the root bucket name, or nil.
func (t *txn) Bucket(name []byte) *bucket { return t.child(t.tx.Bucket(name), name) }

// CreateBucket creates the root bucket name, which must not exist.
func (t *txn) CreateBucket(name []byte) (*bucket, error) {
	b, err := t.tx.CreateBucket(name)
	if err != nil {
		return nil, err
	}
	nb := t.child(b, name)
	nb.recordCreated()
	return nb, nil
}

// CreateBucketIfNotExists returns the root bucket name, created if needed.
func (t *txn) CreateBucketIfNotExists(name []byte) (*bucket, error) {
	if b := t.Bucket(name); b != nil {
		return b, nil
	}
	return t.CreateBucket(name)
}

// DeleteBucket deletes the root bucket name and everything in it.
func (t *txn) DeleteBucket(name []byte) error {
	if err := t.tx.DeleteBucket(name); err != nil {
		return err
	}
	if t.rec != nil {
		t.rec.deleteBucket(appendPath(nil, name))
	}
	return nil
}

// Cursor returns a cursor over the names of the root buckets.
func (t *txn) Cursor() *cursor { return &cursor{c: t.tx.Cursor()} }

func (b *bucket) sub(c *bolt.Bucket, name []byte) *bucket {
	if c == nil {
		return nil
	}
	nb := &bucket{b: c, rec: b.rec}
	if b.rec != nil {
		nb.path = appendPath(append([]byte(nil), b.path...), name)
	}
	return nb
}

func (b *bucket) recordCreated() {
	if b.rec != nil {
		b.rec.createBucket(b.path)
	}
}

// Bucket returns the nested bucket name, or nil.
func (b *bucket) Bucket(name []byte) *bucket { return b.sub(b.b.Bucket(name), name) }

// CreateBucket creates the nested bucket name, which must not exist.
func (b *bucket) CreateBucket(name []byte) (*bucket, error) {
	c, err := b.b.CreateBucket(name)
	if err != nil {
		return nil, err
	}
	nb := b.sub(c, name)
	nb.recordCreated()
	return nb, nil
}

// CreateBucketIfNotExists returns the nested bucket name, created if
// needed.
func (b *bucket) CreateBucketIfNotExists(name []byte) (*bucket, error) {
	if nb := b.Bucket(name); nb != nil {
		return nb, nil
	}
	return b.CreateBucket(name)
}

// DeleteBucket deletes the nested bucket name and everything in it.
func (b *bucket) DeleteBucket(name []byte) error {
	if err := b.b.DeleteBucket(name); err != nil {
		return err
	}
	if b.rec != nil {
		b.rec.deleteBucket(appendPath(append([]byte(nil), b.path...), name))
	}
	return nil
}

// Get returns the value of key, or nil; it is valid for the transaction.
func (b *bucket) Get(key []byte) []byte { return b.b.Get(key) }

// Put sets key to value.
func (b *bucket) Put(key, value []byte) error {
	if err := b.b.Put(key, value); err != nil {
		return err
	}
	if b.rec != nil {
		b.rec.put(b.path, key, value)
	}
	return nil
}

// Delete removes key.
func (b *bucket) Delete(key []byte) error {
	if err := b.b.Delete(key); err != nil {
		return err
	}
	if b.rec != nil {
		b.rec.delete(b.path, key)
	}
	return nil
}

// NextSequence returns the next value of the bucket's sequence.
func (b *bucket) NextSequence() (uint64, error) {
	n, err := b.b.NextSequence()
	if err != nil {
		return 0, err
	}
	if b.rec != nil {
		b.rec.setSequence(b.path, n)
	}
	return n, nil
}

// Cursor returns a cursor over the bucket.
func (b *bucket) Cursor() *cursor { return &cursor{c: b.b.Cursor()} }

// ForEach calls fn with every key and value of the bucket, in key order;
// the value of a nested bucket is nil.
func (b *bucket) ForEach(fn func(k, v []byte) error) error { return b.b.ForEach(fn) }

// ForEachBucket calls fn with the name of every nested bucket.
func (b *bucket) ForEachBucket(fn func(k []byte) error) error { return b.b.ForEachBucket(fn) }

// Stats returns the bucket's statistics.
func (b *bucket) Stats() bolt.BucketStats { return b.b.Stats() }

// First moves to the first key.
func (c *cursor) First() ([]byte, []byte) { return c.c.First() }

// Last moves to the last key.
func (c *cursor) Last() ([]byte, []byte) { return c.c.Last() }

// Next moves to the next key.
func (c *cursor) Next() ([]byte, []byte) { return c.c.Next() }

// Prev moves to the previous key.
func (c *cursor) Prev() ([]byte, []byte) { return c.c.Prev() }

// Seek moves to key, or the first key after it.
func (c *cursor) Seek(key []byte) ([]byte, []byte) { return c.c.Seek(key) }
