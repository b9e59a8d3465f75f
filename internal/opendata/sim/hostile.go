package sim

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Hostile is how the simulated upstream misbehaves, as real vendors do where
// the spec says "not shown". The zero value behaves perfectly. The simulator's
// ground truth (Alarm, Ongoing, AlarmCounts) stays in true time whatever the
// modes: tests compare what a client made of the answers with it.
type Hostile struct {
	// ClockOffset shifts the whole upstream's clock: every time it writes
	// (alarm times, the Date header, the tenant's createTime and
	// updateTime, real-time tp and tpTime, the days of history answers) is
	// true time plus the offset, and the startTime/endTime of a request are
	// read in that clock; durations are unchanged. Positive runs ahead.
	ClockOffset time.Duration
	// DeviceClockOffsets shift the alarm times of single devices, by serial
	// number, on top of ClockOffset: a data logger that stamps its own clock
	// (or local time as UTC). Windows filter on the stamped times.
	// SetDeviceClockOffset changes them while the simulator runs.
	DeviceClockOffsets map[string]time.Duration
	// DeviceClockSkew shifts the alarm times of a share of the devices
	// (DeviceClockSkewShare), on top of ClockOffset, while the Date header
	// stays right: 8h is local time of UTC+8 stamped as UTC, -2m a data
	// logger's clock 2 minutes behind. DeviceClockOffsets of a device
	// replaces it.
	DeviceClockSkew time.Duration
	// DeviceClockSkewShare is the share of devices DeviceClockSkew applies
	// to, chosen by a hash of the seed and the serial number; 0 means every
	// device.
	DeviceClockSkewShare float64
	// IngestLag makes an alarm visible only that long after it occurred,
	// and its recovery that long after it recovered: the upstream lists
	// what a device uploaded, late. An alarm that recovered within the lag
	// first appears already over, with both times, when it becomes
	// visible.
	IngestLag time.Duration
	// IngestLagShare is the share of devices that lag, chosen by a hash of
	// the seed and the serial number; 0 means every device.
	IngestLagShare float64
	// PageCap serves at most this many rows per getAlarmList page whatever
	// size asks, while the page's offset is still (current-1)*size: a client
	// that does not adapt loses the rows past the cap of every page.
	PageCap int
	// TotalOffset is added to every getAlarmList total (never below 0);
	// the rows served are unchanged, so a positive offset counts rows that
	// are never served.
	TotalOffset int
	// DeviceSNListLimit refuses a getAlarmList whose deviceSnList names
	// more devices, with A0410.
	DeviceSNListLimit int
	// FilterOnRecovery makes startTime/endTime of isRecovery=true queries
	// filter on the recovery time instead of the occurrence time.
	FilterOnRecovery bool
	// IgnoreLevels ignores the eventLevels filter.
	IgnoreLevels bool
	// RecoveredOrder orders the pages of isRecovery=true queries; the zero
	// value, OrderOccurrence, is newest occurrence first, as the ongoing
	// list. SetRecoveredOrder changes it while the simulator runs.
	RecoveredOrder Order
	// PadRecords gives every alarm record a payload of that many bytes, for
	// oversized answers: 500 records of 120,000 bytes make a 60 MB page.
	PadRecords int
}

// Order is how the simulator orders the recovered alarms it lists. The spec
// promises no order: a client may learn one, and must notice when it stops.
type Order int

const (
	// OrderOccurrence lists the newest stamped occurrence first.
	OrderOccurrence Order = iota
	// OrderRecovery lists the newest stamped recovery first.
	OrderRecovery
	// OrderScrambled lists the alarms in an order of no time (by a hash of
	// the originId), the same for every page of a query, so that paging
	// still reads every alarm once.
	OrderScrambled
)

// hostility is the state of the Hostile modes that change while the
// simulator runs.
type hostility struct {
	mu      sync.Mutex
	order   Order
	offsets map[int]time.Duration // by device index
	offline map[int]int64         // by device index: when it went offline, epoch ms
	lagging []bool                // by device index; nil means every device lags
	pad     string
}

