package dedupe

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/relay-energy/relay/internal/event"
)

// migrateRecords moves the store from schema version 1 to 2: the record of
// every ongoing alarm, kept in the records bucket, is appended to the record
// log lt and referenced from its state, and the bucket is deleted. Records
// of alarms that are not ongoing are not needed, and dropped. It runs in the
// transaction of the first read-write Open, which syncs the log before it
// commits.
func migrateRecords(tx *bolt.Tx, lt *logTx) error {
	records := tx.Bucket(bucketRecords)
	if records != nil {
		alarms, ongoing := tx.Bucket(bucketAlarms), tx.Bucket(bucketOngoing)
		c := ongoing.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			v := alarms.Get(k)
			if v == nil {
				return fmt.Errorf("ongoing alarm %q has no state: %w", k, errCorrupt)
			}
			st, err := decodeState(v)
			if err != nil {
				return fmt.Errorf("alarm %q: %w", k, err)
			}
			if rv := records.Get(k); rv != nil && !st.terminal() {
				// Decoded and encoded again: the frame holds a record this
				// relay reads.
				rec, err := decodeAlarm(rv)
				if err != nil {
					return fmt.Errorf("record of alarm %q: %w", k, err)
				}
				enc := encodeAlarm(&rec)
				lt.put(&st.rec, enc, recordHash(enc))
			}
			// Every ongoing state in the current format, with or without a
			// record.
			if err := alarms.Put(k, st.encode()); err != nil {
				return err
			}
		}
		if err := tx.DeleteBucket(bucketRecords); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketMeta).Put(metaVersion, binary.BigEndian.AppendUint64(nil, schemaVersion))
}

// ongoingRecordsV1 is OngoingRecords of a read-only store in schema version
// 1, whose records are in their own bucket.
func ongoingRecordsV1(tx *bolt.Tx, records *bolt.Bucket, fn func(a *event.Alarm) error) error {
	c := tx.Bucket(bucketOngoing).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		v := records.Get(k)
		if v == nil {
			continue
		}
		a, err := decodeAlarm(v)
		if err != nil {
			return fmt.Errorf("record of alarm %q: %w", k, err)
		}
		if err := fn(&a); err != nil {
			return err
		}
	}
	return nil
}
