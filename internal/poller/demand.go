package poller

import (
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/opendata"
)

// The upstream limits requests per address, and the tenants of one upstream
// host share one budget (docs/design.md §4, "Tenants of one budget"). The
// poller tells the budget what waits to be detected in its account after
// every step, so that the budget can weigh this tenant's next request
// against the others': the transitions expected since its last read of the
// current alarms, at the rates learned from what it detected, and the
// alarms it saw vanish and has not looked up yet.

// countTransitions shows the facts the starts and ends of evs, for the
// account's rates. Starts of alarms that occurred before the store's first
// run are the bootstrap's, not the account's rate.
func (p *Poller) countTransitions(evs []event.Event) {
	starts, ends := 0, 0
	for i := range evs {
		d := &evs[i].Data
		switch d.Transition {
		case event.Start:
			if occ, err := time.Parse(time.RFC3339Nano, d.OccurredAt); err == nil && !occ.Before(p.firstRun) {
				starts++
			}
		case event.End, event.Invalid:
			ends++
		}
	}
	p.facts.Transitions(starts, ends)
}

// demand is what waits to be detected in the account.
func (p *Poller) demand() opendata.Demand {
	d := opendata.Demand{Rate: p.facts.Rates().PerSecond(), Since: p.lastRead}
	var sum time.Duration
	var first time.Time
	for _, v := range p.vanished {
		if v.tries > 0 {
			// Looked up and not listed yet: another request would not
			// find it sooner.
			continue
		}
		// It ended between the read before the one it vanished from and
		// that one: on average half-way.
		end := v.at
		if !v.after.IsZero() && v.after.Before(v.at) {
			end = v.after.Add(v.at.Sub(v.after) / 2)
		}
		if d.Pending == 0 {
			first = end
		}
		sum += end.Sub(first)
		d.Pending++
	}
	if d.Pending > 0 {
		d.PendingSince = first.Add(sum / time.Duration(d.Pending))
	}
	return d
}

// tellDemand tells the client's budget what waits in the account now.
func (p *Poller) tellDemand() { p.client.SetDemand(p.demand()) }

// sweepLate reports, for a tenant that shares its budget with others,
// whether its last sweep is older than SweepEvery of the budget's slots for
// each tenant: as long as a tenant with the budget to itself takes for
// SweepEvery steps. A tenant read once in many of the budget's slots would
// otherwise sweep once in SweepEvery of its own reads, and an alarm that
// started and ended between two reads is found by a sweep only.
func (p *Poller) sweepLate(now time.Time) bool {
	b := p.client.Budget()
	n := b.Tenants()
	if n < 2 {
		return false
	}
	return p.upAt(now).Sub(p.sweepMark) >= time.Duration(p.cfg.SweepEvery*n)*b.Spacing()
}