func newHostility(o Options, f *fleet) *hostility {
	h := &hostility{offsets: map[int]time.Duration{}, offline: map[int]int64{}, order: o.Hostile.RecoveredOrder}
	if skew, share := o.Hostile.DeviceClockSkew, o.Hostile.DeviceClockSkewShare; skew != 0 {
		for i, d := range f.devices {
			if share <= 0 || share >= 1 || unit(hash64(strconv.FormatInt(o.Seed, 10), "skew", d.sn)) < share {
				h.offsets[i] = skew
			}
		}
	}
	for sn, d := range o.Hostile.DeviceClockOffsets {
		if dev := f.deviceBySN[sn]; dev != nil {
			h.offsets[dev.idx] = d
		}
	}
	if share := o.Hostile.IngestLagShare; o.Hostile.IngestLag > 0 && share > 0 && share < 1 {
		h.lagging = make([]bool, len(f.devices))
		for i, d := range f.devices {
			h.lagging[i] = unit(hash64(strconv.FormatInt(o.Seed, 10), "lag", d.sn)) < share
		}
	}
	if n := o.Hostile.PadRecords; n > 0 {
		h.pad = strings.Repeat("0123456789abcdef", n/16+1)[:n]
	}
	return h
}

// SetDeviceClockOffset makes the device with serial number sn stamp its
// alarms with its own clock, off by d (on top of the upstream's offset).
func (s *Server) SetDeviceClockOffset(sn string, d time.Duration) error {
	dev := s.fleet.deviceBySN[sn]
	if dev == nil {
		return fmt.Errorf("sim: no device %q", sn)
	}
	s.hostile.mu.Lock()
	defer s.hostile.mu.Unlock()
	if d == 0 {
		delete(s.hostile.offsets, dev.idx)
	} else {
		s.hostile.offsets[dev.idx] = d
	}
	return nil
}

// DeviceClockOffset returns how far off the device with serial number sn
// stamps its alarms, on top of the upstream's clock offset.
func (s *Server) DeviceClockOffset(sn string) time.Duration {
	dev := s.fleet.deviceBySN[sn]
	if dev == nil {
		return 0
	}
	s.hostile.mu.Lock()
	defer s.hostile.mu.Unlock()
	return s.hostile.offsets[dev.idx]
}

// SkewedDevices returns the serial numbers of the devices that stamp their
// alarms off the upstream's clock, in the fleet's order.
func (s *Server) SkewedDevices() []string {
	s.hostile.mu.Lock()
	defer s.hostile.mu.Unlock()
	var sns []string
	for _, d := range s.fleet.devices {
		if s.hostile.offsets[d.idx] != 0 {
			sns = append(sns, d.sn)
		}
	}
	return sns
}

// SetRecoveredOrder changes how the recovered alarms are ordered from the
// next answer on: an upstream that changes its mind while a client runs.
func (s *Server) SetRecoveredOrder(o Order) {
	s.hostile.mu.Lock()
	defer s.hostile.mu.Unlock()
	s.hostile.order = o
}

// recoveredOrder returns how the recovered alarms are ordered now.
func (s *Server) recoveredOrder() Order {
	s.hostile.mu.Lock()
	defer s.hostile.mu.Unlock()
	return s.hostile.order
}

// SetDeviceOffline takes the device with serial number sn offline, or back
// online. While it is offline the upstream lists its alarms as they were
// when it went offline: new alarms and recoveries stay buffered on the
// device, and appear at once, with their original times, when it is back.
func (s *Server) SetDeviceOffline(sn string, offline bool) error {
	dev := s.fleet.deviceBySN[sn]
	if dev == nil {
		return fmt.Errorf("sim: no device %q", sn)
	}
	s.hostile.mu.Lock()
	defer s.hostile.mu.Unlock()
	_, was := s.hostile.offline[dev.idx]
	switch {
	case offline && !was:
		s.hostile.offline[dev.idx] = s.clock.Now().UnixMilli()
	case !offline:
		delete(s.hostile.offline, dev.idx)
	}
	return nil
}

// upstreamTime is the true time t as the upstream's clock reads it.
func (s *Server) upstreamTime(t time.Time) time.Time { return t.Add(s.opts.Hostile.ClockOffset) }

