package poller

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/store"
)

// The scenarios below run the real client and store against a simulator
// that misbehaves as real vendors do, and compare every event with what the
// simulator says happened: every alarm started after the first run gets its
// start once, an alarm that ended gets its real end (or invalid) once, after
// its start, and nothing else is produced.

// mix is a traffic plan: alarms on random devices, occurring uniformly over
// a span, a quarter of them short enough to start and end between two
// polls, a quarter lasting minutes, a quarter longer, the rest (and those
// that would end after the span) still ongoing at the end.
func mix(h *harness, rng *rand.Rand, n int, from time.Time, span time.Duration) []sim.Scheduled {
	devices := len(h.sim.Fleet().Devices)
	plan := make([]sim.Scheduled, n)
	for i := range plan {
		occ := from.Add(time.Duration(rng.Int64N(int64(span)))).Truncate(time.Millisecond)
		var d time.Duration
		switch i % 4 {
		case 0:
			d = time.Duration(2+rng.IntN(8)) * time.Second
		case 1:
			d = time.Duration(30+rng.IntN(210)) * time.Second
		case 2:
			d = time.Duration(8+rng.IntN(17)) * time.Minute
		}
		plan[i] = sim.Scheduled{
			Alarm:   sim.AlarmSpec{DeviceSN: h.device(rng.IntN(devices)), Level: rng.IntN(4)},
			StartAt: occ,
			Invalid: i%10 == 9,
		}
		if d > 0 && occ.Add(d).Before(from.Add(span)) {
			plan[i].EndAt = occ.Add(d)
		}
	}
	return plan
}

// schedule hands plan to the simulator and returns the originIds.
func (h *harness) schedule(plan []sim.Scheduled) []string {
	h.t.Helper()
	ids := make([]string, len(plan))
	for i, sc := range plan {
		id, err := h.sim.Schedule(sc)
		if err != nil {
			h.t.Fatalf("schedule alarm %d: %v", i, err)
		}
		ids[i] = id
	}
	return ids
}

// runUntil steps slots until the clock reaches t.
func (h *harness) runUntil(t time.Time) {
	h.t.Helper()
	for h.clk.Now().Before(t) {
		h.step()
	}
}

// checkTruth fails unless the events so far are exactly what happened to
// the alarms of ids, as the simulator knows it: a start each, then the end
// or invalid of those that ended, never inferred, and no other event.
func (h *harness) checkTruth(ids []string) {
	h.t.Helper()
	h.mu.Lock()
	evs := slices.Clone(h.events)
	h.mu.Unlock()
	seen := map[string][]event.Event{}
	for _, e := range evs {
		seen[e.Data.OriginID] = append(seen[e.Data.OriginID], e)
	}
	var problems []string
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
		a, ok := h.sim.Alarm(id)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: the simulator does not know it", id))
			continue
		}
		exp := []string{start(id)}
		switch a.Status {
		case sim.StatusEnded:
			exp = append(exp, end(id))
		case sim.StatusInvalid:
			exp = append(exp, invalid(id))
		}
		var got []string
		for _, e := range seen[id] {
			s := e.ID
			if e.Data.Inferred {
				s += " inferred"
			}
			got = append(got, s)
		}
		if strings.Join(got, ",") != strings.Join(exp, ",") {
			problems = append(problems, fmt.Sprintf("%s (occurred %s, recovered %s, device %s): got %v, want %v",
				id, a.OccurredAt.Format(time.TimeOnly), a.RecoveredAt.Format(time.TimeOnly), a.DeviceSN, got, exp))
		}
	}
	for id, es := range seen {
		if !want[id] {
			problems = append(problems, fmt.Sprintf("%s: %d events for an alarm never scheduled", id, len(es)))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		h.t.Fatalf("%d of %d alarms wrong:\n%s", len(problems), len(ids), strings.Join(problems, "\n"))
	}
}

