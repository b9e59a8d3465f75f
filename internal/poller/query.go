package poller

import (
	"context"
	"maps"
	"math"
	"sort"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/store"
)

// kind is what a query is for.
type kind int

const (
	// kindCurrent reads the ongoing alarms.
	kindCurrent kind = iota
	// kindConfirm looks up the recovered records of vanished alarms.
	kindConfirm
	// kindSweep reads the alarms recovered since the last sweep.
	kindSweep
	// kindAged looks up the recovered records of ongoing alarms older than
	// the lookback window.
	kindAged
	// kindReconcile reads the recovered alarms of older windows, back to
	// the late horizon, for alarms the upstream listed late.
	kindReconcile
	// kindContact reads, at relay's first contact with the upstream, the
	// recovered alarms of the late horizon, which are history.
	kindContact
	// kindLag reads the recovered alarms of the few devices whose stamps
	// lag further than the sweep reaches, back as far as they lag.
	kindLag
)

// String names the kind in logs and metrics.
func (k kind) String() string {
	switch k {
	case kindCurrent:
		return "current"
	case kindConfirm:
		return "confirm"
	case kindSweep:
		return "sweep"
	case kindReconcile:
		return "reconcile"
	case kindContact:
		return "contact"
	case kindLag:
		return "lag_sweep"
	}
	return "aged"
}

func (k kind) priority() opendata.Priority {
	if k == kindCurrent || k == kindConfirm {
		return opendata.PriorityAlarm
	}
	return opendata.PrioritySweep
}

// unit is one query read page by page, one page per slot. Its window is fixed
// when it is created, so that alarms starting while it is paged do not shift
// its total.
type unit struct {
	kind  kind
	query opendata.AlarmQuery // Page is the page to read next
	// level is the level of a level-by-level current snapshot, -1 for all.
	level int
	// read counts the pages read; total is the first page's total and last
	// the latest page's.
	read, total, last int
	at                time.Time // when the first page was answered
	shifted           bool      // total changed between pages
	rows              int       // records read, usable or not: what total counts
	skipped           int       // records the client could not use
	done              bool      // no page is left to read
	// probe says the next page checks whether a short first page was a
	// page cap: it asks for as many rows as that page held.
	probe bool
	// capped says a sweep's window ends before the time it was created.
	capped bool
	// stored says a page of a first contact was stored; tries counts its
	// reads to the end short of its total.
	stored bool
	tries  int
	// mark is where a sweep moves its watermark once read whole: the
	// upstream's now when it was created, or the end of a capped window.
	mark time.Time
	// seen holds the originIds read, applied or not, for the vanish rule,
	// but those of a current snapshot's known alarms, which are marked
	// with its number snap instead (tracked.listed); unique counts them
	// all, once each.
	seen   idMap[struct{}]
	snap   uint16
	unique int
	// want holds the originIds a confirm or aged query has not found yet.
	want map[string]struct{}
	// asked holds every originId a confirm or aged query looks for.
	asked map[string]struct{}
	// wide says a confirm query names no device: it reads the recovered
	// alarms of every device over its window. sweepFrom, when set, is the
	// start of the sweep its window covers: read to its end, it sweeps too
	// and moves the watermark to mark. cut says it was not read to its end.
	wide      bool
	cut       bool
	sweepFrom time.Time
}

// add records a page of u read.
func (p *Poller) add(u *unit, pg *opendata.AlarmPage, at time.Time) {
	if u.read == 0 {
		u.total, u.at = pg.Total, at
	} else if pg.Total != u.total {
		u.shifted = true
	}
	u.read++
	u.last = pg.Total
	u.rows += pg.Rows
	u.skipped += pg.Skipped
	if u.seen.made() {
		for i := range pg.Alarms {
			p.list(u, pg.Alarms[i].OriginID)
		}
		// A record with an originId but no valid status is not applied,
		// yet the alarm is listed: it has not vanished.
		for _, id := range pg.SkippedIDs {
			p.list(u, id)
		}
	}
}

