package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/opendata/sim"
)

// relay api prints the upstream's records as JSON with the characters a
// terminal would act on escaped, readable text kept.
func TestAPIEscapesTheUpstreamsText(t *testing.T) {
	s := sim.New(sim.Options{Seed: 1})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.StartAlarm(sim.AlarmSpec{Level: 0, EventCode: "E1\u202e\u009b31m过温"}); err != nil {
		t.Fatal(err)
	}
	id, secret := s.Credentials()
	cleanEnv(t, map[string]string{"RELAY_BASE_URL": s.URL(), "RELAY_APP_ID": id, "RELAY_APP_SECRET": secret,
		"RELAY_STATE_PATH": filepath.Join(t.TempDir(), "relay.db")})
	code, out, errOut := runCmd(t, cmdAPI, "alarms")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, `"E1\u202e\u009b31m过温"`) {
		t.Errorf("the event code is not printed escaped:\n%s", out)
	}
	if strings.ContainsAny(out, "\u202e\u009b") {
		t.Errorf("output holds a terminal control:\n%q", out)
	}
}
