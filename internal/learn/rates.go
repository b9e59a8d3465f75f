package learn

import "time"

// Rates is how often the alarms of the upstream account start and end, as
// relay detected them over the last one to two hours. A budget shared by
// several tenants of one upstream host serves each in proportion to the
// square root of these rates (docs/design.md §4, "Tenants of one budget").
type Rates struct {
	// StartsPerHour and EndsPerHour are the estimates: the transitions
	// counted, plus one, over the span counted plus two minutes. The one
	// transition in two minutes assumed before any evidence keeps a tenant
	// that has had no alarm yet from being taken for one that never will;
	// it weighs less with every minute counted, and after an hour it adds
	// one transition an hour.
	StartsPerHour, EndsPerHour float64
	// Starts and Ends count the transitions detected over Over, the span
	// counted: from the previous whole hour of the process (or its start)
	// to now.
	Starts, Ends int
	Over         time.Duration
}

// PerSecond returns the transitions a second, starts and ends together: what
// a read of the current alarms finds (an end as the alarm's vanish).
func (r Rates) PerSecond() float64 { return (r.StartsPerHour + r.EndsPerHour) / 3600 }

const (
	// rateWindow is how long one window of the rates counts; the rates are
	// over the current window and the one before.
	rateWindow = time.Hour
	// ratePriorEvents over ratePriorSpan is the rate assumed before any
	// evidence, added to what was counted.
	ratePriorEvents = 1
	ratePriorSpan   = 2 * time.Minute
)

// rateCount counts transitions in windows of rateWindow from the start.
type rateCount struct {
	// start is when the current window began; prevStart the one before,
	// zero while there is none.
	start, prevStart     time.Time
	starts, ends         int
	prevStarts, prevEnds int
}

// roll moves the windows on to now.
func (c *rateCount) roll(now time.Time) {
	if now.Before(c.start.Add(rateWindow)) {
		return
	}
	k := now.Sub(c.start) / rateWindow
	if k == 1 {
		c.prevStart, c.prevStarts, c.prevEnds = c.start, c.starts, c.ends
	} else {
		// Nothing was counted in the window before now's.
		c.prevStart, c.prevStarts, c.prevEnds = c.start.Add((k-1)*rateWindow), 0, 0
	}
	c.start, c.starts, c.ends = c.start.Add(k*rateWindow), 0, 0
}

// rates returns the estimates at now.
func (c *rateCount) rates(now time.Time) Rates {
	c.roll(now)
	from := c.start
	if !c.prevStart.IsZero() {
		from = c.prevStart
	}
	r := Rates{Starts: c.starts + c.prevStarts, Ends: c.ends + c.prevEnds, Over: now.Sub(from).Round(time.Second)}
	hours := (r.Over + ratePriorSpan).Hours()
	r.StartsPerHour = float64(r.Starts+ratePriorEvents) / hours
	r.EndsPerHour = float64(r.Ends+ratePriorEvents) / hours
	return r
}

// Transitions learns from an answer that produced starts alarm starts and
// ends ends (or invalidations) the account's alarms had. Starts of alarms
// that occurred before the store's first run are the bootstrap's, not the
// account's rate: the caller leaves them out.
func (u *Upstream) Transitions(starts, ends int) {
	if starts <= 0 && ends <= 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clk.Now()
	u.rate.roll(now)
	u.rate.starts += max(starts, 0)
	u.rate.ends += max(ends, 0)
	u.m.setRates(u.rate.rates(now))
}

// Rates returns how often the account's alarms start and end, estimated
// now.
func (u *Upstream) Rates() Rates {
	u.mu.Lock()
	defer u.mu.Unlock()
	r := u.rate.rates(u.clk.Now())
	u.m.setRates(r)
	return r
}
