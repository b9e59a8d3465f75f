package event

import "strconv"

// NumericID returns the number id is the decimal form of, and whether it is
// one: digits only, without a leading zero (unless it is "0"), within a
// uint64, so that strconv.FormatUint gives id back exactly. The upstream
// sends its ids as strings or numbers (docs/design.md §3), and most are
// numbers: the poller and the store keep such an id in 8 bytes, or fewer,
// instead of its digits.
func NumericID(id string) (uint64, bool) {
	if id == "" || len(id) > 20 || id[0] == '0' && len(id) > 1 {
		return 0, false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(id, 10, 64)
	return n, err == nil
}
