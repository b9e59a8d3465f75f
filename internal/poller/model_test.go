package poller

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// The latency model of docs/design.md §4 ("The latency model"): starts and
// ends arrive as Poisson streams of half an event per slot each (relaybench's
// churn); a current read sees every start since the last one and tells which
// alarms ended since (they vanished); a recovered read sees every end since
// the last one. Requests are evenly spaced at the budget's spacing, 61/60 of
// a slot. It prints the table of the design with -v:
//
//	go test ./internal/poller -run TestLatencyModel -v

// modelResult holds the percentiles of a schedule, in slots.
type modelResult struct{ p1p50, p1p99, p2p50, p2p99 float64 }

func (r modelResult) String() string {
	return fmt.Sprintf("%.2f | %.2f | %.2f | %.2f", r.p1p50, r.p1p99, r.p2p50, r.p2p99)
}

// modelPolicy decides whether a step reads the recovered list (true) or the
// current one: at is the step's time, lastCur and lastRec the last current
// and recovered reads, vanished how many ends the last current read noticed
// that no recovered read found yet.
type modelPolicy func(at, lastCur, lastRec float64, vanished int) bool

// runModel runs policy over slots slots.
func runModel(policy modelPolicy, slots float64, seed uint64) modelResult {
	rng := rand.New(rand.NewPCG(seed, 28))
	const rate = 0.5 // events a slot
	spacing := 61.0 / 60.0
	next := func(t float64) float64 { return t + rng.ExpFloat64()/rate }
	var starts, ends, pendStarts, unseen, vanished []float64
	ns, ne := next(0), next(0)
	var t, lastCur, lastRec float64
	for t < slots {
		t += spacing
		for ; ns <= t; ns = next(ns) {
			pendStarts = append(pendStarts, ns)
		}
		for ; ne <= t; ne = next(ne) {
			unseen = append(unseen, ne)
		}
		if policy(t, lastCur, lastRec, len(vanished)) {
			for _, e := range append(vanished, unseen...) {
				ends = append(ends, t-e)
			}
			vanished, unseen, lastRec = vanished[:0], unseen[:0], t
			continue
		}
		for _, s := range pendStarts {
			starts = append(starts, t-s)
		}
		pendStarts = pendStarts[:0]
		vanished, unseen, lastCur = append(vanished, unseen...), unseen[:0], t
	}
	return modelResult{quantile(starts, .5), quantile(starts, .99), quantile(ends, .5), quantile(ends, .99)}
}

// runPairedModel is the schedule with every confirm sent at once after the
// current read that noticed a vanish, under a limiter with no window: the
// current reads are spaced stride slots apart.
func runPairedModel(stride, slots float64, seed uint64) modelResult {
	rng := rand.New(rand.NewPCG(seed, 29))
	const rate = 0.5
	next := func(t float64) float64 { return t + rng.ExpFloat64()/rate }
	var starts, ends, pend []float64
	ns, ne := next(0), next(0)
	for t := stride; t < slots; t += stride {
		for ; ns <= t; ns = next(ns) {
			starts = append(starts, t-ns)
		}
		for ; ne <= t; ne = next(ne) {
			pend = append(pend, ne)
		}
		for _, e := range pend {
			ends = append(ends, t-e)
		}
		pend = pend[:0]
	}
	return modelResult{quantile(starts, .5), quantile(starts, .99), quantile(ends, .5), quantile(ends, .99)}
}

func quantile(xs []float64, q float64) float64 {
	slices.Sort(xs)
	return xs[int(q*float64(len(xs)-1))]
}

// TestLatencyModel checks what design §4 says of the model: relay's
// schedule reads starts sooner than the eager alternation at p50 and no
// later at p99, ends later at p50 and no later at p99 (within a hundredth
// of a slot); a recovered read forced every few steps moves it towards
// eager; and no schedule of the family reaches both P1 p50 ≤ 0.75 and
// P2 p50 ≤ 1.1.
func TestLatencyModel(t *testing.T) {
	t.Parallel()
	const slots = 200_000
	eager := runModel(func(_, lastCur, lastRec float64, _ int) bool { return lastCur > lastRec }, slots, 1)
	every := func(k float64) modelPolicy {
		return func(at, lastCur, lastRec float64, vanished int) bool {
			return lastCur > lastRec && (vanished > 0 || at-lastRec >= k*61/60-1e-9)
		}
	}
	relay := runModel(every(1e9), slots, 1)
	third, fifth := runModel(every(3), slots, 1), runModel(every(5), slots, 1)
	// A stride of 1.53 slots is what the budget allows when about 53% of
	// the current reads are followed by a confirm.
	paired := runPairedModel(1.53, slots, 1)
	t.Logf("| schedule | P1 p50 | P1 p99 | P2 p50 | P2 p99 |")
	for _, row := range []struct {
		name string
		r    modelResult
	}{
		{"eager: current and recovered reads alternated", eager},
		{"relay: a current read each step, a confirm when something vanished", relay},
		{"the same, and a recovered read at least every third step", third},
		{"the same, at least every fifth step", fifth},
		{"every confirm paired at once, if the limiter had no window", paired},
	} {
		t.Logf("| %s | %s |", row.name, row.r)
	}
	const eps = 0.01
	if relay.p1p50 >= eager.p1p50 || relay.p1p99 > eager.p1p99+eps || relay.p2p99 > eager.p2p99+eps || relay.p2p50 <= eager.p2p50 {
		t.Errorf("relay %v against eager %v: want starts sooner at p50, ends later at p50, neither later at p99", relay, eager)
	}
	if !(relay.p1p50 < third.p1p50 && third.p1p50 < eager.p1p50 && relay.p2p50 > third.p2p50 && third.p2p50 > eager.p2p50) {
		t.Errorf("a recovered read every third step %v: want it between relay %v and eager %v", third, relay, eager)
	}
	for _, r := range []modelResult{eager, relay, third, fifth} {
		if r.p1p50 <= 0.75 && r.p2p50 <= 1.1 {
			t.Errorf("%v reaches P1 p50 ≤ 0.75 and P2 p50 ≤ 1.1; design §4 says no schedule of the model does", r)
		}
	}
}
