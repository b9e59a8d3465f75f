package poller

import (
	"context"
	"time"

	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/store"
)

// The first contact. What is history (an alarm that was over before relay
// first ran, never to be announced) is decided by what the upstream lists,
// not by the devices' stamps, which may be hours off (stamps.go). At the
// first run, before any sweep or reconciliation, the poller reads the
// recovered alarms of the whole late horizon, from the upstream's now less
// the horizon to MaxClockSkew past it, in pages of the upstream's size; the
// store records the alarms among them it has never seen as history,
// without events. Afterwards a recovered alarm the store has never seen is
// new, whatever its stamps, and gets its start and end: sweeps and
// reconciliation never reach further back than the late horizon, which the
// contact read. The contact's slots come before the sweeps'; the current
// snapshot keeps its turn every third slot, so ongoing alarms are announced
// while a long contact is read.
//
// The contact's window is fixed at its first answer, the moment that decides
// history (the first run, for history): a contact not answered yet is made
// again, with a new window, at each try, so that an alarm that ended while
// the upstream could not be reached counts as history only when it was
// over before relay's first answer. Once a page was stored, a failed page
// reads the contact again from its first page, with the same window (the
// pages already stored are history all the same). A contact read to its end
// with fewer rows than its total is read again, twice at most. Its window's
// start, stored with it, is the floor of every later sweep and
// reconciliation window while that would reach before it: whatever the
// clock offset learnt at the first answer, no later window reads a stamp
// the contact did not. An alarm that starts and ends while the contact's
// pages are read, and that no current snapshot lists in between, is taken
// for history; with the late horizon in one page (up to 500 recovered
// alarms in 24 h) the contact is one answer and nothing can. A restart
// before the last page reads the contact again, in a new window.

// contactTries is how many times a contact read to its end with fewer rows
// than its total is read.
const contactTries = 3

// newContact returns the first contact's query, in the upstream's clock as
// far as it is known: before the first answer, on the relay's.
func (p *Poller) newContact(now time.Time) *unit {
	up := p.upAt(now)
	return &unit{
		kind:  kindContact,
		level: -1,
		query: opendata.AlarmQuery{Page: 1, Size: p.up.pageSize, Start: up.Add(-p.cfg.LateHorizon), End: p.reach(now), Recovered: true},
		seen:  newIDMap[struct{}](0),
		mark:  up,
	}
}

// againContact returns u from its first page, with the same window, after
// tries reads.
func againContact(u *unit, tries int) *unit {
	q := u.query
	q.Page = 1
	return &unit{kind: kindContact, level: -1, query: q, seen: newIDMap[struct{}](0), mark: u.mark, tries: tries}
}

// dropContact decides what follows a failed slot of the contact u: made
// again with a new window while nothing of it was stored, else read again
// from its first page with the same one.
func (p *Poller) dropContact(u *unit) {
	if !u.stored {
		p.contact = nil
		return
	}
	p.contact = againContact(u, u.tries)
}

// onContact applies a page of the first contact as history. Its last page
// stores the contact, its window's start and the sweep's watermark at the
// upstream's now of its first answer, in the same batch.
func (p *Poller) onContact(ctx context.Context, u *unit, pg *opendata.AlarmPage, at time.Time) error {
	if u.read == 1 && !u.stored {
		// The first answer tells the upstream's clock: the contact is at
		// its now.
		u.mark = p.upAt(at)
	}
	retry := u.done && u.rows < u.last && u.tries+1 < contactTries
	b := store.Batch{Observed: pg.Alarms, FirstContact: true, FirstListing: !p.listed, DetectedAt: at}
	if u.done && !retry {
		b.Marks = map[string]time.Time{markContact: u.mark, markContactFrom: u.query.Start, markSweep: u.mark}
	}
	res, err := p.apply(ctx, b)
	if err != nil {
		return err
	}
	u.stored = true
	p.learn(pg.Alarms, res)
	if !u.done {
		return nil
	}
	if retry {
		p.log.Info("first contact read to its end with fewer alarms than its total: read again",
			"rows", u.rows, "total", u.last, "try", u.tries+1)
		p.contact = againContact(u, u.tries+1)
		return nil
	}
	p.contact, p.contacted, p.floor = nil, true, u.query.Start
	p.sweepMark, p.sweepSpan = u.mark, 0
	p.log.Info("first contact: the recovered alarms the upstream lists in the late horizon are history, "+
		"never announced; any other alarm is new, whatever its stamps",
		"recovered_listed", u.unique, "pages", u.read, "from", u.query.Start, "to", u.query.End,
		"after_first_start", at.Sub(p.started).Round(time.Second))
	if u.total != u.last {
		p.log.Warn("the upstream's alarm list changed while the first contact was read: an alarm that started "+
			"and ended within those slots may have been taken for history", "pages", u.read,
			"total", u.total, "last_total", u.last)
	}
	return nil
}
