package store

import (
	"encoding/binary"
	"fmt"
)

// DeadLetterPeek sees a dead letter of a page with its body, inside the
// read transaction: body is valid only during the call and must not be
// kept or modified, and the function must not call the store.
type DeadLetterPeek func(d *DeadLetter, body []byte)

// DeadLetterPage returns up to limit dead letters of sink numbered after
// after (0: from the oldest), oldest first, without their bodies, and
// whether more follow: what a page of a list shows, read without loading
// the sink's other dead letters. peek, when not nil, sees each of them
// with its body (to pick a field out of the event) without a copy.
func (s *Store) DeadLetterPage(sink string, after uint64, limit int, peek DeadLetterPeek) ([]DeadLetter, bool, error) {
	if limit <= 0 {
		return nil, false, fmt.Errorf("dedupe: dead letters of sink %q: limit %d: want at least 1", sink, limit)
	}
	var out []DeadLetter
	more := false
	err := s.view(func(tx *txn) error {
		out, more = nil, false
		b := tx.Bucket(bucketDead).Bucket([]byte(sink))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		k, v := c.Seek(seqKey(after + 1))
		if after == ^uint64(0) {
			k = nil // nothing is numbered after the last number
		}
		for ; k != nil; k, v = c.Next() {
			if len(out) == limit {
				more = true
				return nil
			}
			if len(k) != 8 {
				return fmt.Errorf("dead letter key %x: %w", k, errCorrupt)
			}
			d, body, err := decodeDeadFields(sink, binary.BigEndian.Uint64(k), v)
			if err != nil {
				return err
			}
			if peek != nil {
				peek(&d, body)
			}
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("dedupe: dead letters of sink %q: %w", sink, err)
	}
	return out, more, nil
}

// DeadLetterOf returns dead letter seq of sink with its body, and false
// when the sink holds none of that number (replayed, dropped, pruned, or
// never): what showing one dead letter reads, and nothing else.
func (s *Store) DeadLetterOf(sink string, seq uint64) (DeadLetter, bool, error) {
	var d DeadLetter
	found := false
	err := s.view(func(tx *txn) error {
		b := tx.Bucket(bucketDead).Bucket([]byte(sink))
		if b == nil {
			return nil
		}
		v := b.Get(seqKey(seq))
		if v == nil {
			return nil
		}
		var err error
		d, err = decodeDead(sink, seq, v)
		found = err == nil
		return err
	})
	if err != nil {
		return DeadLetter{}, false, fmt.Errorf("dedupe: dead letter %d of sink %q: %w", seq, sink, err)
	}
	return d, found, nil
}