// list records that u listed alarm id: a known alarm by the number of a
// current snapshot, any other in u.seen. The poller reads one current
// snapshot at a time, to its end (or drops it) before the next begins.
func (p *Poller) list(u *unit, id string) {
	if u.snap != 0 {
		if a, ok := p.known.get(id); ok {
			if a.listed != u.snap {
				a.listed = u.snap
				p.known.set(id, a)
				// Counted already if an earlier page listed it before its
				// start made it known (u.seen holds only such ids, few).
				if u.seen.len() == 0 || !u.seen.has(id) {
					u.unique++
				}
			}
			return
		}
	}
	if !u.seen.has(id) {
		u.seen.set(id, struct{}{})
		u.unique++
	}
}

// nextSnap numbers a new current snapshot, never 0. Numbers come round
// again after 65,535 snapshots: a known alarm last listed by the snapshot
// of the same number then counts as listed, which at worst waits one
// snapshot more to look for its end, and only for an alarm that no
// complete snapshot of its level looked for meanwhile (days of them).
func (p *Poller) nextSnap() uint16 {
	p.snap++
	if p.snap == 0 {
		p.snap = 1
	}
	return p.snap
}

// exhausted reports whether u read every row the upstream served for its
// query, with total unchanged across the pages: a known alarm missing from
// such a current snapshot is worth a confirm query, and such a sweep moves
// its watermark on.
func (u *unit) exhausted() bool { return u.done && !u.shifted }

// complete reports whether u read the whole set: exhausted, and as many
// records as total. Rows are counted, not unique originIds, since total
// counts rows and the upstream may list an alarm twice; skipped records
// count too, since they were read: a record without a usable originId cannot
// be an alarm relay tracks, and one with an unusable status is in seen.
func (u *unit) complete() bool {
	return u.exhausted() && u.rows == u.total
}

func (p *Poller) newCurrent(now time.Time) *unit {
	u := &unit{
		kind:  kindCurrent,
		level: -1,
		query: opendata.AlarmQuery{Page: 1, Size: p.up.pageSize, Start: p.upAt(now).Add(-p.cfg.Lookback), End: p.reach(now)},
		seen:  newIDMap[struct{}](0),
		snap:  p.nextSnap(),
	}
	if p.levelMode {
		u.level = p.level
		u.query.Levels = []int{p.level}
		if p.level == 0 {
			p.cycle = cycle{complete: true}
		}
	}
	return u
}

// onCurrent applies a page of a current snapshot. The first page of a
// whole snapshot that finds more alarms than a page holds ends it,
// incomplete, and switches to level-by-level snapshots, so that the urgent
// alarms are read next (unless the upstream ignores eventLevels).
func (p *Poller) onCurrent(ctx context.Context, u *unit, pg *opendata.AlarmPage, at time.Time) error {
	storm := u.level < 0 && u.read == 1 && pg.Total > p.up.pageSize && !p.up.levelsIgnored
	mixed := p.ignoresLevels(u, pg)
	if storm || mixed {
		u.done, u.probe = true, false
		u.shifted = u.shifted || mixed
	}
	complete := !storm && u.complete()
	cycleComplete := p.cycle.complete && complete
	// whole says the batch ends a complete snapshot of every level.
	whole := u.done && (u.level < 0 && complete || u.level == maxLevel && cycleComplete)
	b := store.Batch{Observed: pg.Alarms, CompleteCurrent: whole, FirstListing: !p.listed, DetectedAt: at}
	// listed says the batch ends the first snapshot of every level read to
	// its end since the store was created.
	listed := !p.listed && !storm && u.done && (u.level < 0 || u.level == maxLevel)
	if listed {
		b.Marks = map[string]time.Time{markListed: p.upAt(at)}
	}
	res, err := p.apply(ctx, b)
	if err != nil {
		return err
	}
	p.listed = p.listed || listed
	p.learn(pg.Alarms, res)
	p.learnStarts(res, at)
	if !u.done {
		return nil
	}
	if u.level >= 0 {
		p.cycle.complete = cycleComplete
		p.cycle.total += u.last
	}
	p.cur = nil
	p.m.snapshot(u.level, complete)
	// A snapshot read to its end but incomplete still tells which known
	// alarms to look for among the recovered ones, once snapshots keep
	// coming incomplete (a total counting rows never served): a one-off
	// glitch is not worth the confirm queries.
	if !storm && (complete || u.exhausted() && (p.up.incomplete > 0 || p.up.phantom > 0)) {
		p.vanish(u)
	}
	if !complete {
		p.log.Debug("current snapshot incomplete: no end can be inferred from it", "level", u.level,
			"pages", u.read, "total", u.total, "last_total", u.last, "rows", u.rows, "unique", u.unique,
			"skipped", u.skipped)
	}
	if !storm && (u.level < 0 || u.level == maxLevel) {
		p.snapshotRead(u.level < 0 && complete || u.level == maxLevel && cycleComplete, at)
		p.lastRead = at
	}
	switch {
	case mixed:
	case storm:
		p.levelMode, p.level = true, 0
		p.log.Info("more ongoing alarms than one page holds: reading them level by level, urgent first",
			"total", pg.Total, "page_size", p.up.pageSize)
	case u.level == maxLevel:
		p.level = 0
		if p.cycle.total <= p.up.pageSize {
			p.levelMode = false
			p.log.Info("one page holds the ongoing alarms again: reading them in one page", "total", p.cycle.total)
		}
	case u.level >= 0:
		p.level++
	}
	return nil
}

