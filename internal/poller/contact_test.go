package poller

import (
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/store"
)

// TestAShortAlarmRightAfterTheFirstAnswerIsNewWhateverTheUpstreamClock: an
// alarm that starts a second after the first contact's answer and ends two
// seconds later is announced, with the upstream's clock right or 15 minutes
// off: the contact is not read again once the clock is known (its window
// start bounds every later window instead).
func TestAShortAlarmRightAfterTheFirstAnswerIsNewWhateverTheUpstreamClock(t *testing.T) {
	t.Parallel()
	for _, off := range []time.Duration{0, 15 * time.Minute, -15 * time.Minute} {
		t.Run(off.String(), func(t *testing.T) {
			t.Parallel()
			h := newHarnessWith(t, func(o *sim.Options) { o.Hostile.ClockOffset = off })
			h.sim.Backfill(20, 24*time.Hour)
			ids := h.schedule([]sim.Scheduled{{Alarm: sim.AlarmSpec{DeviceSN: h.device(0)}, StartAt: t0.Add(time.Second), EndAt: t0.Add(3 * time.Second)}})
			h.open(store.BootstrapNotify)
			h.runUntil(t0.Add(5 * time.Minute))
			h.checkTruth(ids)
			if n := len(h.tap.log()); n > 60 {
				t.Fatalf("%d requests in 5 minutes", n)
			}
		})
	}
}

// TestAFirstContactThatFailsIsReadWhole: the first contact of an upstream
// that serves 50 rows a page, whose store fails on its second page, or whose
// page drops a record while its total stays (a paging glitch), is read
// again, so that no alarm of the history is announced later.
func TestAFirstContactThatFailsIsReadWhole(t *testing.T) {
	t.Parallel()
	t.Run("store error on the second page", func(t *testing.T) {
		t.Parallel()
		h := newHarnessWith(t, func(o *sim.Options) { o.Hostile.PageCap = 50 })
		h.sim.Backfill(150, 24*time.Hour)
		h.open(store.BootstrapNotify)
		h.step()
		if h.p.contact == nil || h.p.contact.read == 0 {
			t.Fatalf("the first slot did not read the contact's first page")
		}
		h.failApply()
		h.runUntil(t0.Add(8 * time.Minute))
		h.checkTruth(nil)
	})
	t.Run("store error on the only page", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.sim.Backfill(20, 24*time.Hour)
		h.open(store.BootstrapNotify)
		h.failApply()
		h.runUntil(t0.Add(6 * time.Minute))
		h.checkTruth(nil)
	})
	t.Run("a record dropped, the total unchanged", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.sim.Backfill(20, 24*time.Hour)
		if err := h.sim.InjectFault(sim.EndpointAlarmList, sim.Fault{Kind: sim.FaultDropAlarm}); err != nil {
			t.Fatal(err)
		}
		h.open(store.BootstrapNotify)
		h.runUntil(t0.Add(6 * time.Minute))
		h.checkTruth(nil)
	})
}

// TestAnOutageAtTheFirstStartMovesTheFirstContact: with the upstream down
// for the first 10 minutes, the first contact is made at its first answer:
// an alarm over before that is history (nothing can tell it from one), and
// one that starts a second after it and ends two seconds later is new.
func TestAnOutageAtTheFirstStartMovesTheFirstContact(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if err := h.sim.InjectFault(sim.EndpointAlarmList, sim.Fault{Kind: sim.FaultServerError, Count: -1}); err != nil {
		t.Fatal(err)
	}
	h.open(store.BootstrapNotify)
	h.schedule([]sim.Scheduled{{Alarm: sim.AlarmSpec{DeviceSN: h.device(0)}, StartAt: t0.Add(time.Minute), EndAt: t0.Add(3 * time.Minute)}})
	h.runUntil(t0.Add(10 * time.Minute))
	h.sim.ClearFaults()
	for h.p.contact == nil || h.p.contact.read == 0 {
		h.step()
		if h.p.contacted {
			break
		}
	}
	answered := h.clk.Now()
	ids := h.schedule([]sim.Scheduled{{Alarm: sim.AlarmSpec{DeviceSN: h.device(1)}, StartAt: answered.Add(time.Second), EndAt: answered.Add(3 * time.Second)}})
	h.runUntil(t0.Add(20 * time.Minute))
	h.checkTruth(ids)
}

// TestRecordModeKeepsSilentAcrossARestartBeforeTheFirstListing: an alarm
// ongoing since before the first run stays silent when relay restarts
// between the first contact and the first listing.
func TestRecordModeKeepsSilentAcrossARestartBeforeTheFirstListing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if _, err := h.sim.StartAlarm(sim.AlarmSpec{DeviceSN: h.device(1), OccurredAt: t0.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	h.open(store.BootstrapRecord)
	h.step()
	if !h.p.contacted || h.p.listed {
		t.Fatalf("after one slot: contacted %t, listed %t; want the contact alone", h.p.contacted, h.p.listed)
	}
	h.close()
	h.clk.Advance(10 * time.Second)
	h.open(store.BootstrapRecord)
	h.runUntil(h.clk.Now().Add(2 * time.Minute))
	h.expect()
	id := h.start(0, 2)
	h.until("a new alarm's start", 4, func() bool { return h.count() == 1 })
	h.expect(start(id))
}

// TestOneLateListingNamesNoZone: an alarm ongoing for 3 hours that the
// upstream lists only after two complete snapshots (a logger uploading
// late) makes its device's alarms look 3 hours late, which the sweep must
// cover, but one alarm names no zone; and after an incomplete snapshot,
// which may have missed an alarm on a page boundary, a first listing
// teaches nothing.
func TestOneLateListingNamesNoZone(t *testing.T) {
	t.Parallel()
	for _, phantom := range []bool{false, true} {
		t.Run(map[bool]string{false: "complete snapshots", true: "incomplete snapshots"}[phantom], func(t *testing.T) {
			t.Parallel()
			h := newHarnessWith(t, func(o *sim.Options) {
				if phantom {
					o.Hostile.TotalOffset = 2
				}
			})
			id, err := h.sim.StartAlarm(sim.AlarmSpec{DeviceSN: h.device(2), OccurredAt: t0.Add(-3*time.Hour + 30*time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			h.tap.hideFromCurrent(id, 2)
			h.open(store.BootstrapNotify)
			h.runUntil(t0.Add(3 * time.Minute))
			h.expect(start(id))
			sum := h.p.StampOffsets()
			if want := map[bool]int{false: 1, true: 0}[phantom]; sum.Off != want {
				t.Fatalf("offsets %+v; want %d device off", sum, want)
			}
			if strings.Contains(h.logs.String(), "whole hours") {
				t.Fatalf("a zone is named from one alarm:\n%s", h.logs.String())
			}
		})
	}
}

// failApply makes the next slot's Apply fail, as a store that cannot be
// written for a moment does, and gives the poller the store again after it.
func (h *harness) failApply() {
	h.t.Helper()
	if err := h.store.Close(); err != nil {
		h.t.Fatal(err)
	}
	h.step()
	st, err := store.Open(h.path, store.Options{Bootstrap: store.BootstrapNotify, Clock: h.clk, LockTimeout: time.Second})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = st.Close() })
	h.store, h.p.store = st, st
}
