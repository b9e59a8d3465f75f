package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/service"
	"github.com/relay-energy/relay/internal/testwait"
)

// TestAckUnackShelveThroughTheRunningRelay: relay ack acknowledges an
// ongoing alarm of the running relay and says so; a second ack exits 1
// naming who was first; relay ack --list shows who; relay unack takes it
// back; an alarm the relay does not know exits 1 saying so; relay shelve
// --for 1h makes a silence that relay silence list shows.
func TestAckUnackShelveThroughTheRunningRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service")
	}
	id := runningRelayWithAlarm(t)

	code, out, errs := runCmd(t, cmdAck, id, "--by", "alice", "--comment", "on my way")
	if code != 0 || out != id+": Acknowledged.\n" || errs != "" {
		t.Fatalf("ack: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
	code, out, errs = runCmd(t, cmdAck, "--by", "bob", id)
	if code != 1 || !strings.Contains(out, "already acknowledged by alice at ") {
		t.Fatalf("ack a second time: exit %d\nstdout %q\nstderr %q; want 1 and who was first", code, out, errs)
	}

	code, out, errs = runCmd(t, cmdAck, "--list")
	if code != 0 {
		t.Fatalf("ack --list: exit %d\n%s%s", code, out, errs)
	}
	if line := lineWith(out, id); !strings.Contains(line, "by alice via api at ") || !strings.Contains(line, "urgent") {
		t.Fatalf("ack --list shows %q for %s, want urgent, by alice via api:\n%s", line, id, out)
	}
	code, out, errs = runCmd(t, cmdAck, "--list", "--json")
	var list service.AckAnswer
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Alarms) != 1 || !list.Alarms[0].Acknowledged ||
		list.Alarms[0].Ack == nil || list.Alarms[0].Ack.By != "alice" || list.Alarms[0].Ack.Comment != "on my way" {
		t.Fatalf("ack --list --json: exit %d\n%s%s", code, out, errs)
	}

	code, out, errs = runCmd(t, cmdUnack, id, "--by", "alice")
	if code != 0 || out != id+": Acknowledgement withdrawn.\n" {
		t.Fatalf("unack: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
	if code, out, _ = runCmd(t, cmdUnack, id, "--by", "alice"); code != 1 || !strings.Contains(out, "not acknowledged") {
		t.Fatalf("unack of an alarm nobody acknowledged: exit %d %q", code, out)
	}
	if code, out, _ = runCmd(t, cmdAck, "--list"); code != 0 || !strings.HasSuffix(strings.TrimSpace(lineWith(out, id)), " no") {
		t.Fatalf("ack --list after unack:\n%s", out)
	}

	code, out, errs = runCmd(t, cmdAck, "nosuchalarm", "--by", "alice")
	if code != 1 || !strings.Contains(out, "relay does not know this alarm") {
		t.Fatalf("ack of an unknown alarm: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}

	code, out, errs = runCmd(t, cmdShelve, id, "--for", "1h", "--by", "alice", "--comment", "known fault")
	if code != 0 || out != id+": Shelved.\n" {
		t.Fatalf("shelve: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
	code, out, errs = runCmd(t, cmdSilence, "list")
	if code != 0 || !strings.Contains(out, "1 silence listed") {
		t.Fatalf("silence list after shelve: exit %d\n%s%s", code, out, errs)
	}
	if line := lineWith(out, "shelved for 1h"); !strings.Contains(line, "active") || !strings.Contains(line, "api:alice") ||
		!strings.Contains(line, id) || !strings.Contains(line, "event_codes=") {
		t.Fatalf("the shelving's silence, listed:\n%s", out)
	}
}

// lineWith returns the first line of text that contains s, or "".
func lineWith(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// runningRelayWithAlarm starts the relay on a simulator with one ongoing
// alarm, points the commands at it with the admin token as user ana, and
// returns the alarm's id once relay ack --list shows it.
func runningRelayWithAlarm(t *testing.T) string {
	t.Helper()
	upstream := sim.StartTest(t, sim.Options{RateLimit: 600})
	id, err := upstream.StartAlarm(sim.AlarmSpec{Level: 0})
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := startService(t, upstream, t.TempDir())
	cleanEnv(t, map[string]string{"RELAY_ADMIN_TOKEN": silenceAdminToken, "RELAY_LISTEN": addr, "USER": "ana"})
	testwait.For(t, 20*time.Second, "the relay to know alarm "+id, func() bool {
		code, out, _ := runCmd(t, cmdAck, "--list")
		return code == 0 && strings.Contains(out, id)
	})
	return id
}
