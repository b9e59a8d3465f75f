package poller

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/store"
)

// firstRun runs a new deployment against an upstream whose device stamps
// (or whole clock) are off as opts says: the tenant holds 60 alarms that
// ended in the 24 h before the first run, 12 of them in its last 3 minutes,
// and 6 ongoing; from one second after the first run, 60 alarms (a quarter
// of them starting and ending within one slot) come over 12 minutes. With
// restart, the relay stops after 100 s and starts again 30 s later. Nothing
// may be announced for the history; every other alarm gets its start, then
// its end or invalid, once.
func firstRun(t *testing.T, opts func(*sim.Options), restart bool) *harness {
	t.Helper()
	h := newHarnessWith(t, opts)
	h.sim.Backfill(48, 24*time.Hour)
	devices := len(h.sim.Fleet().Devices)
	for i := range 12 {
		id, err := h.sim.StartAlarm(sim.AlarmSpec{DeviceSN: h.device(i % devices), OccurredAt: t0.Add(-4 * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		h.end(id, t0.Add(-time.Duration(5+i*14)*time.Second))
	}
	var ids []string
	for i := range 6 {
		id, err := h.sim.StartAlarm(sim.AlarmSpec{DeviceSN: h.device((3 * i) % devices), Level: i % 4, OccurredAt: t0.Add(-time.Duration(i+1) * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rng := rand.New(rand.NewPCG(uint64(len(t.Name())), 24))
	from := t0.Add(time.Second)
	span := 12 * time.Minute
	ids = append(ids, h.schedule(mix(h, rng, 60, from, span))...)

	h.open(store.BootstrapNotify)
	if restart {
		h.runUntil(t0.Add(100 * time.Second))
		h.close()
		h.clk.Advance(30 * time.Second)
		h.open(store.BootstrapNotify)
	}
	h.runUntil(from.Add(span + 10*time.Minute))
	h.checkTruth(ids)
	h.noViolations()
	return h
}

// TestHistoryIsDecidedByTheFirstContactWhateverTheDeviceStamps: device
// stamps 8 hours or 2 minutes behind, 2 minutes, 8 or 14 hours ahead, on
// every device or a tenth of them, with the upstream's Date right: a new
// deployment announces no alarm that ended before its first run and loses
// none that starts after it, short ones included, also across a restart in
// its first minutes.
func TestHistoryIsDecidedByTheFirstContactWhateverTheDeviceStamps(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{-8 * time.Hour, -2 * time.Minute, 2 * time.Minute, 8 * time.Hour, 14 * time.Hour} {
		for _, share := range []float64{0, 0.1} {
			for _, restart := range []bool{false, true} {
				name := fmt.Sprintf("stamps %s off on every device", skew)
				if share != 0 {
					name = fmt.Sprintf("stamps %s off on a tenth of the devices", skew)
				}
				if restart {
					name += ", restarted"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					h := firstRun(t, func(o *sim.Options) {
						o.Hostile.DeviceClockSkew, o.Hostile.DeviceClockSkewShare = skew, share
					}, restart)
					n, all := len(h.sim.SkewedDevices()), len(h.sim.Fleet().Devices)
					if share == 0 && n != all || share != 0 && (n == 0 || n > all/4) {
						t.Fatalf("%d of %d devices stamp off; want every one, or about a tenth", n, all)
					}
				})
			}
		}
	}
}

// TestHistoryIsDecidedByTheFirstContactWhateverTheUpstreamClock: the whole
// upstream's clock 15 minutes ahead or behind, its Date header with it,
// changes nothing either.
func TestHistoryIsDecidedByTheFirstContactWhateverTheUpstreamClock(t *testing.T) {
	t.Parallel()
	for _, offset := range []time.Duration{15 * time.Minute, -15 * time.Minute} {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("clock %s, restart %t", offset, restart), func(t *testing.T) {
				t.Parallel()
				firstRun(t, func(o *sim.Options) { o.Hostile.ClockOffset = offset }, restart)
			})
		}
	}
}

// TestDeviceStampOffsetsAreLearntAndWidenTheSweep: a tenth of the devices
// (or all but two) stamp 8 hours behind and one stamps 2 minutes ahead;
// once their alarms were seen ongoing, the offsets are exported and logged,
// the whole-hour one named as a likely zone mistake, and a short alarm of a
// lagging device is found by the next sweep, not only by reconciliation: a
// lag sweep of the few lagging devices, or the whole sweep widened when
// they are more than one deviceSnList holds.
func TestDeviceStampOffsetsAreLearntAndWidenTheSweep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		share float64
		devs  int // the deviceSnList limit
	}{
		{"a tenth of the devices", 0.1, lookupDevices},
		{"more devices than a deviceSnList holds", 0.1, 1},
		{"all devices but two", 0, lookupDevices},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stampsWidenTheSweep(t, tc.share, tc.devs)
		})
	}
}

