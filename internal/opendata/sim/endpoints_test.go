package sim_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/opendata/sim"
)

func requireKeys(t *testing.T, what string, rec map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := rec[k]; !ok {
			t.Errorf("%s: field %q missing in %v", what, k, rec)
		}
	}
}

func TestLoginReturnsTheTokenInTheHeaderAndTheBody(t *testing.T) {
	h := newHarness(t, sim.Options{})
	id, secret := h.srv.Credentials()
	h.token = ""
	r := h.do(sim.EndpointLogin, map[string]any{"appId": id, "appSecret": secret})
	data := r.body["data"].(map[string]any)
	tok := r.get("TOKEN")
	if tok == "" || tok != data["accessToken"] {
		t.Fatalf("TOKEN header %q, accessToken %v", tok, data["accessToken"])
	}
	if _, ok := data["expiresIn"].(string); !ok {
		t.Errorf("expiresIn %#v is not a string", data["expiresIn"])
	}
	tenant := h.srv.Fleet().Tenant
	if data["scope"] != "tenantId:"+tenant.ID {
		t.Errorf("scope = %v, want tenantId:%s", data["scope"], tenant.ID)
	}
	info := data["tenantInfo"].(map[string]any)
	requireKeys(t, "tenantInfo", info, "id", "name", "enable", "activate", "customerCode", "creatorId",
		"createTime", "updateTime", "fromSupport", "tenantManager")
	if _, err := time.Parse("2006-01-02 15:04:05", info["createTime"].(string)); err != nil {
		t.Errorf("createTime: %v", err)
	}
	if got := h.srv.Stats().Logins; got != 2 {
		t.Errorf("Logins = %d, want 2 (harness and this test)", got)
	}
}

func TestLoginFailuresCarryErrorMsgAndErrorKeyAndNoSecret(t *testing.T) {
	tests := []struct {
		name     string
		body     any
		wantCode string
		wantMsg  string
	}{
		{"wrong secret", map[string]any{"appId": "demo-app", "appSecret": "hunter2"}, sim.CodeThirdParty, "authentication failed"},
		{"wrong app", map[string]any{"appId": "other", "appSecret": "demo-secret"}, sim.CodeThirdParty, "authentication failed"},
		{"no credentials", map[string]any{}, sim.CodeThirdParty, "authentication failed"},
		{"bad grant type", map[string]any{"grantType": "password", "appId": "demo-app", "appSecret": "demo-secret"}, sim.CodeBadParameter, ""},
		{"not an object", []byte(`[1]`), sim.CodeBadParameter, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, sim.Options{})
			h.token = ""
			r := h.do(sim.EndpointLogin, tt.body)
			if r.status != http.StatusOK || r.code() != tt.wantCode {
				t.Fatalf("status %d code %q, want 200 %q: %s", r.status, r.code(), tt.wantCode, r.raw)
			}
			if r.body["errorKey"] != "be_ErrorCode_"+tt.wantCode {
				t.Errorf("errorKey = %v", r.body["errorKey"])
			}
			if msg, _ := r.body["errorMsg"].(string); msg == "" || tt.wantMsg != "" && msg != tt.wantMsg {
				t.Errorf("errorMsg = %q, want %q", msg, tt.wantMsg)
			}
			if r.get("TOKEN") != "" || r.body["data"] != nil {
				t.Errorf("a failed login issued a token: %s", r.raw)
			}
			for _, secret := range []string{"hunter2", "demo-secret"} {
				if strings.Contains(string(r.raw), secret) {
					t.Errorf("answer contains the secret %q", secret)
				}
			}
			if got := h.srv.Stats().LoginFailures; got != 1 {
				t.Errorf("LoginFailures = %d, want 1", got)
			}
		})
	}
}

func TestTokensExpireFourHoursAfterLogin(t *testing.T) {
	tests := []struct {
		name    string
		auth    func(tok string) string
		advance time.Duration
		expire  bool
		want    string
	}{
		{"raw token", func(tok string) string { return tok }, 0, false, sim.CodeSuccess},
		{"bearer token", func(tok string) string { return "Bearer " + tok }, 0, false, sim.CodeSuccess},
		{"lower-case bearer", func(tok string) string { return "bearer " + tok }, 0, false, sim.CodeSuccess},
		{"missing", func(string) string { return "" }, 0, false, sim.CodeTokenInvalid},
		{"unknown", func(string) string { return "not-a-token" }, 0, false, sim.CodeTokenInvalid},
		{"just before expiry", func(tok string) string { return tok }, 4*time.Hour - time.Millisecond, false, sim.CodeSuccess},
		{"at expiry", func(tok string) string { return tok }, 4 * time.Hour, false, sim.CodeTokenExpired},
		{"expired by the test", func(tok string) string { return tok }, 0, true, sim.CodeTokenExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, sim.Options{})
			h.clk.Advance(tt.advance)
			if tt.expire {
				h.srv.ExpireTokens()
			}
			h.token = tt.auth(h.token)
			if r := h.do(sim.EndpointStationList, map[string]any{}); r.code() != tt.want {
				t.Fatalf("code %q, want %q: %s", r.code(), tt.want, r.raw)
			}
			if tt.want == sim.CodeTokenExpired {
				h.token = h.login()
				if r := h.do(sim.EndpointStationList, map[string]any{}); r.code() != sim.CodeSuccess {
					t.Fatalf("after a new login: %s", r.raw)
				}
			}
		})
	}
}

