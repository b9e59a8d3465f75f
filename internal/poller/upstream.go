package poller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/store"
)

// upstream is what the poller has learnt of how the upstream behaves, where
// the spec leaves it open: its clock, the page size it serves, whether it
// honours eventLevels, how many devices a deviceSnList may name, and whether
// its total counts rows it never serves. Nothing of it is stored: a restarted
// relay learns it again within a few slots.
type upstream struct {
	// offset is the upstream's clock minus the relay's; clocked says an
	// answer carried a Date header to measure it.
	offset  time.Duration
	clocked bool
	// wildClock is set while the upstream's clock is further off than
	// MaxClockSkew and so ignored.
	wildClock bool
	// alignFirstRun says the store's first run has not been moved into the
	// upstream's time yet.
	alignFirstRun bool
	// pageSize is the largest page the upstream serves: 500 until it
	// serves fewer rows than asked while listing more.
	pageSize int
	// phantom is how many rows the last total counted beyond the rows
	// served when the answer was read to its end; a first page short by
	// exactly that is the whole answer.
	phantom int
	// levelsIgnored says the upstream answers eventLevels queries with
	// alarms of other levels, so storms are paged whole.
	levelsIgnored bool
	// devices is how many devices one deviceSnList may name.
	devices int
	// wholeOnce is set once a complete snapshot of every level was read:
	// while the latest ones are complete, an alarm a snapshot lists for the
	// first time started since the last, and its stamp tells its device's
	// offset.
	wholeOnce bool
	// lastComplete is when the last complete snapshot of every level was
	// read (or the poller started); incomplete counts the snapshots read
	// to their end since then; stalled is set while that is reported.
	lastComplete time.Time
	incomplete   int
	stalled      bool
}

// learnStarts records, for the alarms a current snapshot lists ongoing for
// the first time while the snapshots before it were complete, the bound of
// their device's stamp offset: their stamp minus the upstream's now (see
// stamps.go). An alarm listed by the first snapshot of the process, or
// after an incomplete one that may have missed it, may be of any age.
func (p *Poller) learnStarts(res store.Result, at time.Time) {
	if !p.up.wholeOnce || p.up.incomplete > 0 {
		return
	}
	up := p.upAt(at)
	for i := range res.Events {
		d := &res.Events[i].Data
		if d.Transition != event.Start {
			continue
		}
		occ, err := time.Parse(time.RFC3339Nano, d.OccurredAt)
		if err != nil {
			continue
		}
		p.stamps.bound(d.DeviceSN, occ.Sub(up), up, true)
	}
}

// overlap is how far a sweep reaches back before the previous one: the
// configured overlap, widened by how far the stamps of the device furthest
// behind lag the upstream's clock (polling delay and ingestion lag
// included), so that a short alarm of that device is swept as soon as one
// of its alarms was seen ongoing. The widening stops at maxLagWidening
// while the devices lagging further are few enough for one deviceSnList:
// those get lag sweeps of their own (newLagSweep), so that a few skewed
// loggers do not make every sweep read hours of the whole fleet; more of
// them widen it as far as they lag, up to the late horizon. Sweeps catching
// up on a backlog in capped windows are not widened, so that they move on.
func (p *Poller) overlap() time.Duration {
	if p.sweepSpan > 0 {
		return p.cfg.SweepOverlap
	}
	up := p.upAt(p.clock.Now())
	widen := p.stamps.behind(up)
	if n := p.stamps.lagging(up, maxLagWidening, nil); n <= p.up.devices {
		widen = min(widen, maxLagWidening)
	}
	return p.cfg.SweepOverlap + max(0, min(widen, p.cfg.LateHorizon-p.cfg.SweepOverlap))
}

// maxLagWidening is how far a sweep of the whole fleet is widened for the
// lag of a few devices: the devices lagging further get lag sweeps.
const maxLagWidening = 15 * time.Minute

