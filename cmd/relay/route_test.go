package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/opendata"
)

// A record as getAlarmList writes it, ids and times as strings and numbers.
const urgentGridAlarm = `{
  "originId": 90001, "tenantId": "1001", "stationId": 5001, "stationName": "North 1",
  "systemId": "7001", "deviceId": 42, "deviceSn": "SN.42 A", "deviceName": "Battery rack 3",
  "deviceTemplateCode": "bms", "eventCode": "E-GRID-001", "eventType": "grid",
  "eventDesc": "grid over-voltage", "eventLevel": "0", "status": 1,
  "occurrenceTime": "1795680000000", "kafkaUuid": "k-1"
}`

func TestRouteShowsRoutesSinksAndSubjectsPerTransition(t *testing.T) {
	cleanEnv(t, exampleEnv)
	alarmFile := filepath.Join(t.TempDir(), "alarm.json")
	if err := os.WriteFile(alarmFile, []byte(urgentGridAlarm), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, cmdRoute, "--alarm", alarmFile, "--rules", exampleRules)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// Columns widen with the longest sink name: compare with single spaces.
	spaces := regexp.MustCompile(` +`)
	start := spaces.ReplaceAllString(section(out, "  start:", "  end:"), " ")
	end := spaces.ReplaceAllString(section(out, "  end:", "  invalid:"), " ")
	for _, want := range []string{
		"routes: everything-to-bus (continue), audit-closures (continue), grid-faults (continue), china-fleet (continue), europe-ops (continue), urgent",
		"-> bus nats PUBLISH energy.alarms.1001.5001.0.start",
		"-> ops webhook POST https://ops.example.com/…",
		"-> oncall slack chat.postMessage to channel C0123456789",
		"-> dashboard nats PUBLISH energy.dashboard.5001.urgent.start",
	} {
		if !strings.Contains(start, want) {
			t.Errorf("start lacks %q:\n%s", want, start)
		}
	}
	for _, want := range []string{
		"routes: everything-to-bus (continue), audit-closures (continue), grid-faults (continue), china-fleet (continue), europe-ops (continue), urgent",
		"-> audit nats PUBLISH relay.audit.urgent.bms.end",
	} {
		if !strings.Contains(end, want) {
			t.Errorf("end lacks %q:\n%s", want, end)
		}
	}
	if !strings.Contains(out, "alarm 90001: level 0 (urgent), event E-GRID-001") {
		t.Errorf("no alarm summary:\n%s", out)
	}
	noSecrets(t, out, errOut)
}

func TestRouteWorksWithoutTheSecretsTheRulesName(t *testing.T) {
	cleanEnv(t, map[string]string{"RELAY_NATS_URL": "nats://127.0.0.1:4222"})
	alarmFile := filepath.Join(t.TempDir(), "alarms.json")
	page := `{"code": "00000", "data": {"current": 1, "size": 20, "total": 2, "dataList": [` + urgentGridAlarm +
		`, {"originId": "90002", "deviceSn": "SN-LAB-0001", "eventLevel": 3, "status": "0", "occurrenceTimeStr": "2026-11-21 08:00:00"}]}}`
	if err := os.WriteFile(alarmFile, []byte(page), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, cmdRoute, "--alarm", alarmFile, "--rules", exampleRules)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "note: SLACK_WEBHOOK_URL is not set") || !strings.Contains(errOut, "note: OPS_WEBHOOK_SECRET is not set") {
		t.Errorf("stderr does not note the unset variables:\n%s", errOut)
	}
	lab := out[strings.Index(out, "alarm 90002"):]
	if !strings.Contains(section(lab, "  start:", "  end:"), "routes: everything-to-bus (continue), audit-closures (continue), lab-devices\n") {
		t.Errorf("the lab device's start is not stopped by lab-devices:\n%s", lab)
	}
}

func TestRouteRefusesWhatIsNotAnAlarm(t *testing.T) {
	cleanEnv(t, exampleEnv)
	for _, c := range []struct{ name, body, want string }{
		{"empty", "", "empty file"},
		{"not json", "originId: 1", "not JSON"},
		{"no originId", `{"deviceSn": "x"}`, "no originId"},
		{"bad status", `{"originId": "1", "status": 2}`, "status: 2 is not 1, 0 or -1"},
		{"bad time", `{"originId": "1", "occurrenceTime": "yesterday"}`, "occurrenceTime"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "a.json")
			if err := os.WriteFile(f, []byte(c.body), 0o600); err != nil {
				t.Fatal(err)
			}
			code, _, errOut := runCmd(t, cmdRoute, "--alarm", f, "--rules", exampleRules)
			if code != 1 || !strings.Contains(errOut, c.want) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, errOut, c.want)
			}
		})
	}
	if code, _, _ := runCmd(t, cmdRoute, "--rules", exampleRules); code != 2 {
		t.Fatalf("without --alarm: exit %d, want 2", code)
	}
}

