package testwait

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/relay-energy/relay/internal/clock"
)

// Quiet tells when every goroutine of the code under test has nothing left
// to do at a fake clock's present: each is blocked on a channel, a timer of
// the fake clock, a lock or the network, and none is running, runnable or
// in a system call. It reads the scheduler's counts from runtime/metrics, so
// it needs no hook in the code under test; it counts every goroutine of the
// test binary, so the test must not run in parallel with others. The zero
// Quiet is ready to use.
type Quiet struct {
	samples []metrics.Sample
}

// Busy returns how many goroutines other than the caller are running,
// runnable or in a system call.
func (q *Quiet) Busy() int {
	if q.samples == nil {
		q.samples = []metrics.Sample{
			{Name: "/sched/goroutines/running:goroutines"},
			{Name: "/sched/goroutines/runnable:goroutines"},
			{Name: "/sched/goroutines/not-in-go:goroutines"},
		}
	}
	metrics.Read(q.samples)
	busy := -1 // the caller is running
	for _, s := range q.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			busy += int(s.Value.Uint64())
		}
	}
	return busy
}

// Settle waits, in real time, until nothing is busy on three looks in a
// row, a few scheduler rounds apart, and at least want() timers of the fake
// clock are pending: every goroutine that sleeps on the clock when it has
// nothing to do (a sink's delivery loop, alarm management's schedule) is
// asleep, not waiting on the network for a receiver's answer, nor woken and
// not yet run. Between looks that find it short it sleeps a little in real
// time, so that the network poller hands over the bytes in flight. It fails
// after limit: something spins or hangs.
func (q *Quiet) Settle(clk *clock.Fake, want func() int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for calm, rounds := 0, 0; ; rounds++ {
		if q.Busy() == 0 {
			calm++
		} else {
			calm = 0
		}
		if calm >= 3 {
			if clk.Waiters() >= want() {
				return nil
			}
			calm = 0
			time.Sleep(50 * time.Microsecond)
		}
		if rounds%64 == 63 {
			if time.Now().After(deadline) {
				return fmt.Errorf("the code under test never went quiet within %s (%d goroutines busy, %d timers pending of %d)",
					limit, q.Busy(), clk.Waiters(), want())
			}
			// Something takes real time (a file's sync): wait for it
			// rather than spin.
			time.Sleep(100 * time.Microsecond)
		}
		for range 20 {
			runtime.Gosched()
		}
	}
}

// AdvanceTo moves clk to end timer by timer, letting everything settle at
// each step, and returns how many timers it fired the clock at.
func (q *Quiet) AdvanceTo(clk *clock.Fake, want func() int, end time.Time, limit time.Duration) (int, error) {
	steps := 0
	for {
		if err := q.Settle(clk, want, limit); err != nil {
			return steps, err
		}
		next, ok := clk.NextDeadline()
		if !ok || next.After(end) {
			if clk.Now().Before(end) {
				clk.Set(end)
				if err := q.Settle(clk, want, limit); err != nil {
					return steps, err
				}
			}
			return steps, nil
		}
		clk.Set(next)
		steps++
	}
}