// newLagSweep returns a sweep of the recovered alarms of the devices whose
// stamps lag further than maxLagWidening, furthest first, as many as one
// deviceSnList may name, from the watermark less the overlap and their
// largest lag to MaxClockSkew past the upstream's now; or nil when there
// are none, or more than one list holds (the sweep itself is widened
// then). It moves no watermark: the sweep does.
func (p *Poller) newLagSweep(now time.Time) *unit {
	if !p.contacted {
		return nil
	}
	up := p.upAt(now)
	var devs []DeviceOffset
	if n := p.stamps.lagging(up, maxLagWidening, &devs); n == 0 || n > p.up.devices {
		return nil
	}
	lag := -devs[0].Offset
	start := p.sweepMark.Add(-p.overlap() - lag)
	if floor := up.Add(-p.cfg.LateHorizon); start.Before(floor) {
		start = floor
	}
	if start.Before(p.floor) {
		start = p.floor
	}
	sns := make([]string, len(devs))
	for i, d := range devs {
		sns[i] = d.SN
	}
	return &unit{
		kind:  kindLag,
		level: -1,
		query: opendata.AlarmQuery{Page: 1, Size: p.up.pageSize, Start: start, End: p.reach(now), Recovered: true, DeviceSNs: sns},
		seen:  newIDMap[struct{}](0),
	}
}

// onLagSweep applies a page of a lag sweep: its alarms are new, or ends of
// known ones, as any sweep's.
func (p *Poller) onLagSweep(ctx context.Context, u *unit, pg *opendata.AlarmPage, at time.Time) error {
	res, err := p.apply(ctx, store.Batch{Observed: pg.Alarms, DetectedAt: at})
	if err != nil {
		return err
	}
	p.learn(pg.Alarms, res)
	if u.done {
		p.lag = nil
	}
	return nil
}

// minPageCap is the smallest page cap the poller believes: a first page
// shorter than that is a glitch or a total that counts rows never served.
const minPageCap = 20

func newUpstream(now time.Time) upstream {
	return upstream{
		alignFirstRun: true,
		pageSize:      pageSize,
		devices:       lookupDevices,
		lastComplete:  now,
	}
}

// upAt returns the upstream's time at the relay's time t.
func (p *Poller) upAt(t time.Time) time.Time { return t.Add(p.up.offset) }

// reach returns the end of every query window created at the relay's time
// now: MaxClockSkew past the upstream's now.
func (p *Poller) reach(now time.Time) time.Time { return p.upAt(now).Add(p.cfg.MaxClockSkew) }

// learnClock takes the client's estimate of the upstream's clock after an
// answer. The first estimate moves the store's first run into the
// upstream's time, for the figures that start there; what is history is
// decided by the first contact (contact.go), not by the clock.
func (p *Poller) learnClock(pg *opendata.AlarmPage) {
	offset, ok := p.client.ClockOffset()
	if !ok {
		return
	}
	if absDur(offset) > p.cfg.MaxClockSkew {
		// A Date header that far off is a broken proxy or clock, not a
		// vendor's skew: windows taken from it would read the wrong days.
		if !p.up.wildClock {
			p.up.wildClock = true
			p.log.Warn("the upstream's Date header is further off than RELAY_MAX_CLOCK_SKEW: ignored, relay's clock is used",
				"offset", offset.Round(time.Second), "max_clock_skew", p.cfg.MaxClockSkew)
		}
		return
	}
	p.up.wildClock = false

	if !p.up.clocked || absDur(offset-p.up.offset) >= time.Minute {
		p.log.Info("upstream clock", "offset", offset.Round(time.Millisecond))
	}
	p.up.offset, p.up.clocked = offset, true
	if !p.up.alignFirstRun {
		return
	}
	p.up.alignFirstRun = false
	first, err := p.store.AlignFirstRun(offset)
	if err != nil {
		p.log.Warn("first run not moved into the upstream's time; history is judged on the relay's clock", "err", err)
		return
	}
	p.firstRun = first
}

