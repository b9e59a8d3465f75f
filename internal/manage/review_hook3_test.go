package manage

import (
	"encoding/binary"
	"runtime"
	"testing"
	"unsafe"
)

// TestABinaryChatterHistoryClaimingMoreStartsThanItsBytesHoldAllocatesNoRoomForThem:
// a start takes at least 5 bytes in the binary form (its time's seconds and
// nanoseconds, its alarm's length, whether it was sent and its N, a byte
// each at the least), so a value whose count of starts its bytes cannot
// hold is refused before room is made for them. Checking the count only
// against the bytes left let a corrupt or hostile value of 1 MiB claim a
// million starts and allocate 56 MiB (a chatterStart each) before failing.
func TestABinaryChatterHistoryClaimingMoreStartsThanItsBytesHoldAllocatesNoRoomForThem(t *testing.T) {
	const size = 1 << 20
	v := []byte{chatterFormat, 0, 0, 0, 0} // not chattering, count 0, no announcer, no note
	v = binary.AppendUvarint(v, size)
	v = append(v, make([]byte, size)...) // holds size/5 starts of zero bytes
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := decodeChatter(v)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a history claiming more starts than its bytes hold reads without an error")
	}
	room := after.TotalAlloc - before.TotalAlloc
	if max := uint64(size / 5 * unsafe.Sizeof(chatterStart{})); room > max {
		t.Errorf("decoding a %d-byte value claiming %d starts allocated %d MiB; the %d starts its bytes can hold take %d MiB",
			len(v), size, room>>20, size/5, max>>20)
	}
	// What its bytes do hold still reads.
	w := []byte{chatterFormat, 0, 0, 0, 0}
	w = binary.AppendUvarint(w, size/5)
	w = append(w, make([]byte, size/5*5)...)
	if st, err := decodeChatter(w); err != nil || len(st.Starts) != size/5 {
		t.Errorf("%d starts of 5 bytes each: read %d starts, error %v", size/5, len(st.Starts), err)
	}
}