// vanish marks the known alarms in u's scope that its snapshot, read to its
// end, lacks: confirm queries look for their recovered records. Only a
// complete snapshot counts as a miss (see missed). An alarm that occurred
// before the window cannot be in it and does not vanish; one that occurred
// after the window's end is not expected yet.
func (p *Poller) vanish(u *unit) {
	from, to := u.query.Start.UnixMilli(), u.query.End.UnixMilli()
	for k, a := range p.known.all() {
		if u.level >= 0 && int(a.level) != u.level {
			continue
		}
		if u.snap != 0 && a.listed == u.snap || a.occ > to {
			continue
		}
		if _, ok := u.seen.getKey(k); ok {
			continue
		}
		id := k.String()
		if _, ok := p.vanished[id]; ok {
			continue
		}
		if a.occ < from {
			if old, _ := p.outside.get(id); !old.logged {
				old.logged = true
				p.outside.set(id, old)
				p.log.Info("ongoing alarm is older than the lookback window: current snapshots cannot see it, "+
					"its end is looked for hourly", "origin_id", id, "occurred_at", time.UnixMilli(a.occ).UTC())
			}
			continue
		}
		p.vanished[id] = &vanish{at: u.at, after: p.lastRead, next: u.at}
		p.log.Debug("alarm missing from a snapshot", "origin_id", id, "device_sn", p.devNames[a.dev])
	}
}

// newSweep returns a sweep from the watermark (less the overlap, and no
// further back than the lookback) to MaxClockSkew past the upstream's now,
// or to the end of the capped span. Its watermark moves to the upstream's
// now: a device clock running ahead stamps times the next sweeps still read.
func (p *Poller) newSweep(now time.Time) *unit {
	up := p.upAt(now)
	start := p.sweepStart(up)
	end, mark, capped := p.reach(now), up, false
	if p.sweepSpan > 0 && start.Add(p.sweepSpan).Before(up) {
		end, mark, capped = start.Add(p.sweepSpan), start.Add(p.sweepSpan), true
	}
	return &unit{
		kind:   kindSweep,
		level:  -1,
		query:  opendata.AlarmQuery{Page: 1, Size: p.up.pageSize, Start: start, End: end, Recovered: true},
		seen:   newIDMap[struct{}](0),
		capped: capped,
		mark:   mark,
	}
}

// sweepStart returns where a sweep starting when the upstream's clock reads
// up reaches back to: the watermark less the overlap, no further back than
// the lookback or the first contact, and not after up.
func (p *Poller) sweepStart(up time.Time) time.Time {
	start := p.sweepMark.Add(-p.overlap())
	if floor := up.Add(-p.cfg.Lookback); start.Before(floor) {
		start = floor
	}
	if start.Before(p.floor) {
		start = p.floor
	}
	if start.After(up) {
		start = up
	}
	return start
}

