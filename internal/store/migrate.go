package store

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/relay-energy/relay/internal/event"
)

// migrateRecords moves the store from schema version 1 to 2: the record of
// every ongoing alarm, kept in the records bucket, is appended to the record
// log lt and referenced from its state, and the bucket is deleted. Records
// of alarms that are not ongoing are not needed, and dropped. It runs in the
// transaction of the first read-write Open, which syncs the log before it
// commits.
func migrateRecords(tx *txn, lt *logTx) error {
	records := tx.Bucket(bucketRecords)
	if records != nil {
		alarms := tx.Bucket(bucketAlarms)
		err := forEachOngoing(tx, func(k []byte, st *state) error {
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
			return alarms.Put(k, st.encode())
		})
		if err != nil {
			return err
		}
		if err := tx.DeleteBucket(bucketRecords); err != nil {
			return err
		}
	}
	if err := migrateJournal(tx.Bucket(bucketJournal), lt); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return tx.Bucket(bucketMeta).Put(metaVersion, binary.BigEndian.AppendUint64(nil, schemaVersion))
}

// migrateJournal moves the strings of every journal entry of format 1 into
// a frame of the record log.
func migrateJournal(journal *bucket, lt *logTx) error {
	type put struct{ k, v []byte }
	var puts []put
	c := journal.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(v) == 0 || v[0] != journalFormatV1 {
			continue
		}
		e, err := decodeJournal(k, v, nil)
		if err != nil {
			return err
		}
		a := event.Alarm{
			OriginID: e.OriginID, TenantID: e.TenantID, StationID: e.StationID, StationName: e.StationName,
			SystemID: e.SystemID, DeviceSN: e.DeviceSN, DeviceName: e.DeviceName,
			DeviceTemplateCode: e.DeviceTemplateCode, EventCode: e.EventCode, EventDesc: e.EventDesc,
			EventType: e.EventType,
		}
		// The flags and the times as they were, the strings in a frame.
		j, err := parseJournal(journalOccurred(k), v)
		if err != nil {
			return fmt.Errorf("journal entry of %q: %w", k[8:], err)
		}
		j.strs = nil
		lt.put(&j.ref, encodeAlarm(&a), 0)
		puts = append(puts, put{k: bytes.Clone(k), v: j.append(nil, journalOccurred(k))})
	}
	for _, p := range puts {
		if err := journal.Put(p.k, p.v); err != nil {
			return err
		}
	}
	return nil
}

// ongoingRecordsV1 is OngoingRecords of a read-only store in schema version
// 1, whose records are in their own bucket.
func ongoingRecordsV1(tx *txn, records *bucket, fn func(a *event.Alarm) error) error {
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
