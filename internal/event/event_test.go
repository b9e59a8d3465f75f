package event

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func sampleAlarm() Alarm {
	return Alarm{
		OriginID: "1790000000000000001", Status: StatusEnded, Level: 0,
		EventCode: "E1023", EventDesc: "Grid overvoltage", EventType: "fault",
		TenantID: "10001", TenantName: "Acme Solar", StationID: "20001", StationName: "North Field",
		SystemID: "30001", DeviceID: "40001", DeviceSN: "INV-0042", DeviceName: "Inverter 42",
		DeviceTemplateCode: "Inverter",
		OccurredAt:         time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC),
		RecoveredAt:        time.Date(2026, 11, 21, 8, 12, 30, 250e6, time.UTC),
		Raw:                json.RawMessage(`{"originId":"1790000000000000001","status":0,"extra":{"kept":true}}`),
	}
}

func TestStartEventMatchesTheDesignSchemaByteForByte(t *testing.T) {
	a := sampleAlarm()
	ev := New(a, Start, time.Date(2026, 11, 21, 8, 0, 3, 0, time.FixedZone("CET", 3600)), false)
	b, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"specversion":"1.0","id":"1790000000000000001:start","source":"opendata/10001/stations/20001",` +
		`"type":"energy.alarm.start","subject":"INV-0042","time":"2026-11-21T08:00:00.000Z",` +
		`"datacontenttype":"application/json","data":{"transition":"start","status":1,"level":0,` +
		`"levelName":"urgent","originId":"1790000000000000001","eventCode":"E1023","eventDesc":"Grid overvoltage",` +
		`"eventType":"fault","tenantId":"10001","stationId":"20001","stationName":"North Field","systemId":"30001",` +
		`"deviceSn":"INV-0042","deviceName":"Inverter 42","deviceTemplateCode":"Inverter",` +
		`"occurredAt":"2026-11-21T08:00:00.000Z","durationMs":0,"detectedAt":"2026-11-21T07:00:03.000Z",` +
		`"inferred":false,"alarm":{"originId":"1790000000000000001","status":0,"extra":{"kept":true}}}}`
	if string(b) != want {
		t.Fatalf("event bytes\n got %s\nwant %s", b, want)
	}
}

func TestTraceContextIsACloudEventsExtensionLeftOutWhenUnset(t *testing.T) {
	a := sampleAlarm()
	ev := New(a, Start, a.OccurredAt, false)
	plain, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain), "trace") {
		t.Fatalf("an event without trace context mentions it: %s", plain)
	}
	ev.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traced, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `"datacontenttype":"application/json","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","data":`
	if !strings.Contains(string(traced), want) {
		t.Fatalf("traceparent is not a top-level attribute beside datacontenttype: %s", traced)
	}
	back, err := Unmarshal(traced)
	if err != nil || back.TraceParent != ev.TraceParent {
		t.Fatalf("decoded traceparent %q, %v", back.TraceParent, err)
	}
	old, err := Unmarshal(plain)
	if err != nil || old.TraceParent != "" || old.TraceState != "" {
		t.Fatalf("an event written without trace context decodes with %q %q, %v", old.TraceParent, old.TraceState, err)
	}
}

func TestEndEventCarriesRecoveryTimeAndDuration(t *testing.T) {
	cases := []struct {
		name     string
		tr       Transition
		inferred bool
		typ      string
		status   int
	}{
		{"real end", End, false, "energy.alarm.end", 0},
		{"inferred end", End, true, "energy.alarm.end", 0},
		{"invalid", Invalid, false, "energy.alarm.invalid", -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := New(sampleAlarm(), tc.tr, time.Now(), tc.inferred)
			if ev.Type != tc.typ || ev.Data.Status != tc.status || ev.ID != "1790000000000000001:"+string(tc.tr) {
				t.Fatalf("type %q status %d id %q", ev.Type, ev.Data.Status, ev.ID)
			}
			if ev.Time != "2026-11-21T08:12:30.250Z" || ev.Data.RecoveredAt != ev.Time {
				t.Fatalf("time %q recoveredAt %q, want the recovery time", ev.Time, ev.Data.RecoveredAt)
			}
			if ev.Data.DurationMs != 750250 {
				t.Fatalf("durationMs = %d, want 750250", ev.Data.DurationMs)
			}
			if ev.Data.Inferred != tc.inferred {
				t.Fatalf("inferred = %v", ev.Data.Inferred)
			}
			b, err := ev.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			back, err := Unmarshal(b)
			if err != nil || back.ID != ev.ID || string(back.Data.Alarm) != string(ev.Data.Alarm) {
				t.Fatalf("round trip: %v %+v", err, back)
			}
		})
	}
}

func TestStatusesLevelsAndTransitionsMapBothWays(t *testing.T) {
	for _, tr := range Transitions {
		got, ok := ForStatus(tr.Status())
		if !ok || got != tr || !tr.Valid() {
			t.Fatalf("%s: ForStatus(%d) = %q %v", tr, tr.Status(), got, ok)
		}
	}
	if _, ok := ForStatus(2); ok {
		t.Fatal("status 2 mapped to a transition")
	}
	for level, name := range map[int]string{0: "urgent", 1: "severe", 2: "major", 3: "minor", 7: "level-7", -1: "level--1"} {
		if got := LevelName(level); got != name {
			t.Fatalf("LevelName(%d) = %q, want %q", level, got, name)
		}
	}
}

func TestAStartNeverClaimsToBeInferredAndAMissingRecordIsAnEmptyObject(t *testing.T) {
	a := sampleAlarm()
	a.Raw = nil
	ev := New(a, Start, time.Now(), true)
	if ev.Data.Inferred || ev.Data.RecoveredAt != "" || string(ev.Data.Alarm) != "{}" {
		t.Fatalf("start: inferred %v recoveredAt %q alarm %s", ev.Data.Inferred, ev.Data.RecoveredAt, ev.Data.Alarm)
	}
	v := ev.View()
	if v.Level != 0 || v.LevelName != "urgent" || v.Transition != Start || v.DeviceSN != "INV-0042" || v.Event != &ev {
		t.Fatalf("view %+v", v)
	}
}