// onSweep applies a page of recovered alarms. The last page of a sweep read
// to its end, with total unchanged, moves the watermark in the same batch
// (rows that total counts but the upstream never serves cannot hold it
// back); otherwise the sweep is repeated from the old watermark. A sweep of several
// pages reads one page per sweep slot, and alarms keep recovering meanwhile:
// when that makes it incomplete, the next sweeps cover windows sized to fit
// one page, until one reaches the present, so that the watermark moves on
// however busy the upstream is (under either reading of the window, a
// recovered alarm falls in at least one of the consecutive windows).
func (p *Poller) onSweep(ctx context.Context, u *unit, pg *opendata.AlarmPage, at time.Time) error {
	b := store.Batch{Observed: pg.Alarms, DetectedAt: at}
	complete := u.exhausted()
	if complete {
		b.Marks = map[string]time.Time{markSweep: u.mark}
	}
	res, err := p.apply(ctx, b)
	if err != nil {
		return err
	}
	p.learn(pg.Alarms, res)
	if !u.done {
		return nil
	}
	p.sweep = nil
	window := u.mark.Sub(u.query.Start)
	if u.skipped > 0 {
		p.log.Warn("sweep skipped unusable recovered records; the watermark moves on regardless", "from", u.query.Start,
			"to", u.query.End, "skipped", u.skipped, "complete", complete)
	}
	if complete {
		p.sweepMark = u.mark
		p.sweepSpan = 0
		if u.capped {
			p.sweepSpan = p.fitSpan(window, u.total)
		}
		return nil
	}
	if u.read > 1 {
		p.sweepSpan = p.fitSpan(window, u.last)
	}
	p.log.Warn("sweep incomplete: it is repeated from the same watermark", "from", u.query.Start,
		"to", u.query.End, "pages", u.read, "total", u.total, "last_total", u.last,
		"rows", u.rows, "unique", u.unique, "skipped", u.skipped, "next_span", p.sweepSpan)
	return nil
}

// fitSpan returns the sweep window expected to hold about 400 recovered
// alarms, one page with room to spare, given that a window of span held
// total: a sweep of one page is one answer and so always complete. It grows
// at most twofold at a time, and stays wider than the configured overlap
// (capped windows are not widened) so that the watermark always moves on.
func (p *Poller) fitSpan(span time.Duration, total int) time.Duration {
	target := p.up.pageSize * 4 / 5
	next := time.Duration(int64(span) / int64(max(total, 1)) * int64(target)).Truncate(time.Second)
	return max(min(next, 2*span), p.cfg.SweepOverlap+time.Minute)
}

// newConfirm returns a confirm query for the vanished alarms that are due,
// or nil when none is.
func (p *Poller) newConfirm(now time.Time) *unit {
	var due []string
	for id, v := range p.vanished {
		if !v.next.After(now) {
			due = append(due, id)
		}
	}
	if len(due) == 0 {
		return nil
	}
	// Oldest vanish first; among alarms that vanished together, the latest
	// occurrence first, so that a chunk's window (from its earliest
	// occurrence) stays short and holds few pages.
	sort.Slice(due, func(i, j int) bool {
		a, b := p.vanished[due[i]], p.vanished[due[j]]
		if !a.at.Equal(b.at) {
			return a.at.Before(b.at)
		}
		if oa, ob := p.occurred(due[i]), p.occurred(due[j]); oa != ob {
			return oa > ob
		}
		return due[i] < due[j]
	})
	if u := p.wideConfirm(due, now); u != nil {
		return u
	}
	return p.lookup(kindConfirm, due, now)
}

