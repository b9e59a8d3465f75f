package poller

import (
	"context"
	"time"

	"github.com/relay-energy/relay/internal/dedupe"
	"github.com/relay-energy/relay/internal/opendata"
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
// The contact's window is fixed when it starts: an alarm that starts and
// ends while its pages are read, and that no current snapshot listed in
// between, is taken for history. With the late horizon in one page (up to
// 500 recovered alarms in 24 h) the contact is one answer and nothing can.
// A failed page is asked again, with the same window. A restart before the
// last page reads the contact again, in a new window from the restart.

// newContact returns the first contact's query, in the upstream's clock as
// far as it is known: before the first answer, on the relay's.
func (p *Poller) newContact(now time.Time) *unit {
	up := p.upAt(now)
	return &unit{
		kind:    kindContact,
		level:   -1,
		query:   opendata.AlarmQuery{Page: 1, Size: p.up.pageSize, Start: up.Add(-p.cfg.LateHorizon), End: p.reach(now), Recovered: true},
		seen:    make(map[string]struct{}),
		mark:    up,
		clocked: p.up.clocked,
	}
}

// onContact applies a page of the first contact as history. Its last page
// stores the contact and starts the sweep's watermark at it, in the same
// batch.
func (p *Poller) onContact(ctx context.Context, u *unit, pg *opendata.AlarmPage, at time.Time) error {
	b := dedupe.Batch{Observed: pg.Alarms, FirstContact: true, DetectedAt: at}
	if u.done {
		b.Marks = map[string]time.Time{markContact: u.mark, markSweep: u.mark}
	}
	res, err := p.apply(ctx, b)
	if err != nil {
		return err
	}
	p.learn(pg.Alarms, res)
	if !u.clocked && p.up.offset != 0 {
		// The window was taken on the relay's clock, and the first answer
		// says the upstream's is off: what it read is history all the
		// same, and the contact is read again in the upstream's clock, so
		// that it holds every window a later sweep or reconciliation reads.
		p.contact = p.newContact(p.clock.Now())
		p.log.Info("first contact read again in the upstream's clock", "offset", p.up.offset)
		return nil
	}
	if !u.done {
		return nil
	}
	p.contact, p.contacted = nil, true
	p.sweepMark, p.sweepSpan = u.mark, 0
	p.log.Info("first contact: the recovered alarms the upstream lists in the late horizon are history, "+
		"never announced; any other alarm is new, whatever its stamps",
		"recovered_listed", len(u.seen), "pages", u.read, "from", u.query.Start, "to", u.query.End)
	if u.shifted {
		p.log.Warn("the upstream's alarm list changed while the first contact was read: an alarm that started "+
			"and ended within those slots may have been taken for history", "pages", u.read,
			"total", u.total, "last_total", u.last)
	}
	return nil
}
