package opendata_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

func TestEveryEndpointAnswersTyped(t *testing.T) {
	h := newHarness(t, sim.Options{Seed: 7}, nil)
	ctx := context.Background()
	fleet := h.sim.Fleet()
	station := fleet.Stations[0]
	owned := func(shared bool) bool { return !shared }

	cases := []struct {
		name     string
		endpoint string
		check    func(t *testing.T)
	}{
		{"login", sim.EndpointLogin, func(t *testing.T) {
			res, err := h.client.Login(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.TenantID != fleet.Tenant.ID || res.Tenant.ID != fleet.Tenant.ID || res.Tenant.Name != fleet.Tenant.Name {
				t.Fatalf("tenant = %q/%q/%q, want %q %q", res.TenantID, res.Tenant.ID, res.Tenant.Name, fleet.Tenant.ID, fleet.Tenant.Name)
			}
			if want := h.clk.Now().Add(4 * time.Hour); !res.ExpiresAt.Equal(want) {
				t.Fatalf("ExpiresAt = %s, want %s (expiresIn 14400 s is not under 4 h, so 4 h)", res.ExpiresAt, want)
			}
			if res.Tenant.CreateTime.IsZero() {
				t.Fatal("tenantInfo.createTime not read")
			}
			if !strings.Contains(string(res.Raw), `"[redacted]"`) {
				t.Fatalf("Raw does not redact the token: %s", res.Raw)
			}
			mustNotContain(t, "LoginResult.Raw", string(res.Raw), h.wire.issued()...)
		}},
		{"stations", sim.EndpointStationList, func(t *testing.T) {
			got, err := h.client.TenantStations(ctx, opendata.StationListQuery{FirmwareVersion: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(fleet.Stations) {
				t.Fatalf("%d stations, want %d", len(got), len(fleet.Stations))
			}
			for i, s := range got {
				want := fleet.Stations[i]
				if s.ID != want.ID || s.Name != want.Name || s.SN != want.SN || s.IsShared != want.Shared {
					t.Fatalf("station %d = %+v, want %+v", i, s, want)
				}
				if s.Code == "" || len(s.State) == 0 || len(s.Raw) == 0 {
					t.Fatalf("station %d lacks code (sn fallback), state or raw: %+v", i, s)
				}
			}
		}},
		{"systems", sim.EndpointSystemList, func(t *testing.T) {
			for _, tc := range []struct {
				scope opendata.AssetScope
				keep  func(shared bool) bool
			}{
				{opendata.ScopeDefault, owned},
				{opendata.ScopeOwned, owned},
				{opendata.ScopeShared, func(shared bool) bool { return shared }},
				{opendata.ScopeAll, func(bool) bool { return true }},
			} {
				got, err := h.client.TenantSystems(ctx, opendata.SystemListQuery{AssetScope: tc.scope})
				if err != nil {
					t.Fatal(err)
				}
				var want []string
				for _, s := range fleet.Systems {
					if tc.keep(s.Shared) {
						want = append(want, s.ID)
					}
				}
				if len(got) != len(want) {
					t.Fatalf("scope %d: %d systems, want %d", tc.scope, len(got), len(want))
				}
				for _, s := range got {
					if !contains(want, s.ID) || s.StationID == "" || s.State == "" {
						t.Fatalf("scope %d: unexpected system %+v", tc.scope, s)
					}
				}
			}
		}},
		{"devices", sim.EndpointDeviceList, func(t *testing.T) {
			got, err := h.client.TenantDevices(ctx, opendata.DeviceListQuery{DeviceTypes: []string{"Inverter"}, AssetScope: opendata.ScopeAll})
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			for _, d := range fleet.Devices {
				if d.TemplateCode == "Inverter" {
					want++
				}
			}
			if len(got) != want || want == 0 {
				t.Fatalf("%d inverters, want %d", len(got), want)
			}
			for _, d := range got {
				if d.TemplateCode != "Inverter" || d.NodeID == "" || d.SN == "" || len(d.Attributes) == 0 {
					t.Fatalf("device %+v", d)
				}
			}
		}},
		{"station devices", sim.EndpointStationDevices, func(t *testing.T) {
			got, err := h.client.StationDevices(ctx, opendata.StationDevicesQuery{StationID: station.ID})
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, d := range fleet.Devices {
				if d.StationID == station.ID {
					want = append(want, d.SN)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d devices, want %d", len(got), len(want))
			}
			for _, d := range got {
				if !contains(want, d.SN) || d.StationID != station.ID || d.TemplateType == "" {
					t.Fatalf("device %+v", d)
				}
			}
		}},
		{"station detail", sim.EndpointStationDetail, func(t *testing.T) {
			got, err := h.client.StationDetail(ctx, station.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != station.ID || got.Name != station.Name || got.SN != station.SN || len(got.Attributes) == 0 {
				t.Fatalf("detail %+v, want station %+v", got, station)
			}
			geo := false
			for _, e := range got.ExtraInfo {
				geo = geo || (e.Key == "geoInfo" && strings.Contains(e.Value, "latitude"))
			}
			if !geo {
				t.Fatalf("no geoInfo in %+v", got.ExtraInfo)
			}
		}},
		{"alarms", sim.EndpointAlarmList, func(t *testing.T) {
			dev := fleet.Devices[0]
			var ids []string
			for level := range 3 {
				id, err := h.sim.StartAlarm(sim.AlarmSpec{DeviceSN: dev.SN, Level: level})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			h.clk.Advance(time.Minute)
			if err := h.sim.EndAlarm(ids[2], time.Time{}); err != nil {
				t.Fatal(err)
			}
			q := opendata.AlarmQuery{Start: h.clk.Now().Add(-time.Hour), DeviceSNs: []string{dev.SN}}
			cur, err := h.client.AlarmPage(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if cur.Total != 2 || len(cur.Alarms) != 2 || !cur.Complete {
				t.Fatalf("current: total %d, %d alarms, complete %v; want 2, 2, true", cur.Total, len(cur.Alarms), cur.Complete)
			}
			q.Levels = []int{0}
			urgent, err := h.client.AlarmPage(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(urgent.Alarms) != 1 || urgent.Alarms[0].OriginID != ids[0] || urgent.Alarms[0].Level != 0 {
				t.Fatalf("level 0 filter: %+v", urgent.Alarms)
			}
			q.Levels, q.Recovered = nil, true
			hist, err := h.client.Alarms(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(hist.Alarms) != 1 || hist.Alarms[0].OriginID != ids[2] || hist.Alarms[0].Status != 0 {
				t.Fatalf("recovered: %+v", hist.Alarms)
			}
			want, _ := h.sim.Alarm(ids[2])
			if got := hist.Alarms[0]; !got.RecoveredAt.Equal(want.RecoveredAt) || !got.OccurredAt.Equal(want.OccurredAt) {
				t.Fatalf("times %s/%s, want %s/%s", got.OccurredAt, got.RecoveredAt, want.OccurredAt, want.RecoveredAt)
			}
			q.StationIDs, q.SystemIDs = []string{dev.StationID}, []string{dev.SystemID}
			q.EventCodes, q.DeviceTemplateCodes = []string{want.EventCode}, []string{dev.TemplateCode}
			filtered, err := h.client.AlarmPage(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(filtered.Alarms) != 1 {
				t.Fatalf("every filter set: %d alarms, want 1", len(filtered.Alarms))
			}
		}},
		{"real-time", sim.EndpointRealTime, func(t *testing.T) {
			nodes := nodeIDs(fleet)[:5]
			got, err := h.client.DeviceRealTime(ctx, nodes)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(nodes) {
				t.Fatalf("%d items, want %d", len(got), len(nodes))
			}
			for _, it := range got {
				if !contains(nodes, it.NodeID) || it.CollectedAt.IsZero() || len(it.Metrics) == 0 {
					t.Fatalf("item %+v", it)
				}
			}
		}},
		{"system history", sim.EndpointSystemHistory, func(t *testing.T) {
			ids := []string{fleet.Systems[0].ID, fleet.Systems[1].ID}
			got, err := h.client.SystemHistory(ctx, opendata.HistoryQuery{
				IDs: ids, Dimension: opendata.DimensionDay, StartDate: "2026-11-01", EndDate: "2026-11-07", IdentityCode: "care",
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 {
				t.Fatalf("%d items, want 2", len(got))
			}
			for _, it := range got {
				if !contains(ids, it.ThingID) || it.State == "" || len(it.Points) != 7 || it.Points[0].Date != "2026-11-01" {
					t.Fatalf("item %+v", it)
				}
			}
		}},
		{"station history", sim.EndpointStationHistory, func(t *testing.T) {
			got, err := h.client.StationHistory(ctx, opendata.HistoryQuery{
				IDs: []string{station.ID}, Dimension: opendata.DimensionYear, StartDate: "2024-01-01", EndDate: "2026-01-01",
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].ThingID != station.ID || len(got[0].States) == 0 || len(got[0].Points) != 3 {
				t.Fatalf("items %+v", got)
			}
			if d := got[0].Points[2].Date; d != "2026" {
				t.Fatalf("last year = %q, want 2026", d)
			}
		}},
		{"device history", sim.EndpointDeviceHistory, func(t *testing.T) {
			node := nodeIDs(fleet)[0]
			got, err := h.client.DeviceHistory(ctx, opendata.HistoryQuery{IDs: []string{node}, Dimension: opendata.DimensionTotal})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].NodeID != node || got[0].SN == "" || len(got[0].Points) != 1 || got[0].Points[0].Date != "" {
				t.Fatalf("items %+v", got)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := h.requests(tc.endpoint)
			tc.check(t)
			if h.requests(tc.endpoint) == before {
				t.Fatalf("no request reached %s", tc.endpoint)
			}
		})
	}
	if st := h.sim.Stats(); st.Violations != 0 {
		t.Fatalf("simulator saw %d violations", st.Violations)
	}
	for name, e := range h.sim.Stats().Endpoints {
		if e.Errors != 0 {
			t.Fatalf("%s answered %d errors: a request did not follow the spec", name, e.Errors)
		}
	}
}

func TestDeviceListsAcceptBothShapes(t *testing.T) {
	for _, inDataList := range []bool{false, true} {
		name := "array in data"
		if inDataList {
			name = "data.dataList"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, sim.Options{Seed: 3, DeviceListInDataList: inDataList}, nil)
			fleet := h.sim.Fleet()
			all, err := h.client.TenantDevices(context.Background(), opendata.DeviceListQuery{AssetScope: opendata.ScopeAll})
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != len(fleet.Devices) {
				t.Fatalf("tenant devices: %d, want %d", len(all), len(fleet.Devices))
			}
			st, err := h.client.StationDevices(context.Background(), opendata.StationDevicesQuery{StationID: fleet.Stations[1].ID})
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			for _, d := range fleet.Devices {
				if d.StationID == fleet.Stations[1].ID {
					want++
				}
			}
			if len(st) != want || want == 0 {
				t.Fatalf("station devices: %d, want %d", len(st), want)
			}
		})
	}
}

func TestIDsAndTimestampsAsStringsOrNumbers(t *testing.T) {
	numeric := regexp.MustCompile(`"originId":[0-9]`)
	for _, tc := range []struct {
		name                   string
		shape                  sim.Shape
		wantString, wantNumber bool // forms of originId and occurrenceTime to see in Raw
	}{
		{"strings", sim.ShapeString, true, false},
		{"numbers", sim.ShapeNumber, false, true},
		{"mixed", sim.ShapeMixed, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, sim.Options{Seed: 11, IDs: tc.shape, Timestamps: tc.shape}, nil)
			ctx := context.Background()
			fleet := h.sim.Fleet()
			ids := h.sim.Storm(20)
			h.clk.Advance(90 * time.Second)
			for _, id := range ids[:10] {
				if err := h.sim.EndAlarm(id, time.Time{}); err != nil {
					t.Fatal(err)
				}
			}
			sawString, sawNumber := false, false
			for _, recovered := range []bool{false, true} {
				page, err := h.client.Alarms(ctx, opendata.AlarmQuery{Start: epoch.Add(-time.Minute), Recovered: recovered, Size: 7})
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Alarms) != 10 || !page.Complete || page.Pages != 2 {
					t.Fatalf("recovered=%v: %d alarms in %d pages, complete %v; want 10 in 2, true", recovered, len(page.Alarms), page.Pages, page.Complete)
				}
				for _, a := range page.Alarms {
					want, ok := h.sim.Alarm(a.OriginID)
					if !ok {
						t.Fatalf("unknown originId %q", a.OriginID)
					}
					if a.DeviceID != want.DeviceID || a.StationID != want.StationID || a.SystemID != want.SystemID || a.TenantID != want.TenantID {
						t.Fatalf("ids %q %q %q %q, want %q %q %q %q", a.DeviceID, a.StationID, a.SystemID, a.TenantID,
							want.DeviceID, want.StationID, want.SystemID, want.TenantID)
					}
					if !a.OccurredAt.Equal(want.OccurredAt) || !a.RecoveredAt.Equal(want.RecoveredAt) {
						t.Fatalf("times %s %s, want %s %s", a.OccurredAt, a.RecoveredAt, want.OccurredAt, want.RecoveredAt)
					}
					if numeric.Match(a.Raw) {
						sawNumber = true
					} else {
						sawString = true
					}
				}
			}
			if sawString != tc.wantString || sawNumber != tc.wantNumber {
				t.Fatalf("ids seen as strings %v, as numbers %v; want %v, %v", sawString, sawNumber, tc.wantString, tc.wantNumber)
			}
			devs, err := h.client.TenantDevices(ctx, opendata.DeviceListQuery{AssetScope: opendata.ScopeAll})
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range devs {
				if d.ID != fleet.Devices[i].ID || d.StationID != fleet.Devices[i].StationID {
					t.Fatalf("device %d ids %q %q, want %q %q", i, d.ID, d.StationID, fleet.Devices[i].ID, fleet.Devices[i].StationID)
				}
			}
		})
	}
}

func TestAlarmPagingMergesAndReportsCompleteness(t *testing.T) {
	h := newHarness(t, sim.Options{Seed: 5, Stations: 6}, nil)
	ctx := context.Background()
	h.sim.Storm(1200)
	q := opendata.AlarmQuery{Start: epoch.Add(-time.Hour)}

	all, err := h.client.Alarms(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if all.Total != 1200 || len(all.Alarms) != 1200 || all.Pages != 3 || !all.Complete {
		t.Fatalf("all pages: total %d, %d alarms, %d pages, complete %v; want 1200, 1200, 3, true",
			all.Total, len(all.Alarms), all.Pages, all.Complete)
	}

	before := h.requests(sim.EndpointAlarmList)
	q.Size, q.Page = 1000, 2
	big, err := h.client.AlarmPage(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(big.Alarms) != 200 || big.Alarms[0].OriginID != all.Alarms[1000].OriginID || big.Complete {
		t.Fatalf("page 2 of size 1000: %d alarms, first %s (want 200 from %s), complete %v",
			len(big.Alarms), big.Alarms[0].OriginID, all.Alarms[1000].OriginID, big.Complete)
	}
	if n := h.requests(sim.EndpointAlarmList) - before; n != 1 {
		t.Fatalf("page 2 of size 1000 took %d upstream pages, want 1: page 3 of 500 holds the last 200", n)
	}

	if err := h.sim.InjectFault(sim.EndpointAlarmList, sim.Fault{Kind: sim.FaultDropAlarm}); err != nil {
		t.Fatal(err)
	}
	glitch, err := h.client.Alarms(ctx, opendata.AlarmQuery{Start: epoch.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if glitch.Complete || len(glitch.Alarms) != 1199 {
		t.Fatalf("a page missing a record: %d alarms, complete %v; want 1199, false", len(glitch.Alarms), glitch.Complete)
	}
}

func TestRequestsOverTheLimitsAreRefusedBeforeSending(t *testing.T) {
	h := newHarness(t, sim.Options{Seed: 1}, nil)
	ctx := context.Background()
	start := epoch.Add(-time.Hour)
	cases := []struct {
		name string
		call func() error
	}{
		{"negative page size", func() error {
			_, err := h.client.AlarmPage(ctx, opendata.AlarmQuery{Start: start, Size: -1})
			return err
		}},
		{"no start", func() error { _, err := h.client.AlarmPage(ctx, opendata.AlarmQuery{}); return err }},
		{"window ends before it starts", func() error {
			_, err := h.client.AlarmPage(ctx, opendata.AlarmQuery{Start: start, End: start.Add(-time.Second)})
			return err
		}},
		{"level 4", func() error {
			_, err := h.client.AlarmPage(ctx, opendata.AlarmQuery{Start: start, Levels: []int{4}})
			return err
		}},
		{"no node ids", func() error { _, err := h.client.DeviceRealTime(ctx, nil); return err }},
		{"no dimension", func() error {
			_, err := h.client.SystemHistory(ctx, opendata.HistoryQuery{IDs: []string{"1"}})
			return err
		}},
		{"bad date", func() error {
			_, err := h.client.StationHistory(ctx, opendata.HistoryQuery{IDs: []string{"1"}, Dimension: "day", StartDate: "21.11.2026", EndDate: "2026-11-30"})
			return err
		}},
		{"end before start", func() error {
			_, err := h.client.DeviceHistory(ctx, opendata.HistoryQuery{IDs: []string{"1"}, Dimension: "day", StartDate: "2026-11-30", EndDate: "2026-11-01"})
			return err
		}},
		{"identity code on device history", func() error {
			_, err := h.client.DeviceHistory(ctx, opendata.HistoryQuery{IDs: []string{"1"}, Dimension: "day", IdentityCode: "care"})
			return err
		}},
		{"no station id", func() error { _, err := h.client.StationDetail(ctx, " "); return err }},
		{"unknown asset scope", func() error {
			_, err := h.client.TenantSystems(ctx, opendata.SystemListQuery{AssetScope: 9})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var e *opendata.Error
			if !errors.As(err, &e) || e.Kind != opendata.KindBadRequest || e.HTTPStatus != 0 {
				t.Fatalf("err = %v, want a bad request refused before sending", err)
			}
		})
	}
	if n := h.sim.Stats().Requests; n != 0 {
		t.Fatalf("%d requests reached the simulator, want 0", n)
	}
}