// hostile runs one scenario: a first run, n alarms over span, then settle
// for the ends to be found, and checks the events against the truth, and
// that every start was detected within 10 slots of its occurrence, plus
// late when the upstream lists alarms late.
func hostile(t *testing.T, opts func(*sim.Options), setup func(h *harness), late time.Duration, n int, span, settle time.Duration) *harness {
	t.Helper()
	h := newHarnessWith(t, opts)
	if setup != nil {
		setup(h)
	}
	h.open(store.BootstrapNotify)
	h.steps(3)
	rng := rand.New(rand.NewPCG(uint64(len(t.Name())), 11))
	from := h.clk.Now().Add(20 * time.Second)
	plan := mix(h, rng, n, from, span)
	// Six long alarms on six devices end at the same moment, so that one
	// confirm query names several devices.
	for i := range 6 {
		plan = append(plan, sim.Scheduled{
			Alarm:   sim.AlarmSpec{DeviceSN: h.device(10 + i), Level: i % 4},
			StartAt: from,
			EndAt:   from.Add(span / 2),
		})
	}
	ids := h.schedule(plan)
	h.runUntil(from.Add(span + settle))
	h.checkTruth(ids)
	h.checkStartLatency(ids, late+10*h.p.slot())
	h.noViolations()
	return h
}

// checkStartLatency fails unless every start was detected within bound of
// the alarm's true occurrence, or, for an alarm too short to be seen
// ongoing, of its true recovery.
func (h *harness) checkStartLatency(ids []string, bound time.Duration) {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	var slow []string
	for _, e := range h.events {
		if e.Data.Transition != event.Start {
			continue
		}
		a, ok := h.sim.Alarm(e.Data.OriginID)
		if !ok {
			continue
		}
		ref := a.OccurredAt
		if !a.RecoveredAt.IsZero() && a.RecoveredAt.Sub(a.OccurredAt) < bound {
			ref = a.RecoveredAt
		}
		detected, err := time.Parse(time.RFC3339Nano, e.Data.DetectedAt)
		if err != nil {
			h.t.Fatal(err)
		}
		if d := detected.Sub(ref); d > bound {
			slow = append(slow, fmt.Sprintf("%s: %s after it occurred", e.Data.OriginID, d))
		}
	}
	if len(slow) > 0 {
		h.t.Fatalf("%d starts detected later than %s:\n%s", len(slow), bound, strings.Join(slow, "\n"))
	}
}

func TestHostileUpstreamLosesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  func(*sim.Options)
		setup func(h *harness)
		late  time.Duration
		n     int
	}{
		{"upstream clock 2 minutes ahead", func(o *sim.Options) { o.Hostile.ClockOffset = 2 * time.Minute }, nil, 0, 80},
		{"upstream clock 2 minutes behind", func(o *sim.Options) { o.Hostile.ClockOffset = -2 * time.Minute }, nil, 0, 80},
		{"upstream clock 15 minutes ahead", func(o *sim.Options) { o.Hostile.ClockOffset = 15 * time.Minute }, nil, 0, 80},
		{"upstream clock 15 minutes behind", func(o *sim.Options) { o.Hostile.ClockOffset = -15 * time.Minute }, nil, 0, 80},
		{"device clocks off both ways, one stamping UTC+8 as UTC", nil, func(h *harness) {
			for i, d := range []time.Duration{2 * time.Minute, -2 * time.Minute, 8 * time.Hour, -30 * time.Second, -5 * time.Minute} {
				if err := h.sim.SetDeviceClockOffset(h.device(i), d); err != nil {
					h.t.Fatal(err)
				}
			}
		}, 0, 80},
		{"ingestion lag of 3 minutes on half the devices", func(o *sim.Options) {
			o.Hostile.IngestLag, o.Hostile.IngestLagShare = 3*time.Minute, 0.5
		}, nil, 3 * time.Minute, 80},
		{"page cap of 20 rows", func(o *sim.Options) { o.Hostile.PageCap = 20 }, nil, time.Minute, 120},
		{"total counts 2 rows never served", func(o *sim.Options) { o.Hostile.TotalOffset = 2 }, nil, 0, 80},
		{"total counts 2 rows too few", func(o *sim.Options) { o.Hostile.TotalOffset = -2 }, nil, 0, 80},
		{"deviceSnList of at most 2 devices", func(o *sim.Options) { o.Hostile.DeviceSNListLimit = 2 }, nil, 0, 80},
		{"window filters recovery time", func(o *sim.Options) { o.Hostile.FilterOnRecovery = true }, nil, 0, 80},
		{"eventLevels ignored", func(o *sim.Options) { o.Hostile.IgnoreLevels = true }, nil, 0, 80},
		{"records padded past the string bound", func(o *sim.Options) { o.Hostile.PadRecords = 17 << 10 }, nil, 0, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hostile(t, tc.opts, tc.setup, tc.late, tc.n, 20*time.Minute, 15*time.Minute)
		})
	}
}

