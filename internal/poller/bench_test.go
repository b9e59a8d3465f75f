package poller

import (
	"log/slog"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// trackedPoller returns a poller whose memory holds n ongoing alarms on
// n/20 devices, with originIds and serial numbers shaped like the
// upstream's.
func trackedPoller(n int) *Poller {
	p := &Poller{
		log:      slog.New(slog.DiscardHandler),
		known:    newIDMap[tracked](0),
		outside:  newIDMap[outsideAlarm](0),
		devices:  map[string]uint32{"": 0},
		devNames: []string{""},
		perLevel: make(map[int]int),
		vanished: make(map[string]*vanish),
	}
	occ := t0.Add(-time.Hour)
	for i := range n {
		id := strconv.FormatUint(1_185_686_123_039_067_006+uint64(i)*2, 10)
		dev := "INV" + strconv.Itoa(7_312_476_968+i%(n/20+1))
		p.track(id, dev, occ.Add(time.Duration(i)*time.Second), i%4)
	}
	return p
}

// BenchmarkTrack100kAlarms reports the heap the poller's memory of 100,000
// ongoing alarms takes (target P6: the whole process under 48 MiB resident).
func BenchmarkTrack100kAlarms(b *testing.B) {
	var heap uint64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		p := trackedPoller(100_000)
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = after.HeapAlloc - before.HeapAlloc
		runtime.KeepAlive(p)
	}
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(heap)/100_000, "B/alarm")
}

// BenchmarkVanishScan100k reports the cost of checking 100,000 tracked
// alarms against a complete snapshot of one level.
func BenchmarkVanishScan100k(b *testing.B) {
	p := trackedPoller(100_000)
	u := &unit{kind: kindCurrent, level: 0, seen: newIDMap[struct{}](0), snap: p.nextSnap(), at: t0}
	u.query.Start, u.query.End = t0.Add(-48*time.Hour), t0
	var level0 []string
	for k, a := range p.known.all() {
		if a.level == 0 {
			level0 = append(level0, k.String())
		}
	}
	for _, id := range level0 {
		p.list(u, id)
	}
	if u.seen.len() != 0 || u.unique != len(level0) {
		b.Fatalf("a snapshot listing %d known alarms keeps %d originIds and counts %d", len(level0), u.seen.len(), u.unique)
	}
	for b.Loop() {
		p.vanish(u)
	}
	if len(p.vanished) != 0 {
		b.Fatalf("%d alarms vanished from a snapshot that holds them all", len(p.vanished))
	}
}
