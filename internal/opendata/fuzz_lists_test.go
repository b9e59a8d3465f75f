package opendata

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzDecodeLists feeds arbitrary answers to the decoders of the list,
// detail, real-time and history endpoints: whatever the upstream sends, they
// must not panic, and every record they keep must be a JSON object.
func FuzzDecodeLists(f *testing.F) {
	for _, body := range []string{
		`{"code":"00000","data":[{"id":1,"tenantId":"2","name":"Inverter 1","sn":"INV1","templateCode":"Inverter","nodeId":"1001","state":"1000","stateName":"running","stationId":"10","systemId":20,"isShared":"true","attributeValues":[{"attributeCode":"RatedPower","attributeName":"Rated power","attributeValue":"50"}]}]}`,
		`{"code":"00000","data":{"dataList":[{"id":"3","name":"Station","state":[{"key":5000,"value":"normal"},{"key":"3001","value":"device fault"}],"extraInfoList":[{"extraKey":"geoInfo","extraValue":"{\"city\":\"X\"}"}]}]}}`,
		`{"code":"00000","data":{"dataList":[{"nodeId":1001,"tp":"1795248000000","tpTime":"2026-11-21 08:00:00","metric":{"p":12.5,"u":"230","duration":"10h","gate":"on"}}]}}`,
		`{"code":"00000","data":{"dataList":[{"thingId":7,"name":"Sys","state":"normal","dataList":[{"date":"2026-11-01","metric":{"ep":1.5}},{"date":null,"metrics":{}},{"date":"2026-11","metric":{"ep":"2"}}]}]}}`,
		`{"code":"00000","data":{"dataList":null}}`,
		`{"code":"00000","data":{"dataList":{"not":"a list"}}}`,
		`{"code":"00000","data":[1,"two",null,[],{}]}`,
		`{"code":"00000","data":[{"metric":{"p":1e400,"q":-0,"r":true}}]}`,
		`{"code":"00000","data":"text"}`,
		`{"code":"00000","data":[{"id":`,
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		env, err := decodeEnvelope(body)
		if err != nil || env.code != codeSuccess {
			return
		}
		items, err := listItems(env.data)
		if err != nil {
			return
		}
		for _, d := range devices(items) {
			if !json.Valid(d.Raw) {
				t.Fatalf("device kept a record that is not JSON: %q", d.Raw)
			}
		}
		m := &historyMerge{index: map[string]int{}}
		for _, raw := range items {
			rec, ok := recordFields(raw)
			if !ok {
				continue
			}
			_ = stateItems(rec.list("state"))
			_ = attributes(rec.list("attributeValues"))
			_, _ = metricsOf(metricObject(rec))
			_ = rec.timeOf("tp", "tpTime", time.UTC)
			m.add(rec, raw)
		}
		for _, it := range m.result() {
			if !json.Valid(it.Raw) {
				t.Fatalf("history item kept a record that is not JSON: %q", it.Raw)
			}
		}
	})
}