// TestStormWithAHostileUpstream: 700 alarms at once from an upstream that
// ignores eventLevels, caps its pages, or both: every start is announced,
// and the ends of 100 of them are found, with nothing false.
func TestStormWithAHostileUpstream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts func(*sim.Options)
	}{
		{"eventLevels ignored", func(o *sim.Options) { o.Hostile.IgnoreLevels = true }},
		{"page cap of 200", func(o *sim.Options) { o.Hostile.PageCap = 200 }},
		{"both", func(o *sim.Options) { o.Hostile.IgnoreLevels, o.Hostile.PageCap = true, 200 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarnessWith(t, tc.opts)
			h.open(store.BootstrapNotify)
			h.steps(3)
			ids := h.sim.Storm(700)
			h.until("every start", 200, func() bool { return h.count() == len(ids) })
			for _, id := range ids[:100] {
				h.end(id, h.clk.Now())
			}
			h.until("the ends", 200, func() bool { return h.count() == len(ids)+100 })
			h.steps(20)
			h.checkTruth(ids)
			h.noViolations()
		})
	}
}

// TestPhantomTotalIsReportedAndEndsAreStillFound: an upstream whose total
// counts rows it never serves (or too few) makes every snapshot incomplete;
// the ends of alarms ongoing since before the first run, which no sweep
// window holds, are still found from their recovered records, none is
// inferred, and the stall is reported.
func TestPhantomTotalIsReportedAndEndsAreStillFound(t *testing.T) {
	t.Parallel()
	for _, k := range []int{3, -3} {
		t.Run(fmt.Sprintf("total off by %d", k), func(t *testing.T) {
			t.Parallel()
			h := newHarnessWith(t, func(o *sim.Options) { o.Hostile.TotalOffset = k })
			h.confirm = 2 * time.Minute
			var ids []string
			for i := range 5 {
				ids = append(ids, h.start(i%4, i))
			}
			h.clk.Advance(30 * time.Minute) // the first run comes later
			h.open(store.BootstrapNotify)
			h.until("the starts", 10, func() bool { return h.count() == 5 })
			h.steps(2)
			h.end(ids[0], h.clk.Now())
			h.end(ids[3], h.clk.Now())
			h.until("the ends", 30, func() bool { return h.count() == 7 })
			h.runUntil(h.clk.Now().Add(10 * time.Minute))
			h.checkTruth(ids)
			phantomReported(t, h)
		})
	}
}

// phantomReported fails unless h's poller reports end detection stalled.
func phantomReported(t *testing.T, h *harness) {
	t.Helper()
	if err := h.p.EndDetection(); err == nil || !strings.Contains(err.Error(), "no complete snapshot") {
		t.Fatalf("EndDetection() = %v; want the stall reported", err)
	}
	if got := testutil.ToFloat64(h.metrics.incomplete); got < 10 {
		t.Fatalf("incomplete snapshots in a row = %v; want the run counted", got)
	}
	if !strings.Contains(h.logs.String(), "end detection stalled") {
		t.Fatal("no warning that end detection stalled")
	}
}