func TestNonPostUnknownPathAndNonJSONAreRefused(t *testing.T) {
	h := newHarness(t, sim.Options{})
	r := h.request(http.MethodGet, sim.EndpointStationList, map[string]any{}, func(*http.Request) {})
	if r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != http.MethodPost {
		t.Errorf("GET: status %d, Allow %q", r.status, r.header.Get("Allow"))
	}
	if r := h.do("getNothing", map[string]any{}); r.status != http.StatusNotFound {
		t.Errorf("unknown path: status %d", r.status)
	}
	r = h.request(http.MethodPost, sim.EndpointStationList, map[string]any{}, func(req *http.Request) {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	})
	if r.status != http.StatusUnsupportedMediaType || r.code() != sim.CodeBadParameter {
		t.Errorf("form body: status %d code %q", r.status, r.code())
	}
	r = h.request(http.MethodPost, sim.EndpointStationList, map[string]any{}, func(req *http.Request) {
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
	})
	if r.code() != sim.CodeSuccess {
		t.Errorf("json with charset: %s", r.raw)
	}
}

func TestEveryEndpointAnswersTheSpecShape(t *testing.T) {
	h := newHarness(t, sim.Options{Seed: 7})
	fl := h.srv.Fleet()
	st := fl.Stations[0]
	var nodes []string
	for _, d := range fl.Devices {
		if d.NodeID != "" {
			nodes = append(nodes, d.NodeID)
		}
	}
	mustStart(t, h.srv, sim.AlarmSpec{DeviceSN: fl.Devices[0].SN})
	ended := mustStart(t, h.srv, sim.AlarmSpec{DeviceSN: fl.Devices[1].SN, Level: 2})
	h.clk.Advance(time.Minute)
	if err := h.srv.EndAlarm(ended, time.Time{}); err != nil {
		t.Fatal(err)
	}
	alarmFields := []string{"originId", "kafkaUuid", "tenantId", "tenantName", "deviceId", "deviceSn", "deviceName",
		"deviceTemplateType", "deviceTemplateCode", "systemId", "systemCode", "systemName", "stationId", "stationCode",
		"stationName", "occurrenceTime", "occurrenceTimeStr", "recoveryTime", "recoveryTimeStr", "durationTp", "status",
		"eventCode", "eventDesc", "eventType", "eventLevel", "eventCategoryCode", "eventCategoryDescription",
		"eventCategoryInfluence", "eventTagNameStr", "eventTagCodeStr", "payload", "note"}

	tests := []struct {
		endpoint string
		body     map[string]any
		check    func(t *testing.T, items []map[string]any)
	}{
		{sim.EndpointStationList, map[string]any{"isGetFirmwareVersion": 0}, func(t *testing.T, items []map[string]any) {
			if len(items) != len(fl.Stations) {
				t.Fatalf("%d stations, want %d", len(items), len(fl.Stations))
			}
			for _, it := range items {
				requireKeys(t, "station", it, "tenantId", "id", "name", "templateCode", "templateType", "templateCategory", "sn", "nodeId", "isShared", "state")
				state := it["state"].([]any)
				requireKeys(t, "station state", state[0].(map[string]any), "key", "value")
			}
		}},
		{sim.EndpointSystemList, map[string]any{"assetScope": 0}, func(t *testing.T, items []map[string]any) {
			if len(items) != len(fl.Systems) {
				t.Fatalf("%d systems, want %d", len(items), len(fl.Systems))
			}
			for _, it := range items {
				requireKeys(t, "system", it, "tenantId", "id", "name", "templateCode", "templateType", "code", "nodeId", "stationId", "isShared", "state", "stateName")
				if s := it["state"]; s != "normal" && s != "abnormal" {
					t.Errorf("system state %v", s)
				}
			}
		}},
		{sim.EndpointDeviceList, map[string]any{"assetScope": 0, "isGetFirmwareVersion": "1"}, func(t *testing.T, items []map[string]any) {
			if len(items) != len(fl.Devices) {
				t.Fatalf("%d devices, want %d", len(items), len(fl.Devices))
			}
			for _, it := range items {
				requireKeys(t, "device", it, "id", "tenantId", "name", "sn", "templateCode", "state", "stateName", "stationId", "systemId", "isShared", "attributeValues", "firmwareVersion")
			}
		}},
		{sim.EndpointStationDevices, map[string]any{"stationId": st.ID}, func(t *testing.T, items []map[string]any) {
			if len(items) == 0 {
				t.Fatal("no devices")
			}
			for _, it := range items {
				requireKeys(t, "station device", it, "id", "name", "sn", "code", "templateCode", "templateType", "stationId", "systemId", "state", "stateName", "attributeValues", "extraInfoList")
				if str(it["stationId"]) != st.ID {
					t.Errorf("device of station %v in the list of %s", it["stationId"], st.ID)
				}
			}
		}},
		{sim.EndpointAlarmList, map[string]any{"current": 1, "size": 20, "startTime": 0, "endTime": t0.Add(time.Hour).UnixMilli(), "isRecovery": true}, func(t *testing.T, items []map[string]any) {
			if len(items) != 1 {
				t.Fatalf("%d recovered alarms, want 1", len(items))
			}
			requireKeys(t, "alarm", items[0], alarmFields...)
			if items[0]["recoveryTime"] == nil || str(items[0]["durationTp"]) != "60000" {
				t.Errorf("ended alarm: recoveryTime %v durationTp %v", items[0]["recoveryTime"], items[0]["durationTp"])
			}
		}},
		{sim.EndpointAlarmList, map[string]any{"current": 1, "size": 20, "startTime": 0, "endTime": t0.Add(time.Hour).UnixMilli()}, func(t *testing.T, items []map[string]any) {
			if len(items) != 1 {
				t.Fatalf("%d ongoing alarms, want 1", len(items))
			}
			requireKeys(t, "alarm", items[0], alarmFields...)
			if items[0]["occurrenceTimeStr"] != "2026-11-21 08:00:00" || str(items[0]["occurrenceTime"]) != "1795248000000" {
				t.Errorf("occurrence %v / %v", items[0]["occurrenceTime"], items[0]["occurrenceTimeStr"])
			}
			if items[0]["status"] != json.Number("1") || items[0]["eventLevel"] != json.Number("0") {
				t.Errorf("status %v level %v", items[0]["status"], items[0]["eventLevel"])
			}
		}},
		{sim.EndpointRealTime, map[string]any{"deviceNodeList": nodes}, func(t *testing.T, items []map[string]any) {
			if len(items) != len(nodes) {
				t.Fatalf("%d items, want %d", len(items), len(nodes))
			}
			for _, it := range items {
				requireKeys(t, "real-time", it, "nodeId", "name", "sn", "stationId", "systemId", "state", "stateName", "tp", "tpTime", "metric")
				for k, v := range it["metric"].(map[string]any) {
					_, isString := v.(string)
					if isString != (k == "duration" || k == "gate") {
						t.Errorf("metric %s = %#v", k, v)
					}
				}
			}
		}},
		{sim.EndpointSystemHistory, map[string]any{"systemIdList": []string{fl.Systems[0].ID}, "dimension": "month", "identityCode": "care"}, func(t *testing.T, items []map[string]any) {
			requireKeys(t, "system history", items[0], "thingId", "name", "state", "stateName", "dataList")
			if n := len(items[0]["dataList"].([]any)); n != 12 {
				t.Errorf("month default gave %d entries, want 12", n)
			}
		}},
		{sim.EndpointStationHistory, map[string]any{"stationIdList": []string{st.ID}, "dimension": "total"}, func(t *testing.T, items []map[string]any) {
			requireKeys(t, "station history", items[0], "thingId", "name", "state", "dataList")
			if _, ok := items[0]["state"].([]any); !ok {
				t.Errorf("station state %#v is not a list", items[0]["state"])
			}
			entry := items[0]["dataList"].([]any)[0].(map[string]any)
			if v, ok := entry["date"]; !ok || v != nil {
				t.Errorf("total date = %#v, want null", v)
			}
		}},
		{sim.EndpointDeviceHistory, map[string]any{"deviceNodeList": nodes[:2], "dimension": "day", "startDate": "2026-11-01", "endDate": "2026-11-30"}, func(t *testing.T, items []map[string]any) {
			requireKeys(t, "device history", items[0], "thingId", "nodeId", "name", "sn", "stationId", "systemId", "state", "stateName", "date", "dataList")
			list := items[0]["dataList"].([]any)
			if len(list) != 30 || list[0].(map[string]any)["date"] != "2026-11-01" {
				t.Fatalf("%d days, first %v", len(list), list[0])
			}
			if m := list[29].(map[string]any)["metric"].(map[string]any); len(m) != 0 {
				t.Errorf("a future day has data: %v", m)
			}
			withData := 0
			for _, day := range list[:10] {
				if m := day.(map[string]any)["metric"].(map[string]any); len(m) > 0 {
					withData++
					if len(m) < 5 {
						t.Errorf("a past day's metrics look thin: %v", m)
					}
				}
			}
			if withData < 8 {
				t.Errorf("only %d of the first 10 past days have metrics", withData)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.endpoint, func(t *testing.T) { tt.check(t, h.list(tt.endpoint, tt.body)) })
	}

	t.Run(sim.EndpointStationDetail, func(t *testing.T) {
		d := h.data(sim.EndpointStationDetail, map[string]any{"stationId": st.ID}).(map[string]any)
		requireKeys(t, "station detail", d, "tenantId", "id", "name", "sn", "nodeId", "attributeValues", "extraInfoList")
		codes := map[string]bool{}
		for _, a := range d["attributeValues"].([]any) {
			codes[a.(map[string]any)["attributeCode"].(string)] = true
		}
		if !codes["Latitude"] || !codes["Longitude"] {
			t.Errorf("attribute codes %v", codes)
		}
		var geo map[string]any
		for _, e := range d["extraInfoList"].([]any) {
			if e := e.(map[string]any); e["extraKey"] == "geoInfo" {
				if err := json.Unmarshal([]byte(e["extraValue"].(string)), &geo); err != nil {
					t.Fatal(err)
				}
			}
		}
		requireKeys(t, "geoInfo", geo, "formattedAddress", "adCode", "country", "province", "city", "cityCode", "district", "township", "longitude", "latitude")
	})
}

func TestDeviceListsAnswerAnArrayOrDataListByOption(t *testing.T) {
	for _, inDataList := range []bool{false, true} {
		h := newHarness(t, sim.Options{DeviceListInDataList: inDataList})
		st := h.srv.Fleet().Stations[0].ID
		for _, ep := range []string{sim.EndpointDeviceList, sim.EndpointStationDevices} {
			d := h.data(ep, map[string]any{"stationId": st})
			_, isArray := d.([]any)
			if isArray == inDataList {
				t.Errorf("%s with DeviceListInDataList=%v: data is %T", ep, inDataList, d)
			}
		}
	}
}

func TestAssetScopeAndDeviceTypesFilterTheLists(t *testing.T) {
	h := newHarness(t, sim.Options{Stations: 3})
	fl := h.srv.Fleet()
	count := func(shared bool, sys bool) int {
		n := 0
		if sys {
			for _, s := range fl.Systems {
				if s.Shared == shared {
					n++
				}
			}
			return n
		}
		for _, d := range fl.Devices {
			if d.Shared == shared {
				n++
			}
		}
		return n
	}
	for _, sys := range []bool{true, false} {
		ep := sim.EndpointDeviceList
		if sys {
			ep = sim.EndpointSystemList
		}
		owned, shared := count(false, sys), count(true, sys)
		if owned == 0 || shared == 0 {
			t.Fatalf("fleet has %d owned and %d shared", owned, shared)
		}
		for _, tt := range []struct {
			scope any
			want  int
		}{{nil, owned}, {0, owned + shared}, {1, owned}, {2, shared}, {"2", shared}} {
			body := map[string]any{}
			if tt.scope != nil {
				body["assetScope"] = tt.scope
			}
			items := h.list(ep, body)
			if len(items) != tt.want {
				t.Errorf("%s assetScope %v: %d items, want %d", ep, tt.scope, len(items), tt.want)
			}
			for _, it := range items {
				if shared, ok := it["isShared"].(bool); ok && tt.scope == 1 && shared {
					t.Errorf("%s assetScope 1 returned a shared asset", ep)
				}
			}
		}
	}
	items := h.list(sim.EndpointDeviceList, map[string]any{"assetScope": 0, "deviceTypes": []string{"Inverter"}})
	if len(items) == 0 {
		t.Fatal("no inverters")
	}
	for _, it := range items {
		if it["templateCode"] != "Inverter" {
			t.Errorf("deviceTypes [Inverter] returned %v", it["templateCode"])
		}
	}
}

func TestShapesWriteIdsAndTimesAsAsked(t *testing.T) {
	kinds := func(h *harness) (strs, nums int) {
		mustStart(t, h.srv, sim.AlarmSpec{})
		h.srv.Storm(30)
		_, recs := h.alarms(nil)
		for _, r := range recs {
			for _, k := range []string{"deviceId", "stationId", "occurrenceTime"} {
				switch r[k].(type) {
				case string:
					strs++
				case json.Number:
					nums++
				}
			}
		}
		for _, d := range h.list(sim.EndpointDeviceList, map[string]any{"assetScope": 0}) {
			switch d["id"].(type) {
			case string:
				strs++
			case json.Number:
				nums++
			}
		}
		return strs, nums
	}
	if s, n := kinds(newHarness(t, sim.Options{IDs: sim.ShapeString, Timestamps: sim.ShapeString})); n != 0 || s == 0 {
		t.Errorf("ShapeString: %d strings, %d numbers", s, n)
	}
	if s, n := kinds(newHarness(t, sim.Options{IDs: sim.ShapeNumber, Timestamps: sim.ShapeNumber})); s != 0 || n == 0 {
		t.Errorf("ShapeNumber: %d strings, %d numbers", s, n)
	}
	if s, n := kinds(newHarness(t, sim.Options{})); s == 0 || n == 0 {
		t.Errorf("ShapeMixed: %d strings, %d numbers", s, n)
	}
}

func TestSameSeedGivesTheSameFleetAndData(t *testing.T) {
	answer := func(seed int64) string {
		h := newHarness(t, sim.Options{Seed: seed, Stations: 4})
		var b strings.Builder
		for _, ep := range []string{sim.EndpointStationList, sim.EndpointSystemList, sim.EndpointDeviceList} {
			b.Write(h.do(ep, map[string]any{"assetScope": 0}).raw)
		}
		var nodes []string
		for _, d := range h.srv.Fleet().Devices {
			if d.NodeID != "" {
				nodes = append(nodes, d.NodeID)
			}
		}
		b.Write(h.do(sim.EndpointRealTime, map[string]any{"deviceNodeList": nodes}).raw)
		b.Write(h.do(sim.EndpointDeviceHistory, map[string]any{"deviceNodeList": nodes, "dimension": "year", "startDate": "2024-01-01", "endDate": "2026-01-01"}).raw)
		h.srv.Storm(50)
		b.Write(h.do(sim.EndpointAlarmList, map[string]any{"current": 1, "size": 500, "startTime": 0, "endTime": t0.UnixMilli()}).raw)
		return b.String()
	}
	a, b, c := answer(42), answer(42), answer(43)
	if a != b {
		t.Error("two servers with seed 42 answered differently")
	}
	if a == c {
		t.Error("seeds 42 and 43 answered the same")
	}
}

func TestHistoryDatesDefaultAndAreLimited(t *testing.T) {
	h := newHarness(t, sim.Options{})
	sys := h.srv.Fleet().Systems[0].ID
	tests := []struct {
		name        string
		body        map[string]any
		first, last string
		n           int
	}{
		{"day default is the current month", map[string]any{"dimension": "day"}, "2026-11-01", "2026-11-30", 30},
		{"month default is the current year", map[string]any{"dimension": "month"}, "2026-01", "2026-12", 12},
		{"year default is the current year", map[string]any{"dimension": "year"}, "2026", "2026", 1},
		{"day with only a start closes its month", map[string]any{"dimension": "day", "startDate": "2024-02-10"}, "2024-02-10", "2024-02-29", 20},
		{"day range of 31 days", map[string]any{"dimension": "day", "startDate": "2026-01-01", "endDate": "2026-01-31"}, "2026-01-01", "2026-01-31", 31},
		{"month range of 12 months", map[string]any{"dimension": "month", "startDate": "2025-03-15", "endDate": "2026-02-01"}, "2025-03", "2026-02", 12},
		{"year range is unlimited", map[string]any{"dimension": "year", "startDate": "2000-01-01", "endDate": "2026-12-31"}, "2000", "2026", 27},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.body["systemIdList"] = []string{sys}
			items := h.list(sim.EndpointSystemHistory, tt.body)
			list := items[0]["dataList"].([]any)
			first, last := list[0].(map[string]any)["date"], list[len(list)-1].(map[string]any)["date"]
			if len(list) != tt.n || first != tt.first || last != tt.last {
				t.Errorf("%d entries %v..%v, want %d %s..%s", len(list), first, last, tt.n, tt.first, tt.last)
			}
		})
	}
}
