package learn

import (
	"math"
	"time"
)

// Lateness is how late the upstream lists alarms: first seen minus
// occurrence, in the upstream's clock, over the last one to two hours. It
// holds the polling delay, the upstream's ingestion lag and device clocks
// running behind; a device clock running ahead makes it negative, counted
// apart (Ahead) so that it does not hide the lag of the others.
type Lateness struct {
	// Samples counts the alarms measured, Ahead those first seen before
	// they occurred.
	Samples, Ahead int
	// P50 and P99 are quantiles of the alarms not ahead, to within a
	// fifth (the bucket's upper bound); Max is exact.
	P50, P99, Max time.Duration
	// MaxAhead is how far before its stamped occurrence an alarm was first
	// seen, at most.
	MaxAhead time.Duration
}

// The sketch's buckets are log-spaced, four per doubling: bucket 0 holds
// lateness under a second, bucket i (1 to buckets-2) holds [2^((i-1)/4),
// 2^(i/4)) seconds, and the last one everything from 2^18 s (three days)
// on. A window's memory is a fixed array, whatever the traffic.
const (
	perDoubling = 4
	buckets     = 18*perDoubling + 2
	// sketchWindow is how long one window collects; quantiles are over the
	// current window and the one before, so a change shows within two.
	sketchWindow = time.Hour
)

// window is one hour of samples.
type window struct {
	start  time.Time
	counts [buckets]uint32
	n      int
	ahead  int
	max    time.Duration
	maxAhd time.Duration
}

// sketch is a bounded record of lateness: two windows.
type sketch struct {
	cur, prev window
}

func bucketOf(d time.Duration) int {
	s := d.Seconds()
	if s < 1 {
		return 0
	}
	i := int(math.Floor(math.Log2(s)*perDoubling)) + 1
	return min(i, buckets-1)
}

// upper returns the upper bound of bucket i.
func upper(i int) time.Duration {
	if i >= buckets-1 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Exp2(float64(i)/perDoubling) * float64(time.Second))
}

// add records lateness d measured at now.
func (s *sketch) add(d time.Duration, now time.Time) {
	switch {
	case s.cur.start.IsZero():
		s.cur.start = now
	case now.Sub(s.cur.start) >= 2*sketchWindow:
		s.prev, s.cur = window{}, window{start: now}
	case now.Sub(s.cur.start) >= sketchWindow:
		s.prev, s.cur = s.cur, window{start: now}
	}
	w := &s.cur
	w.n++
	if d < 0 {
		w.ahead++
		w.maxAhd = max(w.maxAhd, -d)
		return
	}
	w.counts[bucketOf(d)]++
	w.max = max(w.max, d)
}

// summary returns the lateness of both windows.
func (s *sketch) summary() Lateness {
	var counts [buckets]uint32
	var n uint32
	for i := range counts {
		counts[i] = s.cur.counts[i] + s.prev.counts[i]
		n += counts[i]
	}
	l := Lateness{
		Samples:  s.cur.n + s.prev.n,
		Ahead:    s.cur.ahead + s.prev.ahead,
		Max:      max(s.cur.max, s.prev.max),
		MaxAhead: max(s.cur.maxAhd, s.prev.maxAhd),
	}
	if n == 0 {
		return l
	}
	quantile := func(q float64) time.Duration {
		rank := uint32(math.Ceil(q * float64(n)))
		var seen uint32
		for i, c := range counts {
			if seen += c; seen >= rank {
				return min(upper(i), l.Max)
			}
		}
		return l.Max
	}
	l.P50, l.P99 = quantile(0.5), quantile(0.99)
	return l
}