// wideConfirm returns a confirm query of every device for the due alarms
// it can expect to find in one page, or nil when there are none. Its window
// runs from the earliest occurrence it looks for, less the slack, to
// MaxClockSkew past the upstream's now, and reaches back to the sweep's
// start too: one page read to its end confirms every vanished alarm in it,
// of any number of devices, and is the sweep as well. An alarm is in it
// while its window is no longer than wideSpan, the longest expected to fit
// a page, or at any age while the recovered list is proven newest recovery
// first, whose first page holds the latest recoveries. An alarm a wide query
// could not find in the one page it reads is looked up by its device.
func (p *Poller) wideConfirm(due []string, now time.Time) *unit {
	if !p.contacted {
		return nil
	}
	up := p.upAt(now)
	ordered := p.facts.RecoveryOrdered()
	var sweepFrom time.Time
	start := up
	// It sweeps too unless a sweep is paging or catching up in capped
	// windows, or devices lag further than a sweep is widened for: their
	// lag sweeps follow the sweep's watermark.
	if p.sweepSpan == 0 && (p.sweep == nil || p.sweep.read == 0) && p.stamps.lagging(up, maxLagWidening, nil) == 0 {
		sweepFrom = p.sweepStart(up)
		start = sweepFrom
	}
	want := make(map[string]struct{})
	for _, id := range due {
		if p.vanished[id].narrow {
			continue
		}
		from := time.UnixMilli(p.occurred(id)).Add(-confirmSlack)
		if !ordered && up.Sub(from) > p.wideSpan {
			continue
		}
		want[id] = struct{}{}
		if from.Before(start) {
			start = from
		}
	}
	if len(want) == 0 {
		return nil
	}
	// It reaches back to the earliest ongoing alarm it may hold, so that
	// it also ends the alarms that recovered since the last snapshot.
	if from := p.earliestKnown().Add(-confirmSlack); from.Before(start) {
		if lim := up.Add(-p.wideSpan); from.Before(lim) {
			from = lim
		}
		if from.Before(start) {
			start = from
		}
	}
	return &unit{
		kind:      kindConfirm,
		level:     -1,
		query:     opendata.AlarmQuery{Page: 1, Size: p.up.pageSize, Start: start, End: p.reach(now), Recovered: true},
		want:      want,
		asked:     maps.Clone(want),
		wide:      true,
		sweepFrom: sweepFrom,
		mark:      up,
	}
}

// earliestKnown returns the earliest occurrence of the ongoing alarms
// tracked, or the far future when there are none.
func (p *Poller) earliestKnown() time.Time {
	earliest := int64(math.MaxInt64)
	for _, a := range p.known.all() {
		earliest = min(earliest, a.occ)
	}
	if earliest == math.MaxInt64 {
		return time.Unix(1<<40, 0)
	}
	return time.UnixMilli(earliest)
}

// sweeps reports whether a wide confirm query applies the record a of an
// alarm it does not look for: when its window covers a sweep's and a falls
// in that sweep's window, whichever of its times the upstream filters on.
func (u *unit) sweeps(a *event.Alarm) bool {
	if u.sweepFrom.IsZero() {
		return false
	}
	return !a.OccurredAt.Before(u.sweepFrom) || !a.RecoveredAt.IsZero() && !a.RecoveredAt.Before(u.sweepFrom)
}

// newAged returns a query for the ongoing alarms older than the lookback
// window, least recently checked first, or nil when there are none.
func (p *Poller) newAged(now time.Time) *unit {
	floor := now.Add(-p.cfg.Lookback).UnixMilli()
	var old []string
	for k, a := range p.known.all() {
		if a.occ < floor {
			old = append(old, k.String())
		}
	}
	if len(old) == 0 {
		return nil
	}
	sort.Slice(old, func(i, j int) bool {
		a, _ := p.outside.get(old[i])
		b, _ := p.outside.get(old[j])
		if a.checked != b.checked {
			return a.checked < b.checked
		}
		return old[i] < old[j]
	})
	u := p.lookup(kindAged, old, now)
	for id := range u.want {
		a, _ := p.outside.get(id)
		a.checked = now.UnixMilli()
		p.outside.set(id, a)
	}
	return u
}

