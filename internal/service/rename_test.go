package service

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

const slackRules = `sinks:
  - name: %s
    type: slack
    channel: C0PAGER
routes:
  - name: all
    to: [%s]
`

// TestRenamingASlackSinkKeepsItsThreads: an alarm starts under the sink
// "oncall"; the rules rename it "pager" with the same channel; the alarm's
// end is still posted in the thread of its start, not as a new message.
func TestRenamingASlackSinkKeepsItsThreads(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for a few seconds")
	}
	upstream := sim.StartTest(t, sim.Options{RateLimit: 600})
	slack := notifytest.NewSlack(t, "xoxb-rename-token")
	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "rules.yaml")
	writeFile(t, rulesPath, strings.ReplaceAll(slackRules, "%s", "oncall"))
	appID, secret := upstream.Credentials()
	cfg, err := config.Load(context.Background(), envconfig.MapLookuper(map[string]string{
		"RELAY_BASE_URL": upstream.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": secret,
		"RELAY_RATE_LIMIT": "600", "RELAY_STATE_PATH": filepath.Join(dir, "relay.db"), "RELAY_RULES": rulesPath,
		"RELAY_SLACK_TOKEN": "xoxb-rename-token", "RELAY_SLACK_API_URL": slack.APIURL(),
		"RELAY_LISTEN": "127.0.0.1:0", "RELAY_SHUTDOWN_GRACE": "1s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: cfg, HUP: hup, Logger: NewLogger(&logs, "info", "text", nil)})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	id, err := upstream.StartAlarm(sim.AlarmSpec{Level: 0})
	if err != nil {
		t.Fatal(err)
	}
	startTS := ""
	waitUntil(t, "the start posted", func() bool {
		for _, c := range slack.Calls() {
			if c.Method == notifytest.MethodPostMessage && c.ThreadTS == "" && strings.Contains(c.Text+attachmentsText(c), id) {
				startTS = c.TS
			}
		}
		return startTS != ""
	}, slack.Calls)

	writeFile(t, rulesPath, strings.ReplaceAll(slackRules, "%s", "pager"))
	hup <- syscall.SIGHUP
	waitUntil(t, "the rename applied", func() bool { return strings.Contains(logs.String(), "sink renamed") }, nil)
	if err := upstream.EndAlarm(id, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the end posted in the start's thread", func() bool {
		for _, c := range slack.Calls() {
			if c.Method == notifytest.MethodPostMessage && c.ThreadTS == startTS {
				return true
			}
		}
		return false
	}, slack.Calls)
	for _, c := range slack.Calls() {
		if c.Method == notifytest.MethodPostMessage && c.ThreadTS == "" && c.TS != startTS {
			t.Errorf("a new top-level message was posted: %+v", c)
		}
	}
	if !strings.Contains(logs.String(), "from=oncall to=pager") {
		t.Errorf("the log does not name the rename:\n%s", logs.String())
	}
}

func attachmentsText(c notifytest.SlackCall) string {
	var b strings.Builder
	for _, a := range c.Attachments {
		b.WriteString(a.Text + a.Fallback + a.Title + a.Footer)
		for _, f := range a.Fields {
			b.WriteString(f.Value)
		}
	}
	return b.String()
}

func waitUntil(t *testing.T, what string, cond func() bool, calls func() []notifytest.SlackCall) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			if calls != nil {
				t.Logf("calls: %+v", calls())
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
