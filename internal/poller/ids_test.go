package poller

import (
	"math"
	"slices"
	"strconv"
	"testing"
)

// knownAs returns what the poller keeps of the known alarm id, the zero
// tracked for an alarm it does not know.
func (p *Poller) knownAs(id string) tracked {
	a, _ := p.known.get(id)
	return a
}

// Every originId is its own key, numbers or not: two ids that are the same
// number in two spellings ("7" and "07", or " 7") are two alarms, and an id
// comes back from the map spelt as it went in.
func TestIDMapKeepsEveryOriginIDApart(t *testing.T) {
	ids := []string{"7", "07", "007", " 7", "7 ", "+7", "-7", "0", "00", "", "7a", "a7", "1185685023527438795",
		strconv.FormatUint(math.MaxUint64, 10), "18446744073709551616", "99999999999999999999", "1e3", "٣"}
	m := newIDMap[int](0)
	for i, id := range ids {
		m.set(id, i)
	}
	if m.len() != len(ids) {
		t.Fatalf("%d ids hold %d entries; want one each", len(ids), m.len())
	}
	for i, id := range ids {
		if v, ok := m.get(id); !ok || v != i {
			t.Errorf("get(%q) = %d, %v; want %d", id, v, ok, i)
		}
	}
	var back []string
	for k, v := range m.all() {
		if ids[v] != k.String() {
			t.Errorf("all yields %q for the value of %q", k.String(), ids[v])
		}
		back = append(back, k.String())
	}
	slices.Sort(back)
	want := slices.Sorted(slices.Values(ids))
	if !slices.Equal(back, want) {
		t.Errorf("all yields %q; want %q", back, want)
	}
	for _, id := range ids {
		m.remove(id)
		if m.has(id) {
			t.Errorf("%q is still held after remove", id)
		}
	}
	if m.len() != 0 {
		t.Errorf("%d entries left after removing every id", m.len())
	}
}

// Only the canonical decimal form of a uint64 is taken as a number.
func TestNumericID(t *testing.T) {
	for id, want := range map[string]bool{
		"0": true, "7": true, "1185685023527438795": true, strconv.FormatUint(math.MaxUint64, 10): true,
		"": false, "07": false, "00": false, "-1": false, "+1": false, " 1": false, "1.0": false,
		"18446744073709551616": false, "123456789012345678901": false, "0x10": false,
	} {
		n, ok := numericID(id)
		if ok != want {
			t.Errorf("numericID(%q) = %d, %v; want %v", id, n, ok, want)
		}
		if ok && strconv.FormatUint(n, 10) != id {
			t.Errorf("numericID(%q) = %d, which is spelt otherwise", id, n)
		}
	}
}
