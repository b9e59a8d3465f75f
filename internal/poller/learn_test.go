package poller

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/relay-energy/relay/internal/learn"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/store"
)

// The tests below run the real poller against the simulator and check what
// it learned of the upstream (package learn) from the answers it received:
// no test here changes what relay asks.

// traffic runs h through n alarms of the hostile tests' mix over 20 minutes
// and 15 more for their ends, and checks every start and end against the
// simulator's truth.
func (h *harness) traffic(n int, midway func()) {
	h.t.Helper()
	h.open(store.BootstrapNotify)
	h.steps(3)
	rng := rand.New(rand.NewPCG(uint64(len(h.t.Name())), 5))
	from := h.clk.Now().Add(20 * time.Second)
	ids := h.schedule(mix(h, rng, n, from, 20*time.Minute))
	if midway != nil {
		h.runUntil(from.Add(10 * time.Minute))
		midway()
	}
	h.runUntil(from.Add(35 * time.Minute))
	h.checkTruth(ids)
	h.noViolations()
}

// factIs fails unless fact f is in state want, with its metric.
func (h *harness) factIs(f learn.Fact, want learn.State) {
	h.t.Helper()
	if f.State != want {
		h.t.Errorf("%s is %s (evidence %d, contradictions %d); want %s", f.Name, f.State, f.Evidence, f.Contradictions, want)
	}
	if got := testutil.ToFloat64(h.metrics.upstream.Fact(f.Name)); got != float64(want) {
		h.t.Errorf("relay_upstream_fact{fact=%q} = %v; want %d", f.Name, got, want)
	}
}

// TestLearnsWhatACleanUpstreamDoes: against the simulator as it behaves by
// default, relay learns that its recovered list is ordered newest
// occurrence first (not by recovery), that its window filters on the
// occurrence (or, with FilterOnRecovery, the recovery), that its pages are
// not capped below the size asked, that its totals are honest, and how late
// alarms are first seen: within a few slots.
func TestLearnsWhatACleanUpstreamDoes(t *testing.T) {
	t.Parallel()
	for _, onRecovery := range []bool{false, true} {
		name := "window on occurrence"
		if onRecovery {
			name = "window on recovery"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarnessWith(t, func(o *sim.Options) { o.Hostile.FilterOnRecovery = onRecovery })
			h.traffic(80, nil)
			f := h.p.Learned()
			h.factIs(f.OccurrenceOrder, learn.Holds)
			h.factIs(f.RecoveryOrder, learn.Refuted)
			on, off := f.WindowOnOccurrence, f.WindowOnRecovery
			if onRecovery {
				on, off = off, on
			}
			h.factIs(on, learn.Holds)
			h.factIs(off, learn.Refuted)
			h.factIs(f.TotalsHonest, learn.Holds)
			if f.PageCapped.State == learn.Holds || f.PageCapped.Value != 0 {
				t.Errorf("page cap %+v; want none below the size asked", f.PageCapped)
			}
			if got := testutil.ToFloat64(h.metrics.upstream.PageCap()); got != 0 {
				t.Errorf("relay_upstream_page_cap = %v; want 0", got)
			}
			l := f.Lateness
			if l.Samples < 20 || l.Ahead != 0 || l.P50 <= 0 || l.P99 > 10*h.p.slot() || l.Max < l.P99 {
				t.Errorf("lateness %+v; want starts seen within a few slots of their occurrence", l)
			}
		})
	}
}

