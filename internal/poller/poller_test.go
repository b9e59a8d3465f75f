package poller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/store"
)

func parseTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("event time %q: %v", s, err)
	}
	return v
}

func TestAlarmStartThenEndWithRealRecoveryTime(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.open(store.BootstrapNotify)
	h.step() // the first snapshot is empty and completes the bootstrap
	id := h.start(0, 0)
	occurred := h.clk.Now()
	h.step()
	h.expect(start(id))
	if d := parseTime(t, h.event(0).Data.DetectedAt).Sub(occurred); d > h.p.slot() {
		t.Fatalf("start detected %s after the occurrence; want within one slot", d)
	}
	h.steps(4)
	h.expect(start(id))

	recovered := h.clk.Now().Add(-2500 * time.Millisecond)
	h.end(id, recovered)
	h.steps(2) // the current poll misses it, the next slot confirms it
	h.expect(start(id), end(id))
	e := h.event(1).Data
	if e.RecoveredAt != event.FormatTime(recovered) || e.Status != 0 || e.Inferred {
		t.Fatalf("end: recoveredAt %s status %d inferred %v; want %s, 0, false",
			e.RecoveredAt, e.Status, e.Inferred, event.FormatTime(recovered))
	}
	if want := recovered.Sub(occurred).Milliseconds(); e.DurationMs != want {
		t.Fatalf("end: durationMs %d; want %d", e.DurationMs, want)
	}
	h.steps(15) // past the confirm timeout: nothing more
	h.expect(start(id), end(id))
	h.noViolations()

	m := h.metrics
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"starts", testutil.ToFloat64(m.transitions.WithLabelValues("start", "false")), 1},
		{"ends", testutil.ToFloat64(m.transitions.WithLabelValues("end", "false")), 1},
		{"ongoing level 0", testutil.ToFloat64(m.ongoing.WithLabelValues("0")), 0},
		{"latency series (start, end)", float64(testutil.CollectAndCount(m.latency)), 2},
		{"failed polls", testutil.ToFloat64(m.polls.WithLabelValues("current", "transient")), 0},
		{"confirm polls", testutil.ToFloat64(m.polls.WithLabelValues("confirm", "ok")), 1},
	} {
		if c.got != c.want {
			t.Errorf("metric %s = %v; want %v", c.name, c.got, c.want)
		}
	}
}

