package event

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// marshalCases are upstream records and field values that exercise every
// branch of Marshal: whitespace, escapes, HTML characters, U+2028, invalid
// UTF-8, numbers, nesting, and records that are not JSON.
var marshalCases = []struct {
	raw  string
	text string
}{
	{`{"originId":"1","status":1}`, "Grid overvoltage"},
	{" { \"a\" : [ 1 , 2.5e-3 , -0 , true , false , null ] ,\n\t\"b\" : { } , \"c\" : [ ] } ", "tab\tnew\nline"},
	{`{"s":"<b>&amp;</b> \u2028 \" \\ \/ \b\f\n\r\t \u00e9"}`, `<script>"quoted" & \back</script>`},
	{"{\"raw\":\"\u2028\u2029 line seps\"}", "\u2028\u2029"},
	{`{"cn":"北区 — Nord","emoji":"🔥"}`, "北区 🔥"},
	{"{\"bad\":\"\xff\xfe\"}", "bad \xff utf8 \xe2\x80"},
	{`"just a string"`, "\x00\x01\x1f\x7f"},
	{`12345678901234567890`, ""},
	{`[{"deep":[[[{"x":[1,{"y":null}]}]]]}]`, "x"},
	{`{"a":1,}`, "trailing comma"},
	{`{"a":01}`, "leading zero"},
	{`{"a":1.}`, "bare dot"},
	{`{"a":"unfinished`, "unfinished"},
	{`{"a":"\x"}`, "bad escape"},
	{`{"a":"\u12g4"}`, "bad hex"},
	{"{\"a\":\"ctl\x01\"}", "control"},
	{`{"a":1} {"b":2}`, "two values"},
	{`{"a" 1}`, "no colon"},
	{`tru`, "short literal"},
	{``, "empty but not nil"},
	{`   `, "only space"},
	{`-`, "minus"},
	{`1e+`, "exponent"},
	{`{"a":[1 2]}`, "no comma"},
	{strings.Repeat("[", 10001) + strings.Repeat("]", 10001), "too deep"},
	{strings.Repeat("[", 10000) + strings.Repeat("]", 10000), "deep enough"},
}

// checkMarshal compares Marshal of an event holding raw and text with what
// encoding/json writes: the same bytes, or both an error.
func checkMarshal(t *testing.T, raw []byte, text string) {
	t.Helper()
	a := Alarm{
		OriginID: "1185686123039067006" + text, EventCode: text, EventDesc: text, EventType: text,
		TenantID: "t", StationID: text, StationName: text, SystemID: text, DeviceSN: text,
		DeviceName: text, DeviceTemplateCode: text, Level: len(text) - 3,
		OccurredAt: time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC), Raw: raw,
	}
	for _, tr := range []Transition{Start, End} {
		if tr == End {
			a.RecoveredAt = a.OccurredAt.Add(90 * time.Second)
		}
		ev := New(a, tr, a.OccurredAt.Add(time.Minute), len(text)%2 == 0)
		ev.Data.Alarm = raw // as given, even nil or empty
		if len(text)%3 == 0 {
			ev.Data.Escalation = &Escalation{Route: text, AfterMs: 600000, WaitedMs: 603000}
		}
		if len(text)%4 < 2 {
			ev.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
			if len(text)%4 == 1 {
				ev.TraceState = text
			}
		}
		want, wantErr := json.Marshal(&ev)
		got, gotErr := ev.Marshal()
		if (wantErr != nil) != (gotErr != nil) {
			t.Fatalf("raw %q: Marshal error %v, encoding/json error %v", raw, gotErr, wantErr)
		}
		if wantErr == nil && !bytes.Equal(got, want) {
			t.Fatalf("raw %q text %q:\nMarshal      %s\nencoding/json %s", raw, text, got, want)
		}
	}
	for i, tr := range []Transition{Ack, Unack} {
		ev := NewAck(a, tr, i+1, AckInfo{By: text, Name: text, Via: "slack", At: FormatTime(a.OccurredAt), Comment: text}, a.OccurredAt)
		ev.Data.Alarm = raw
		want, wantErr := json.Marshal(&ev)
		got, gotErr := ev.Marshal()
		if (wantErr != nil) != (gotErr != nil) {
			t.Fatalf("%s raw %q: Marshal error %v, encoding/json error %v", tr, raw, gotErr, wantErr)
		}
		if wantErr == nil && !bytes.Equal(got, want) {
			t.Fatalf("%s raw %q text %q:\nMarshal      %s\nencoding/json %s", tr, raw, text, got, want)
		}
	}
}