// TestLearnsWhatAHostileUpstreamDoes: against the hostile mix of relaybench
// (pages capped at 100 rows, deviceSnLists of at most 5 devices, alarms
// listed 3 minutes late), relay learns the page cap, the deviceSnList limit
// exactly (a list of 5 accepted, one of 6 refused), still knows the limit
// after a restart on the same store, and sees the late uploads in the
// lateness p99.
func TestLearnsWhatAHostileUpstreamDoes(t *testing.T) {
	t.Parallel()
	h := newHarnessWith(t, func(o *sim.Options) {
		o.Hostile.PageCap, o.Hostile.DeviceSNListLimit, o.Hostile.IngestLag = 100, 5, 3*time.Minute
	})
	h.open(store.BootstrapNotify)
	// Confirm queries name devices only for alarms a confirm of every
	// device is not expected to find in one page: none here, unless the
	// poller learned that such a page holds no window at all.
	h.p.wideSpan = 0
	h.steps(3)
	// Alarms on 5 devices end together, then alarms on 6 devices: one
	// confirm names 5 devices, the next 6.
	var ids []string
	for _, devices := range []int{5, 6} {
		var batch []string
		for i := range devices {
			batch = append(batch, h.start(i%4, i))
		}
		ids = append(ids, batch...)
		h.until("the starts", 60, func() bool { return h.count() == 2*len(ids)-devices })
		for _, id := range batch {
			h.end(id, h.clk.Now())
		}
		h.until("the ends", 120, func() bool { return h.count() == 2*len(ids) })
	}
	h.checkTruth(ids)
	// A storm of 150 alarms: the first page of the snapshot serves 100.
	h.sim.Storm(150)
	h.until("the page cap", 60, func() bool { return h.p.Learned().PageCapped.State == learn.Holds })
	f := h.p.Learned()
	if f.PageCapped.Value != 100 {
		t.Errorf("page cap %d; want 100", f.PageCapped.Value)
	}
	if got := testutil.ToFloat64(h.metrics.upstream.PageCap()); got != 100 {
		t.Errorf("relay_upstream_page_cap = %v; want 100", got)
	}
	if l := f.Lateness; l.P99 < 3*time.Minute || l.P50 < 3*time.Minute {
		t.Errorf("lateness %+v; want the 3 minutes of the late uploads in p50 and p99", l)
	}
	limit := func(when string) {
		t.Helper()
		d := h.p.Learned()
		h.factIs(d.DeviceList, learn.Holds)
		if d.DeviceList.Value != 5 || d.Refused != 6 {
			t.Errorf("%s: deviceSnList accepted up to %d, refused from %d; want 5 and 6", when, d.DeviceList.Value, d.Refused)
		}
		if got := testutil.ToFloat64(h.metrics.upstream.DeviceLimit()); got != 5 {
			t.Errorf("%s: relay_upstream_device_list_limit = %v; want 5", when, got)
		}
	}
	limit("learned")
	h.close()
	h.open(store.BootstrapNotify)
	limit("after a restart")
	if h.p.up.devices != 5 {
		t.Errorf("after a restart the poller names up to %d devices in a list; want the 5 learnt before", h.p.up.devices)
	}
}