// paging decides, after page pg of u was added, whether u is done and what
// its next request asks. It learns a page cap from a first page that is
// shorter than asked while total says more rows exist: the next page asks
// for that many rows, and if it finds more the cap is kept for every later
// query. If it finds none, total counts rows the upstream never serves
// (phantom rows), and a first page short by the same count again is taken as
// the whole answer instead of asking twice.
func (p *Poller) paging(u *unit, pg *opendata.AlarmPage) {
	short := pg.Rows < u.query.Size
	switch {
	case u.probe:
		u.probe = false
		if pg.Rows > 0 {
			p.facts.PageCapped(pageSize, u.query.Size)
			if p.up.pageSize != u.query.Size {
				p.log.Warn("the upstream serves fewer alarms per page than asked: paging with its size",
					"asked", pageSize, "served", u.query.Size)
			}
			p.up.pageSize = u.query.Size
			p.m.setPageSize(u.query.Size)
		} else if u.rows < pg.Total {
			p.learnPhantom(pg.Total - u.rows)
		}
		u.done = pg.Rows == 0 || short || u.rows >= pg.Total
	case pg.Rows == 0:
		u.done = true
		if u.rows < pg.Total && u.read > 1 {
			p.learnPhantom(pg.Total - u.rows)
		}
	case short && u.read == 1 && pg.Rows >= minPageCap && u.rows < pg.Total && pg.Total-u.rows != p.up.phantom:
		// Pages of two sizes cannot prove a snapshot complete: the
		// probing query counts as shifted.
		u.probe, u.shifted = true, true
		u.query.Size = pg.Rows
		u.done = false
	default:
		// A short page is the last; a full one is the last only when it
		// holds exactly what total counts (a total below the rows served
		// is read on, in case the upstream undercounts).
		u.done = short || u.rows == pg.Total
	}
	if !u.done {
		u.query.Page++
	}
}

func (p *Poller) learnPhantom(n int) {
	if n != p.up.phantom {
		p.log.Warn("the upstream's total counts alarms it never serves: snapshots cannot be complete, "+
			"so ends are found only from recovered records and none can be inferred", "phantom_rows", n)
	}
	p.up.phantom = n
}

// ignoresLevels reports whether a page of a level-by-level snapshot holds
// alarms of other levels, and if so stops level-by-level snapshots for good.
func (p *Poller) ignoresLevels(u *unit, pg *opendata.AlarmPage) bool {
	if u.level < 0 {
		return false
	}
	for i := range pg.Alarms {
		if l := pg.Alarms[i].Level; l >= 0 && l <= maxLevel && l != u.level {
			p.up.levelsIgnored = true
			p.levelMode, p.level = false, 0
			p.log.Warn("the upstream ignores the eventLevels filter: storms are paged whole, not urgent first",
				"asked_level", u.level, "got_level", l)
			return true
		}
	}
	return false
}

// refusedList reports whether err refused u's list of devices as too long,
// and if so halves the devices a lookup names, down to one.
func (p *Poller) refusedList(u *unit, err error) bool {
	if u.kind != kindConfirm && u.kind != kindAged && u.kind != kindLag || len(u.query.DeviceSNs) < 2 {
		return false
	}
	var oe *opendata.Error
	if !errors.As(err, &oe) || oe.Kind != opendata.KindBadRequest {
		return false
	}
	p.facts.ListAnswered(len(u.query.DeviceSNs), true)
	p.up.devices = max(1, len(u.query.DeviceSNs)/2)
	p.m.refused(u.kind)
	p.m.setDeviceLimit(p.up.devices)
	p.log.Warn("the upstream refused a deviceSnList: asking for fewer devices",
		"query", u.kind.String(), "devices", len(u.query.DeviceSNs), "next", p.up.devices, "code", oe.Code)
	return true
}

