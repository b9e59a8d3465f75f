package poller

import (
	"slices"
	"sync"
	"time"
)

// Usage is the upstream request budget as the poller uses it, for the
// operator console's System page.
type Usage struct {
	// Limit is the configured rate limit, requests a minute; Effective is
	// the client budget's limit now, lower while the upstream signals
	// overload.
	Limit, Effective int
	// InUse counts the requests the client started in the last minute,
	// logins included; Waiting counts the requests waiting for a slot.
	InUse, Waiting int
	// ByQuery counts the alarm queries of the last minute by what they
	// were for (current, sweep, confirm, ...), most first.
	ByQuery []QueryCount
	// LastSuccess is when the upstream last answered an alarm query;
	// LastFailure when a query last failed and LastError why, as the log
	// says it (the client keeps the app secret and tokens out of it). Zero
	// and empty before the first.
	LastSuccess, LastFailure time.Time
	LastError                string
}

// QueryCount is how many alarm queries of one kind went out.
type QueryCount struct {
	Query    string
	Requests int
}

// usage remembers the alarm queries of the last minute and the last
// failure; the polling goroutine writes it, Usage reads it.
type usage struct {
	mu      sync.Mutex
	recent  []sent
	failed  time.Time
	lastErr string
}

// sent is one alarm query sent at at.
type sent struct {
	at   time.Time
	kind kind
}

// sent records a query of kind k sent at at, and forgets those older than a
// minute: at most a minute's budget is kept.
func (u *usage) sent(k kind, at time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.recent = append(u.dropOld(at), sent{at: at, kind: k})
}

func (u *usage) dropOld(now time.Time) []sent {
	i := 0
	for i < len(u.recent) && now.Sub(u.recent[i].at) >= time.Minute {
		i++
	}
	return slices.Delete(u.recent, 0, i)
}

func (u *usage) failure(at time.Time, msg string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.failed, u.lastErr = at, msg
}

// Usage returns the request budget's use now. It may be called from any
// goroutine.
func (p *Poller) Usage() Usage {
	b := p.client.Budget()
	out := Usage{Limit: p.cfg.RateLimit, Effective: b.Limit(), InUse: b.InUse(), Waiting: b.Waiting(), LastSuccess: p.LastSuccess()}
	now := p.clock.Now()
	u := &p.usage
	u.mu.Lock()
	u.recent = u.dropOld(now)
	counts := map[string]int{}
	for _, s := range u.recent {
		counts[s.kind.String()]++
	}
	out.LastFailure, out.LastError = u.failed, u.lastErr
	u.mu.Unlock()
	for q, n := range counts {
		out.ByQuery = append(out.ByQuery, QueryCount{Query: q, Requests: n})
	}
	slices.SortFunc(out.ByQuery, func(a, b QueryCount) int {
		if a.Requests != b.Requests {
			return b.Requests - a.Requests
		}
		if a.Query < b.Query {
			return -1
		}
		return 1
	})
	return out
}
