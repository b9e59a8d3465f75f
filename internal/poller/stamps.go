package poller

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// Device stamps. The upstream's own clock is known from its Date header
// (upstream.go), but an alarm's times are stamped by its device: a data
// logger with its own clock, or a vendor that converts local time to epoch
// milliseconds as if it were UTC, moves every stamp of a device by the same
// offset (+8 h for China) while the Date stays right. The poller learns each
// device's offset from what it sees, without trusting any stamp:
//
//   - a stamp later than the upstream's now when it was listed is impossible
//     without an offset: the stamp minus that now is a lower bound of it;
//   - an alarm first listed ongoing by a current snapshot, when the last
//     snapshot of its level was complete and lacked it, started since then
//     (a few slots): its stamp minus the upstream's now is the offset, less
//     that polling delay and any ingestion lag, which the sweep must cover
//     the same way.
//
// Every sample is a lower bound of the offset (the alarm cannot have been
// listed before it happened), so a device's offset is the largest bound of
// the last hour or two; a device stamps right when that is within a minute
// of zero. The offsets widen the sweep's overlap (the largest lag behind),
// are exported as a metric, logged when they change, and named as a likely
// zone mistake when they come to whole hours.

const (
	// stampTolerance is how far a device's stamps may be off and still
	// count as right: polling delay alone makes a fresh alarm look up to a
	// few slots old.
	stampTolerance = time.Minute
	// stampWindow is how long a bound is remembered: the offset is the
	// largest bound of this window and the one before, so that a device
	// whose clock is fixed is believed within two windows.
	stampWindow = time.Hour
	// zoneSlack is how close to a whole hour an offset must be to be named
	// a likely zone mistake.
	zoneSlack = 5 * time.Minute
	// noBound marks a window without a sample.
	noBound = math.MinInt32
	// tolSec is stampTolerance in the seconds of a stampBound.
	tolSec = int32(stampTolerance / time.Second)
)

// stampBound is what the poller knows of one device's stamps: the largest
// lower bound of its offset, in seconds, in the current window and the one
// before, and how many tight samples (fresh alarms) came within
// stampTolerance of each.
type stampBound struct {
	cur, prev   int32
	curN, prevN uint8
	window      int64 // the window of cur: upstream Unix time / stampWindow
}

// stampOffsets are the learned offsets of the devices that gave a sample.
type stampOffsets struct {
	dev map[string]*stampBound
	// dirty says a bound changed since the summary was last taken, and
	// window is the window it was taken in: a summary of another window
	// is taken again, since bounds age out.
	dirty  bool
	window int64
	// shown is the summary last logged and exported; zones the whole-hour
	// offsets already warned about.
	shown StampSummary
	zones map[time.Duration]bool
}

func windowOf(t time.Time) int64 { return t.Unix() / int64(stampWindow/time.Second) }

// bound records that device sn's offset is at least b, seen at up, the
// upstream's now; tight says b comes from an alarm that started a few slots
// before (it counts towards naming a zone).
func (s *stampOffsets) bound(sn string, b time.Duration, up time.Time, tight bool) {
	if sn == "" {
		return
	}
	if s.dev == nil {
		s.dev = make(map[string]*stampBound)
	}
	sec := int32(max(min(b/time.Second, math.MaxInt32), noBound+1))
	w := windowOf(up)
	d := s.dev[sn]
	if d == nil {
		d = &stampBound{cur: noBound, prev: noBound, window: w}
		s.dev[sn] = d
	}
	switch {
	case w == d.window+1:
		d.prev, d.prevN, d.cur, d.curN, d.window = d.cur, d.curN, noBound, 0, w
		s.dirty = true
	case w > d.window+1:
		d.prev, d.prevN, d.cur, d.curN, d.window = noBound, 0, noBound, 0, w
		s.dirty = true
	}
	switch {
	case d.cur == noBound || sec > d.cur+tolSec:
		d.cur, d.curN = sec, 0
		s.dirty = true
	case sec > d.cur:
		d.cur = sec
		s.dirty = true
	}
	if tight && sec >= d.cur-tolSec && d.curN < math.MaxUint8 {
		d.curN++
		s.dirty = true
	}
}

// offset returns the device's offset as known at up, how many tight samples
// agree with it, and whether it is known: no sample in the last two windows
// is none.
func (d *stampBound) offset(up time.Time) (time.Duration, int, bool) {
	w := windowOf(up)
	v, n := int32(noBound), 0
	switch {
	case w == d.window:
		v, n = d.cur, int(d.curN)
		if d.prev != noBound && d.prev > d.cur+tolSec {
			v, n = d.prev, int(d.prevN)
		} else if d.prev != noBound && d.prev >= d.cur-tolSec {
			v, n = max(d.cur, d.prev), n+int(d.prevN)
		}
	case w == d.window+1:
		v, n = d.cur, int(d.curN)
	}
	return time.Duration(v) * time.Second, n, v != noBound
}

