package sim_test

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/opendata/sim"
)

func TestAlarmListFilters(t *testing.T) {
	h := newHarness(t, sim.Options{Stations: 3})
	fl := h.srv.Fleet()
	// One alarm per device, levels cycling 0..3, all with a known code.
	byDevice := map[string]string{}
	for i, d := range fl.Devices {
		byDevice[d.SN] = mustStart(t, h.srv, sim.AlarmSpec{DeviceSN: d.SN, Level: i % 4, EventCode: "X_" + strconv.Itoa(i%3)})
	}
	ended := mustStart(t, h.srv, sim.AlarmSpec{DeviceSN: fl.Devices[0].SN})
	invalid := mustStart(t, h.srv, sim.AlarmSpec{DeviceSN: fl.Devices[1].SN})
	h.clk.Advance(time.Minute)
	if err := h.srv.EndAlarm(ended, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.InvalidateAlarm(invalid, time.Time{}); err != nil {
		t.Fatal(err)
	}

	st, sy := fl.Stations[1], fl.Systems[0]
	want := func(keep func(i int, d sim.Device) bool) []string {
		var ids []string
		for i, d := range fl.Devices {
			if keep(i, d) {
				ids = append(ids, byDevice[d.SN])
			}
		}
		slices.Sort(ids)
		return ids
	}
	tests := []struct {
		name string
		body map[string]any
		want []string
	}{
		{"all ongoing", nil, want(func(int, sim.Device) bool { return true })},
		{"history has ended and invalid", map[string]any{"isRecovery": true}, sortedOf(ended, invalid)},
		{"station as number", map[string]any{"stationIdList": []any{num(st.ID)}}, want(func(_ int, d sim.Device) bool { return d.StationID == st.ID })},
		{"station as string", map[string]any{"stationIdList": []string{st.ID}}, want(func(_ int, d sim.Device) bool { return d.StationID == st.ID })},
		{"system", map[string]any{"systemIdList": []string{sy.ID}}, want(func(_ int, d sim.Device) bool { return d.SystemID == sy.ID })},
		{"device sn", map[string]any{"deviceSnList": []string{fl.Devices[2].SN, fl.Devices[5].SN}}, want(func(i int, _ sim.Device) bool { return i == 2 || i == 5 })},
		{"levels", map[string]any{"eventLevels": []int{0, 3}}, want(func(i int, _ sim.Device) bool { return i%4 == 0 || i%4 == 3 })},
		{"event codes", map[string]any{"eventCodes": []string{"X_1"}}, want(func(i int, _ sim.Device) bool { return i%3 == 1 })},
		{"device types", map[string]any{"deviceTemplateCodes": []string{"Inverter"}}, want(func(_ int, d sim.Device) bool { return d.TemplateCode == "Inverter" })},
		{"combined", map[string]any{"stationIdList": []string{st.ID}, "eventLevels": []int{1}}, want(func(i int, d sim.Device) bool { return d.StationID == st.ID && i%4 == 1 })},
		{"empty lists do not filter", map[string]any{"stationIdList": []string{}, "eventLevels": []int{}}, want(func(int, sim.Device) bool { return true })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			total, recs := h.alarms(tt.body)
			got := originIDs(recs)
			slices.Sort(got)
			if total != len(tt.want) || !slices.Equal(got, tt.want) {
				t.Errorf("total %d, ids %v; want %v", total, got, tt.want)
			}
		})
	}
}

func sortedOf(ids ...string) []string {
	slices.Sort(ids)
	return ids
}

// num makes a JSON number of a decimal id.
func num(id string) any {
	n, _ := strconv.ParseInt(id, 10, 64)
	return n
}

