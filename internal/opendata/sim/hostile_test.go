package sim_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/opendata/sim"
)

// TestHostileModesMisbehaveAsSpecified: each mode of sim.Hostile changes
// the answers exactly as documented, while the ground truth (Alarm,
// Ongoing) stays in true time.
func TestHostileModesMisbehaveAsSpecified(t *testing.T) {
	dev := sim.New(sim.Options{}).Fleet().Devices // the harnesses' fleet
	for _, tc := range []struct {
		name  string
		opts  sim.Options
		check func(t *testing.T, h *harness)
	}{
		{"Date header follows the shifted clock", sim.Options{Hostile: sim.Hostile{ClockOffset: -2 * time.Minute}}, func(t *testing.T, h *harness) {
			r := h.do(sim.EndpointAlarmList, map[string]any{"current": 1, "size": 10, "startTime": 0, "endTime": 1})
			date, err := http.ParseTime(r.header.Get("Date"))
			if want := h.clk.Now().Add(-2 * time.Minute).Truncate(time.Second); err != nil || !date.Equal(want) {
				t.Fatalf("Date %q (%v); want %s", r.header.Get("Date"), err, want)
			}
		}},
		{"clock offset stamps and filters in the shifted clock", sim.Options{Hostile: sim.Hostile{ClockOffset: 15 * time.Minute}}, func(t *testing.T, h *harness) {
			now := h.clk.Now()
			mustStart(t, h.srv, sim.AlarmSpec{})
			if total, _ := h.alarms(map[string]any{"endTime": now.UnixMilli()}); total != 0 {
				t.Fatalf("a window ending at the true now found %d alarms; the upstream stamps them 15 min ahead", total)
			}
			total, recs := h.alarms(map[string]any{"endTime": now.Add(time.Hour).UnixMilli()})
			if total != 1 || str(recs[0]["occurrenceTime"]) != fmt.Sprint(now.Add(15*time.Minute).UnixMilli()) {
				t.Fatalf("total %d, records %v; want one stamped 15 min ahead", total, recs)
			}
		}},
		{"clock offset shifts every time the upstream writes", sim.Options{}, func(t *testing.T, _ *harness) {
			// 23:50 on the last day of a month: 15 minutes ahead, the
			// upstream is in the next month.
			at := time.Date(2026, 11, 30, 23, 50, 0, 0, time.UTC)
			perfect := writtenTimes(t, newHarness(t, sim.Options{}), at)
			ahead := writtenTimes(t, newHarness(t, sim.Options{Hostile: sim.Hostile{ClockOffset: 15 * time.Minute}}), at)
			for _, w := range []struct {
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
				if got := ahead[w.what]; got != w.want {
					t.Errorf("%s = %s; want %s (perfect upstream: %s)", w.what, got, w.want, perfect[w.what])
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
		}},
		{"device clocks stamp and filter their own alarms; Date keeps the upstream's clock", sim.Options{Hostile: sim.Hostile{
			ClockOffset: -2 * time.Minute, DeviceClockOffsets: map[string]time.Duration{dev[0].SN: 8 * time.Hour},
		}}, func(t *testing.T, h *harness) {
			if err := h.srv.SetDeviceClockOffset(dev[1].SN, -30*time.Second); err != nil {
				t.Fatal(err)
			}
			if err := h.srv.SetDeviceClockOffset("no-such-device", time.Minute); err == nil {
				t.Error("SetDeviceClockOffset accepted an unknown serial number")
			}
			ids := map[string]string{} // originId: device
			for _, d := range dev[:3] {
				ids[mustStart(t, h.srv, sim.AlarmSpec{DeviceSN: d.SN})] = d.SN
			}
			for _, w := range []struct {
				from, to time.Duration // window around t0, in the upstream's clock
				want     map[string]string
			}{
				{-3 * time.Minute, 0, map[string]string{dev[1].SN: "07:57:30", dev[2].SN: "07:58:00"}},
				{7 * time.Hour, 9 * time.Hour, map[string]string{dev[0].SN: "15:58:00"}},
			} {
				_, recs := h.alarms(map[string]any{"startTime": t0.Add(w.from).UnixMilli(), "endTime": t0.Add(w.to).UnixMilli()})
				got := map[string]string{}
				for _, r := range recs {
					got[str(r["deviceSn"])] = clockTime(t, r["occurrenceTime"])
				}
				if fmt.Sprint(got) != fmt.Sprint(w.want) {
					t.Errorf("window %s..%s: %v; want %v", w.from, w.to, got, w.want)
				}
			}
			for id := range ids {
				if a, _ := h.srv.Alarm(id); !a.OccurredAt.Equal(t0) {
					t.Errorf("ground truth of %s: occurred %s; want the true %s", id, a.OccurredAt, t0)
				}
			}
			r := h.do(sim.EndpointAlarmList, map[string]any{"current": 1, "size": 1, "startTime": 0, "endTime": 1})
			if date, err := http.ParseTime(r.header.Get("Date")); err != nil || !date.Equal(t0.Add(-2*time.Minute)) {
				t.Errorf("Date %q; want the upstream's clock, %s", r.header.Get("Date"), t0.Add(-2*time.Minute))
			}
		}},
		{"page cap loses the rows past the cap to a naive client", sim.Options{Hostile: sim.Hostile{PageCap: 3}}, func(t *testing.T, h *harness) {
			for range 8 {
				mustStart(t, h.srv, sim.AlarmSpec{})
			}
			var order []string // the true order, one row a page
			for i := range 8 {
				_, recs := h.alarms(map[string]any{"size": 1, "current": i + 1})
				order = append(order, originIDs(recs)...)
			}
			var naive []string
			for page := 1; page <= 2; page++ {
				d := h.data(sim.EndpointAlarmList, map[string]any{"current": page, "size": 5, "startTime": 0, "endTime": h.clk.Now().UnixMilli()}).(map[string]any)
				if str(d["size"]) != "5" || str(d["total"]) != "8" || str(d["pages"]) != "2" {
					t.Fatalf("page %d: size %v, total %v, pages %v; want 5, 8 and 2", page, d["size"], d["total"], d["pages"])
				}
				for _, it := range d["dataList"].([]any) {
					naive = append(naive, str(it.(map[string]any)["originId"]))
				}
			}
			want := append(append([]string{}, order[:3]...), order[5:]...)
			if fmt.Sprint(naive) != fmt.Sprint(want) {
				t.Fatalf("a naive client paging by 5 read %v; want rows 1-3 and 6-8 of %v", naive, order)
			}
		}},
		{"total off by k, rows unchanged", sim.Options{}, func(t *testing.T, _ *harness) {
			for _, k := range []struct{ offset, alarms, total int }{{2, 1, 3}, {-1, 3, 2}, {-5, 1, 0}} {
				h := newHarness(t, sim.Options{Hostile: sim.Hostile{TotalOffset: k.offset}})
				for range k.alarms {
					mustStart(t, h.srv, sim.AlarmSpec{})
				}
				if total, recs := h.alarms(nil); total != k.total || len(recs) != k.alarms {
					t.Errorf("offset %d: total %d, %d rows; want %d and %d", k.offset, total, len(recs), k.total, k.alarms)
				}
			}
		}},
		{"deviceSnList past the limit refused with A0410", sim.Options{HTTPErrors: true, Hostile: sim.Hostile{DeviceSNListLimit: 2}}, func(t *testing.T, h *harness) {
			for _, l := range []struct {
				sns    []string
				status int
				code   string
			}{
				{[]string{dev[0].SN, dev[1].SN}, http.StatusOK, sim.CodeSuccess},
				{[]string{dev[0].SN, dev[1].SN, dev[2].SN}, http.StatusBadRequest, sim.CodeOutOfRange},
			} {
				r := h.do(sim.EndpointAlarmList, map[string]any{"current": 1, "size": 10, "startTime": 0,
					"endTime": h.clk.Now().UnixMilli(), "deviceSnList": l.sns})
				desc, _ := r.body["description"].(string)
				if r.status != l.status || r.code() != l.code || (l.code != sim.CodeSuccess && !strings.Contains(desc, "at most 2")) {
					t.Errorf("%d devices: status %d, code %s, description %q; want %d, %s and the limit named",
						len(l.sns), r.status, r.code(), desc, l.status, l.code)
				}
			}
		}},
		{"ingestion lag hides alarms, then shows short ones already over", sim.Options{Hostile: sim.Hostile{IngestLag: 3 * time.Minute}}, func(t *testing.T, h *harness) {
			short := mustStart(t, h.srv, sim.AlarmSpec{})
			long := mustStart(t, h.srv, sim.AlarmSpec{})
			for _, step := range []struct {
				after       time.Duration // since the alarms occurred, at t0
				end         string        // ends this alarm at that moment
				short, long string        // as listed
			}{
				{time.Minute, short, "", ""},
				{3*time.Minute - time.Second, "", "", ""},
				{3 * time.Minute, "", "08:00:00 to 08:01:00", "ongoing from 08:00:00"},
				{5 * time.Minute, long, "08:00:00 to 08:01:00", "ongoing from 08:00:00"},
				{8*time.Minute - time.Second, "", "08:00:00 to 08:01:00", "ongoing from 08:00:00"},
				{8 * time.Minute, "", "08:00:00 to 08:01:00", "08:00:00 to 08:05:00"},
			} {
				h.clk.Set(t0.Add(step.after))
				if step.end != "" {
					if err := h.srv.EndAlarm(step.end, h.clk.Now()); err != nil {
						t.Fatal(err)
					}
				}
				got := listedAs(t, h)
				if got[short] != step.short || got[long] != step.long {
					t.Fatalf("%s after they occurred: short %q, long %q; want %q and %q",
						step.after, got[short], got[long], step.short, step.long)
				}
			}
		}},
		{"an offline device uploads its backlog on reconnect", sim.Options{}, func(t *testing.T, h *harness) {
			sn := dev[0].SN
			before := mustStart(t, h.srv, sim.AlarmSpec{DeviceSN: sn})
			h.clk.Advance(time.Minute)
			if err := h.srv.SetDeviceOffline(sn, true); err != nil {
				t.Fatal(err)
			}
			h.clk.Advance(time.Minute)
			if err := h.srv.EndAlarm(before, h.clk.Now()); err != nil {
				t.Fatal(err)
			}
			during := mustStart(t, h.srv, sim.AlarmSpec{DeviceSN: sn})
			h.clk.Advance(time.Hour)
			if got := listedAs(t, h); got[before] != "ongoing from 08:00:00" || got[during] != "" {
				t.Fatalf("offline: %q and %q listed; want the first as last seen, ongoing, and the second not at all", got[before], got[during])
			}
			if a, _ := h.srv.Alarm(before); !a.RecoveredAt.Equal(t0.Add(2 * time.Minute)) {
				t.Fatalf("ground truth: recovered %s; want the true %s", a.RecoveredAt, t0.Add(2*time.Minute))
			}
			if on := h.srv.Ongoing(); len(on) != 1 || on[0].OriginID != during {
				t.Fatalf("ground truth: ongoing %v; want the alarm started offline", on)
			}
			if err := h.srv.SetDeviceOffline(sn, false); err != nil {
				t.Fatal(err)
			}
			if got := listedAs(t, h); got[before] != "08:00:00 to 08:02:00" || got[during] != "ongoing from 08:02:00" {
				t.Fatalf("back online: %q and %q; want both with their original times", got[before], got[during])
			}
		}},
		{"recovered alarms filtered on recovery time", sim.Options{Hostile: sim.Hostile{FilterOnRecovery: true}}, func(t *testing.T, _ *harness) {
			for _, mode := range []struct {
				on                        bool
				nearOcc, nearRec, ongoing int // recovered near occurrence, near recovery; ongoing near occurrence
			}{{false, 1, 0, 1}, {true, 0, 1, 1}} {
				h := newHarness(t, sim.Options{Hostile: sim.Hostile{FilterOnRecovery: mode.on}})
				h.clk.Advance(3 * time.Hour)
				now := h.clk.Now()
				occ := now.Add(-2 * time.Hour)
				id := mustStart(t, h.srv, sim.AlarmSpec{OccurredAt: occ})
				mustStart(t, h.srv, sim.AlarmSpec{OccurredAt: occ})
				if err := h.srv.EndAlarm(id, now.Add(-time.Minute)); err != nil {
					t.Fatal(err)
				}
				near := func(at time.Time, recovery bool) int {
					n, _ := h.alarms(map[string]any{"isRecovery": recovery,
						"startTime": at.Add(-5 * time.Minute).UnixMilli(), "endTime": at.Add(5 * time.Minute).UnixMilli()})
					return n
				}
				if a, b, c := near(occ, true), near(now, true), near(occ, false); a != mode.nearOcc || b != mode.nearRec || c != mode.ongoing {
					t.Errorf("FilterOnRecovery %t: recovered near occurrence %d, near recovery %d, ongoing near occurrence %d; want %d, %d, %d",
						mode.on, a, b, c, mode.nearOcc, mode.nearRec, mode.ongoing)
				}
			}
		}},
		{"recovered alarms ordered by occurrence, by recovery, or scrambled, changed at runtime", sim.Options{}, func(t *testing.T, h *harness) {
			// Three alarms occur a minute apart and recover in the reverse
			// order: occurrence order and recovery order disagree.
			var ids []string
			for i := range 3 {
				ids = append(ids, mustStart(t, h.srv, sim.AlarmSpec{OccurredAt: h.clk.Now().Add(time.Duration(i-10) * time.Minute)}))
			}
			for i, id := range ids {
				if err := h.srv.EndAlarm(id, h.clk.Now().Add(time.Duration(-1-i)*time.Minute)); err != nil {
					t.Fatal(err)
				}
			}
			listed := func(size int) []string {
				var out []string
				for page := 1; len(out) < len(ids); page++ {
					_, recs := h.alarms(map[string]any{"isRecovery": true, "current": page, "size": size})
					if len(recs) == 0 {
						break
					}
					out = append(out, originIDs(recs)...)
				}
				return out
			}
			want := func(order ...int) string {
				var out []string
				for _, i := range order {
					out = append(out, ids[i])
				}
				return strings.Join(out, ",")
			}
			if got := strings.Join(listed(500), ","); got != want(2, 1, 0) {
				t.Fatalf("by default: %s; want newest occurrence first %s", got, want(2, 1, 0))
			}
			h.srv.SetRecoveredOrder(sim.OrderRecovery)
			if got := strings.Join(listed(500), ","); got != want(0, 1, 2) {
				t.Fatalf("OrderRecovery: %s; want newest recovery first %s", got, want(0, 1, 2))
			}
			h.srv.SetRecoveredOrder(sim.OrderScrambled)
			whole, paged := listed(500), listed(1)
			if strings.Join(whole, ",") != strings.Join(paged, ",") {
				t.Fatalf("OrderScrambled: one page %v, pages of one %v; want the same order on every page", whole, paged)
			}
			all := slices.Clone(ids)
			slices.Sort(all)
			if slices.Sort(paged); !slices.Equal(paged, all) {
				t.Fatalf("OrderScrambled lists %v; want every alarm once: %v", paged, all)
			}
		}},
		{"eventLevels ignored", sim.Options{}, func(t *testing.T, _ *harness) {
			for _, mode := range []struct {
				ignore bool
				want   int
			}{{false, 0}, {true, 1}} {
				h := newHarness(t, sim.Options{Hostile: sim.Hostile{IgnoreLevels: mode.ignore}})
				mustStart(t, h.srv, sim.AlarmSpec{Level: 3})
				if n, _ := h.alarms(map[string]any{"eventLevels": []int{0}}); n != mode.want {
					t.Errorf("IgnoreLevels %t: %d alarms for level 0 (one of level 3 exists); want %d", mode.ignore, n, mode.want)
				}
			}
		}},
		{"padded records make a page of the expected size", sim.Options{Hostile: sim.Hostile{PadRecords: 120_000}}, func(t *testing.T, h *harness) {
			const rows = 50
			for range rows {
				mustStart(t, h.srv, sim.AlarmSpec{})
			}
			r := h.do(sim.EndpointAlarmList, map[string]any{"current": 1, "size": rows, "startTime": 0, "endTime": h.clk.Now().UnixMilli()})
			if lo, hi := rows*120_000, rows*(120_000+2_000); len(r.raw) < lo || len(r.raw) > hi {
				t.Errorf("a page of %d padded records is %d bytes; want %d to %d", rows, len(r.raw), lo, hi)
			}
			if r.header.Get("Content-Length") != strconv.Itoa(len(r.raw)) {
				t.Errorf("Content-Length %s for %d bytes", r.header.Get("Content-Length"), len(r.raw))
			}
			var payloads []string
			for _, it := range r.body["data"].(map[string]any)["dataList"].([]any) {
				payloads = append(payloads, str(it.(map[string]any)["payload"]))
			}
			if len(payloads) != rows || len(payloads[0]) != 120_000 || payloads[0] != payloads[rows-1] {
				t.Errorf("%d records; want %d, each with the same 120000-byte payload", len(payloads), rows)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, newHarness(t, tc.opts)) })
	}
}

// listedAs returns, by originId, how getAlarmList lists each alarm:
// "ongoing from" its occurrence, or its occurrence "to" its recovery, as
// clock times of the answer.
func listedAs(t *testing.T, h *harness) map[string]string {
	t.Helper()
	out := map[string]string{}
	_, ongoing := h.alarms(nil)
	for _, r := range ongoing {
		out[str(r["originId"])] = "ongoing from " + clockTime(t, r["occurrenceTime"])
	}
	_, recovered := h.alarms(map[string]any{"isRecovery": true})
	for _, r := range recovered {
		out[str(r["originId"])] = clockTime(t, r["occurrenceTime"]) + " to " + clockTime(t, r["recoveryTime"])
	}
	return out
}

// clockTime writes an epoch ms field as HH:mm:ss UTC.
func clockTime(t *testing.T, v any) string {
	t.Helper()
	ms, err := strconv.ParseInt(str(v), 10, 64)
	if err != nil {
		t.Fatalf("%v is not epoch ms: %v", v, err)
	}
	return time.UnixMilli(ms).UTC().Format(time.TimeOnly)
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