// seeListed records the bounds that records listed at up (the upstream's
// now) give: a stamp in the upstream's future. A stamp in its past says
// nothing on its own: the alarm may be old.
func (s *stampOffsets) seeListed(recs []event.Alarm, up time.Time) {
	for i := range recs {
		a := &recs[i]
		latest := a.OccurredAt
		if a.RecoveredAt.After(latest) {
			latest = a.RecoveredAt
		}
		if b := latest.Sub(up); b >= stampTolerance {
			s.bound(a.DeviceSN, b, up, false)
		}
	}
}

// behind returns how far the stamps of the device furthest behind lag the
// upstream's clock (0 when none lags), polling delay and ingestion lag
// included: how much further back a sweep must reach.
func (s *stampOffsets) behind(up time.Time) time.Duration {
	var lag time.Duration
	for _, d := range s.dev {
		if off, _, ok := d.offset(up); ok && -off > lag {
			lag = -off
		}
	}
	return lag
}

// lagging counts the devices whose stamps lag the upstream's clock further
// than beyond at up, and, when out is not nil, sets it to them, furthest
// first.
func (s *stampOffsets) lagging(up time.Time, beyond time.Duration, out *[]DeviceOffset) int {
	n := 0
	for sn, d := range s.dev {
		if off, _, ok := d.offset(up); ok && -off > beyond {
			n++
			if out != nil {
				*out = append(*out, DeviceOffset{SN: sn, Offset: off})
			}
		}
	}
	if out != nil {
		slices.SortFunc(*out, func(a, b DeviceOffset) int {
			if c := cmp.Compare(a.Offset, b.Offset); c != 0 {
				return c
			}
			return strings.Compare(a.SN, b.SN)
		})
	}
	return n
}

// StampSummary is the distribution of the devices' learned stamp offsets.
type StampSummary struct {
	// Devices is how many devices gave a sample within the last two hours;
	// Off how many of them stamp more than a minute off the upstream's
	// clock.
	Devices int `json:"devices"`
	Off     int `json:"off"`
	// Min, Median and Max are the offsets' distribution; positive stamps
	// run ahead of the upstream's clock.
	Min    time.Duration `json:"min_ns"`
	Median time.Duration `json:"median_ns"`
	Max    time.Duration `json:"max_ns"`
	// Worst are the devices furthest off, by serial number, at most 10.
	Worst []DeviceOffset `json:"furthest_off"`
}

// DeviceOffset is one device's learned stamp offset, and how many alarms
// that started a few slots before they were listed agree with it.
type DeviceOffset struct {
	SN      string        `json:"device_sn"`
	Offset  time.Duration `json:"offset_ns"`
	Samples int           `json:"samples"`
}

// summary returns the distribution of the offsets known at up.
func (s *stampOffsets) summary(up time.Time) StampSummary {
	var all []DeviceOffset
	for sn, d := range s.dev {
		if off, n, ok := d.offset(up); ok {
			all = append(all, DeviceOffset{SN: sn, Offset: off, Samples: n})
		} else {
			delete(s.dev, sn)
		}
	}
	var sum StampSummary
	if len(all) == 0 {
		return sum
	}
	slices.SortFunc(all, func(a, b DeviceOffset) int {
		if c := cmp.Compare(a.Offset, b.Offset); c != 0 {
			return c
		}
		return strings.Compare(a.SN, b.SN)
	})
	sum.Devices = len(all)
	sum.Min, sum.Median, sum.Max = all[0].Offset, all[len(all)/2].Offset, all[len(all)-1].Offset
	var off []DeviceOffset
	for _, d := range all {
		if absDur(d.Offset) > stampTolerance {
			off = append(off, d)
		}
	}
	sum.Off = len(off)
	slices.SortStableFunc(off, func(a, b DeviceOffset) int { return cmp.Compare(absDur(b.Offset), absDur(a.Offset)) })
	sum.Worst = off[:min(len(off), 10)]
	return sum
}

// differs reports whether a summary is worth logging after the last one:
// another count of devices off, or a bound moved by more than the
// tolerance.
func (a StampSummary) differs(b StampSummary) bool {
	if a.Off != b.Off || (a.Devices == 0) != (b.Devices == 0) {
		return true
	}
	for _, d := range [][2]time.Duration{{a.Min, b.Min}, {a.Median, b.Median}, {a.Max, b.Max}} {
		if absDur(d[0]-d[1]) > stampTolerance {
			return true
		}
	}
	return false
}