func stampsWidenTheSweep(t *testing.T, share float64, devs int) {
	h := newHarnessWith(t, func(o *sim.Options) {
		o.Hostile.DeviceClockSkew, o.Hostile.DeviceClockSkewShare = -8*time.Hour, share
	})
	// A device that stamps right and one 2 minutes ahead.
	right, ahead := -1, -1
	for i, d := range h.sim.Fleet().Devices {
		if h.sim.DeviceClockOffset(d.SN) == 0 || share == 0 && i < 2 {
			if right < 0 {
				right = i
			} else if ahead < 0 {
				ahead = i
			}
		}
	}
	for sn, d := range map[string]time.Duration{h.device(right): 0, h.device(ahead): 2 * time.Minute} {
		if err := h.sim.SetDeviceClockOffset(sn, d); err != nil {
			t.Fatal(err)
		}
	}
	var lagging []int
	for i, d := range h.sim.Fleet().Devices {
		if h.sim.DeviceClockOffset(d.SN) < 0 {
			lagging = append(lagging, i)
		}
	}
	h.open(store.BootstrapNotify)
	h.p.up.devices = devs
	h.steps(3)
	// Two alarms of a minute on each device that stamps off, and on a
	// device that stamps right, teach the offsets: a zone is named from two
	// that agree.
	var plan []sim.Scheduled
	at := h.clk.Now().Add(10 * time.Second)
	for _, i := range append([]int{right, ahead}, lagging...) {
		for k := range 2 {
			occ := at.Add(time.Duration(k) * 30 * time.Second)
			plan = append(plan, sim.Scheduled{Alarm: sim.AlarmSpec{DeviceSN: h.device(i)}, StartAt: occ, EndAt: occ.Add(time.Minute)})
		}
	}
	ids := h.schedule(plan)
	h.runUntil(at.Add(3 * time.Minute))

	sum := h.p.StampOffsets()
	if sum.Devices < len(plan)/2 || sum.Off != len(lagging)+1 {
		t.Fatalf("summary %+v; want %d devices measured, %d of them off", sum, len(plan)/2, len(lagging)+1)
	}
	if sum.Min > -8*time.Hour+stampTolerance || sum.Min < -8*time.Hour-stampTolerance ||
		sum.Max < 2*time.Minute-stampTolerance || sum.Max > 2*time.Minute {
		t.Fatalf("offsets from %s to %s; want about -8h and +2m", sum.Min, sum.Max)
	}
	if got := testutil.ToFloat64(h.metrics.stampOff.WithLabelValues("min")); got != sum.Min.Seconds() {
		t.Fatalf("metric min = %v; want %v", got, sum.Min.Seconds())
	}
	if got := testutil.ToFloat64(h.metrics.stampDevs.WithLabelValues("off")); got != float64(sum.Off) {
		t.Fatalf("metric off = %v; want %d", got, sum.Off)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "device stamp offsets") || !strings.Contains(logs, "local time of UTC-8 stamped as UTC") {
		t.Fatalf("the offsets, and the zone mistake, are not logged:\n%s", logs)
	}
	if got := strings.Count(logs, "local time of UTC-8"); got != 1 {
		t.Fatalf("the zone mistake is logged %d times; want once", got)
	}
	few := len(lagging) <= devs
	if widened := h.p.overlap() > 8*time.Hour; widened == few {
		t.Fatalf("sweep overlap %s with %d devices lagging, %d per deviceSnList", h.p.overlap(), len(lagging), devs)
	}

	// Short alarms of the lagging devices, once the offsets are known: each
	// found by the sweep that follows it (one slot in 4 here), within a
	// few slots, not by the reconciliation pass that takes minutes.
	var short []sim.Scheduled
	at = h.clk.Now().Add(5 * time.Second)
	for k, i := range lagging[:min(len(lagging), 4)] {
		occ := at.Add(time.Duration(k) * 40 * time.Second)
		short = append(short, sim.Scheduled{Alarm: sim.AlarmSpec{DeviceSN: h.device(i)}, StartAt: occ, EndAt: occ.Add(3 * time.Second)})
	}
	shortIDs := h.schedule(short)
	h.reconcileOff()
	h.runUntil(at.Add(time.Duration(len(short))*40*time.Second + 2*time.Minute))
	h.checkTruth(append(ids, shortIDs...))
	h.checkStartLatency(shortIDs, 6*h.p.slot())
	if lagSweeps := testutil.ToFloat64(h.metrics.polls.WithLabelValues("lag_sweep", "ok")); (lagSweeps > 0) != few {
		t.Fatalf("%v lag sweeps with %d devices lagging, %d per deviceSnList", lagSweeps, len(lagging), devs)
	}
}

// reconcileOff keeps reconciliation from running, so that what is found is
// the sweep's doing.
func (h *harness) reconcileOff() {
	h.p.cfg.ReconcileEvery = 1 << 30
	h.p.sinceRec = 0
}