// lookup returns a recovered-alarm query for the alarms of ids (in order of
// preference) on at most 50 devices (fewer once the upstream refused a list
// that long), with the window [earliest occurrence - 1 min, MaxClockSkew
// past the upstream's now], which holds both the occurrence and the recovery
// of each.
// Alarms without a device serial number are looked up on their own, without
// a device filter.
func (p *Poller) lookup(k kind, ids []string, now time.Time) *unit {
	first, _ := p.known.get(ids[0])
	noDevice := first.dev == 0
	devices := make(map[uint32]bool)
	var sns []string
	want := make(map[string]struct{})
	earliest := first.occ
	for _, id := range ids {
		a, _ := p.known.get(id)
		if (a.dev == 0) != noDevice {
			continue
		}
		if !noDevice && !devices[a.dev] {
			if len(sns) == p.up.devices {
				continue
			}
			devices[a.dev] = true
			sns = append(sns, p.devNames[a.dev])
		}
		want[id] = struct{}{}
		earliest = min(earliest, a.occ)
	}
	start := time.UnixMilli(earliest).Add(-confirmSlack)
	if up := p.upAt(now); start.After(up) {
		start = up
	}
	return &unit{
		kind:  k,
		level: -1,
		query: opendata.AlarmQuery{Page: 1, Size: p.up.pageSize, Start: start, End: p.reach(now), Recovered: true, DeviceSNs: sns},
		want:  want,
		asked: maps.Clone(want),
	}
}

// onLookup applies a page of a confirm or aged query. Only the records of the
// alarms it looks for, or of other alarms the poller tracks, are applied: its
// window can reach back past the retention, and the records of unknown alarms
// of the same devices are the sweep's to find (or history). The query stops
// early once every alarm it looks for was found.
func (p *Poller) onLookup(ctx context.Context, u *unit, pg *opendata.AlarmPage, at time.Time) error {
	if u.wide && !u.done {
		// A wide query reads one page: more would cost more requests
		// than looking the rest up by device.
		u.done, u.cut = true, true
	}
	var mine []event.Alarm
	for i := range pg.Alarms {
		a := &pg.Alarms[i]
		_, asked := u.asked[a.OriginID]
		if !asked && !p.known.has(a.OriginID) && !u.sweeps(a) {
			continue
		}
		mine = append(mine, *a)
		if a.Status != event.StatusOngoing {
			delete(u.want, a.OriginID)
		}
	}
	b := store.Batch{Observed: mine, DetectedAt: at}
	swept := u.wide && !u.cut && !u.sweepFrom.IsZero() && u.exhausted()
	if swept {
		b.Marks = map[string]time.Time{markSweep: u.mark}
	}
	res, err := p.apply(ctx, b)
	if err != nil {
		return err
	}
	p.learn(mine, res)
	if !u.done && len(u.want) > 0 {
		return nil
	}
	if u.kind == kindAged {
		p.aged = nil
		return nil
	}
	p.confirm = nil
	if u.wide {
		p.wideRead(u, swept)
		if u.cut {
			for id := range u.want {
				if v, ok := p.vanished[id]; ok {
					v.narrow = true
				}
			}
			return nil
		}
	}
	p.retryLater(u, at, true)
	return nil
}

// wideRead learns from a wide confirm query read: how long a window fits
// one page, and, when it swept, the sweep's new watermark.
func (p *Poller) wideRead(u *unit, swept bool) {
	span := u.mark.Sub(u.query.Start)
	if u.cut {
		// Fit to what the page served: a capped page holds fewer rows
		// than asked before the cap is learnt.
		served := max(u.rows, 1) * 4 / 5
		fit := time.Duration(int64(span) / int64(max(u.total, 1)) * int64(max(served, 1)))
		p.wideSpan = min(p.wideSpan, max(fit.Truncate(time.Second), p.cfg.SweepOverlap+time.Minute))
	} else {
		p.wideSpan = max(p.wideSpan, p.fitSpan(span, u.total))
	}
	if !swept {
		return
	}
	p.sweepMark, p.sweepSpan = u.mark, 0
	p.sinceSweep = 0
	if p.sweep != nil && p.sweep.read == 0 {
		p.sweep = nil
	}
}

// retryLater schedules the next confirm query of the alarms u did not find,
// backing off from two slots up to a quarter of the confirm timeout; looked
// says u was read to its end.
func (p *Poller) retryLater(u *unit, at time.Time, looked bool) {
	slot := p.slot()
	ceiling := max(slot, p.cfg.ConfirmTimeout/4)
	for id := range u.want {
		v, ok := p.vanished[id]
		if !ok {
			continue
		}
		v.tries++
		v.looked = v.looked || looked
		wait := ceiling
		if v.tries < 20 {
			wait = min(ceiling, slot<<v.tries)
		}
		v.next = at.Add(wait)
	}
}
