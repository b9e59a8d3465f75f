package poller

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"
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

// loggedOutside reports whether the poller logged the known alarm id as
// older than the lookback window.
func (p *Poller) loggedOutside(id string) bool {
	a, _ := p.outside.get(id)
	return a.logged
}

// A known alarm counts as listed by the current snapshot that listed it,
// and by no other: the next snapshot that lacks it finds it vanished, and a
// snapshot keeps no originId of the known alarms it lists.
func TestKnownAlarmIsListedByTheSnapshotThatListedItOnly(t *testing.T) {
	p := trackedPoller(40)
	first := &unit{kind: kindCurrent, level: -1, seen: newIDMap[struct{}](0), snap: p.nextSnap()}
	second := &unit{kind: kindCurrent, level: -1, seen: newIDMap[struct{}](0), snap: p.nextSnap()}
	for _, u := range []*unit{first, second} {
		u.query.Start, u.query.End = t0.Add(-48*time.Hour), t0
	}
	var ids []string
	for k := range p.known.all() {
		ids = append(ids, k.String())
	}
	// One snapshot at a time, as the poller reads them: the second begins
	// after the first was read to its end.
	for _, id := range ids {
		p.list(first, id)
	}
	p.list(first, "not-known")
	p.vanish(first)
	if len(p.vanished) != 0 {
		t.Fatalf("vanished %v from the snapshot that listed them all", slices.Collect(maps.Keys(p.vanished)))
	}
	if first.unique != len(ids)+1 || first.seen.len() != 1 {
		t.Fatalf("the first snapshot counts %d unique ids and keeps %d; want %d and the unknown one", first.unique, first.seen.len(), len(ids)+1)
	}
	for _, id := range ids[1:] {
		p.list(second, id)
	}
	p.vanish(second)
	if len(p.vanished) != 1 || p.vanished[ids[0]] == nil {
		t.Fatalf("vanished %v; want %s alone, which the second snapshot lacks", slices.Collect(maps.Keys(p.vanished)), ids[0])
	}
	p.snap = math.MaxUint16
	if n := p.nextSnap(); n != 1 {
		t.Fatalf("the snapshot after %d is numbered %d; want 1 (0 is none)", math.MaxUint16, n)
	}
}

// A snapshot counts each alarm it lists once (unit.unique, which the logs
// of an incomplete snapshot report as its unique ids), also one it listed
// before the poller knew it and again, a page that shifted later, once its
// start made it known: the first listing kept its id among the unknown
// ones, the second marked it as a known alarm listed.
func TestASnapshotCountsAnAlarmThatBecameKnownBetweenItsPagesOnce(t *testing.T) {
	p := trackedPoller(40)
	u := &unit{kind: kindCurrent, level: -1, seen: newIDMap[struct{}](0), snap: p.nextSnap()}
	u.query.Start, u.query.End = t0.Add(-48*time.Hour), t0
	var ids []string
	for k := range p.known.all() {
		ids = append(ids, k.String())
	}
	for _, id := range ids {
		p.list(u, id)
	}
	const id = "1185686123039999999"
	p.list(u, id) // a new alarm, on the first page
	p.track(id, "INV7312476968", t0.Add(-time.Minute), 1)
	p.list(u, id) // the same alarm again, on a page that shifted
	if u.unique != len(ids)+1 {
		t.Fatalf("a snapshot listing %d known alarms and one new one, twice, counts %d unique ids; want %d",
			len(ids), u.unique, len(ids)+1)
	}
	p.vanish(u)
	if len(p.vanished) != 0 {
		t.Fatalf("vanished %v from the snapshot that listed them all", slices.Collect(maps.Keys(p.vanished)))
	}
}
