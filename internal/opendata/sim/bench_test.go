package sim_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/opendata/sim"
)

// BenchmarkAlarmPageWith100kAlarms answers getAlarmList pages of a tenant
// tracking 100,000 alarms, 5,000 of them ongoing: the server's cost of one
// request, encoding included.
func BenchmarkAlarmPageWith100kAlarms(b *testing.B) {
	h := newHarness(b, sim.Options{Stations: 10, SystemsPerStation: 3, DevicesPerSystem: 10})
	h.srv.Backfill(95_000, 30*24*time.Hour)
	h.srv.Storm(5_000)
	now := h.clk.Now().UnixMilli()
	month := now - (30 * 24 * time.Hour).Milliseconds()
	queries := []struct {
		name string
		body map[string]any
	}{
		{"current/size500", map[string]any{"current": 1, "size": 500, "startTime": month, "endTime": now}},
		{"current/level0", map[string]any{"current": 1, "size": 500, "startTime": month, "endTime": now, "eventLevels": []int{0}}},
		{"history/size500", map[string]any{"current": 1, "size": 500, "startTime": month, "endTime": now, "isRecovery": true}},
		{"history/lastpage", map[string]any{"current": 190, "size": 500, "startTime": month, "endTime": now, "isRecovery": true}},
		{"history/oneDevice", map[string]any{"current": 1, "size": 500, "startTime": month, "endTime": now, "isRecovery": true,
			"deviceSnList": []string{h.srv.Fleet().Devices[0].SN}}},
	}
	ok := []byte(`{"code":"00000"`)
	for _, q := range queries {
		body, _ := json.Marshal(q.body)
		b.Run(q.name, func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/api/openapi/v1/service/getAlarmList", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", h.token)
				rec := httptest.NewRecorder()
				h.srv.ServeHTTP(rec, req)
				if !bytes.HasPrefix(rec.Body.Bytes(), ok) {
					b.Fatalf("%s", rec.Body.Bytes())
				}
			}
		})
	}
}