func TestAlarmPagesAreStableAndTotalCountsAll(t *testing.T) {
	h := newHarness(t, sim.Options{})
	for i := range 45 {
		h.clk.Advance(time.Second)
		mustStart(t, h.srv, sim.AlarmSpec{Level: i % 4})
	}
	h.srv.Storm(5) // five alarms in the same millisecond: ordered by originId
	var all []map[string]any
	for page := 1; page <= 3; page++ {
		total, recs := h.alarms(map[string]any{"current": page, "size": 20})
		if total != 50 {
			t.Fatalf("page %d: total %d, want 50", page, total)
		}
		if want := min(20, 50-(page-1)*20); len(recs) != want {
			t.Fatalf("page %d has %d records, want %d", page, len(recs), want)
		}
		all = append(all, recs...)
	}
	if _, recs := h.alarms(map[string]any{"current": 4, "size": 20}); len(recs) != 0 {
		t.Errorf("page past the end has %d records", len(recs))
	}
	seen := map[string]bool{}
	for i, r := range all {
		id := str(r["originId"])
		if seen[id] {
			t.Fatalf("%s on two pages", id)
		}
		seen[id] = true
		if i == 0 {
			continue
		}
		prev, cur := str(all[i-1]["occurrenceTime"]), str(r["occurrenceTime"])
		if prev < cur || prev == cur && str(all[i-1]["originId"]) < id {
			t.Fatalf("record %d (%s, %s) is out of order after (%s, %v)", i, cur, id, prev, all[i-1]["originId"])
		}
	}
	if _, again := h.alarms(map[string]any{"current": 2, "size": 20}); !slices.Equal(originIDs(again), originIDs(all[20:40])) {
		t.Error("the same page asked twice differs")
	}
}

func TestAlarmWindowFiltersOnOccurrenceTime(t *testing.T) {
	h := newHarness(t, sim.Options{})
	h.clk.Advance(3 * time.Hour)
	now := h.clk.Now()
	id := mustStart(t, h.srv, sim.AlarmSpec{OccurredAt: now.Add(-2 * time.Hour)})
	if err := h.srv.EndAlarm(id, now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		from, to time.Time
		found    bool
	}{
		{"window around recovery only", now.Add(-10 * time.Minute), now, false},
		{"window around occurrence", now.Add(-3 * time.Hour), now.Add(-time.Hour), true},
		{"window starting at occurrence", now.Add(-2 * time.Hour), now.Add(-2 * time.Hour), true},
		{"window ending a millisecond before", now.Add(-3 * time.Hour), now.Add(-2*time.Hour - time.Millisecond), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			total, _ := h.alarms(map[string]any{"isRecovery": true, "startTime": tt.from.UnixMilli(), "endTime": tt.to.UnixMilli()})
			if (total == 1) != tt.found {
				t.Errorf("total %d, want found=%v", total, tt.found)
			}
		})
	}
	a, ok := h.srv.Alarm(id)
	if !ok || a.Status != sim.StatusEnded || !a.RecoveredAt.Equal(now.Add(-time.Minute)) {
		t.Errorf("Alarm(%s) = %+v, %v", id, a, ok)
	}
}