// Zone returns the whole number of hours d's offset comes to, and whether
// it names a zone: a zone is named from two fresh alarms that agree, never
// from one, nor from an old alarm's stamp.
func (d DeviceOffset) Zone() (int, bool) {
	if d.Samples < 2 {
		return 0, false
	}
	return ZoneHours(d.Offset)
}

// ZoneHours returns the whole number of hours an offset comes to, within
// zoneSlack, and whether it does (0 h does not count): the mark of local
// time stamped as UTC.
func ZoneHours(off time.Duration) (int, bool) {
	h := off.Round(time.Hour)
	if h == 0 || absDur(off-h) > zoneSlack {
		return 0, false
	}
	return int(h / time.Hour), true
}

// ZoneAdvice is what to tell an operator about device stamps off by a whole
// number of hours: local time of a zone stamped as UTC (UTC+8 makes stamps
// 8 h ahead, UTC-5 5 h behind).
func ZoneAdvice(hours int) string {
	way, n := "ahead of", hours
	if hours < 0 {
		way, n = "behind", -hours
	}
	return fmt.Sprintf("stamps %d h %s the upstream's clock look like local time of UTC%+d stamped as UTC: "+
		"ask the vendor whether occurrenceTime and recoveryTime are epoch milliseconds of UTC or of the "+
		"station's local time, and in which zone the data logger's clock is set", n, way, hours)
}

// publishStamps exports and logs the devices' offsets once they changed.
func (p *Poller) publishStamps(now time.Time) {
	up := p.upAt(now)
	if !p.stamps.dirty && windowOf(up) == p.stamps.window {
		return
	}
	p.stamps.dirty, p.stamps.window = false, windowOf(up)
	sum := p.stamps.summary(up)
	p.m.setStamps(sum)
	p.stampSummary.Store(&sum)
	p.warnZones(sum)
	if !sum.differs(p.stamps.shown) {
		return
	}
	p.stamps.shown = sum
	attrs := []any{"devices", sum.Devices, "off", sum.Off, "min", sum.Min, "median", sum.Median, "max", sum.Max}
	if len(sum.Worst) > 0 {
		worst := make([]string, len(sum.Worst))
		for i, d := range sum.Worst {
			worst[i] = d.SN + "=" + d.Offset.String()
		}
		attrs = append(attrs, "furthest_off", strings.Join(worst, " "))
	}
	p.log.Info("device stamp offsets from the upstream's clock (positive: ahead); "+
		"sweeps reach back as far as the stamps lag", append(attrs, "sweep_overlap", p.overlap())...)
}

// warnZones warns once of each whole-hour offset among the devices
// furthest off.
func (p *Poller) warnZones(sum StampSummary) {
	if p.stamps.zones == nil {
		p.stamps.zones = make(map[time.Duration]bool)
	}
	for _, d := range sum.Worst {
		hours, ok := d.Zone()
		if !ok || p.stamps.zones[time.Duration(hours)*time.Hour] {
			continue
		}
		p.stamps.zones[time.Duration(hours)*time.Hour] = true
		p.log.Warn("device stamps off by whole hours: "+ZoneAdvice(hours), "device_sn", d.SN, "offset", d.Offset)
	}
}

// StampOffsets returns the distribution of the devices' stamp offsets last
// taken; the zero summary before any device gave a sample.
func (p *Poller) StampOffsets() StampSummary {
	if s := p.stampSummary.Load(); s != nil {
		return *s
	}
	return StampSummary{}
}

// AheadAdvice is what to tell an operator about device stamps at least off
// ahead of the upstream's clock, by one look (a lower bound, not an
// offset), when that is an hour or more; false otherwise.
func AheadAdvice(off time.Duration) (string, bool) {
	hours := int((off + zoneSlack) / time.Hour)
	if hours < 1 {
		return "", false
	}
	return fmt.Sprintf("stamps at least %s ahead of the upstream's clock look like local time of UTC%+d or a zone "+
		"further east stamped as UTC (China's UTC+8 gives +8 h): ask the vendor whether occurrenceTime and "+
		"recoveryTime are epoch milliseconds of UTC or of the station's local time, and in which zone the "+
		"data logger's clock is set; the running relay measures the offset itself", off.Round(time.Minute), hours), true
}

// LookAtStamps returns what one look at recs, listed at up (the upstream's
// now), tells of the devices' stamps: the devices that stamp ahead of the
// upstream's clock, and at least by how much. Stamps behind it need the
// polling of new alarms to show.
func LookAtStamps(recs []event.Alarm, up time.Time) StampSummary {
	var s stampOffsets
	s.seeListed(recs, up)
	return s.summary(up)
}