// TestOrderedRecoveredListThatStopsBeingOrdered: the upstream lists
// recovered alarms newest recovery first, caps its pages at 20 rows and
// holds a day of history, so that no window of more than a few minutes fits
// one page. relay learns the order and acts on it: its confirms of every
// device look for vanished alarms of any age in their one page, and none
// names devices. Midway the upstream scrambles the order. The fact is
// refuted with exactly one log line and its metric, confirms name devices
// again, and nothing is lost: every start and end still arrives, and
// nothing false.
func TestOrderedRecoveredListThatStopsBeingOrdered(t *testing.T) {
	t.Parallel()
	h := newHarnessWith(t, func(o *sim.Options) {
		o.Hostile.RecoveredOrder, o.Hostile.PageCap = sim.OrderRecovery, 20
	})
	h.sim.Backfill(200, 20*time.Hour)
	h.open(store.BootstrapNotify)
	h.steps(3)
	rng := rand.New(rand.NewPCG(uint64(len(t.Name())), 5))
	from := h.clk.Now().Add(20 * time.Second)
	plan := mix(h, rng, 160, from, 20*time.Minute)
	// Four long alarms, from the start: once many alarms recovered since,
	// only the order lets a page of every device hold their ends.
	for i, d := range []time.Duration{8, 9, 25, 28} {
		plan = append(plan, sim.Scheduled{
			Alarm:   sim.AlarmSpec{DeviceSN: h.device(20 + i), Level: i % 4},
			StartAt: from, EndAt: from.Add(d * time.Minute),
		})
	}
	ids := h.schedule(plan)
	h.until("the order learned", 100, func() bool { return h.p.Learned().RecoveryOrder.State == learn.Holds })
	learned := len(h.tap.log())
	h.runUntil(from.Add(10 * time.Minute))
	f := h.p.Learned()
	h.factIs(f.RecoveryOrder, learn.Holds)
	h.factIs(f.OccurrenceOrder, learn.Refuted)
	byDevice := func(reqs []alarmRequest) int {
		n := 0
		for _, r := range reqs {
			if r.Recovery && len(r.DeviceSNs) > 0 {
				n++
			}
		}
		return n
	}
	scrambled := len(h.tap.log())
	if n := byDevice(h.tap.log()[learned:scrambled]); n != 0 {
		t.Errorf("%d confirms named devices while the order held; want none", n)
	}
	h.sim.SetRecoveredOrder(sim.OrderScrambled)
	h.runUntil(from.Add(35 * time.Minute))
	h.checkTruth(ids)
	h.noViolations()
	h.factIs(h.p.Learned().RecoveryOrder, learn.Refuted)
	if n := byDevice(h.tap.log()[scrambled:]); n == 0 {
		t.Errorf("no confirm named devices once the order was refuted; want them for the alarms a page cannot hold")
	}
	var lines []string
	for _, l := range strings.Split(h.logs.String(), "\n") {
		if strings.Contains(l, "upstream fact changed") && strings.Contains(l, "fact="+learn.FactRecoveryOrder) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 || !strings.Contains(lines[0], "to=holds") || !strings.Contains(lines[1], "from=holds to=refuted") {
		t.Fatalf("log lines of %s:\n%s\nwant one when it held, then one when it was refuted", learn.FactRecoveryOrder, strings.Join(lines, "\n"))
	}
}

// TestUpstreamThatSpacesRequestsRefusesOneBurstOnly: an upstream whose
// limiter refuses a request sooner than a slot after the one before (the
// spec does not say which limiter it runs). The first request relay sends
// right after a current read is refused; bursts_admitted is refuted with
// one log line, the poller sends one request a slot from then on, and
// nothing is lost or false. A restart on the same store remembers the
// refusal and sends no burst again.
func TestUpstreamThatSpacesRequestsRefusesOneBurstOnly(t *testing.T) {
	t.Parallel()
	h := newHarnessWith(t, func(o *sim.Options) { o.Spacing = 6 * time.Second })
	h.open(store.BootstrapNotify)
	h.steps(3)
	rng := rand.New(rand.NewPCG(17, 5))
	from := h.clk.Now().Add(20 * time.Second)
	ids := h.schedule(mix(h, rng, 60, from, 20*time.Minute))
	h.runUntil(from.Add(35 * time.Minute))
	h.checkTruth(ids)
	if v := h.sim.Stats().Violations; v != 1 {
		t.Errorf("the simulator refused %d requests; want the first burst only", v)
	}
	h.factIs(h.p.Learned().BurstsAdmitted, learn.Refuted)
	lines := 0
	for _, l := range strings.Split(h.logs.String(), "\n") {
		if strings.Contains(l, "upstream fact changed") && strings.Contains(l, "fact="+learn.FactBurstsAdmitted) {
			lines++
		}
	}
	if lines != 1 {
		t.Errorf("%d log lines of %s changing; want 1", lines, learn.FactBurstsAdmitted)
	}
	h.close()
	h.clk.Advance(time.Minute)
	h.open(store.BootstrapNotify)
	if h.p.pairing() {
		t.Fatal("after a restart the poller pairs requests again; want the refusal remembered")
	}
	h.sim.ResetStats()
	h.steps(40)
	h.noViolations()
}
