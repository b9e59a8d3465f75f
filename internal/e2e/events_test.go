package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/opendata/sim"
)

// eventTime is how docs/design.md §6 writes times: RFC 3339, UTC,
// milliseconds.
var eventTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

const eventTimeLayout = "2006-01-02T15:04:05.000Z"

// envelopeKeys and dataKeys are the fields of an event, docs/design.md §6.
// recoveredAt is absent from a start; eventType is the upstream's eventType,
// omitted when empty.
var (
	envelopeKeys = []string{"specversion", "id", "source", "type", "subject", "time", "datacontenttype", "data"}
	dataKeys     = []string{"transition", "status", "level", "levelName", "originId", "eventCode", "eventDesc",
		"tenantId", "stationId", "stationName", "systemId", "deviceSn", "deviceName", "deviceTemplateCode",
		"occurredAt", "recoveredAt", "durationMs", "detectedAt", "inferred", "alarm"}
	optionalDataKeys = []string{"eventType"}
	levelNames       = []string{"urgent", "severe", "major", "minor"}
	// alarmKeys are the fields of an upstream alarm record, every one of
	// which data.alarm must carry as received.
	alarmKeys = []string{"originId", "kafkaUuid", "tenantId", "tenantName", "deviceId", "deviceSn", "deviceName",
		"deviceTemplateType", "deviceTemplateCode", "systemId", "systemCode", "systemName", "stationId",
		"stationCode", "stationName", "occurrenceTime", "occurrenceTimeStr", "recoveryTime", "recoveryTimeStr",
		"durationTp", "status", "eventCode", "eventDesc", "eventType", "eventLevel", "eventCategoryCode",
		"eventCategoryDescription", "eventCategoryInfluence", "eventTagNameStr", "eventTagCodeStr", "payload", "note"}
)

// transitionStatus is the upstream status of each transition.
var transitionStatus = map[string]int{"start": 1, "end": 0, "invalid": -1}

// checkEvent checks the bytes of one event against docs/design.md §6 and
// against the simulator's record of the alarm: every field present with its
// type and value, nothing else, and no inferred end.
func checkEvent(body []byte, a sim.Alarm, transition string) error {
	var env map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&env); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	if err := sameKeys("envelope", env, envelopeKeys, nil); err != nil {
		return err
	}
	var data map[string]json.RawMessage
	if err := json.Unmarshal(env["data"], &data); err != nil {
		return fmt.Errorf("data: not an object: %v", err)
	}
	want := slices.Clone(dataKeys)
	if transition == "start" {
		want = slices.DeleteFunc(want, func(k string) bool { return k == "recoveredAt" })
	}
	if err := sameKeys("data", data, want, optionalDataKeys); err != nil {
		return err
	}

	occurred := eventTimeOf(a.OccurredAt)
	at := occurred
	var recovered string
	var duration int64
	if transition != "start" {
		recovered = eventTimeOf(a.RecoveredAt)
		at = recovered
		duration = a.RecoveredAt.Sub(a.OccurredAt).Milliseconds()
	}
	strs := []struct{ field, got, want string }{
		{"specversion", str(env["specversion"]), "1.0"},
		{"id", str(env["id"]), a.OriginID + ":" + transition},
		{"source", str(env["source"]), "opendata/" + a.TenantID + "/stations/" + a.StationID},
		{"type", str(env["type"]), "energy.alarm." + transition},
		{"subject", str(env["subject"]), a.DeviceSN},
		{"time", str(env["time"]), at},
		{"datacontenttype", str(env["datacontenttype"]), "application/json"},
		{"data.transition", str(data["transition"]), transition},
		{"data.levelName", str(data["levelName"]), levelNames[a.Level]},
		{"data.originId", str(data["originId"]), a.OriginID},
		{"data.eventCode", str(data["eventCode"]), a.EventCode},
		{"data.eventDesc", str(data["eventDesc"]), a.EventDesc},
		{"data.tenantId", str(data["tenantId"]), a.TenantID},
		{"data.stationId", str(data["stationId"]), a.StationID},
		{"data.stationName", str(data["stationName"]), a.StationName},
		{"data.systemId", str(data["systemId"]), a.SystemID},
		{"data.deviceSn", str(data["deviceSn"]), a.DeviceSN},
		{"data.deviceName", str(data["deviceName"]), a.DeviceName},
		{"data.deviceTemplateCode", str(data["deviceTemplateCode"]), a.DeviceTemplateCode},
		{"data.occurredAt", str(data["occurredAt"]), occurred},
	}
	if transition != "start" {
		strs = append(strs, struct{ field, got, want string }{"data.recoveredAt", str(data["recoveredAt"]), recovered})
	}
	if raw, ok := data["eventType"]; ok {
		strs = append(strs, struct{ field, got, want string }{"data.eventType", str(raw), a.EventType})
	}
	for _, s := range strs {
		if s.got != s.want {
			return fmt.Errorf("%s = %q, want %q", s.field, s.got, s.want)
		}
	}
	nums := []struct {
		field     string
		got, want int64
	}{
		{"data.status", num(data["status"]), int64(transitionStatus[transition])},
		{"data.level", num(data["level"]), int64(a.Level)},
		{"data.durationMs", num(data["durationMs"]), duration},
	}
	for _, n := range nums {
		if n.got != n.want {
			return fmt.Errorf("%s = %d, want %d", n.field, n.got, n.want)
		}
	}
	if got := string(data["inferred"]); got != "false" {
		return fmt.Errorf("data.inferred = %s, want false (the simulator has the real record)", got)
	}
	times := map[string]json.RawMessage{"time": env["time"], "data.occurredAt": data["occurredAt"], "data.detectedAt": data["detectedAt"]}
	if transition != "start" {
		times["data.recoveredAt"] = data["recoveredAt"]
	}
	for field, raw := range times {
		if v := str(raw); !eventTime.MatchString(v) {
			return fmt.Errorf("%s = %q, want RFC 3339 UTC with milliseconds", field, v)
		}
	}
	// Both clocks are this machine's: a transition cannot be detected
	// before it happened.
	if detected := str(data["detectedAt"]); detected < at {
		return fmt.Errorf("data.detectedAt = %s, before the transition at %s", detected, at)
	}
	return checkRecord(data["alarm"], a, transition)
}