func TestScheduledAlarmsApplyAsTheClockPasses(t *testing.T) {
	h := newHarness(t, sim.Options{})
	late, err := h.srv.Schedule(sim.Scheduled{
		Alarm:   sim.AlarmSpec{Level: 1, OccurredAt: t0.Add(5 * time.Minute)},
		StartAt: t0.Add(8 * time.Minute), EndAt: t0.Add(20 * time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := h.srv.Schedule(sim.Scheduled{StartAt: t0.Add(10 * time.Minute), EndAt: t0.Add(15 * time.Minute), Invalid: true})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		at                time.Time
		lateSt, badSt     sim.Status
		lateSeen, badSeen bool
	}{
		{t0.Add(7 * time.Minute), 0, 0, false, false},
		{t0.Add(8 * time.Minute), sim.StatusOngoing, 0, true, false},
		{t0.Add(12 * time.Minute), sim.StatusOngoing, sim.StatusOngoing, true, true},
		{t0.Add(16 * time.Minute), sim.StatusOngoing, sim.StatusInvalid, true, true},
		{t0.Add(25 * time.Minute), sim.StatusEnded, sim.StatusInvalid, true, true},
	}
	for _, st := range steps {
		h.clk.Set(st.at)
		for _, c := range []struct {
			id     string
			seen   bool
			status sim.Status
		}{{late, st.lateSeen, st.lateSt}, {bad, st.badSeen, st.badSt}} {
			a, ok := h.srv.Alarm(c.id)
			if ok != c.seen || ok && a.Status != c.status {
				t.Errorf("at %v: alarm %s seen=%v status=%v, want seen=%v status=%v", st.at.Sub(t0), c.id, ok, a.Status, c.seen, c.status)
			}
		}
	}
	a, _ := h.srv.Alarm(late)
	if !a.OccurredAt.Equal(t0.Add(5*time.Minute)) || !a.RecoveredAt.Equal(t0.Add(20*time.Minute)) || a.Level != 1 {
		t.Errorf("late alarm %+v", a)
	}
	// The request path applies schedules too, without Tick.
	id, _ := h.srv.Schedule(sim.Scheduled{StartAt: t0.Add(30 * time.Minute)})
	h.clk.Set(t0.Add(30 * time.Minute))
	_, recs := h.alarms(nil)
	if !slices.Contains(originIDs(recs), id) {
		t.Error("a scheduled alarm did not appear in getAlarmList when due")
	}
}

func TestAlarmMethodsRefuseImpossibleTransitions(t *testing.T) {
	h := newHarness(t, sim.Options{})
	id := mustStart(t, h.srv, sim.AlarmSpec{})
	tests := []struct {
		name string
		run  func() error
	}{
		{"unknown device", func() error { _, err := h.srv.StartAlarm(sim.AlarmSpec{DeviceSN: "nope"}); return err }},
		{"level 4", func() error { _, err := h.srv.StartAlarm(sim.AlarmSpec{Level: 4}); return err }},
		{"future occurrence", func() error { _, err := h.srv.StartAlarm(sim.AlarmSpec{OccurredAt: t0.Add(time.Hour)}); return err }},
		{"end before occurrence", func() error { return h.srv.EndAlarm(id, t0.Add(-time.Second)) }},
		{"end in the future", func() error { return h.srv.EndAlarm(id, t0.Add(time.Hour)) }},
		{"unknown alarm", func() error { return h.srv.EndAlarm("123", time.Time{}) }},
		{"schedule ending before it occurs", func() error {
			_, err := h.srv.Schedule(sim.Scheduled{StartAt: t0.Add(time.Hour), EndAt: t0.Add(time.Minute)})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.run() == nil {
				t.Error("no error")
			}
		})
	}
	if err := h.srv.EndAlarm(id, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.InvalidateAlarm(id, time.Time{}); err == nil {
		t.Error("an ended alarm was invalidated")
	}
}

func TestChurnIsDeterministicWhateverTheClockSteps(t *testing.T) {
	churn := sim.Churn{StartsPerMinute: 3, MeanDuration: 5 * time.Minute, InvalidFraction: 0.2}
	run := func(step time.Duration) (sim.AlarmCounts, []string) {
		h := newHarness(t, sim.Options{Seed: 9, Churn: churn})
		for h.clk.Now().Before(t0.Add(2 * time.Hour)) {
			h.clk.Advance(step)
			h.srv.Tick()
		}
		_, ongoing := h.alarms(nil)
		_, recovered := h.alarms(map[string]any{"isRecovery": true})
		return h.srv.AlarmCounts(), append(originIDs(ongoing), originIDs(recovered)...)
	}
	c1, ids1 := run(10 * time.Second)
	c2, ids2 := run(2 * time.Hour)
	if c1 != c2 || !slices.Equal(ids1, ids2) {
		t.Fatalf("10 s steps gave %+v, one 2 h step gave %+v", c1, c2)
	}
	if total := c1.Ongoing + c1.Ended + c1.Invalid; total < 250 || total > 470 || c1.Invalid == 0 || c1.Ongoing == 0 {
		t.Errorf("3 starts per minute for 2 h gave %+v", c1)
	}
}

func TestStormStartsMixedLevelsAndMarksDevicesFaulty(t *testing.T) {
	h := newHarness(t, sim.Options{})
	ids := h.srv.Storm(5000)
	if len(ids) != 5000 || h.srv.AlarmCounts().Ongoing != 5000 {
		t.Fatalf("storm started %d, ongoing %d", len(ids), h.srv.AlarmCounts().Ongoing)
	}
	levels := map[int]int{}
	for _, a := range h.srv.Ongoing() {
		levels[a.Level]++
	}
	for l := range 4 {
		if levels[l] < 300 {
			t.Errorf("level %d: %d alarms", l, levels[l])
		}
	}
	total, recs := h.alarms(map[string]any{"eventLevels": []int{0}, "size": 500})
	if total != levels[0] || len(recs) != min(500, levels[0]) {
		t.Errorf("level-0 query: total %d (want %d), page %d", total, levels[0], len(recs))
	}
	for _, d := range h.list(sim.EndpointDeviceList, map[string]any{"assetScope": 0}) {
		if d["state"] != "1002" {
			t.Errorf("device %v in state %v during a storm", d["sn"], d["state"])
		}
	}
}

func TestBackfillAddsHistoryOnly(t *testing.T) {
	h := newHarness(t, sim.Options{Churn: sim.Churn{InvalidFraction: 0.5}})
	h.srv.Backfill(1000, 24*time.Hour)
	c := h.srv.AlarmCounts()
	if c.Ongoing != 0 || c.Ended+c.Invalid != 1000 || c.Invalid == 0 {
		t.Fatalf("counts %+v", c)
	}
	total, recs := h.alarms(map[string]any{"isRecovery": true, "startTime": t0.Add(-24 * time.Hour).UnixMilli(), "endTime": t0.UnixMilli()})
	if total != 1000 || len(recs) != 500 {
		t.Fatalf("total %d, page %d", total, len(recs))
	}
	for _, r := range recs {
		if st := str(r["status"]); st != "0" && st != "-1" {
			t.Fatalf("status %s in history", st)
		}
	}
}

func TestConcurrentRequestsAndAlarmChangesAreSafe(t *testing.T) {
	h := newHarness(t, sim.Options{Churn: sim.Churn{StartsPerMinute: 30}})
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := *h
			c.ip = "10.0.1." + strconv.Itoa(i)
			for {
				select {
				case <-done:
					return
				default:
				}
				if r := c.do(sim.EndpointAlarmList, map[string]any{"current": 1, "size": 50, "startTime": 0, "endTime": t0.Add(time.Hour).UnixMilli()}); r.code() != sim.CodeSuccess {
					t.Errorf("%s", r.raw)
					return
				}
				c.do(sim.EndpointDeviceList, map[string]any{})
			}
		}()
	}
	for range 50 {
		h.clk.Advance(time.Second)
		id := mustStart(t, h.srv, sim.AlarmSpec{Level: sim.RandomLevel})
		if err := h.srv.EndAlarm(id, time.Time{}); err != nil {
			t.Error(err)
		}
		h.srv.Storm(2)
		h.srv.Ongoing()
	}
	close(done)
	wg.Wait()
	if c := h.srv.AlarmCounts(); c.Ended < 50 || c.Ongoing < 100 {
		t.Errorf("counts %+v", c)
	}
}

// Two clients of one tenant, each with its own token, show up as a pair of
// overlapping pollers while they poll at the same time, and not when one
// follows the other.
func TestPollerOverlapsCountsTwoClientsPollingAtOnce(t *testing.T) {
	h := newHarness(t, sim.Options{})
	a := h.token
	poll := func(tok string) {
		t.Helper()
		h.token = tok
		h.alarms(nil)
		h.clk.Advance(time.Second)
	}
	poll(a)
	poll(a)
	b := h.login()
	poll(b)
	if got := h.srv.PollerOverlaps(); len(got) != 0 {
		t.Fatalf("one client after the other: %d overlaps, want none", len(got))
	}
	poll(a)
	if got := h.srv.PollerOverlaps(); len(got) != 1 {
		t.Fatalf("the first client again after the second: %d overlaps, want 1", len(got))
	}
}
