package main

import (
	"math"
	"slices"
)

// never is the latency of something that did not happen within the run: an
// alarm whose start was never detected. It sorts after every real latency,
// so that a percentile which reaches it says "never", not a flattering number.
var never = math.Inf(1)

// summary describes a latency distribution, in slots.
type summary struct {
	// N counts the samples, Missing those that never happened (+Inf).
	N, Missing int
	P50, P99   float64
	Max        float64
	// sorted holds the samples in ascending order, +Inf last.
	sorted []float64
}

// summarize sorts a copy of samples and summarises it. With no samples
// every figure is NaN (not measured).
func summarize(samples []float64) summary {
	s := summary{N: len(samples), sorted: slices.Clone(samples)}
	slices.Sort(s.sorted)
	for _, v := range s.sorted {
		if math.IsInf(v, 1) {
			s.Missing++
		}
	}
	s.P50 = percentile(s.sorted, 50)
	s.P99 = percentile(s.sorted, 99)
	s.Max = percentile(s.sorted, 100)
	return s
}

// percentile returns the p-th percentile (0 < p <= 100) of the ascending
// samples by the nearest-rank method: the smallest sample such that at least
// p percent of the samples are less than or equal to it. It never
// interpolates, so that a reported p99 is a latency that was really seen. It
// returns NaN for no samples.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 || p <= 0 || p > 100 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// median returns the median of vs, ignoring NaN (not measured); with an even
// number of values it is the mean of the two middle ones unless one of them
// is +Inf, which then wins. It returns NaN when nothing was measured.
func median(vs []float64) float64 {
	var xs []float64
	for _, v := range vs {
		if !math.IsNaN(v) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	a, b := xs[n/2-1], xs[n/2]
	if math.IsInf(b, 1) {
		return b
	}
	return (a + b) / 2
}

// cdfPoint is one step of an empirical distribution: the fraction of samples
// at or below X.
type cdfPoint struct {
	X, F float64
}

// cdf returns the steps of the empirical distribution of the ascending
// samples: one point per distinct finite value. Samples that never happened
// keep the curve below 1.
func cdf(sorted []float64) []cdfPoint {
	var pts []cdfPoint
	n := float64(len(sorted))
	for i, v := range sorted {
		if math.IsInf(v, 1) {
			break
		}
		f := float64(i+1) / n
		if len(pts) > 0 && pts[len(pts)-1].X == v {
			pts[len(pts)-1].F = f
			continue
		}
		pts = append(pts, cdfPoint{X: v, F: f})
	}
	return pts
}
