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
