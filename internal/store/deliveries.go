package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// Keys alarm management keeps in a sink's memory of an alarm, beside the
// sink's own: what became of a start that left the outbox without being
// sent as itself (see the delivery ledger in ledger.go).
const (
	// MemorySuppressed is why the alarm's start was withheld (hold,
	// silence, maintenance...); its end is then withheld too.
	MemorySuppressed = "relay.suppressed"
	// MemoryWhy names what withheld it: the silence's id, the window's name.
	MemoryWhy = "relay.why"
	// MemoryDigest is the id of the digest the alarm's start joined.
	MemoryDigest = "relay.digest"
)

// StartState is what became of an alarm's start at one sink.
type StartState string

// The states of a start at a sink, as the delivery ledger knows them.
const (
	// StartPending: the start waits in the sink's outbox.
	StartPending StartState = "pending"
	// StartDelivered: the start left the outbox, sent to the sink.
	StartDelivered StartState = "delivered"
	// StartDigested: the start left the outbox in a digest.
	StartDigested StartState = "digested"
	// StartWithheld: alarm management withheld the start (a silence, a
	// maintenance window, a hold...).
	StartWithheld StartState = "withheld"
	// StartDead: the start is a dead letter of the sink.
	StartDead StartState = "dead"
	// StartDropped: the start was dropped, with its sink or by an operator.
	StartDropped StartState = "dropped"
)

// StartDelivery is what became of an alarm's start at one sink.
type StartDelivery struct {
	Sink  string
	State StartState
	// Reason says why a start was withheld, given up on (the last error)
	// or dropped; empty otherwise.
	Reason string
	// At is when a pending start was enqueued, or when a dead one was given
	// up on; zero for the other states, whose time the store does not keep
	// beside the alarm.
	At time.Time
	// NoEnd says the sink's rules say send_resolved: false: its end will be
	// recorded as not wanted, not sent (Store.SetResolvedOff).
	NoEnd bool
}

