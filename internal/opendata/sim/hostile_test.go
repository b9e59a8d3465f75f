package sim_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/opendata/sim"
)

func TestHostileModesMisbehaveAsSpecified(t *testing.T) {
	t.Run("Date header follows the shifted clock", func(t *testing.T) {
		h := newHarness(t, sim.Options{Hostile: sim.Hostile{ClockOffset: -2 * time.Minute}})
		r := h.do(sim.EndpointAlarmList, map[string]any{"current": 1, "size": 10, "startTime": 0, "endTime": 1})
		date, err := http.ParseTime(r.header.Get("Date"))
		if want := h.clk.Now().Add(-2 * time.Minute).Truncate(time.Second); err != nil || !date.Equal(want) {
			t.Fatalf("Date %q (%v); want %s", r.header.Get("Date"), err, want)
		}
	})
	t.Run("clock offset stamps and filters in the shifted clock", func(t *testing.T) {
		h := newHarness(t, sim.Options{Hostile: sim.Hostile{ClockOffset: 15 * time.Minute}})
		now := h.clk.Now()
		mustStart(t, h.srv, sim.AlarmSpec{})
		if total, _ := h.alarms(map[string]any{"endTime": now.UnixMilli()}); total != 0 {
			t.Fatalf("a window ending at the true now found %d alarms; the upstream stamps them 15 min ahead", total)
		}
		total, recs := h.alarms(map[string]any{"endTime": now.Add(time.Hour).UnixMilli()})
		if total != 1 || str(recs[0]["occurrenceTime"]) != fmt.Sprint(now.Add(15*time.Minute).UnixMilli()) {
			t.Fatalf("total %d, records %v; want one stamped 15 min ahead", total, recs)
		}
	})
	t.Run("clock offset shifts every time the upstream writes", func(t *testing.T) {
		// 23:50 on the last day of a month: 15 minutes ahead, the upstream
		// is in the next month.
		at := time.Date(2026, 11, 30, 23, 50, 0, 0, time.UTC)
		perfect := writtenTimes(t, newHarness(t, sim.Options{}), at)
		ahead := writtenTimes(t, newHarness(t, sim.Options{Hostile: sim.Hostile{ClockOffset: 15 * time.Minute}}), at)
		for _, tc := range []struct {
			what string
			want string // in the shifted clock
		}{
			{"Date", "2026-12-01 00:05:00"},
			{"occurrenceTime", "2026-11-30 23:50:00"},
			{"occurrenceTimeStr", "2026-11-30 23:50:00"},
			{"recoveryTime", "2026-12-01 00:00:00"},
			{"recoveryTimeStr", "2026-12-01 00:00:00"},
			{"durationTp", "600000"},
			{"default history day", "2026-12-01"},
		} {
			if got := ahead[tc.what]; got != tc.want {
				t.Errorf("%s = %s; want %s (perfect upstream: %s)", tc.what, got, tc.want, perfect[tc.what])
			}
		}
		if want := "2026-11-30 23:50:00"; perfect["Date"] != want {
			t.Errorf("a perfect upstream's Date = %s; want the fake clock, %s", perfect["Date"], want)
		}
		for _, what := range []string{"createTime", "updateTime", "tp", "tpTime"} {
			p, err1 := time.Parse(time.DateTime, perfect[what])
			a, err2 := time.Parse(time.DateTime, ahead[what])
			if err1 != nil || err2 != nil || a.Sub(p) != 15*time.Minute {
				t.Errorf("%s: %s ahead, %s perfect; want 15m apart", what, ahead[what], perfect[what])
			}
		}
	})
	t.Run("page cap serves fewer rows than asked", func(t *testing.T) {
		h := newHarness(t, sim.Options{Hostile: sim.Hostile{PageCap: 3}})
		for range 8 {
			mustStart(t, h.srv, sim.AlarmSpec{})
		}
		total, recs := h.alarms(map[string]any{"size": 5})
		if total != 8 || len(recs) != 3 {
			t.Fatalf("total %d, %d rows; want 8 and 3", total, len(recs))
		}
		_, page2 := h.alarms(map[string]any{"size": 5, "current": 2})
		if len(page2) != 3 || str(page2[0]["originId"]) == str(recs[2]["originId"]) {
			t.Fatalf("page 2 starts at row 5 (rows 3 and 4 are lost to a naive client): %v", page2)
		}
	})
	t.Run("total off by k", func(t *testing.T) {
		h := newHarness(t, sim.Options{Hostile: sim.Hostile{TotalOffset: 2}})
		mustStart(t, h.srv, sim.AlarmSpec{})
		if total, recs := h.alarms(nil); total != 3 || len(recs) != 1 {
			t.Fatalf("total %d, %d rows; want 3 and 1", total, len(recs))
		}
	})
	t.Run("deviceSnList limit refused with A0410", func(t *testing.T) {
		h := newHarness(t, sim.Options{Hostile: sim.Hostile{DeviceSNListLimit: 2}})
		r := h.do(sim.EndpointAlarmList, map[string]any{"current": 1, "size": 10, "startTime": 0,
			"endTime": h.clk.Now().UnixMilli(), "deviceSnList": []string{"a", "b", "c"}})
		if r.code() != sim.CodeOutOfRange {
			t.Fatalf("code %s; want %s", r.code(), sim.CodeOutOfRange)
		}
	})
	t.Run("ingestion lag hides alarms, then shows short ones already over", func(t *testing.T) {
		h := newHarness(t, sim.Options{Hostile: sim.Hostile{IngestLag: 3 * time.Minute}})
		short := mustStart(t, h.srv, sim.AlarmSpec{})
		long := mustStart(t, h.srv, sim.AlarmSpec{})
		for _, step := range []struct {
			after       time.Duration // since the alarms occurred
			end         string        // ends this alarm at that moment
			short, long string        // as listed
		}{
			{time.Minute, short, "", ""},
			{3*time.Minute - time.Second, "", "", ""},
			{3 * time.Minute, "", "over 1m0s after", "ongoing"},
			{5 * time.Minute, long, "over 1m0s after", "ongoing"},
			{8*time.Minute - time.Second, "", "over 1m0s after", "ongoing"},
			{8 * time.Minute, "", "over 1m0s after", "over 5m0s after"},
		} {
			h.clk.Set(t0.Add(step.after))
			if step.end != "" {
				if err := h.srv.EndAlarm(step.end, h.clk.Now()); err != nil {
					t.Fatal(err)
				}
			}
			got := listedAs(h)
			if got[short] != step.short || got[long] != step.long {
				t.Fatalf("%s after they occurred: short %q, long %q; want %q and %q",
					step.after, got[short], got[long], step.short, step.long)
			}
		}
	})
	t.Run("an offline device uploads its backlog on reconnect", func(t *testing.T) {
		h := newHarness(t, sim.Options{})
		sn := h.srv.Fleet().Devices[0].SN
		if err := h.srv.SetDeviceOffline(sn, true); err != nil {
			t.Fatal(err)
		}
		mustStart(t, h.srv, sim.AlarmSpec{DeviceSN: sn})
		h.clk.Advance(time.Hour)
		if n, _ := h.alarms(nil); n != 0 {
			t.Fatalf("%d alarms of an offline device listed", n)
		}
		if err := h.srv.SetDeviceOffline(sn, false); err != nil {
			t.Fatal(err)
		}
		if n, _ := h.alarms(nil); n != 1 {
			t.Fatalf("%d alarms after reconnecting; want 1", n)
		}
	})
	t.Run("recovered alarms filtered on recovery time", func(t *testing.T) {
		h := newHarness(t, sim.Options{Hostile: sim.Hostile{FilterOnRecovery: true}})
		h.clk.Advance(3 * time.Hour)
		now := h.clk.Now()
		id := mustStart(t, h.srv, sim.AlarmSpec{OccurredAt: now.Add(-2 * time.Hour)})
		if err := h.srv.EndAlarm(id, now.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		if n, _ := h.alarms(map[string]any{"isRecovery": true, "startTime": now.Add(-10 * time.Minute).UnixMilli()}); n != 1 {
			t.Fatalf("a window around the recovery found %d; want 1", n)
		}
	})
	t.Run("eventLevels ignored", func(t *testing.T) {
		h := newHarness(t, sim.Options{Hostile: sim.Hostile{IgnoreLevels: true}})
		mustStart(t, h.srv, sim.AlarmSpec{Level: 3})
		if n, _ := h.alarms(map[string]any{"eventLevels": []int{0}}); n != 1 {
			t.Fatalf("%d alarms for level 0; want the level-3 alarm all the same", n)
		}
	})
	t.Run("padded records", func(t *testing.T) {
		h := newHarness(t, sim.Options{Hostile: sim.Hostile{PadRecords: 100_000}})
		mustStart(t, h.srv, sim.AlarmSpec{})
		if _, recs := h.alarms(nil); len(recs) != 1 || len(str(recs[0]["payload"])) != 100_000 {
			t.Fatalf("payload of %d bytes; want 100000", len(str(recs[0]["payload"])))
		}
	})
}

// listedAs returns, by originId, how getAlarmList lists each alarm: ongoing,
// or over that long after its listed occurrence.
func listedAs(h *harness) map[string]string {
	h.t.Helper()
	out := map[string]string{}
	_, ongoing := h.alarms(nil)
	for _, r := range ongoing {
		out[str(r["originId"])] = "ongoing"
	}
	_, recovered := h.alarms(map[string]any{"isRecovery": true})
	for _, r := range recovered {
		occ, _ := strconv.ParseInt(str(r["occurrenceTime"]), 10, 64)
		rec, _ := strconv.ParseInt(str(r["recoveryTime"]), 10, 64)
		out[str(r["originId"])] = fmt.Sprintf("over %s after", time.Duration(rec-occ)*time.Millisecond)
	}
	return out
}

// writtenTimes sets h's clock to at, makes one alarm that occurred 15
// minutes earlier and ended 10 minutes later, and returns the times h's
// answers write, by field name, as yyyy-MM-dd HH:mm:ss (epoch ms fields
// converted, durations as they are).
func writtenTimes(t *testing.T, h *harness, at time.Time) map[string]string {
	t.Helper()
	h.clk.Set(at)
	h.token = h.login()
	ms := func(v any) string {
		n, err := strconv.ParseInt(str(v), 10, 64)
		if err != nil {
			t.Fatalf("%v is not epoch ms: %v", v, err)
		}
		return time.UnixMilli(n).UTC().Format(time.DateTime)
	}
	out := map[string]string{}
	r := h.do(sim.EndpointAlarmList, map[string]any{"current": 1, "size": 1, "startTime": 0, "endTime": 1})
	date, err := http.ParseTime(r.header.Get("Date"))
	if err != nil {
		t.Fatalf("Date %q: %v", r.header.Get("Date"), err)
	}
	out["Date"] = date.UTC().Format(time.DateTime)
	id := mustStart(t, h.srv, sim.AlarmSpec{OccurredAt: at.Add(-15 * time.Minute)})
	if err := h.srv.EndAlarm(id, at.Add(-5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	_, recs := h.alarms(map[string]any{"isRecovery": true, "endTime": at.Add(time.Hour).UnixMilli()})
	if len(recs) != 1 {
		t.Fatalf("%d recovered alarms; want 1", len(recs))
	}
	for _, f := range []string{"occurrenceTime", "recoveryTime"} {
		out[f], out[f+"Str"] = ms(recs[0][f]), str(recs[0][f+"Str"])
	}
	out["durationTp"] = str(recs[0]["durationTp"])
	id2, secret := h.srv.Credentials()
	h.token = ""
	info := h.data(sim.EndpointLogin, map[string]any{"appId": id2, "appSecret": secret}).(map[string]any)["tenantInfo"].(map[string]any)
	h.token = h.login()
	out["createTime"], out["updateTime"] = str(info["createTime"]), str(info["updateTime"])
	node := ""
	for _, d := range h.srv.Fleet().Devices {
		if d.NodeID != "" {
			node = d.NodeID
			break
		}
	}
	rt := h.list(sim.EndpointRealTime, map[string]any{"deviceNodeList": []string{node}})
	out["tp"], out["tpTime"] = ms(rt[0]["tp"]), str(rt[0]["tpTime"])
	hist := h.list(sim.EndpointDeviceHistory, map[string]any{"deviceNodeList": []string{node}, "dimension": "day"})
	out["default history day"] = str(hist[0]["date"])
	return out
}
