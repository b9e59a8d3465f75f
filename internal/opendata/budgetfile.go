package opendata

import (
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
	var live []time.Time
	for _, s := range starts {
		if s.After(now) {
			s = now // another process's clock, or ours stepped back: it counts
		}
		if s.Add(budgetWindow + budgetMargin).After(now) {
			live = append(live, s)
		}
	}
	slices.SortFunc(live, time.Time.Compare)
	if n := len(live); n >= limit {
		return live[n-limit].Add(budgetWindow + budgetMargin).Sub(now), nil
	}
	return 0, writeBudgetFile(path, append(live, now))
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