// Deliveries returns, for each alarm of origins, what became of its start at
// each sink of its ledger set (the sinks it was enqueued for), in the set's
// order, read in one transaction: what the operator console shows beside an
// ongoing alarm. An alarm the store does not know, or that started before
// the ledger, is absent from the map; one whose start went to no sink has an
// empty list.
//
// It reads each alarm's state, ledger record and memory by key, and walks
// the outbox of each sink named, once, and the dead letters of a sink only
// when one of the alarms is among them: its cost follows the alarms asked
// for and the outboxes' depth, not the alarms the store tracks.
func (s *Store) Deliveries(origins []string) (map[string][]StartDelivery, error) {
	var out map[string][]StartDelivery
	err := s.view(func(tx *txn) error {
		var err error
		out, err = startStates(tx, origins, s.noResolvedSinks())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dedupe: deliveries of %d alarms: %w", len(origins), err)
	}
	return out, nil
}

// startStates is Deliveries in tx, noResolved naming the sinks that want no
// ends.
func startStates(tx *txn, origins []string, noResolved map[string]bool) (map[string][]StartDelivery, error) {
	out := make(map[string][]StartDelivery, len(origins))
	sets := newSinkSets(tx)
	// open lists, by sink, where each alarm's entry is in out whose
	// state is not yet known from the ledger record: pending, or else
	// what the memory says.
	open := map[string]map[string]int{}
	dead := map[string]map[string]int{}
	for _, origin := range origins {
		if _, done := out[origin]; done {
			continue
		}
		v, _ := findState(tx, origin)
		if v == nil {
			continue
		}
		st, err := decodeState(v)
		if err != nil {
			return nil, fmt.Errorf("alarm %q: %w", origin, err)
		}
		if st.sinks == 0 {
			continue
		}
		names, err := sets.names(st.setID())
		if err != nil {
			return nil, err
		}
		ds := make([]StartDelivery, len(names))
		for i, sink := range names {
			ds[i].Sink, ds[i].NoEnd = sink, noResolved[sink]
			switch kind, reason := ledgerRecord(tx, sink, origin); kind {
			case ledgerDead:
				ds[i].State = StartDead
				addIndex(dead, sink, origin, i)
			case ledgerDropped:
				ds[i].State, ds[i].Reason = StartDropped, reason
			default:
				addIndex(open, sink, origin, i)
			}
		}
		out[origin] = ds
	}
	for sink, want := range open {
		if err := pendingStarts(tx, sink, want, out); err != nil {
			return nil, err
		}
		if err := remembered(tx, sink, want, out); err != nil {
			return nil, err
		}
	}
	for sink, want := range dead {
		if err := deadStarts(tx, sink, want, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// startWaits reports whether a start of origin waits in sink's outbox.
func startWaits(tx *txn, sink, origin string) (bool, error) {
	out := map[string][]StartDelivery{origin: {{Sink: sink}}}
	want := map[string]int{origin: 0}
	if err := pendingStarts(tx, sink, want, out); err != nil {
		return false, err
	}
	return out[origin][0].State == StartPending, nil
}

// addIndex records in m that origin's delivery at sink is its i-th.
func addIndex(m map[string]map[string]int, sink, origin string, i int) {
	if m[sink] == nil {
		m[sink] = map[string]int{}
	}
	m[sink][origin] = i
}

// pendingStarts marks pending the starts of want waiting in sink's outbox,
// and forgets them from want.
func pendingStarts(tx *txn, sink string, want map[string]int, out map[string][]StartDelivery) error {
	ob := tx.Bucket(bucketOutbox).Bucket([]byte(sink))
	if ob == nil {
		return nil
	}
	// The entries' fields are peeked at in place, without allocating: in a
	// storm the outbox holds as many entries as there are alarms.
	c := ob.Cursor()
	for k, v := c.First(); k != nil && len(want) > 0; k, v = c.Next() {
		if len(k) != 8 || len(v) < 1 || v[0] != entryFormat {
			return fmt.Errorf("outbox entry %s/%x: %w", sink, k, errCorrupt)
		}
		r := reader{b: v[1:]}
		enqueued := r.varint()
		r.varint() // level
		r.bytes()  // event id
		origin := r.bytes()
		transition := r.bytes()
		if r.err != nil {
			return fmt.Errorf("outbox entry %s/%x: %w", sink, k, errCorrupt)
		}
		i, ok := want[string(origin)]
		if !ok || string(transition) != string(event.Start) {
			continue
		}
		id := string(origin)
		d := &out[id][i]
		d.State, d.At = StartPending, fromNs(enqueued)
		delete(want, id)
	}
	return nil
}

// remembered tells the state of the starts of want that left sink's outbox
// from the sink's memory of their alarms: withheld, digested or delivered.
func remembered(tx *txn, sink string, want map[string]int, out map[string][]StartDelivery) error {
	mb := tx.Bucket(bucketMemory).Bucket([]byte(sink))
	for origin, i := range want {
		d := &out[origin][i]
		d.State = StartDelivered
		if mb == nil {
			continue
		}
		v := mb.Get([]byte(origin))
		if v == nil {
			continue
		}
		var m map[string]string
		if err := json.Unmarshal(v, &m); err != nil {
			return fmt.Errorf("memory of sink %q for alarm %q: %w", sink, origin, err)
		}
		switch {
		case m[MemorySuppressed] != "":
			d.State, d.Reason = StartWithheld, m[MemorySuppressed]
			if why := m[MemoryWhy]; why != "" {
				d.Reason += ": " + why
			}
		case m[MemoryDigest] != "":
			d.State = StartDigested
		}
	}
	return nil
}

// deadStarts gives the dead starts of want at sink the reason and time of
// their dead letter.
func deadStarts(tx *txn, sink string, want map[string]int, out map[string][]StartDelivery) error {
	db := tx.Bucket(bucketDead).Bucket([]byte(sink))
	if db == nil {
		return nil
	}
	c := db.Cursor()
	for k, v := c.First(); k != nil && len(want) > 0; k, v = c.Next() {
		if len(k) != 8 {
			return fmt.Errorf("dead letter key %x: %w", k, errCorrupt)
		}
		d, err := decodeDead(sink, binary.BigEndian.Uint64(k), v)
		if err != nil {
			return err
		}
		i, ok := want[d.OriginID]
		if !ok || d.Transition != event.Start {
			continue
		}
		o := &out[d.OriginID][i]
		o.Reason, o.At = d.Reason, d.At
		delete(want, d.OriginID)
	}
	return nil
}

// AlarmText is what an ongoing alarm's latest upstream record says of it
// in words, beside the station and serial the store's index keeps: what
// the operator console shows of each row.
type AlarmText struct {
	EventCode, EventDesc    string
	StationName, DeviceName string
	// DeviceType is the record's deviceTemplateCode.
	DeviceType string
}

// Texts returns the AlarmText of each ongoing alarm of origins, read from
// its latest upstream record in one transaction. An alarm that is not
// ongoing, or whose record the store does not hold, is absent from the map.
func (s *Store) Texts(origins []string) (map[string]AlarmText, error) {
	var out map[string]AlarmText
	err := errLogRetired
	for errors.Is(err, errLogRetired) {
		out = make(map[string]AlarmText, len(origins))
		err = s.view(func(tx *txn) error {
			l, err := s.acquireTxLog(tx)
			if err != nil {
				return err
			}
			defer s.releaseLog(l)
			for _, origin := range origins {
				k := []byte(origin)
				v, ongoing := findState(tx, origin)
				if !ongoing {
					continue
				}
				if v == nil {
					return fmt.Errorf("ongoing alarm %q has no state: %w", origin, errCorrupt)
				}
				st, err := decodeState(v)
				if err != nil {
					return fmt.Errorf("alarm %q: %w", origin, err)
				}
				if st.rec.n == 0 {
					continue
				}
				a, err := readRecord(l, k, st.rec)
				if err != nil {
					return err
				}
				out[origin] = AlarmText{EventCode: a.EventCode, EventDesc: a.EventDesc, StationName: a.StationName,
					DeviceName: a.DeviceName, DeviceType: a.DeviceTemplateCode}
			}
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("dedupe: the records of %d alarms: %w", len(origins), err)
	}
	return out, nil
}