func TestMarshalIsEncodingJSON(t *testing.T) {
	for _, c := range marshalCases {
		checkMarshal(t, []byte(c.raw), c.text)
	}
	checkMarshal(t, nil, "nil record")
}

func FuzzMarshalIsEncodingJSON(f *testing.F) {
	for _, c := range marshalCases {
		if len(c.raw) < 1000 {
			f.Add([]byte(c.raw), c.text)
		}
	}
	f.Fuzz(checkMarshal)
}

// TestMarshalAllocatesOnce checks Marshal's estimate of its length: a
// typical event, of each transition, is written into one allocation, not
// grown and copied on the way.
func TestMarshalAllocatesOnce(t *testing.T) {
	raw, a := typicalRecord()
	a.Raw = raw
	for _, tr := range []Transition{Start, End} {
		if tr == End {
			a.RecoveredAt = a.OccurredAt.Add(90 * time.Second)
		}
		ev := New(a, tr, a.OccurredAt.Add(time.Minute), false)
		ev.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		if n := testing.AllocsPerRun(100, func() { _, _ = ev.Marshal() }); n != 1 {
			b, _ := ev.Marshal()
			t.Errorf("%s: Marshal made %v allocations, want 1 (%d bytes, capacity %d)", tr, n, len(b), cap(b))
		}
	}
}

// typicalRecord is an upstream record of every field of the spec's alarm
// record, and the Alarm read from it.
func typicalRecord() ([]byte, Alarm) {
	raw := []byte(`{"originId":"1700000000000000001","kafkaUuid":"3f2b8c1e-5a4d-4c7e-9b1a-000000000001","tenantId":"1001",` +
		`"tenantName":"Example Solar","deviceId":"4001","deviceSn":"SN500001","deviceName":"Inverter 1","deviceTemplateType":"Inverter",` +
		`"deviceTemplateCode":"inverter","systemId":"3000","systemCode":"SYS-3000","systemName":"System 3000","stationId":"2000",` +
		`"stationCode":"ST-2000","stationName":"North Field 0","occurrenceTime":1763712000000,"occurrenceTimeStr":"2025-11-21 08:00:00",` +
		`"recoveryTime":null,"recoveryTimeStr":null,"durationTp":null,"status":1,"eventCode":"INV_101","eventDesc":"Grid overvoltage protection",` +
		`"eventType":"fault","eventLevel":1,"eventCategoryCode":"GRID","eventCategoryDescription":"Grid side","eventCategoryInfluence":"generation stopped",` +
		`"eventTagNameStr":"grid,voltage","eventTagCodeStr":"T01,T07","payload":"{\"point\":\"uGrid\",\"value\":254.31,\"threshold\":253}","note":""}`)
	return raw, Alarm{OriginID: "1700000000000000001", EventCode: "INV_101", EventDesc: "Grid overvoltage protection", EventType: "fault",
		TenantID: "1001", StationID: "2000", StationName: "North Field 0", SystemID: "3000", DeviceSN: "SN500001", DeviceName: "Inverter 1",
		DeviceTemplateCode: "inverter", OccurredAt: time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)}
}

func BenchmarkMarshal(b *testing.B) {
	raw, a := typicalRecord()
	a.Raw = raw
	ev := New(a, Start, time.Date(2026, 11, 21, 8, 1, 0, 0, time.UTC), false)
	b.Run("Marshal", func(b *testing.B) {
		for b.Loop() {
			if _, err := ev.Marshal(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(&ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
