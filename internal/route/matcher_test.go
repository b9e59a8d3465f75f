package route

import (
	"encoding/json"
	"testing"

	"github.com/relay-energy/relay/internal/event"
)

func TestMatcher(t *testing.T) {
	ev := func(tr event.Transition, level int, station, device string) *event.Event {
		return &event.Event{Data: event.Data{Transition: tr, Level: level, StationID: station, StationName: "Solar " + station,
			DeviceName: device, DeviceSN: "SN-" + device, DeviceTemplateCode: "INVERTER"}}
	}
	m, err := ParseMatch("--match", []byte(`{levels: [urgent, 1], station_ids: [S1], device_names: ["INV-*"], device_types: [inverter]}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		ev   *event.Event
		want bool
	}{
		{ev(event.Start, 0, "S1", "INV-1"), true},
		{ev(event.End, 1, "S1", "INV-22"), true},
		{ev(event.Start, 2, "S1", "INV-1"), false},
		{ev(event.Start, 0, "S2", "INV-1"), false},
		{ev(event.Start, 0, "S1", "PCS-1"), false},
	}
	for i, c := range cases {
		if got := m.Matches(c.ev); got != c.want {
			t.Errorf("case %d: Matches = %v, want %v", i, got, c.want)
		}
	}
	// Stored as JSON, compiled again: the same conditions.
	b, err := json.Marshal(m.Match)
	if err != nil {
		t.Fatal(err)
	}
	var back Match
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	m2, err := NewMatcher(back)
	if err != nil {
		t.Fatalf("NewMatcher(%s): %v", b, err)
	}
	for i, c := range cases {
		if got := m2.Matches(c.ev); got != c.want {
			t.Errorf("case %d after JSON %s: Matches = %v, want %v", i, b, got, c.want)
		}
	}
	var zero Matcher
	if !zero.Matches(cases[3].ev) {
		t.Error("the zero Matcher should match every event")
	}
	if _, err := ParseMatch("--match", []byte(`{levels: [9], colour: red}`)); err == nil {
		t.Error("ParseMatch accepted a bad level and an unknown key")
	} else {
		t.Log(err)
	}
	if _, err := NewMatcher(Match{Levels: []int{7}, StationNames: []string{`bad\`}}); err == nil {
		t.Error("NewMatcher accepted level 7 and a broken glob")
	}
}
