package store

import (
	"bytes"
	"fmt"
)

// bucketKV holds one bucket per namespace of small values that the packages
// above the store own and encode: the silences, the digests and the chatter
// history of alarm management. The store only keeps them with everything
// else, in the one file that has one writer.
var bucketKV = []byte("kv")

// KV is one value of a namespace; a nil Value deletes the key.
type KV struct {
	NS, Key string
	Value   []byte
}

// Get returns the value of key in namespace ns, or nil.
func (s *Store) Get(ns, key string) ([]byte, error) {
	var out []byte
	err := s.view(func(tx *txn) error {
		if b := tx.Bucket(bucketKV).Bucket([]byte(ns)); b != nil {
			out = bytes.Clone(b.Get([]byte(key)))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dedupe: %s/%s: %w", ns, key, err)
	}
	return out, nil
}

// Put writes every kv in one transaction.
func (s *Store) Put(kvs ...KV) error {
	err := s.update(func(tx *txn, _ map[string]int) error { return putKV(tx, kvs) })
	if err != nil {
		return fmt.Errorf("dedupe: writing %d values: %w", len(kvs), err)
	}
	return nil
}

// Scan calls fn with each key of namespace ns that starts with prefix, in
// key order, and the value, which fn must not keep.
func (s *Store) Scan(ns, prefix string, fn func(key string, value []byte) error) error {
	err := s.view(func(tx *txn) error {
		b := tx.Bucket(bucketKV).Bucket([]byte(ns))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		p := []byte(prefix)
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			if err := fn(string(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("dedupe: scanning %s/%s: %w", ns, prefix, err)
	}
	return nil
}

func putKV(tx *txn, kvs []KV) error {
	root := tx.Bucket(bucketKV)
	for _, kv := range kvs {
		if kv.NS == "" || kv.Key == "" {
			return fmt.Errorf("value %q/%q: namespace and key must not be empty", kv.NS, kv.Key)
		}
		b, err := root.CreateBucketIfNotExists([]byte(kv.NS))
		if err != nil {
			return err
		}
		if kv.Value == nil {
			err = b.Delete([]byte(kv.Key))
		} else {
			err = b.Put([]byte(kv.Key), kv.Value)
		}
		if err != nil {
			return fmt.Errorf("%s/%s: %w", kv.NS, kv.Key, err)
		}
	}
	return nil
}

// DeleteIf deletes, in one transaction, every key of namespace ns for which
// drop reports true, and returns how many it deleted: a value written
// between a scan and a delete is never lost, since drop sees the value the
// delete removes.
func (s *Store) DeleteIf(ns string, drop func(key string, value []byte) bool) (int, error) {
	n := 0
	err := s.update(func(tx *txn, _ map[string]int) error {
		b := tx.Bucket(bucketKV).Bucket([]byte(ns))
		if b == nil {
			return errUnchanged
		}
		var keys [][]byte
		if err := b.ForEach(func(k, v []byte) error {
			if drop(string(k), v) {
				keys = append(keys, bytes.Clone(k))
			}
			return nil
		}); err != nil {
			return err
		}
		if len(keys) == 0 {
			return errUnchanged
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		n = len(keys)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("dedupe: pruning %s: %w", ns, err)
	}
	return n, nil
}