func TestAlarmBetweenTwoPollsIsSweptStartThenEnd(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.open(store.BootstrapNotify)
	h.step()
	now := h.clk.Now()
	id, err := h.sim.Schedule(sim.Scheduled{
		Alarm:   sim.AlarmSpec{DeviceSN: h.device(1), Level: 1},
		StartAt: now.Add(time.Second), EndAt: now.Add(4 * time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.until("the sweep finds the alarm", 6, func() bool { return h.count() == 2 })
	h.expect(start(id), end(id))
	s, e := h.event(0), h.event(1)
	if s.Time != event.FormatTime(now.Add(time.Second)) || e.Data.RecoveredAt != event.FormatTime(now.Add(4*time.Second)) {
		t.Fatalf("start time %s, recovery %s; want %s and %s", s.Time, e.Data.RecoveredAt,
			event.FormatTime(now.Add(time.Second)), event.FormatTime(now.Add(4*time.Second)))
	}
	if s.Data.DetectedAt != e.Data.DetectedAt || !h.tap.last().Recovery {
		t.Fatalf("start and end should come from one sweep answer")
	}
	h.steps(12)
	h.expect(start(id), end(id))
}

func TestAlarmInvalidatedGivesStartThenInvalid(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.open(store.BootstrapNotify)
	h.step()
	id := h.start(2, 3)
	h.step()
	h.expect(start(id))
	if err := h.sim.InvalidateAlarm(id, time.Time{}); err != nil {
		t.Fatal(err)
	}
	h.until("the invalid is confirmed", 4, func() bool { return h.count() == 2 })
	h.expect(start(id), invalid(id))
	if e := h.event(1).Data; e.Status != -1 || e.Inferred {
		t.Fatalf("invalid: status %d inferred %v; want -1, false", e.Status, e.Inferred)
	}
	h.steps(12)
	h.expect(start(id), invalid(id))
}

func TestAlarmMissingFromOnePageIsNotEnded(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (*harness, []string) {
		h := newHarness(t)
		h.open(store.BootstrapNotify)
		h.step()
		var ids []string
		for i := range 3 {
			ids = append(ids, h.start(i, i))
			h.until("the start", 2, func() bool { return h.count() == i+1 })
		}
		h.expect(start(ids[0]), start(ids[1]), start(ids[2]))
		return h, ids
	}
	t.Run("paging glitch, total unchanged", func(t *testing.T) {
		h, ids := setup(t)
		faults := h.sim.Stats().Faults
		if err := h.sim.InjectFault(sim.EndpointAlarmList, sim.Fault{Kind: sim.FaultDropAlarm}); err != nil {
			t.Fatal(err)
		}
		for range 16 { // past the confirm timeout
			h.step()
			if len(h.p.vanished) != 0 {
				t.Fatalf("an alarm vanished from an incomplete snapshot")
			}
		}
		if h.sim.Stats().Faults == faults {
			t.Fatalf("the simulator never dropped a record")
		}
		h.expect(start(ids[0]), start(ids[1]), start(ids[2]))
	})
	t.Run("missing from a complete snapshot, back in the next", func(t *testing.T) {
		h, ids := setup(t)
		h.tap.hideFromCurrent(ids[1], 1)
		h.until("the alarm vanishes", 4, func() bool { return h.p.vanished[ids[1]] != nil })
		h.until("the alarm is seen again", 6, func() bool { return len(h.p.vanished) == 0 })
		h.steps(16)
		h.expect(start(ids[0]), start(ids[1]), start(ids[2]))
	})
}

func TestAlarmWithoutRecoveredRecordGetsInferredEnd(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.open(store.BootstrapNotify)
	h.step()
	id := h.start(0, 0)
	h.step()
	h.tap.hideFromRecovered(id)
	h.end(id, h.clk.Now().Add(-time.Second))
	vanishedAt := h.clk.Now()
	h.step()
	if v := h.p.vanished[id]; v == nil || !v.at.Equal(vanishedAt) {
		t.Fatalf("vanish %+v; want vanished at %s", v, vanishedAt)
	}
	h.until("the inferred end", 20, func() bool { return h.count() == 2 })
	h.expect(start(id), inferred(id))
	e := h.event(1).Data
	if e.RecoveredAt != event.FormatTime(vanishedAt) {
		t.Fatalf("inferred end at %s; want the vanish time %s", e.RecoveredAt, event.FormatTime(vanishedAt))
	}
	if d := parseTime(t, e.DetectedAt).Sub(vanishedAt); d < h.confirm {
		t.Fatalf("end inferred %s after the vanish; want the confirm timeout %s", d, h.confirm)
	}
	h.tap.showRecovered(id) // the record turns up late: still nothing more
	h.steps(10)
	h.expect(start(id), inferred(id))
}

func TestRestartLosesAndRepeatsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.open(store.BootstrapNotify)
	h.spaced() // so that a vanish and its confirm query fall in two slots
	h.step()
	a := h.start(0, 0)
	h.step()
	b := h.start(1, 1)
	h.step()
	h.step() // the sweep slot
	h.expect(start(a), start(b))
	h.end(a, h.clk.Now().Add(-time.Second))
	h.step()
	if h.p.vanished[a] == nil {
		t.Fatalf("a should have vanished before the stop")
	}
	h.close() // stopped between the vanish and its confirmation

	h.clk.Advance(30 * time.Second)
	c, err := h.sim.Schedule(sim.Scheduled{
		Alarm:   sim.AlarmSpec{DeviceSN: h.device(2), Level: 2},
		StartAt: h.clk.Now().Add(10 * time.Second), EndAt: h.clk.Now().Add(70 * time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(2 * time.Minute)
	d := h.start(3, 3)
	h.clk.Advance(time.Minute)
	h.end(b, h.clk.Now().Add(-20*time.Second))
	h.clk.Advance(time.Minute)

	h.open(store.BootstrapNotify)
	if h.p.known.len() != 2 {
		t.Fatalf("restart tracks %d ongoing alarms; want 2", h.p.known.len())
	}
	h.step() // current: d starts, a and b vanish
	// The confirm query of every device: both ends, and, since its window
	// covers the sweep's, c, which started and ended during the downtime;
	// its page lists the newest occurrence first.
	h.step()
	h.expect(start(a), start(b), start(d), start(c), end(c), end(b), end(a))
	h.steps(16)
	h.expect(start(a), start(b), start(d), start(c), end(c), end(b), end(a))
	h.noViolations()
}

func TestSweepCatchesUpAfterDowntimeWhileAlarmsKeepRecovering(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.open(store.BootstrapNotify)
	h.step()
	h.close()
	down := h.clk.Now()
	var ids []string
	schedule := func(startAt, endAt time.Time) {
		id, err := h.sim.Schedule(sim.Scheduled{Alarm: sim.AlarmSpec{Level: sim.RandomLevel}, StartAt: startAt, EndAt: endAt})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	// 1,200 alarms start and end while the relay is down: three sweep pages.
	for i := range 1200 {
		at := down.Add(time.Duration(i) * time.Second)
		schedule(at, at.Add(30*time.Second))
	}
	// 60 more start while it is down and end one per slot after the
	// restart, so that every sweep page of the downtime sees a new total.
	restart := down.Add(30 * time.Minute)
	for i := range 60 {
		schedule(down.Add(time.Duration(i)*20*time.Second), restart.Add(time.Duration(i+1)*6*time.Second))
	}
	h.clk.Set(restart)
	h.open(store.BootstrapNotify)
	h.until("a complete sweep while alarms keep recovering", 45, func() bool { return h.p.sweepMark.After(down) })
	h.until("every alarm's start and end", 80, func() bool { return h.count() == 2*len(ids) })
	h.steps(8)
	got := h.got()
	if len(got) != 2*len(ids) {
		t.Fatalf("%d events; want %d", len(got), 2*len(ids))
	}
	pos := make(map[string]int, len(got))
	for i, e := range got {
		if _, dup := pos[e]; dup {
			t.Fatalf("event %s produced twice", e)
		}
		pos[e] = i
	}
	for _, id := range ids {
		s, ok1 := pos[start(id)]
		e, ok2 := pos[end(id)]
		if !ok1 || !ok2 || s > e {
			t.Fatalf("alarm %s: want its start, then its end", id)
		}
	}
	if !h.p.sweepMark.After(restart) {
		t.Fatalf("sweep watermark %s; want past the restart %s", h.p.sweepMark, restart)
	}
	h.noViolations()
}

// isCurrentLevel reports whether r read the ongoing alarms of one level.
func isCurrentLevel(r alarmRequest, level int) bool {
	return !r.Recovery && len(r.Levels) == 1 && r.Levels[0] == level
}

func TestThreePageSnapshotsStayCorrectWhileTotalShifts(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.open(store.BootstrapNotify)
	h.step()
	base := h.clk.Now()
	ids := make([]string, 1200)
	want := make([]string, len(ids))
	for i := range ids {
		id, err := h.sim.StartAlarm(sim.AlarmSpec{Level: 2, OccurredAt: base.Add(-time.Duration(len(ids)-i) * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		ids[i], want[i] = id, start(id)
	}
	snapshots := func(complete bool) float64 {
		return testutil.ToFloat64(h.metrics.snapshots.WithLabelValues("2", fmt.Sprint(complete)))
	}
	h.until("a complete three-page snapshot of level 2", 30, func() bool { return snapshots(true) == 1 })
	got := h.got()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%d events; want one start for each of the 1200 alarms", len(got))
	}
	if snapshots(false) != 0 {
		t.Fatalf("an undisturbed snapshot was incomplete")
	}
	pagesRead := func() bool { r := h.tap.last(); return isCurrentLevel(r, 2) && r.Current == 1 }
	snapshotRead := func() bool { return h.p.cur == nil }

	// An alarm on page 1 ends while level 2 is paged: total drops and one
	// record of page 2 moves to page 1, unread.
	h.until("level 2 page 1", 12, pagesRead)
	x := ids[len(ids)-10]
	h.end(x, h.clk.Now())
	h.until("level 2 read", 4, snapshotRead)
	if snapshots(false) != 1 || len(h.p.vanished) != 0 {
		t.Fatalf("incomplete snapshots %v, vanished %d; want 1 and 0", snapshots(false), len(h.p.vanished))
	}
	h.until("x's end", 20, func() bool { return h.count() == 1201 })
	if e := h.got()[1200]; e != end(x) {
		t.Fatalf("event %s; want %s", e, end(x))
	}

	// A late alarm appears on page 1 while level 2 is paged: total grows
	// and a record of page 1 is read again on page 2.
	h.until("level 2 page 1", 12, pagesRead)
	late, err := h.sim.StartAlarm(sim.AlarmSpec{Level: 2, OccurredAt: h.clk.Now().Add(-30 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	h.until("level 2 read", 4, snapshotRead)
	if snapshots(false) != 2 || len(h.p.vanished) != 0 {
		t.Fatalf("incomplete snapshots %v, vanished %d; want 2 and 0", snapshots(false), len(h.p.vanished))
	}
	h.until("the late alarm's start", 12, func() bool { return h.count() == 1202 })
	h.steps(14) // past the confirm timeout
	if got := h.got(); len(got) != 1202 || got[1201] != start(late) {
		t.Fatalf("%d events, last %s; want 1202, the last %s", len(got), got[len(got)-1], start(late))
	}
	h.noViolations()
}

func TestBackToOnePageWhenAlarmsEnd(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.open(store.BootstrapNotify)
	h.step()
	ids := make([]string, 600)
	for i := range ids {
		id, err := h.sim.StartAlarm(sim.AlarmSpec{Level: 3, OccurredAt: h.clk.Now().Add(-time.Duration(len(ids)-i) * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	h.until("600 starts", 20, func() bool { return h.count() == len(ids) })
	if !h.p.levelMode {
		t.Fatalf("600 ongoing alarms should be read level by level")
	}
	ended := map[string]bool{}
	for _, id := range ids[:200] {
		h.end(id, h.clk.Now())
		ended[end(id)] = true
	}
	h.until("200 ends", 20, func() bool { return h.count() == len(ids)+200 })
	h.until("one page again", 12, func() bool { return !h.p.levelMode })
	h.steps(12)
	got := h.got()
	if len(got) != len(ids)+200 {
		t.Fatalf("%d events; want %d", len(got), len(ids)+200)
	}
	for _, e := range got[len(ids):] {
		if !ended[e] {
			t.Fatalf("event %s; want only the real ends of the 200 ended alarms", e)
		}
		delete(ended, e)
	}
}

func TestStormReadsUrgentAlarmsFirst(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.open(store.BootstrapNotify)
	h.step()
	stormAt := h.clk.Now()
	ids := h.sim.Storm(5000)
	h.until("a start for every alarm of the storm", 40, func() bool { return h.count() == len(ids) })
	h.steps(4)

	levels := make(map[string]int, len(ids))
	for _, id := range ids {
		a, ok := h.sim.Alarm(id)
		if !ok {
			t.Fatalf("the simulator does not know alarm %s", id)
		}
		levels[id] = a.Level
	}
	firstMinor := int64(-1)
	for _, r := range h.tap.log() {
		if isCurrentLevel(r, 3) {
			firstMinor = r.seq
			break
		}
	}
	if firstMinor < 0 {
		t.Fatalf("level 3 was never requested on its own")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	urgent, lastUrgent := 0, time.Time{}
	for i, e := range h.events {
		if e.Data.Transition != event.Start || seen[e.Data.OriginID] {
			t.Fatalf("event %s: want exactly one start per alarm", e.ID)
		}
		seen[e.Data.OriginID] = true
		if levels[e.Data.OriginID] != 0 {
			continue
		}
		urgent++
		if h.evSeq[i] > firstMinor {
			t.Fatalf("level-0 start %s produced after the first level-3 request", e.ID)
		}
		if at := parseTime(t, e.Data.DetectedAt); at.After(lastUrgent) {
			lastUrgent = at
		}
	}
	if len(seen) != len(ids) || urgent == 0 {
		t.Fatalf("%d alarms started, %d urgent; want %d and some", len(seen), urgent, len(ids))
	}
	t.Logf("storm: %d urgent alarms, all detected %.1f slots after the storm", urgent,
		float64(lastUrgent.Sub(stormAt))/float64(6*time.Second))
	if st := h.sim.Stats(); st.Violations != 0 {
		t.Fatalf("%d rate-limit violations; want 0", st.Violations)
	}
}

func TestUpstreamFaultsCauseNoFalseTransition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault sim.Fault
		kind  string // in the failure's log line
		code  string
	}{
		{"HTTP 503", sim.Fault{Kind: sim.FaultServerError, Count: 3}, "transient", ""},
		{"C0001", sim.Fault{Kind: sim.FaultEnvelope, Count: 3}, "transient", "C0001"},
		{"malformed JSON", sim.Fault{Kind: sim.FaultMalformedJSON, Count: 3}, "transient", ""},
		{"truncated body", sim.Fault{Kind: sim.FaultTruncated, Count: 3}, "transient", ""},
		{"A0230 expired token", sim.Fault{Kind: sim.FaultExpiredToken, Count: 3}, "auth", "A0230"},
		{"A0501 too many requests", sim.Fault{Kind: sim.FaultRateLimited, Count: 3}, "rate_limited", "A0501"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.open(store.BootstrapNotify)
			h.step()
			a := h.start(0, 0)
			h.step()
			b := h.start(1, 1)
			h.step()
			recovered := h.clk.Now().Add(-time.Second)
			h.end(a, recovered)
			if err := h.sim.InjectFault(sim.EndpointAlarmList, tc.fault); err != nil {
				t.Fatal(err)
			}
			h.until("a's end", 30, func() bool { return h.count() == 3 })
			h.steps(20)
			h.expect(start(a), start(b), end(a))
			if e := h.event(2).Data; e.Inferred || e.RecoveredAt != event.FormatTime(recovered) {
				t.Fatalf("end: inferred %v at %s; want the real recovery %s", e.Inferred, e.RecoveredAt,
					event.FormatTime(recovered))
			}
			line := ""
			for _, l := range strings.Split(h.logs.String(), "\n") {
				if strings.Contains(l, "alarm query failed") {
					line = l
					break
				}
			}
			if !strings.Contains(line, "kind="+tc.kind) || !strings.Contains(line, "code="+tc.code) {
				t.Fatalf("failure log line %q; want kind=%s code=%s", line, tc.kind, tc.code)
			}
			failed := 0.0
			for _, q := range []string{"current", "confirm", "sweep"} {
				failed += testutil.ToFloat64(h.metrics.polls.WithLabelValues(q, tc.kind))
			}
			if failed == 0 {
				t.Fatalf("no failed poll counted with outcome %s", tc.kind)
			}
			h.noViolations()
		})
	}
}

func TestOutageLongerThanConfirmTimeoutInfersNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.open(store.BootstrapNotify)
	h.spaced() // so that the outage can begin between the vanish and its confirm query
	h.step()
	id := h.start(1, 0)
	h.step()
	recovered := h.clk.Now().Add(-time.Second)
	h.end(id, recovered)
	h.step()
	if h.p.vanished[id] == nil {
		t.Fatalf("the alarm should have vanished")
	}
	if err := h.sim.InjectFault(sim.EndpointAlarmList, sim.Fault{Kind: sim.FaultServerError, Count: -1}); err != nil {
		t.Fatal(err)
	}
	h.steps(20) // twice the confirm timeout without an answer
	h.expect(start(id))
	h.sim.ClearFaults()
	h.until("the real end", 4, func() bool { return h.count() == 2 })
	h.expect(start(id), end(id))
	if e := h.event(1).Data; e.RecoveredAt != event.FormatTime(recovered) {
		t.Fatalf("end at %s; want the real recovery %s", e.RecoveredAt, event.FormatTime(recovered))
	}
}

func TestBootstrapAndHistory(t *testing.T) {
	t.Parallel()
	for _, mode := range []store.Bootstrap{store.BootstrapNotify, store.BootstrapRecord} {
		t.Run(string(mode), func(t *testing.T) {
			h := newHarness(t)
			h.sim.Backfill(40, 6*time.Hour)
			o1, err := h.sim.StartAlarm(sim.AlarmSpec{DeviceSN: h.device(0), OccurredAt: t0.Add(-time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			o2, err := h.sim.StartAlarm(sim.AlarmSpec{DeviceSN: h.device(1), Level: 1, OccurredAt: t0.Add(-10 * time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			// Ended a moment before the first run, inside the first sweep's
			// overlap: history all the same.
			old, err := h.sim.StartAlarm(sim.AlarmSpec{DeviceSN: h.device(2), OccurredAt: t0.Add(-90 * time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			h.end(old, t0.Add(-30*time.Second))

			h.open(mode)
			h.steps(9) // two sweeps
			var want []string
			if mode == store.BootstrapNotify {
				want = []string{start(o2), start(o1)}
			}
			h.expect(want...)

			e := h.start(3, 3)
			h.step()
			h.end(o1, h.clk.Now().Add(-time.Second))
			want = append(want, start(e), end(o1))
			h.until("o1's end", 4, func() bool { return h.count() == len(want) })
			h.steps(9)
			h.expect(want...)
		})
	}
}

func TestAlarmOlderThanLookbackIsCheckedHourly(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.lookback = time.Minute
	h.open(store.BootstrapNotify)
	h.p.agedEvery = 2 * time.Minute
	h.step()
	id := h.start(0, 0)
	h.step()
	h.expect(start(id))
	h.steps(12) // the alarm leaves the window
	if !h.p.loggedOutside(id) || len(h.p.vanished) != 0 {
		t.Fatalf("an alarm older than the window should be known as outside it, not vanished")
	}
	recovered := h.clk.Now()
	h.end(id, recovered)
	h.until("the aged check finds the end", 25, func() bool { return h.count() == 2 })
	h.expect(start(id), end(id))
	if e := h.event(1).Data; e.RecoveredAt != event.FormatTime(recovered) {
		t.Fatalf("end at %s; want %s", e.RecoveredAt, event.FormatTime(recovered))
	}
}

func TestRunPollsUntilCanceled(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.open(store.BootstrapNotify)
	if h.p.Ready() {
		t.Fatalf("ready before any answer")
	}
	id := h.start(0, 0)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.p.Run(ctx) }()
	limit := time.Now().Add(10 * time.Second)
	for h.count() == 0 {
		if time.Now().After(limit) {
			cancel()
			t.Fatalf("no event within 10 s of real time")
		}
		if at, ok := h.clk.NextDeadline(); ok {
			h.clk.Set(at)
		}
		time.Sleep(time.Millisecond)
	}
	h.expect(start(id))
	if !h.p.Ready() || h.p.LastSuccess().IsZero() {
		t.Fatalf("not ready after an answer")
	}
	if err := h.p.Run(ctx); err == nil {
		t.Fatalf("a second Run while the first runs should fail")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	h.clk.Advance(4 * h.p.slot())
	if h.p.Ready() {
		t.Fatalf("ready with no answer for four slots")
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.open(store.BootstrapNotify)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no client", Config{Store: h.store}, "Client is required"},
		{"no store", Config{Client: h.client}, "Store is required"},
		{"negative rate", Config{Client: h.client, Store: h.store, RateLimit: -1}, "rate limit -1"},
		{"negative lookback", Config{Client: h.client, Store: h.store, Lookback: -time.Hour}, "lookback -1h0m0s"},
		{"sweep too often", Config{Client: h.client, Store: h.store, SweepEvery: 2}, "sweep every 2 slots"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
	p, err := New(Config{Client: h.client, Store: h.store})
	if err != nil {
		t.Fatal(err)
	}
	if p.slot() != 6*time.Second || p.cfg.SweepEvery != 8 || p.cfg.ConfirmTimeout != 10*time.Minute {
		t.Fatalf("defaults: slot %s, sweep every %d, confirm timeout %s", p.slot(), p.cfg.SweepEvery, p.cfg.ConfirmTimeout)
	}
}
