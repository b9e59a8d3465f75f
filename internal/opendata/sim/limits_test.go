package sim_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/opendata/sim"
)

func TestRateLimitIsASlidingWindowPerIP(t *testing.T) {
	for _, httpErrors := range []bool{false, true} {
		t.Run(map[bool]string{false: "envelope A0501", true: "HTTP 429"}[httpErrors], func(t *testing.T) {
			h := newHarness(t, sim.Options{RateLimit: 10, HTTPErrors: httpErrors}) // the login is request 1
			for i := 2; i <= 10; i++ {
				h.clk.Advance(time.Second)
				if r := h.do(sim.EndpointStationList, map[string]any{}); r.code() != sim.CodeSuccess {
					t.Fatalf("request %d: %s", i, r.raw)
				}
			}
			r := h.do(sim.EndpointAlarmList, map[string]any{"current": 1, "size": 1, "startTime": 0, "endTime": 1})
			wantStatus := http.StatusOK
			if httpErrors {
				wantStatus = http.StatusTooManyRequests
			}
			if r.status != wantStatus || r.code() != sim.CodeRateLimited || r.body["data"] != nil {
				t.Fatalf("11th request: status %d body %s", r.status, r.raw)
			}
			// The login at t0 leaves the window 60 s later: 51 s from now.
			if ra := r.header.Get("Retry-After"); ra != "51" {
				t.Errorf("Retry-After = %q, want 51", ra)
			}
			other := *h
			other.ip = "10.0.0.2"
			if r := other.do(sim.EndpointStationList, map[string]any{}); r.code() != sim.CodeSuccess {
				t.Errorf("another IP was limited: %s", r.raw)
			}
			h.clk.Set(t0.Add(time.Minute - time.Millisecond))
			if r := h.do(sim.EndpointStationList, map[string]any{}); r.code() != sim.CodeRateLimited {
				t.Errorf("just inside the window: %s", r.raw)
			}
			h.clk.Set(t0.Add(time.Minute))
			if r := h.do(sim.EndpointStationList, map[string]any{}); r.code() != sim.CodeSuccess {
				t.Errorf("after the first request left the window: %s", r.raw)
			}
			st := h.srv.Stats()
			if st.Requests != 14 || st.Violations != 2 {
				t.Errorf("Requests %d Violations %d, want 14 and 2", st.Requests, st.Violations)
			}
			if e := st.Endpoints[sim.EndpointAlarmList]; e.Requests != 1 || e.Violations != 1 {
				t.Errorf("getAlarmList stats %+v", e)
			}
			if e := st.Endpoints[sim.EndpointLogin]; e.Requests != 1 || e.Violations != 0 {
				t.Errorf("login stats %+v", e)
			}
			if got := h.srv.MaxArrivals(time.Minute); got != 12 {
				t.Errorf("MaxArrivals = %d, want 12 (10 admitted and 2 refused from one IP)", got)
			}
			if n := len(h.srv.Arrivals()); n != 14 {
				t.Errorf("%d arrivals recorded, want 14", n)
			}
		})
	}
}

