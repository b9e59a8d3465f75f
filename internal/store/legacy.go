package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/plant"
)

// metaLedgerAdopted marks a file whose alarms from before the delivery
// ledger were given what it needs (AdoptLedger).
var metaLedgerAdopted = []byte("ledgerAdopted")

// AdoptLedger gives a store written before the delivery ledger (schema
// versions 1 and 2) what the ledger needs, so that every promise of the
// ledger holds for its alarms too: each ongoing alarm without a sink set
// gets the set route gives its start now (where its end would go by the
// rules in force, less the sinks whose destination the rules last applied
// to the file did not have, which never got its start; no sink for an
// alarm recorded silently), beside the sinks a Join gave it, and each
// start among the dead letters with no ledger record is recorded dead, the
// later entries of its alarm waiting in that outbox parked beside it. Until
// then such an alarm's end would follow the rules of the moment: sent where
// its start never went, lost where it did after a level change or a
// removed sink, and sent alone beside a dead start. It is done once per
// file, in one transaction, and marked in meta: later calls, and calls on a
// store the ledger wrote from the start, change nothing. The service calls
// it with the rules in force when it opens a tenant's store, before any
// delivery starts. It returns how many alarms got a set and how many dead
// starts were recorded.
//
// dests are the sinks of the rules in force with their destinations
// (route.Sink.Destination), as AdoptSinks takes them: AdoptLedger must run
// before AdoptSinks records them as the rules last applied.
func (s *Store) AdoptLedger(route Router, dests map[string]string) (alarms, dead int, err error) {
	if s.endsByRules || s.plant.On(plant.LedgerNotUpgraded) {
		return 0, 0, nil
	}
	err = s.update(func(tx *txn, delta map[string]int) error {
		alarms, dead = 0, 0
		meta := tx.Bucket(bucketMeta)
		if meta.Get(metaLedgerAdopted) != nil {
			return errUnchanged
		}
		var err error
		if alarms, err = s.adoptSets(tx, route, knewSink(meta, dests)); err != nil {
			return err
		}
		if dead, err = recordDeadStarts(tx, delta, s.clock.Now().UnixNano()); err != nil {
			return err
		}
		return meta.Put(metaLedgerAdopted, []byte{1})
	})
	if err != nil {
		return 0, 0, fmt.Errorf("dedupe: adopting the delivery ledger: %w", err)
	}
	return alarms, dead, nil
}

// knewSink returns whether the rules last applied to the file (meta's
// sinks) had a sink of dests' destination, or of its name: a sink they did
// not have got no start of an alarm recorded before them. With no record
// of them (a file no rules were applied to), every sink counts.
func knewSink(meta *bucket, dests map[string]string) func(string) bool {
	old := map[string]string{}
	if v := meta.Get(metaSinks); v == nil || json.Unmarshal(v, &old) != nil || len(old) == 0 {
		return func(string) bool { return true }
	}
	had := map[string]bool{}
	for _, d := range old {
		if d != "" {
			had[d] = true
		}
	}
	return func(sink string) bool {
		_, named := old[sink]
		return named || dests[sink] != "" && had[dests[sink]]
	}
}

// adoptSets gives each ongoing alarm of tx without a sink set, or with one
// a Join added to the rules' routing, the set route gives its start among
// the sinks knew says had it, beside those joined, and returns how many it
// gave one.
func (s *Store) adoptSets(tx *txn, route Router, knew func(string) bool) (int, error) {
	l, err := s.acquireTxLog(tx)
	if err != nil {
		return 0, err
	}
	defer s.releaseLog(l)
	sets := newSinkSets(tx)
	n := 0
	err = updateOngoing(tx, func(k []byte, st *state) (bool, error) {
		if st.ledgered() || st.rec.n == 0 {
			return false, nil
		}
		var names []string
		if st.flags&flagSilent == 0 && route != nil {
			rec, err := readRecord(l, k, st.rec)
			if err != nil {
				return false, err
			}
			ev := event.New(rec, event.Start, fromMs(st.firstSeen), false)
			for _, sink := range route(&ev) {
				if knew(sink) {
					names = append(names, sink)
				}
			}
		}
		if st.sinks != 0 {
			joined, err := sets.names(st.setID())
			if err != nil {
				return false, err
			}
			names = append(names, joined...)
		}
		var err error
		if names, err = uniqueSinks(names); err != nil {
			return false, fmt.Errorf("route gave alarm %q: %w", k, err)
		}
		if st.sinks, err = sets.id(names); err != nil {
			return false, err
		}
		n++
		return true, nil
	})
	return n, err
}

// recordDeadStarts records in the ledger each start among the dead letters
// of tx that has no record there, and parks beside it the entries of its
// alarm waiting in that outbox; it returns how many it recorded.
func recordDeadStarts(tx *txn, delta map[string]int, at int64) (int, error) {
	type start struct{ sink, origin string }
	var found []start
	root := tx.Bucket(bucketDead)
	err := root.ForEachBucket(func(sink []byte) error {
		return root.Bucket(sink).ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return fmt.Errorf("dead letter key %x: %w", k, errCorrupt)
			}
			d, err := decodeDead(string(sink), binary.BigEndian.Uint64(k), v)
			if err != nil {
				return err
			}
			if d.Transition == event.Start {
				if kind, _ := ledgerRecord(tx, d.Sink, d.OriginID); kind == 0 {
					found = append(found, start{d.Sink, d.OriginID})
				}
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	for _, f := range found {
		if err := putLedger(tx, f.sink, f.origin, ledgerDead, ""); err != nil {
			return 0, err
		}
		if _, err := parkPending(tx, delta, f.sink, f.origin, at); err != nil {
			return 0, err
		}
	}
	return len(found), nil
}
