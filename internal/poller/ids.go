package poller

import (
	"iter"
	"strconv"

	"github.com/relay-energy/relay/internal/event"
)

// idMap maps originIds to values of V, in the compact form the poller keeps
// its memory of every ongoing alarm in. The upstream sends ids as strings
// or numbers (docs/design.md §3), and most are numbers: an originId that is
// the decimal form of a uint64 is keyed by that number, which takes 8
// bytes and keeps no string alive; any other by its string. Both forms
// stand for exactly one originId, so the map is exact.
//
// At 100,000 alarms the numeric form takes about a third of the memory
// (BenchmarkTrack100kAlarms): no 24-byte string per alarm, and a key of 8
// bytes instead of a 16-byte string header.
type idMap[V any] struct {
	nums map[uint64]V
	strs map[string]V
}

// alarmID is an originId as idMap holds it: a number, or a string when
// str says so.
type alarmID struct {
	num uint64
	s   string
	str bool
}

// String returns the originId.
func (k alarmID) String() string {
	if k.str {
		return k.s
	}
	return strconv.FormatUint(k.num, 10)
}

// keyOf returns the form idMap keys id by.
func keyOf(id string) alarmID {
	if n, ok := event.NumericID(id); ok {
		return alarmID{num: n}
	}
	return alarmID{s: id, str: true}
}

func newIDMap[V any](size int) idMap[V] {
	return idMap[V]{nums: make(map[uint64]V, size), strs: make(map[string]V)}
}

// made reports whether m was made by newIDMap: the zero idMap holds
// nothing and takes nothing.
func (m idMap[V]) made() bool { return m.nums != nil }

// get returns the value of id.
func (m idMap[V]) get(id string) (V, bool) { return m.getKey(keyOf(id)) }

// getKey returns the value of k.
func (m idMap[V]) getKey(k alarmID) (V, bool) {
	if k.str {
		v, ok := m.strs[k.s]
		return v, ok
	}
	v, ok := m.nums[k.num]
	return v, ok
}

// has reports whether m holds id.
func (m idMap[V]) has(id string) bool {
	_, ok := m.get(id)
	return ok
}

// set makes v the value of id.
func (m idMap[V]) set(id string, v V) {
	if k := keyOf(id); k.str {
		m.strs[k.s] = v
	} else {
		m.nums[k.num] = v
	}
}

// remove removes id.
func (m idMap[V]) remove(id string) {
	if k := keyOf(id); k.str {
		delete(m.strs, k.s)
	} else {
		delete(m.nums, k.num)
	}
}

// len returns how many ids m holds.
func (m idMap[V]) len() int { return len(m.nums) + len(m.strs) }

// all yields each id of m, in no order, and its value. The id's String
// makes the originId, which costs an allocation for a number: a loop that
// needs it for few of the ids calls it only for those.
func (m idMap[V]) all() iter.Seq2[alarmID, V] {
	return func(yield func(alarmID, V) bool) {
		for n, v := range m.nums {
			if !yield(alarmID{num: n}, v) {
				return
			}
		}
		for s, v := range m.strs {
			if !yield(alarmID{s: s, str: true}, v) {
				return
			}
		}
	}
}