func TestDecodeAlarmIsTolerant(t *testing.T) {
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		json string
		want event.Alarm
	}{
		{"numbers", `{"originId": 7, "stationId": 5001, "eventLevel": 2, "status": 0, "occurrenceTime": 1795248000000, "recoveryTime": 1795248060000}`,
			event.Alarm{OriginID: "7", StationID: "5001", Level: 2, Status: 0, OccurredAt: at, RecoveredAt: at.Add(time.Minute)}},
		{"strings", `{"originId": "7", "stationId": "5001", "eventLevel": "2", "status": "-1", "occurrenceTime": "1795248000000"}`,
			event.Alarm{OriginID: "7", StationID: "5001", Level: 2, Status: -1, OccurredAt: at}},
		{"time strings read in the upstream zone", `{"originId": "7", "occurrenceTimeStr": "2026-11-21 16:00:00"}`,
			event.Alarm{OriginID: "7", Level: -1, Status: 1, OccurredAt: at}},
		{"float-written integers and nulls", `{"originId": "7", "eventLevel": 1.0, "status": 1, "deviceSn": null}`,
			event.Alarm{OriginID: "7", Level: 1, Status: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := decodeAlarm([]byte(c.json), shanghai)
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Raw) != c.json {
				t.Fatalf("raw = %s, want the record as received", got.Raw)
			}
			got.Raw = nil
			if got.OriginID != c.want.OriginID || got.StationID != c.want.StationID || got.Level != c.want.Level ||
				got.Status != c.want.Status || !got.OccurredAt.Equal(c.want.OccurredAt) || !got.RecoveredAt.Equal(c.want.RecoveredAt) || got.DeviceSN != "" {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// section returns the part of s from the line starting with from up to to.
func section(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	s = s[i:]
	if j := strings.Index(s, to); j > 0 {
		s = s[:j]
	}
	return s
}

// TestRouteAcceptsWhatRelayAPIAlarmsPrints: the page relay api alarms prints
// can be handed to relay route as it is.
func TestRouteAcceptsWhatRelayAPIAlarmsPrints(t *testing.T) {
	cleanEnv(t, exampleEnv)
	page := opendata.AlarmPage{Current: 1, Size: 500, Total: 1, Pages: 1, Rows: 1,
		Alarms: []event.Alarm{{OriginID: "90001", Status: 1, Raw: json.RawMessage(urgentGridAlarm)}}}
	body, err := json.MarshalIndent(page, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "alarms.json")
	if err := os.WriteFile(f, body, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, cmdRoute, "--alarm", f, "--rules", exampleRules)
	if code != 0 || !strings.Contains(out, "alarm 90001: level 0 (urgent), event E-GRID-001") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// Upstream text holding terminal controls is printed escaped, names in any
// script readable.
func TestRouteEscapesTheUpstreamsText(t *testing.T) {
	cleanEnv(t, exampleEnv)
	alarmFile := filepath.Join(t.TempDir(), "alarm.json")
	record := `{"originId": "9\u001b[2J1", "stationId": "5001", "stationName": "北区\r储能站", "deviceSn": "SN\b42",
		"deviceName": "Battery rack\u202e 3", "eventCode": "E1", "eventDesc": "\u001b[31mover-temperature",
		"eventLevel": 0, "status": 1, "occurrenceTime": 1795680000000, "tenantId": "1001"}`
	if err := os.WriteFile(alarmFile, []byte(record), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, cmdRoute, "--alarm", alarmFile, "--rules", exampleRules)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	want := `alarm 9\x1b[2J1: level 0 (urgent), event E1 "\x1b[31mover-temperature", device SN\b42 "Battery rack\u202e 3" (), station 5001 "北区\r储能站", system , tenant 1001`
	if !strings.Contains(out, want+"\n") {
		t.Errorf("output lacks\n%s\n%s", want, out)
	}
	if strings.ContainsAny(out, "\x1b\r\b\u202e") {
		t.Errorf("output holds a terminal control:\n%q", out)
	}
}

// TestRouteRenderShowsEverySinksBody runs docs/rules.md's command: with
// --render, every sink an alarm goes to shows the requests it would send,
// body and all, and no secret (the variables are unset, so relay route uses
// placeholders and says so).
func TestRouteRenderShowsEverySinksBody(t *testing.T) {
	cleanEnv(t, nil)
	code, out, errOut := runCmd(t, cmdRoute, "--alarm", "../../testdata/alarm.json", "--rules", exampleRules, "--render")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	routed := regexp.MustCompile(`(?m)^    -> (\S+) `).FindAllStringSubmatch(out, -1)
	if len(routed) < 5 {
		t.Fatalf("the alarm went to %d sinks, want the example's routes to send it to several:\n%s", len(routed), out)
	}
	for _, m := range routed {
		if !strings.Contains(out, "    "+m[1]+" sends ") {
			t.Errorf("no rendering of sink %s:\n%s", m[1], out)
		}
	}
	if !strings.Contains(out, `"originId":"90001"`) {
		t.Errorf("no event body in the rendering:\n%s", out)
	}
	noSecrets(t, out, errOut)
}