// TestAlarmsUploadedLateAreAnnounced: a data logger that was offline uploads
// alarms that are already over 10 minutes, 2 hours and 20 hours after they
// occurred, while relay has been running all along (so its sweeps have long
// passed their times): reconciliation announces each, start then end,
// within one pass.
func TestAlarmsUploadedLateAreAnnounced(t *testing.T) {
	t.Parallel()
	for _, lag := range []time.Duration{10 * time.Minute, 2 * time.Hour, 20 * time.Hour} {
		t.Run(lag.String(), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.rate = 1 // 60 s slots: 20 hours are 1,200 slots
			h.lookback = 48 * time.Hour
			h.open(store.BootstrapNotify)
			h.steps(3)
			sn := h.device(5)
			if err := h.sim.SetDeviceOffline(sn, true); err != nil {
				t.Fatal(err)
			}
			occurred := h.clk.Now().Add(time.Minute)
			id := h.schedule([]sim.Scheduled{{
				Alarm:   sim.AlarmSpec{DeviceSN: sn, Level: 1},
				StartAt: occurred,
				EndAt:   occurred.Add(4 * time.Minute),
			}})[0]
			h.runUntil(occurred.Add(lag))
			if h.count() != 0 {
				t.Fatalf("events before the device reconnected: %v", h.got())
			}
			if err := h.sim.SetDeviceOffline(sn, false); err != nil {
				t.Fatal(err)
			}
			back := h.clk.Now()
			h.until("the late alarm's start and end", 60, func() bool { return h.count() == 2 })
			h.checkTruth([]string{id})
			// The bound docs/upstream.md states: one reconciliation pass, which
			// starts at most 2 minutes apart and takes one slot in 10 per
			// page; the whole horizon of this quiet fleet fits one page.
			took := h.clk.Now().Sub(back)
			if bound := reconcilePass + 10*h.p.slot(); took > bound {
				t.Fatalf("announced %s after the upload; docs/upstream.md promises within %s", took, bound)
			}
			h.noViolations()
		})
	}
}

// TestUpstreamClockOffsetChangesNoDecision: the same alarms, with the whole
// upstream's clock 15 minutes ahead, behind, or right, make the same
// requests and are detected equally fast on the fake clock: every window
// is taken in the upstream's clock.
func TestUpstreamClockOffsetChangesNoDecision(t *testing.T) {
	t.Parallel()
	type outcome struct {
		latencies []time.Duration
		requests  int
	}
	run := func(offset time.Duration) outcome {
		h := newHarnessWith(t, func(o *sim.Options) { o.Hostile.ClockOffset = offset })
		h.open(store.BootstrapNotify)
		h.steps(3)
		rng := rand.New(rand.NewPCG(5, 11))
		from := h.clk.Now().Add(20 * time.Second)
		var plan []sim.Scheduled
		for range 100 {
			occ := from.Add(time.Duration(rng.Int64N(int64(15 * time.Minute)))).Truncate(time.Millisecond)
			plan = append(plan, sim.Scheduled{
				Alarm:   sim.AlarmSpec{DeviceSN: h.device(rng.IntN(20)), Level: rng.IntN(4)},
				StartAt: occ, EndAt: occ.Add(time.Duration(1+rng.IntN(10)) * time.Minute),
			})
		}
		ids := h.schedule(plan)
		h.runUntil(from.Add(32 * time.Minute))
		h.checkTruth(ids)
		var out outcome
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, e := range h.events {
			a, _ := h.sim.Alarm(e.Data.OriginID)
			ref := a.OccurredAt
			if e.Data.Transition != event.Start {
				ref = a.RecoveredAt
			}
			d, err := time.Parse(time.RFC3339Nano, e.Data.DetectedAt)
			if err != nil {
				t.Fatal(err)
			}
			out.latencies = append(out.latencies, d.Sub(ref))
		}
		out.requests = len(h.tap.log())
		return out
	}
	right := run(0)
	for _, offset := range []time.Duration{15 * time.Minute, -15 * time.Minute} {
		got := run(offset)
		if !slices.Equal(got.latencies, right.latencies) || got.requests != right.requests {
			t.Fatalf("clock %s off: %d requests and latencies %v; with no offset %d requests and %v",
				offset, got.requests, got.latencies, right.requests, right.latencies)
		}
	}
}
