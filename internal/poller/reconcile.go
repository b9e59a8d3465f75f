package poller

import (
	"context"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/store"
)

// Reconciliation reads again, in slots nothing urgent wants, the recovered
// alarms of the windows behind the sweep, back to the late horizon. The sweep
// reads only the recent past; an alarm the upstream lists late (a data
// logger that was offline uploads its buffer, a device whose clock runs
// behind stamps its alarms in the past) and that is already over when it
// first appears lies behind the sweep's window. Every recovered alarm whose
// occurrence (or recovery, whichever the upstream filters on) is within the
// horizon falls in one window of each pass, so a pass announces it, start
// then end, unless it is history. A recovered record of a known alarm ends
// it, as any recovered record does.
//
// A pass walks back from the sweep's watermark, one window at a time, each
// window sized to fit about one page; a new pass starts at most every
// reconcilePass while alarms are listed later than a sweep reaches back,
// and less often (up to maxReconcilePass) while none is, so that in a quiet
// fleet, where the whole horizon fits one page, reconciliation costs one
// slot in that time.

// nextReconcileEvery returns the least time until the pass after the one
// starting now: reconcilePass while an alarm of the last hour or two was
// listed later after its occurrence than half the time a sweep reaches
// back (only reconciliation finds such an alarm when it is already over,
// and lateness near the reach says some may go past it), and otherwise
// twice the time before, up to maxReconcilePass. It stays reconcilePass
// for the first minLateWatch and until minLateSamples alarms were
// measured. A late alarm found brings it back to reconcilePass at the next
// pass.
func (p *Poller) nextReconcileEvery() time.Duration {
	late, samples := p.facts.LatestLate()
	if samples < minLateSamples || p.clock.Now().Sub(p.started) < minLateWatch {
		return reconcilePass
	}
	if late > p.cfg.SweepOverlap/2 {
		if p.recEvery != reconcilePass {
			p.log.Info("alarms are listed nearly as late as a sweep reaches back, or later: reconciling more often",
				"latest", late, "every", reconcilePass)
		}
		return reconcilePass
	}
	return min(2*p.recEvery, maxReconcilePass)
}

// minLateSamples and minLateWatch are how many alarms must have been
// measured, and for how long, before reconciliation may run less often.
const (
	minLateSamples = 20
	minLateWatch   = 10 * time.Minute
)

// newReconcile returns the next window of the pass in progress, or starts a
// new pass, or returns nil when the last pass began less than reconcilePass
// ago.
func (p *Poller) newReconcile(now time.Time) *unit {
	floor := p.upAt(now).Add(-p.cfg.LateHorizon)
	if floor.Before(p.floor) {
		floor = p.floor
	}
	if !p.recCursor.After(floor) {
		if !p.recPass.IsZero() && now.Sub(p.recPass) < p.recEvery {
			return nil
		}
		cursor := p.sweepMark.Add(-p.overlap())
		if !cursor.After(floor) {
			return nil
		}
		if !p.recPass.IsZero() {
			p.recEvery = p.nextReconcileEvery()
		}
		p.recPass, p.recCursor = now, cursor
	}
	span := p.recSpan
	if span <= 0 {
		span = p.cfg.LateHorizon
	}
	start := p.recCursor.Add(-span)
	if start.Before(floor) {
		start = floor
	}
	return &unit{
		kind:  kindReconcile,
		level: -1,
		query: opendata.AlarmQuery{Page: 1, Size: p.up.pageSize, Start: start, End: p.recCursor, Recovered: true},
		seen:  newIDMap[struct{}](0),
	}
}

// onReconcile applies a page of a reconciliation window. Once the window is
// read to its end the pass moves on to the window before it, sized from
// what this one held; a window whose total shifted is read again.
func (p *Poller) onReconcile(ctx context.Context, u *unit, pg *opendata.AlarmPage, at time.Time) error {
	res, err := p.apply(ctx, store.Batch{Observed: pg.Alarms, DetectedAt: at})
	if err != nil {
		return err
	}
	p.learn(pg.Alarms, res)
	late := 0
	for i := range res.Events {
		if d := &res.Events[i].Data; d.Transition == event.Start {
			late++
			p.log.Info("late alarm announced: the upstream listed it only after it was over",
				"origin_id", d.OriginID, "device_sn", d.DeviceSN, "occurred_at", d.OccurredAt)
		}
	}
	p.m.late(late)
	if !u.done {
		return nil
	}
	p.rec = nil
	window := u.query.End.Sub(u.query.Start)
	switch {
	case !u.exhausted():
		p.recSpan = p.fitSpan(window, u.last)
		return nil
	case u.read > 1 || u.total > p.up.pageSize*4/5:
		p.recSpan = p.fitSpan(window, u.total)
	default:
		p.recSpan = min(2*window, p.cfg.LateHorizon)
	}
	p.recCursor = u.query.Start
	return nil
}
