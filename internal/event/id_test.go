package event

import (
	"math"
	"strconv"
	"testing"
)

// Only the canonical decimal form of a uint64 is taken as a number.
func TestNumericID(t *testing.T) {
	for id, want := range map[string]bool{
		"0": true, "7": true, "1185685023527438795": true, strconv.FormatUint(math.MaxUint64, 10): true,
		"": false, "07": false, "00": false, "-1": false, "+1": false, " 1": false, "1.0": false,
		"18446744073709551616": false, "123456789012345678901": false, "0x10": false,
	} {
		n, ok := NumericID(id)
		if ok != want {
			t.Errorf("NumericID(%q) = %d, %v; want %v", id, n, ok, want)
		}
		if ok && strconv.FormatUint(n, 10) != id {
			t.Errorf("NumericID(%q) = %d, which is spelt otherwise", id, n)
		}
	}
}