func TestLoginCountsAgainstTheRateLimit(t *testing.T) {
	h := newHarness(t, sim.Options{RateLimit: 2})
	h.login()
	if r := h.do(sim.EndpointLogin, map[string]any{"appId": "demo-app", "appSecret": "demo-secret"}); r.code() != sim.CodeRateLimited {
		t.Fatalf("third login: %s", r.raw)
	}
	if st := h.srv.Stats(); st.Logins != 2 || st.Endpoints[sim.EndpointLogin].Violations != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestMaxArrivalsFindsTheBusiestWindow(t *testing.T) {
	h := newHarness(t, sim.Options{}) // login at t0
	for _, d := range []time.Duration{10, 20, 59, 60, 61, 62} {
		h.clk.Set(t0.Add(d * time.Second))
		h.do(sim.EndpointStationList, map[string]any{})
	}
	// [0 s, 60 s) holds 0, 10, 20, 59; [10 s, 70 s) holds 10, 20, 59, 60, 61, 62.
	if got := h.srv.MaxArrivals(time.Minute); got != 6 {
		t.Errorf("MaxArrivals = %d, want 6", got)
	}
	h.srv.ResetStats()
	if st := h.srv.Stats(); st.Requests != 0 || h.srv.MaxArrivals(time.Minute) != 0 {
		t.Errorf("after ResetStats: %+v", st)
	}
}

func TestValidationErrors(t *testing.T) {
	h := newHarness(t, sim.Options{})
	fl := h.srv.Fleet()
	alarm := func(over map[string]any) map[string]any {
		b := map[string]any{"current": 1, "size": 20, "startTime": 0, "endTime": 1}
		for k, v := range over {
			if v == nil {
				delete(b, k)
			} else {
				b[k] = v
			}
		}
		return b
	}
	many := func(n int, id string) []string { return strings.Split(strings.Repeat(id+",", n-1)+id, ",") }
	sys, node := fl.Systems[0].ID, fl.Devices[0].NodeID
	tests := []struct {
		name     string
		endpoint string
		body     any
		want     string
	}{
		{"body not an object", sim.EndpointStationList, []byte(`"x"`), sim.CodeBadParameter},
		{"body not JSON", sim.EndpointStationList, []byte(`{`), sim.CodeBadParameter},
		{"alarm without current", sim.EndpointAlarmList, alarm(map[string]any{"current": nil}), sim.CodeBadParameter},
		{"alarm without size", sim.EndpointAlarmList, alarm(map[string]any{"size": nil}), sim.CodeBadParameter},
		{"alarm without startTime", sim.EndpointAlarmList, alarm(map[string]any{"startTime": nil}), sim.CodeBadParameter},
		{"alarm without endTime", sim.EndpointAlarmList, alarm(map[string]any{"endTime": nil}), sim.CodeBadParameter},
		{"alarm size as text", sim.EndpointAlarmList, alarm(map[string]any{"size": "twenty"}), sim.CodeBadParameter},
		{"alarm station id not a number", sim.EndpointAlarmList, alarm(map[string]any{"stationIdList": []string{"abc"}}), sim.CodeBadParameter},
		{"alarm isRecovery not a boolean", sim.EndpointAlarmList, alarm(map[string]any{"isRecovery": 2}), sim.CodeBadParameter},
		{"alarm size 501", sim.EndpointAlarmList, alarm(map[string]any{"size": 501}), sim.CodeOutOfRange},
		{"alarm size 0", sim.EndpointAlarmList, alarm(map[string]any{"size": 0}), sim.CodeOutOfRange},
		{"alarm current 0", sim.EndpointAlarmList, alarm(map[string]any{"current": 0}), sim.CodeOutOfRange},
		{"alarm window reversed", sim.EndpointAlarmList, alarm(map[string]any{"startTime": 2}), sim.CodeOutOfRange},
		{"alarm level 4", sim.EndpointAlarmList, alarm(map[string]any{"eventLevels": []int{4}}), sim.CodeOutOfRange},
		{"alarm unknown device type", sim.EndpointAlarmList, alarm(map[string]any{"deviceTemplateCodes": []string{"Toaster"}}), sim.CodeOutOfRange},
		{"size 500 is fine", sim.EndpointAlarmList, alarm(map[string]any{"size": "500"}), sim.CodeSuccess},
		{"asset scope 3", sim.EndpointSystemList, map[string]any{"assetScope": 3}, sim.CodeOutOfRange},
		{"firmware flag 2", sim.EndpointDeviceList, map[string]any{"isGetFirmwareVersion": "2"}, sim.CodeOutOfRange},
		{"unknown device type", sim.EndpointDeviceList, map[string]any{"deviceTypes": []string{"Toaster"}}, sim.CodeOutOfRange},
		{"station detail without id", sim.EndpointStationDetail, map[string]any{}, sim.CodeBadParameter},
		{"station detail of another tenant", sim.EndpointStationDetail, map[string]any{"stationId": "1"}, sim.CodeOutOfRange},
		{"station devices without id", sim.EndpointStationDevices, map[string]any{}, sim.CodeBadParameter},
		{"real-time without nodes", sim.EndpointRealTime, map[string]any{"deviceNodeList": []string{}}, sim.CodeBadParameter},
		{"real-time 101 nodes", sim.EndpointRealTime, map[string]any{"deviceNodeList": many(101, node)}, sim.CodeOutOfRange},
		{"real-time 100 nodes", sim.EndpointRealTime, map[string]any{"deviceNodeList": many(100, node)}, sim.CodeSuccess},
		{"history without ids", sim.EndpointSystemHistory, map[string]any{"dimension": "day"}, sim.CodeBadParameter},
		{"history without dimension", sim.EndpointSystemHistory, map[string]any{"systemIdList": []string{sys}}, sim.CodeBadParameter},
		{"history bad date", sim.EndpointSystemHistory, map[string]any{"systemIdList": []string{sys}, "dimension": "day", "startDate": "2026/01/01"}, sim.CodeBadParameter},
		{"device history with identityCode", sim.EndpointDeviceHistory, map[string]any{"deviceNodeList": []string{node}, "dimension": "day", "identityCode": "care"}, sim.CodeBadParameter},
		{"history 51 ids", sim.EndpointStationHistory, map[string]any{"stationIdList": many(51, sys), "dimension": "day"}, sim.CodeOutOfRange},
		{"device history 51 nodes", sim.EndpointDeviceHistory, map[string]any{"deviceNodeList": many(51, node), "dimension": "day"}, sim.CodeOutOfRange},
		{"unknown identityCode", sim.EndpointSystemHistory, map[string]any{"systemIdList": []string{sys}, "dimension": "day", "identityCode": "boss"}, sim.CodeOutOfRange},
		{"bad dimension", sim.EndpointSystemHistory, map[string]any{"systemIdList": []string{sys}, "dimension": "week"}, sim.CodeRangeTooLong},
		{"32 days", sim.EndpointSystemHistory, map[string]any{"systemIdList": []string{sys}, "dimension": "day", "startDate": "2026-01-01", "endDate": "2026-02-01"}, sim.CodeRangeTooLong},
		{"13 months", sim.EndpointDeviceHistory, map[string]any{"deviceNodeList": []string{node}, "dimension": "month", "startDate": "2025-01-01", "endDate": "2026-01-01"}, sim.CodeRangeTooLong},
		{"end before start", sim.EndpointStationHistory, map[string]any{"stationIdList": []string{sys}, "dimension": "year", "startDate": "2026-01-01", "endDate": "2025-01-01"}, sim.CodeRangeTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(tt.endpoint, tt.body)
			if r.status != http.StatusOK || r.code() != tt.want {
				t.Errorf("status %d code %q, want 200 %q: %s", r.status, r.code(), tt.want, r.raw)
			}
			if tt.want != sim.CodeSuccess && r.body["description"] == "" {
				t.Error("failure without description")
			}
		})
	}
	if e := h.srv.Stats().Endpoints[sim.EndpointAlarmList]; e.Errors != 13 {
		t.Errorf("getAlarmList errors = %d, want 13", e.Errors)
	}
}

func TestHTTPErrorsMapCodesToStatuses(t *testing.T) {
	h := newHarness(t, sim.Options{HTTPErrors: true})
	if r := h.do(sim.EndpointAlarmList, map[string]any{}); r.status != http.StatusBadRequest || r.code() != sim.CodeBadParameter {
		t.Errorf("bad parameter: %d %s", r.status, r.raw)
	}
	h.token = "nope"
	if r := h.do(sim.EndpointStationList, map[string]any{}); r.status != http.StatusUnauthorized || r.code() != sim.CodeTokenInvalid {
		t.Errorf("bad token: %d %s", r.status, r.raw)
	}
	h.token = ""
	if r := h.do(sim.EndpointLogin, map[string]any{"appId": "x", "appSecret": "y"}); r.status != http.StatusOK || r.code() != sim.CodeThirdParty {
		t.Errorf("login failure: %d %s", r.status, r.raw)
	}
}