// retryNow abandons the lookup u after its list was refused, so that the
// next slot asks again, with fewer devices, for the same alarms.
func (p *Poller) retryNow(u *unit) {
	if u.kind == kindLag {
		p.lag = nil
		return
	}
	if u.kind == kindAged {
		p.aged = nil
		for id := range u.want {
			if a, ok := p.outside.get(id); ok {
				a.checked = 0
				p.outside.set(id, a)
			}
		}
		return
	}
	p.confirm = nil
}

// snapshotRead records a snapshot of every level read to its end.
func (p *Poller) snapshotRead(complete bool, at time.Time) {
	if complete {
		p.up.wholeOnce = true
		if p.up.stalled {
			p.log.Info("end detection resumed: a complete snapshot was read", "incomplete_before", p.up.incomplete)
		}
		p.up.lastComplete, p.up.incomplete, p.up.stalled = at, 0, false
	} else {
		p.up.incomplete++
	}
	p.m.setIncomplete(p.up.incomplete)
	p.stall.Store(p.stallReason(at))
}

// checkStall warns once when end detection has been stalled for more than
// stallAfter: known alarms, and no complete snapshot to tell which of them
// vanished.
func (p *Poller) checkStall(now time.Time) {
	reason := p.stallReason(now)
	p.stall.Store(reason)
	if reason == "" || p.up.stalled {
		return
	}
	p.up.stalled = true
	p.log.Warn("end detection stalled: "+reason, "incomplete_snapshots", p.up.incomplete,
		"phantom_rows", p.up.phantom, "page_size", p.up.pageSize)
}

// stallReason says why end detection is stalled at now, "" while it is not:
// no complete snapshot for stallAfter, or, for a tenant sharing its budget
// with others, for twice the longest the budget lets it wait between two
// reads (opendata.Budget's ReadBound).
func (p *Poller) stallReason(now time.Time) string {
	since := now.Sub(p.up.lastComplete)
	if since <= max(stallAfter, 2*p.client.Budget().ReadBound()) || p.known.len() == 0 {
		return ""
	}
	return fmt.Sprintf("no complete snapshot of the ongoing alarms for %s (%d read incomplete): "+
		"ends are found only from recovered records, none can be inferred", since.Round(time.Second), p.up.incomplete)
}

// EndDetection returns nil while the poller can tell which alarms ended,
// and otherwise an error saying why it cannot. It may be called from any
// goroutine.
func (p *Poller) EndDetection() error {
	if r, _ := p.stall.Load().(string); r != "" {
		return errors.New(r)
	}
	return nil
}

// observe shows the facts (package learn) a page of u: what it served and
// the total it said, the length of its deviceSnList that was accepted, and,
// for recovered alarms, their order and which of their times the window
// filtered on. It decides nothing.
func (p *Poller) observe(u *unit, pg *opendata.AlarmPage) {
	p.facts.PageServed(u.query.Size, pg.Rows, u.rows-pg.Rows, pg.Total)
	p.facts.ListAnswered(len(u.query.DeviceSNs), false)
	if u.query.Recovered {
		p.facts.RecoveredPage(u.query.Start, u.query.End, pg.Alarms)
	}
}

// firstSeen shows the facts how late the alarms that evs start were first
// listed: their detection, in the upstream's clock, minus their stamped
// occurrence. Alarms that occurred before the store's first run are the
// bootstrap's, not a measure of the upstream.
func (p *Poller) firstSeen(evs []event.Event) {
	for i := range evs {
		d := &evs[i].Data
		if d.Transition != event.Start || d.Inferred {
			continue
		}
		occ, err := time.Parse(time.RFC3339Nano, d.OccurredAt)
		if err != nil || occ.Before(p.firstRun) {
			continue
		}
		seen, err := time.Parse(time.RFC3339Nano, d.DetectedAt)
		if err != nil {
			continue
		}
		p.facts.FirstSeen(occ, seen.Add(p.up.offset))
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
