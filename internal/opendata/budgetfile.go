package opendata

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The budget file keeps the start times of the last window of requests of
// every process that shares it: the running relay, and relay api or relay
// check --online beside it on the same host. A request may start only when
// the file holds fewer starts within the window than the limit, checked and
// recorded under an exclusive lock on <file>.lock, so together they stay
// within the upstream's limit per IP; a process restarted after a crash
// reads it too and never adds a burst on top of its predecessor. Writes
// replace the file through a rename, so a reader sees the old list or the
// new one, never half of one.

// SharedBudget is a request budget shared with other processes that call the
// same upstream from the same IP: the budget file of one host, or a KV bucket
// of the replicas of one egress group. A Client asks it after its own Budget
// granted a start, so that together the sharers stay within the upstream's
// limit per IP.
type SharedBudget interface {
	// Reserve records a request start at now if fewer than limit starts of
	// any sharer hold a slot (AdmitStart decides), and otherwise returns how
	// long to wait before asking again. bid is what the request's tenant
	// has waiting (Budget's schedule): a budget that orders its sharers'
	// requests may have it wait for a better bid; one that does not
	// ignores it. An error means the budget could not be consulted; the
	// Client then goes on within its own Budget.
	Reserve(ctx context.Context, now time.Time, limit int, bid Bid) (time.Duration, error)
}

// Bid is how urgent a request is to the schedule of a budget shared by
// tenants (ScheduleLatency), for a SharedBudget that orders requests across
// processes: a request goes before another whose bid it beats.
type Bid struct {
	// Overdue is how long the tenant is past the floor of its budget, 0
	// when it is not; Backlog is the tenant's Demand.Backlog.
	Overdue time.Duration
	Backlog float64
}

// Beats reports whether b goes before o: the longer overdue first, then
// the larger backlog.
func (b Bid) Beats(o Bid) bool {
	if b.Overdue != o.Overdue {
		return b.Overdue > o.Overdue
	}
	return b.Backlog > o.Backlog
}

// AdmitStart is the rule every SharedBudget applies to the request starts it
// holds: a start holds its slot for the upstream's window of 60 s plus a
// margin of 1 s, and a start later than now (another process's clock, or
// ours stepped back) counts as now. When fewer than limit starts hold a slot
// it returns them with now appended, oldest first, and a wait of 0: the
// caller records that list in place of the one it read. Otherwise it returns
// nil and how long until a slot frees.
func AdmitStart(starts []time.Time, now time.Time, limit int) ([]time.Time, time.Duration) {
	limit = max(limit, 1)
	live := make([]time.Time, 0, len(starts)+1)
	for _, s := range starts {
		if s.After(now) {
			s = now
		}
		if s.Add(budgetWindow + budgetMargin).After(now) {
			live = append(live, s)
		}
	}
	slices.SortFunc(live, time.Time.Compare)
	if n := len(live); n >= limit {
		return nil, live[n-limit].Add(budgetWindow + budgetMargin).Sub(now)
	}
	return append(live, now), 0
}

// budgetFile is the SharedBudget of the processes of one host: a file of
// start times, checked and rewritten under a lock.
type budgetFile string

// Reserve implements SharedBudget; the processes of one host are served
// first come, first served, whatever their bids.
func (f budgetFile) Reserve(_ context.Context, now time.Time, limit int, _ Bid) (time.Duration, error) {
	return reserveShared(string(f), now, limit)
}

// String returns the file's path, as logs name it.
func (f budgetFile) String() string { return string(f) }

// reserveShared records a request start at now in the budget file at path
// if fewer than limit starts of any process lie within the window there,
// and otherwise returns how long to wait before asking again.
func reserveShared(path string, now time.Time, limit int) (time.Duration, error) {
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return 0, fmt.Errorf("opendata: budget file lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return 0, fmt.Errorf("opendata: budget file lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too
	starts, err := readBudgetFile(path)
	if err != nil {
		return 0, err
	}
	live, wait := AdmitStart(starts, now, limit)
	if wait > 0 {
		return wait, nil
	}
	return 0, writeBudgetFile(path, live)
}

// Preload records request starts made earlier, by a previous process, as
// occupying slots until their window passes. Starts older than the window
// are ignored; starts in the future (the clock stepped back) count as now.
func (b *Budget) Preload(starts []time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	merged := append([]time.Time(nil), b.starts...)
	for _, s := range starts {
		if s.After(now) {
			// The wall clock stepped back across the restart: the request
			// still counts, as if it had started now.
			s = now
		}
		if s.Add(budgetWindow + budgetMargin).After(now) {
			merged = append(merged, s)
		}
	}
	slices.SortFunc(merged, time.Time.Compare)
	b.starts = merged
	b.broadcastLocked()
}

// Starts returns the request starts that still occupy a slot, oldest first.
func (b *Budget) Starts() []time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refreshLocked(b.clock.Now())
	return append([]time.Time(nil), b.starts...)
}

// readBudgetFile returns the start times in path; a missing file is no
// starts.
func readBudgetFile(path string) ([]time.Time, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opendata: budget file: %w", err)
	}
	var out []time.Time
	for _, f := range strings.Fields(string(data)) {
		ms, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("opendata: budget file %s: %q is not a time in epoch milliseconds", path, f)
		}
		out = append(out, time.UnixMilli(ms))
	}
	return out, nil
}

// writeBudgetFile replaces path with the start times.
func writeBudgetFile(path string, starts []time.Time) error {
	var sb strings.Builder
	for _, s := range starts {
		sb.WriteString(strconv.FormatInt(s.UnixMilli(), 10))
		sb.WriteByte('\n')
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("opendata: budget file: %w", err)
	}
	_, werr := tmp.WriteString(sb.String())
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("opendata: budget file: %w", werr)
	}
	return nil
}