// devView is how one device's alarms look to the upstream at a moment: as
// they truly were at at (epoch ms), stamped shift ms off. An alarm that
// recovered within lag ms of its occurrence, and no later than upload (the
// last moment the device uploaded, epoch ms), is listed over as soon as it
// is listed.
type devView struct {
	at, shift, lag, upload int64
}

// listed reports whether the upstream lists a, and returns a as listed.
func (v devView) listed(a alarm) (alarm, bool) {
	if a.occ > v.at {
		return a, false
	}
	over := a.rec <= v.at || (a.rec < a.occ+v.lag && a.rec <= v.upload)
	if a.status != StatusOngoing && !over {
		a.status, a.rec = StatusOngoing, 0
	}
	return a, true
}

// skewed reports whether the upstream's answers are not the true state now:
// some clock is off, some device lags or is offline, windows filter on
// recovery, or recovered alarms are listed in another order than by
// occurrence. The engine's indexes cannot answer those directly.
func (s *Server) skewed() bool {
	o := &s.opts.Hostile
	if o.ClockOffset != 0 || o.IngestLag > 0 || o.FilterOnRecovery {
		return true
	}
	s.hostile.mu.Lock()
	defer s.hostile.mu.Unlock()
	return len(s.hostile.offsets) > 0 || len(s.hostile.offline) > 0 || s.hostile.order != OrderOccurrence
}

// views returns, by device index, how each device's alarms look now.
func (s *Server) views(now time.Time) []devView {
	o := &s.opts.Hostile
	h := s.hostile
	h.mu.Lock()
	defer h.mu.Unlock()
	ms := now.UnixMilli()
	out := make([]devView, len(s.fleet.devices))
	for i := range out {
		v := devView{at: ms, shift: o.ClockOffset.Milliseconds(), upload: ms}
		if since, ok := h.offline[i]; ok {
			// What happened from the moment it went offline on is buffered.
			v.upload = since - 1
		}
		if o.IngestLag > 0 && (h.lagging == nil || h.lagging[i]) {
			v.lag = o.IngestLag.Milliseconds()
		}
		v.at = min(ms-v.lag, v.upload)
		v.shift += h.offsets[i].Milliseconds()
		out[i] = v
	}
	return out
}

// pageSkewed answers q as the upstream sees the alarms through views: an
// alarm that occurred after its device's view time is not listed yet, one
// that recovered after it is still ongoing (unless it recovered within the
// device's lag, see devView.listed), and windows filter the stamped
// times (the recovery time with onRecovery, for recovered alarms). Pages
// are ordered newest stamped occurrence first, like page, or, for
// recovered alarms, as order says. It returns the total, the page and the
// shift of each alarm of the page.
func (e *engine) pageSkewed(now time.Time, q alarmQuery, views []devView, onRecovery bool, order Order) (int, []alarm, []int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(now)
	type hit struct {
		a     alarm
		key   int64 // stamped occurrence, or what order sorts on
		shift int64
	}
	var hits []hit
	consider := func(x index) {
		for _, en := range x {
			if !q.match(en) {
				continue
			}
			v := views[en.dev]
			a, ok := v.listed(*en.a)
			if !ok {
				continue
			}
			if (a.status != StatusOngoing) != q.recovery {
				continue
			}
			key := a.occ + v.shift
			if q.recovery && onRecovery {
				key = a.rec + v.shift
			}
			if key < q.from || key > q.to {
				continue
			}
			sortKey := a.occ + v.shift
			switch {
			case !q.recovery:
			case order == OrderRecovery:
				sortKey = a.rec + v.shift
			case order == OrderScrambled:
				sortKey = int64(hash64(e.seed, "order", a.id) >> 1)
			}
			hits = append(hits, hit{a: a, key: sortKey, shift: v.shift})
		}
	}
	consider(e.ongoing)
	consider(e.recovered)
	slices.SortFunc(hits, func(x, y hit) int {
		if c := cmp.Compare(y.key, x.key); c != 0 {
			return c
		}
		return strings.Compare(y.a.id, x.a.id)
	})
	var page []alarm
	var shifts []int64
	for i := q.offset; i < len(hits) && i < q.offset+q.size; i++ {
		page = append(page, hits[i].a)
		shifts = append(shifts, hits[i].shift)
	}
	return len(hits), page, shifts
}
