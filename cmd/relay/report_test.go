package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/isa"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/service"
	"github.com/relay-energy/relay/internal/store"
)

const reportRulesFile = `sinks:
  - name: out
    type: console
routes:
  - name: urgent
    match: { levels: [urgent] }
    to: [out]
    continue: true
  - name: everything
    to: [out]
`

// reportState writes a state file whose journal holds 12 urgent alarms and
// then 3 minor ones, 30 s apart from until-3h: the 11th starts at 5:00, the
// 5th leaves the 10 minutes at 12:00, so 420 s in flood. It returns the
// file's path and the period's end.
func reportState(t *testing.T) (string, time.Time) {
	t.Helper()
	until := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "copy.db")
	s, err := store.Open(path, store.Options{Clock: clock.NewFake(until)})
	if err != nil {
		t.Fatal(err)
	}
	var b store.Batch
	for i := range 15 {
		level := 0
		if i >= 12 {
			level = 3
		}
		b.Observed = append(b.Observed, event.Alarm{
			OriginID: fmt.Sprint("a", i), Status: event.StatusOngoing, Level: level, EventCode: "E1", EventDesc: "grid fault",
			DeviceSN: fmt.Sprint("SN", i%2), StationID: "s1", OccurredAt: until.Add(-3*time.Hour + time.Duration(i)*30*time.Second),
		})
	}
	if _, err := s.Apply(context.Background(), b, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path, until
}

func TestReportOnACopiedStateFile(t *testing.T) {
	cleanEnv(t, nil)
	state, until := reportState(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte(reportRulesFile), 0o600); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(t.TempDir(), "hours.svg")
	code, out, errs := runCmd(t, cmdReport, "--state", state, "--rules", rules, "--since", "1d",
		"--until", until.Format(time.RFC3339), "--format", "json", "--svg", chart)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep isa.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Overall.Alarms != 15 || rep.Overall.Peak10m != 15 || rep.Overall.FloodSeconds != 420 || rep.Rules != rules {
		t.Fatalf("overall: %d alarms, peak %d, flood %g s, rules %q; want 15, 15, 420 s, %s",
			rep.Overall.Alarms, rep.Overall.Peak10m, rep.Overall.FloodSeconds, rep.Rules, rules)
	}
	if len(rep.Routes) != 2 || rep.Routes[0].Alarms != 12 || rep.Routes[1].Alarms != 15 {
		t.Fatalf("routes %+v, want urgent 12, everything 15", rep.Routes)
	}
	svg, err := os.ReadFile(chart)
	if err != nil || xml.Unmarshal(svg, new(struct{})) != nil || !strings.Contains(string(svg), "flood threshold") {
		t.Fatalf("--svg wrote %d bytes (%v), want a chart with the flood threshold", len(svg), err)
	}

	// Text, and no rules: the overall figures alone, with a note.
	code, out, errs = runCmd(t, cmdReport, "--state", state, "--since", "1d", "--until", until.Format(time.RFC3339))
	if code != 0 || !regexp.MustCompile(`\(all alarms\) +15 `).MatchString(out) || !strings.Contains(out, "No rules were given") ||
		!strings.Contains(errs, "no rules file") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}

func TestReportRefusesWhatItCannotUse(t *testing.T) {
	cleanEnv(t, nil)
	state, _ := reportState(t)
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"a bad period", []string{"--state", state, "--since", "a week"}, 2, `--since "a week": want a duration such as 7d`},
		{"a bad end", []string{"--state", state, "--until", "today"}, 2, "RFC 3339"},
		{"a bad format", []string{"--state", state, "--format", "html"}, 2, "text, markdown, json"},
		{"rules without a state file", []string{"--rules", "rules.yaml"}, 2, "--rules goes with --state"},
		{"a state file and an address", []string{"--state", state, "--addr", "127.0.0.1:1"}, 2, "exclude each other"},
		{"a missing state file", []string{"--state", filepath.Join(t.TempDir(), "none.db")}, 1, "none.db"},
		{"a missing rules file", []string{"--state", state, "--rules", filepath.Join(t.TempDir(), "none.yaml")}, 1, "none.yaml"},
		{"no admin token", []string{}, 1, "RELAY_ADMIN_TOKEN is not set"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runCmd(t, cmdReport, tt.args...)
			if code != tt.code || !strings.Contains(errs, tt.want) || out != "" {
				t.Fatalf("exit %d, stderr %q, stdout %q; want %d and %q", code, errs, out, tt.code, tt.want)
			}
		})
	}
}

// TestReportFromTheRunningRelay: relay report asks the running relay, whose
// routes are the operator positions, and prints what relay report --state
// prints from its state file once it stopped.
func TestReportFromTheRunningRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for a few seconds")
	}
	upstream := sim.StartTest(t, sim.Options{RateLimit: 600})
	for level := range 4 {
		if _, err := upstream.StartAlarm(sim.AlarmSpec{Level: level}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte(reportRulesFile), 0o600); err != nil {
		t.Fatal(err)
	}
	appID, secret := upstream.Credentials()
	env := map[string]string{
		"RELAY_BASE_URL": upstream.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": secret, "RELAY_RATE_LIMIT": "600",
		"RELAY_STATE_PATH": filepath.Join(dir, "relay.db"), "RELAY_RULES": rules, "RELAY_LISTEN": "127.0.0.1:0",
		"RELAY_SHUTDOWN_GRACE": "1s", "RELAY_ADMIN_TOKEN": "an-admin-token-of-16",
	}
	cfg, err := config.Load(context.Background(), envconfig.MapLookuper(env))
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- service.Run(ctx, service.Options{Config: cfg, Console: &syncBuffer{}, Ready: func(addr string) { ready <- addr }})
	}()
	defer func() {
		cancel()
		<-done
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("run returned early: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the relay never listened")
	}
	cleanEnv(t, map[string]string{"RELAY_ADMIN_TOKEN": "an-admin-token-of-16", "RELAY_LISTEN": addr})
	until := time.Now().Add(time.Minute).UTC().Truncate(time.Second).Format(time.RFC3339)
	var remote string
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, errs := runCmd(t, cmdReport, "--since", "2d", "--until", until, "--format", "markdown")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		if strings.Contains(out, "| (all alarms) | 4 |") {
			remote = out
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the report never counted the 4 alarms:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(remote, "| urgent | 1 |") || !strings.Contains(remote, "| everything | 4 |") {
		t.Fatalf("the running relay's routes are not the positions:\n%s", remote)
	}
	if code, _, errs := runCmd(t, cmdReport, "--addr", addr, "--since", "2d"); code != 0 {
		t.Fatalf("--addr: exit %d: %s", code, errs)
	}
	t.Setenv("RELAY_ADMIN_TOKEN", "a-wrong-admin-token")
	if code, _, errs := runCmd(t, cmdReport); code != 1 || !strings.Contains(errs, "HTTP 401") || strings.Contains(errs, "a-wrong") {
		t.Fatalf("a wrong token: exit %d, %q; want 1 and HTTP 401 without the token", code, errs)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	done <- nil
	code, local, errs := runCmd(t, cmdReport, "--state", cfg.Store.Path, "--rules", rules, "--since", "2d", "--until", until, "--format", "markdown")
	if code != 0 {
		t.Fatalf("--state: exit %d: %s", code, errs)
	}
	if local != remote {
		t.Fatalf("the state file's report differs from the running relay's:\n%s\n---\n%s", local, remote)
	}
}