// checkRecord checks data.alarm: the upstream record as received.
func checkRecord(raw json.RawMessage, a sim.Alarm, transition string) error {
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(raw, &rec); err != nil {
		return fmt.Errorf("data.alarm: not an object: %v", err)
	}
	if err := sameKeys("data.alarm", rec, alarmKeys, nil); err != nil {
		return err
	}
	for _, f := range []struct{ field, want string }{
		{"originId", a.OriginID}, {"kafkaUuid", a.KafkaUUID}, {"deviceSn", a.DeviceSN},
		{"stationId", a.StationID}, {"eventCode", a.EventCode},
	} {
		if got := idString(rec[f.field]); got != f.want {
			return fmt.Errorf("data.alarm.%s = %s, want %q", f.field, rec[f.field], f.want)
		}
	}
	status := num(rec["status"])
	switch {
	case transition != "start" && status != int64(transitionStatus[transition]):
		return fmt.Errorf("data.alarm.status = %d: the %s is not carried by its own record", status, transition)
	case transition == "start" && status != 1 && status != int64(a.Status):
		return fmt.Errorf("data.alarm.status = %d for a start of an alarm whose status is %d", status, a.Status)
	}
	return nil
}

// sameKeys checks that obj has exactly the keys want, plus any of optional.
func sameKeys(what string, obj map[string]json.RawMessage, want, optional []string) error {
	var missing, extra []string
	for _, k := range want {
		if _, ok := obj[k]; !ok {
			missing = append(missing, k)
		}
	}
	for k := range obj {
		if !slices.Contains(want, k) && !slices.Contains(optional, k) {
			extra = append(extra, k)
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		slices.Sort(extra)
		return fmt.Errorf("%s: missing fields %v, unexpected fields %v", what, missing, extra)
	}
	return nil
}

// str decodes a JSON string; anything else gives a marker that matches no
// wanted value.
func str(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "<not a string: " + string(raw) + ">"
	}
	return s
}

// num decodes a JSON integer; anything else gives a marker value.
func num(raw json.RawMessage) int64 {
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil {
		return -1 << 62
	}
	return n
}

// idString decodes an id the upstream writes as a string or a number.
func idString(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return string(raw)
}

func eventTimeOf(t time.Time) string { return t.UTC().Format(eventTimeLayout) }

// eventOf returns the alarm id and transition of an event id.
func eventOf(id string) (originID, transition string) {
	i := strings.LastIndexByte(id, ':')
	if i < 0 {
		return id, ""
	}
	return id[:i], id[i+1:]
}
