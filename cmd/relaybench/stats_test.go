package main

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

func TestPercentileIsNearestRank(t *testing.T) {
	ten := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	tests := []struct {
		name   string
		sorted []float64
		p      float64
		want   float64
	}{
		{"p50 of ten is the fifth", ten, 50, 5},
		{"p99 of ten is the largest", ten, 99, 10},
		{"p100 is the largest", ten, 100, 10},
		{"p10 of ten is the first", ten, 10, 1},
		{"p99 of a hundred is the 99th", hundred, 99, 99},
		{"p50 of one sample is it", []float64{0.4}, 50, 0.4},
		{"a sample that never happened wins when reached", []float64{1, 2, never}, 99, never},
		{"a sample that never happened is ignored below it", []float64{1, 2, 3, never}, 50, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Fatalf("percentile(%v, %g) = %g, want %g", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
	for _, p := range []float64{0, -1, 101} {
		if got := percentile(ten, p); !math.IsNaN(got) {
			t.Fatalf("percentile(ten, %g) = %g, want NaN", p, got)
		}
	}
	if got := percentile(nil, 50); !math.IsNaN(got) {
		t.Fatalf("percentile(nil, 50) = %g, want NaN", got)
	}
}

func TestSummarizeSortsACopyAndCountsMissing(t *testing.T) {
	samples := []float64{3, never, 1, 2}
	s := summarize(samples)
	if s.N != 4 || s.Missing != 1 || s.P50 != 2 || s.P99 != never || s.Max != never {
		t.Fatalf("summary = %+v", s)
	}
	if samples[0] != 3 {
		t.Fatalf("summarize reordered its input: %v", samples)
	}
	if empty := summarize(nil); !math.IsNaN(empty.P50) || empty.N != 0 {
		t.Fatalf("summary of nothing = %+v, want NaN figures", empty)
	}
}

func TestMedian(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name string
		vs   []float64
		want float64
	}{
		{"odd", []float64{3, 1, 2}, 2},
		{"even is the mean of the middle two", []float64{4, 1, 2, 3}, 2.5},
		{"not measured values are left out", []float64{nan, 5, nan}, 5},
		{"never in the middle wins", []float64{1, never}, never},
		{"never beyond the middle does not", []float64{1, 2, never}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := median(tt.vs); got != tt.want {
				t.Fatalf("median(%v) = %g, want %g", tt.vs, got, tt.want)
			}
		})
	}
	if got := median([]float64{nan}); !math.IsNaN(got) {
		t.Fatalf("median of nothing measured = %g, want NaN", got)
	}
}

func TestCDFStepsOncePerDistinctValueAndStopsBelowOneForMissing(t *testing.T) {
	got := cdf([]float64{1, 1, 2, 4, never})
	want := []cdfPoint{{1, 0.4}, {2, 0.6}, {4, 0.8}}
	if !slices.Equal(got, want) {
		t.Fatalf("cdf = %v, want %v", got, want)
	}
}

func TestTimingCountsLocalWorkAfterTheRequestAtItsRealDuration(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	rec := newRecorder()
	// The alarm occurred at t0; the request that found it arrived 3 s
	// later and its answer was decoded 6 s after that on a 60× clock (0.1 s
	// of real work); the event reached JetStream 12 s after the arrival.
	rec.detect("a", event.Start, t0.Add(9*time.Second))
	rec.deliver(event.ID("a", event.Start), t0.Add(15*time.Second))
	tm := timing{rec: rec, speed: 60, arrivals: []time.Time{t0.Add(-3 * time.Second), t0.Add(3 * time.Second), t0.Add(10 * time.Second)}}
	tests := []struct {
		name          string
		id            string
		delivered     bool
		measured, est float64
	}{
		{"detection", event.ID("a", event.Start), false, 9.0 / 6, (3 + 6.0/60) / 6},
		{"delivery", event.ID("a", event.Start), true, 15.0 / 6, (3 + 12.0/60) / 6},
		{"never detected", event.ID("b", event.Start), false, never, never},
		{"detected, never delivered", event.ID("a", event.End), true, never, never},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, r := tm.latency(tt.id, t0, tt.delivered)
			if math.Abs(m-tt.measured) > 1e-9 || math.Abs(r-tt.est) > 1e-9 {
				t.Fatalf("latency = %g measured, %g estimated; want %g, %g", m, r, tt.measured, tt.est)
			}
		})
	}
	// Without a request after the reference time, there is nothing to
	// correct: the estimate is the measurement.
	early := timing{rec: rec, speed: 60, arrivals: []time.Time{t0.Add(-time.Second)}}
	if m, r := early.latency(event.ID("a", event.Start), t0, false); m != r {
		t.Fatalf("latency without a request after the reference = %g measured, %g estimated; want equal", m, r)
	}
}

func TestPeakOngoingCountsOverlaps(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	plan := []plannedAlarm{
		{Occurred: at(0), End: at(10)},
		{Occurred: at(5), End: at(15)},
		{Occurred: at(10), End: at(20)}, // starts as the first ends
		{Occurred: at(100), End: at(110)},
	}
	if got := peakOngoing(plan, at(0), at(50)); got != 2 {
		t.Fatalf("peakOngoing = %d, want 2", got)
	}
}
