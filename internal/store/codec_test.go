package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// TestAlarmCodecKeepsEveryField fills every field of event.Alarm, so that a
// field added there fails here until the codec stores it.
func TestAlarmCodecKeepsEveryField(t *testing.T) {
	var a event.Alarm
	v := reflect.ValueOf(&a).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch f.Interface().(type) {
		case string:
			f.SetString(fmt.Sprintf("%s-%d", name, i))
		case int:
			f.SetInt(int64(-i - 1))
		case time.Time:
			f.Set(reflect.ValueOf(t0.Add(time.Duration(i) * time.Second)))
		case json.RawMessage:
			f.Set(reflect.ValueOf(json.RawMessage(`{"eventLevel":"1","extra":[1,2]}`)))
		default:
			t.Fatalf("event.Alarm.%s has type %s, which the codec test does not know", name, f.Type())
		}
	}
	got, err := decodeAlarm(encodeAlarm(&a))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, a) {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, a)
	}
}

func TestStateCodec(t *testing.T) {
	tests := []state{
		{},
		{flags: flagSeenOngoing | flagStarted, lastSeen: 1, level: 3, occurred: -5, firstSeen: 9, deviceSN: "SN", stationID: "S"},
		{flags: 0xff, lastSeen: t0.UnixMilli(), level: -1, occurred: t0.UnixMilli(), recovered: t0.UnixMilli() + 1,
			firstSeen: t0.UnixMilli(), pruneAt: t0.UnixMilli() + 2, deviceSN: "设备", stationID: ""},
	}
	for i, st := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			b := st.encode()
			got, err := decodeState(b)
			if err != nil {
				t.Fatal(err)
			}
			if got != st {
				t.Fatalf("round trip = %+v, want %+v", got, st)
			}
			h, err := peekState(b)
			if err != nil {
				t.Fatal(err)
			}
			if h != (stateHeader{flags: st.flags, lastSeen: st.lastSeen, level: st.level}) {
				t.Fatalf("peekState = %+v, want the header of %+v", h, st)
			}
		})
	}
}

func TestCorruptValuesAreErrors(t *testing.T) {
	st := state{flags: flagStarted, level: 1, deviceSN: "SN-1", stationID: "S1"}
	a := rec("a1", 1, time.Time{})
	e := Entry{EventID: "a1:start", OriginID: "a1", Transition: event.Start, Body: []byte("{}"), EnqueuedAt: t0}
	d := DeadLetter{Entry: e, Reason: "gone", At: t0}
	stateB, alarmB, entryB, deadB := st.encode(), encodeAlarm(&a), encodeEntry(&e), encodeDead(&d)
	tests := []struct {
		name   string
		decode func() error
	}{
		{"state truncated", func() error { _, err := decodeState(stateB[:len(stateB)-2]); return err }},
		{"state with trailing bytes", func() error { _, err := decodeState(append(stateB, 0)); return err }},
		{"state header only", func() error { _, err := peekState(stateB[:stateHeaderLen]); return err }},
		{"state of an unknown format", func() error { b := st.encode(); b[0] = 9; _, err := decodeState(b); return err }},
		{"record truncated", func() error { _, err := decodeAlarm(alarmB[:8]); return err }},
		{"record empty", func() error { _, err := decodeAlarm(nil); return err }},
		{"entry truncated", func() error { _, err := decodeEntry("bus", 1, entryB[:5]); return err }},
		{"dead letter truncated", func() error { _, err := decodeDead("bus", 1, deadB[:5]); return err }},
		{"dead letter time missing", func() error { _, err := peekDeadAt(deadB[:1]); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.decode(); !errors.Is(err, errCorrupt) {
				t.Fatalf("got %v, want errCorrupt", err)
			}
		})
	}
}
