package opendata

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

func TestAlarmRecordsDecodeTolerantly(t *testing.T) {
	shanghai := time.FixedZone("CST", 8*3600)
	occurred := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		record    string
		loc       *time.Location
		ok        bool
		id        string
		deviceID  string
		status    int
		level     int
		occurred  time.Time
		recovered time.Time
	}{
		{name: "strings", ok: true, loc: time.UTC,
			record: `{"originId":"1001","deviceId":"77","status":1,"eventLevel":0,"occurrenceTime":"1795248000000"}`,
			id:     "1001", deviceID: "77", status: 1, level: 0, occurred: occurred},
		{name: "numbers", ok: true, loc: time.UTC,
			record: `{"originId":1001,"deviceId":9223372036854775807,"status":"0","eventLevel":"2","occurrenceTime":1795248000000,"recoveryTime":1795248060000}`,
			id:     "1001", deviceID: "9223372036854775807", status: 0, level: 2, occurred: occurred, recovered: occurred.Add(time.Minute)},
		{name: "text times read in the upstream zone", ok: true, loc: shanghai,
			record: `{"originId":"a","status":-1,"eventLevel":3,"occurrenceTime":"","occurrenceTimeStr":"2026-11-21 16:00:00","recoveryTime":null,"recoveryTimeStr":"2026-11-21 16:01:00"}`,
			id:     "a", status: -1, level: 3, occurred: occurred, recovered: occurred.Add(time.Minute)},
		{name: "epoch ms wins over text", ok: true, loc: shanghai,
			record: `{"originId":"a","status":1,"eventLevel":1,"occurrenceTime":1795248000000,"occurrenceTimeStr":"1999-01-01 00:00:00"}`,
			id:     "a", status: 1, level: 1, occurred: occurred},
		{name: "no level", ok: true, loc: time.UTC, record: `{"originId":"a","status":1}`, id: "a", status: 1, level: -1},
		{name: "unknown fields and odd types", ok: true, loc: time.UTC,
			record: `{"originId":"a","status":1.0,"eventLevel":0,"deviceId":{"x":1},"occurrenceTime":"soon","extra":[1,2]}`,
			id:     "a", status: 1, level: 0},
		{name: "no originId", loc: time.UTC, record: `{"status":1}`},
		{name: "empty originId", loc: time.UTC, record: `{"originId":"","status":1}`},
		{name: "no status", loc: time.UTC, record: `{"originId":"a"}`},
		{name: "status 2", loc: time.UTC, record: `{"originId":"a","status":2}`},
		{name: "status text", loc: time.UTC, record: `{"originId":"a","status":"ongoing"}`},
		{name: "not an object", loc: time.UTC, record: `["originId","a"]`},
		{name: "originId at the length limit", ok: true, loc: time.UTC,
			record: `{"originId":"` + strings.Repeat("x", MaxOriginIDLen) + `","status":1}`,
			id:     strings.Repeat("x", MaxOriginIDLen), status: 1, level: -1},
		{name: "originId over the length limit", loc: time.UTC,
			record: `{"originId":"` + strings.Repeat("x", MaxOriginIDLen+1) + `","status":1}`},
		{name: "originId too long for a bbolt key", loc: time.UTC,
			record: `{"originId":"` + strings.Repeat("x", 40<<10) + `","status":1}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, ok := decodeAlarm(json.RawMessage(tc.record), tc.loc)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if a.OriginID != tc.id || a.DeviceID != tc.deviceID || a.Status != tc.status || a.Level != tc.level {
				t.Fatalf("got id %q device %q status %d level %d, want %q %q %d %d",
					a.OriginID, a.DeviceID, a.Status, a.Level, tc.id, tc.deviceID, tc.status, tc.level)
			}
			if !a.OccurredAt.Equal(tc.occurred) || !a.RecoveredAt.Equal(tc.recovered) {
				t.Fatalf("times %s / %s, want %s / %s", a.OccurredAt, a.RecoveredAt, tc.occurred, tc.recovered)
			}
			if string(a.Raw) != tc.record {
				t.Fatalf("Raw = %s, want the record as received", a.Raw)
			}
		})
	}
}

func TestMetricValuesNumbersOrText(t *testing.T) {
	nums, text := metricsOf(json.RawMessage(`{"p":12.5,"u":"230.1","gate":"open","duration":"3h","on":true,"nan":"NaN","gone":null,"obj":{"a":1}}`))
	wantNums := map[string]float64{"p": 12.5, "u": 230.1}
	wantText := map[string]string{"gate": "open", "duration": "3h", "on": "true", "nan": "NaN", "obj": `{"a":1}`}
	if len(nums) != len(wantNums) || len(text) != len(wantText) {
		t.Fatalf("nums %v text %v, want %v %v", nums, text, wantNums, wantText)
	}
	for k, v := range wantNums {
		if nums[k] != v {
			t.Fatalf("nums[%s] = %v, want %v", k, nums[k], v)
		}
	}
	for k, v := range wantText {
		if text[k] != v {
			t.Fatalf("text[%s] = %q, want %q", k, text[k], v)
		}
	}
}

func TestListShapes(t *testing.T) {
	cases := []struct {
		name string
		data string
		n    int
		ok   bool
	}{
		{"array in data", `[{"id":1},{"id":"2"}]`, 2, true},
		{"data.dataList", `{"dataList":[{"id":1}]}`, 1, true},
		{"empty array", `[]`, 0, true},
		{"null data", `null`, 0, true},
		{"null dataList", `{"dataList":null}`, 0, true},
		{"no dataList", `{"total":0}`, 0, true},
		{"dataList not a list", `{"dataList":{"id":1}}`, 0, false},
		{"data a string", `"x"`, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			items, err := listItems(json.RawMessage(tc.data))
			if (err == nil) != tc.ok || len(items) != tc.n {
				t.Fatalf("listItems = %d items, %v; want %d, ok %v", len(items), err, tc.n, tc.ok)
			}
		})
	}
}

func TestHistoryPlanSplitsDates(t *testing.T) {
	cases := []struct {
		name       string
		dim        Dimension
		start, end string
		want       []dateRange
	}{
		{"31 days is one call", DimensionDay, "2026-01-01", "2026-01-31", []dateRange{{"2026-01-01", "2026-01-31"}}},
		{"32 days are two", DimensionDay, "2026-01-01", "2026-02-01", []dateRange{{"2026-01-01", "2026-01-31"}, {"2026-02-01", "2026-02-01"}}},
		{"90 days are three", DimensionDay, "2026-08-01", "2026-10-29",
			[]dateRange{{"2026-08-01", "2026-08-31"}, {"2026-09-01", "2026-10-01"}, {"2026-10-02", "2026-10-29"}}},
		{"12 months is one call", DimensionMonth, "2026-01-15", "2026-12-31", []dateRange{{"2026-01-15", "2026-12-31"}}},
		{"13 months are two", DimensionMonth, "2025-12-10", "2026-12-01", []dateRange{{"2025-12-10", "2026-11-30"}, {"2026-12-01", "2026-12-01"}}},
		{"years are never split", DimensionYear, "2000-01-01", "2026-01-01", []dateRange{{"2000-01-01", "2026-01-01"}}},
		{"one date leaves the range to the upstream", DimensionDay, "2026-01-01", "", []dateRange{{"2026-01-01", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := planHistory(endpointSystemHistory, HistoryQuery{IDs: []string{"1"}, Dimension: tc.dim, StartDate: tc.start, EndDate: tc.end})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("ranges %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("ranges %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// FuzzDecodeAlarmPage feeds arbitrary answer bodies to the alarm-page
// decoder: it must never panic, and every alarm it returns must make an
// event that marshals.
func FuzzDecodeAlarmPage(f *testing.F) {
	for _, body := range []string{
		`{"code":"00000","description":"success","data":{"current":1,"size":500,"total":1,"dataList":[{"originId":"1795248000000001","kafkaUuid":"k","tenantId":"1","tenantName":"T","deviceId":2,"deviceSn":"INV1","deviceName":"Inverter 1","deviceTemplateType":"PV","deviceTemplateCode":"Inverter","systemId":"3","systemCode":"S","systemName":"Sys","stationId":4,"stationCode":"ST","stationName":"Sunridge","occurrenceTime":"1795248000000","occurrenceTimeStr":"2026-11-21 08:00:00","recoveryTime":null,"recoveryTimeStr":null,"durationTp":null,"status":1,"eventCode":"E1","eventDesc":"d","eventType":"t","eventLevel":0,"eventCategoryCode":"c","eventCategoryDescription":"","eventCategoryInfluence":"","eventTagNameStr":"","eventTagCodeStr":"","payload":"{}","note":""}]}}`,
		`{"code":"00000","data":{"current":"2","size":"20","total":"3","dataList":[{"originId":9,"status":"0","eventLevel":"3","occurrenceTime":1795248000000,"recoveryTime":"1795248060000"},{"originId":"10","status":-1,"occurrenceTimeStr":"2026-11-21 08:00:00","recoveryTimeStr":"2026-11-21 08:01:00"},{"status":1}]}}`,
		`{"code":"00000","data":{"total":0,"dataList":[]}}`,
		`{"code":"00000","data":{"total":0,"dataList":null}}`,
		`{"code":"00000","data":null}`,
		`{"code":"A0501","description":"too many requests"}`,
		`{"code":"00000","data":{"total":1,"dataList":{"originId":"1"}}}`,
		`{"code":"00000","data":{"total":1e400,"dataList":[]}}`,
		`{"code":"00000","data":{"total":1,"dataList":[{"originId":"a","status":1,"occurrenceTime":"99999999999999999999","recoveryTime":-5,"eventLevel":1e9}]}}`,
		`{"code":"00000","data":{"total":1,"dataList":[{"originId":"a","status":1,"occurrenceTime":"NaN","occurrenceTimeStr":"9999-12-31 23:59:59"}]}}`,
		`{"code":"00000","data":{"total":1,"dataList":[{"originId":"\u00e9\ud83d\ude00","status":1,"originId":"dup"}]}}`,
		`{"code":"00000","description":"success","data":{"current":1,"size":500,"total":1,"dataList":[{"originId":"1","status":1`,
		`<html>502 Bad Gateway</html>`,
		``,
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		env, err := decodeEnvelope(body)
		if err != nil || env.code != codeSuccess {
			return
		}
		page, err := decodeAlarmData(env.data, time.FixedZone("CST", 8*3600))
		if err != nil {
			return
		}
		if page.Total < 0 {
			t.Fatalf("total %d", page.Total)
		}
		for _, a := range page.Alarms {
			if a.OriginID == "" {
				t.Fatal("alarm without originId")
			}
			if _, ok := event.ForStatus(a.Status); !ok {
				t.Fatalf("alarm with status %d", a.Status)
			}
			if !json.Valid(a.Raw) || !bytes.Contains(body, a.Raw) {
				t.Fatalf("Raw %q is not the record as received", a.Raw)
			}
			e := event.New(a, event.End, time.Unix(0, 0), false)
			if _, err := e.Marshal(); err != nil {
				t.Fatalf("event of a decoded alarm does not marshal: %v", err)
			}
		}
	})
}

// TestUnusableRecordsDoNotMakeAnAnswerIncomplete checks that a page holding
// records the client cannot use, or the same originId twice, is still the
// whole set when its rows match the total.
func TestUnusableRecordsDoNotMakeAnAnswerIncomplete(t *testing.T) {
	long := strings.Repeat("y", 40<<10)
	cases := []struct {
		name       string
		pages      []string // each a data object
		rows       int
		alarms     []string
		skipped    int
		skippedIDs []string
		complete   bool
	}{
		{name: "clean", pages: []string{`{"total":2,"dataList":[{"originId":"a","status":1},{"originId":"b","status":1}]}`},
			rows: 2, alarms: []string{"a", "b"}, complete: true},
		{name: "no originId", pages: []string{`{"total":2,"dataList":[{"originId":"a","status":1},{"status":1}]}`},
			rows: 2, alarms: []string{"a"}, skipped: 1, complete: true},
		{name: "status outside 1, 0, -1", pages: []string{`{"total":2,"dataList":[{"originId":"a","status":1},{"originId":"b","status":7}]}`},
			rows: 2, alarms: []string{"a"}, skipped: 1, skippedIDs: []string{"b"}, complete: true},
		{name: "originId too long", pages: []string{`{"total":2,"dataList":[{"originId":"a","status":1},{"originId":"` + long + `","status":1}]}`},
			rows: 2, alarms: []string{"a"}, skipped: 1, complete: true},
		{name: "duplicate rows", pages: []string{`{"total":3,"dataList":[{"originId":"a","status":1},{"originId":"b","status":1},{"originId":"a","status":1}]}`},
			rows: 3, alarms: []string{"a", "b"}, complete: true},
		{name: "duplicate across pages", pages: []string{
			`{"total":3,"dataList":[{"originId":"a","status":1},{"originId":"b","status":1}]}`,
			`{"total":3,"dataList":[{"originId":"b","status":1}]}`},
			rows: 3, alarms: []string{"a", "b"}, complete: true},
		{name: "a row missing", pages: []string{`{"total":3,"dataList":[{"originId":"a","status":1},{"status":1}]}`},
			rows: 2, alarms: []string{"a"}, skipped: 1, complete: false},
		{name: "total shifted", pages: []string{
			`{"total":2,"dataList":[{"originId":"a","status":1}]}`,
			`{"total":3,"dataList":[{"originId":"b","status":1},{"originId":"c","status":1}]}`},
			rows: 3, alarms: []string{"a", "b", "c"}, complete: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newAlarmMerge(1, maxPageSize, true)
			for _, data := range tc.pages {
				p, err := decodeAlarmData(json.RawMessage(data), time.UTC)
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				m.add(p)
			}
			got := m.result()
			var ids []string
			for _, a := range got.Alarms {
				ids = append(ids, a.OriginID)
			}
			if got.Rows != tc.rows || !slices.Equal(ids, tc.alarms) || got.Skipped != tc.skipped ||
				!slices.Equal(got.SkippedIDs, tc.skippedIDs) || got.Complete != tc.complete {
				t.Fatalf("rows %d alarms %v skipped %d %v complete %t; want %d %v %d %v %t",
					got.Rows, ids, got.Skipped, got.SkippedIDs, got.Complete,
					tc.rows, tc.alarms, tc.skipped, tc.skippedIDs, tc.complete)
			}
		})
	}
}
