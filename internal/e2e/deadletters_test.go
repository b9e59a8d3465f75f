package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

const deadLetterRules = `
sinks:
  - name: oncall
    type: slack
    channel: C0ONCALL
routes:
  - name: all
    to: [oncall]
`

// TestDeadLettersReplayAfterAFixedToken is the acceptance: with a
// rotated (wrong) Slack token every start and end is dead-lettered; the
// relay is restarted with the fixed token, `relay deadletters replay --sink
// oncall` (the built binary, through the ops listener) puts them back, and
// Slack then gets each event once, in order: every start as a message, every
// end as a reply in its start's thread.
func TestDeadLettersReplayAfterAFixedToken(t *testing.T) {
	skipShort(t)
	const rate = 600
	s := startSim(t, sim.Options{Seed: 11, RateLimit: rate})
	goodToken, adminToken := newSecret(t, "xoxb-"), newSecret(t, "admin-")
	slack := notifytest.NewSlack(t, goodToken)
	dir := t.TempDir()
	env := relayEnv(s, rate, dir, writeRules(t, dir, deadLetterRules))
	env["RELAY_SLACK_TOKEN"] = newSecret(t, "xoxb-rotated-")
	env["RELAY_SLACK_API_URL"] = slack.APIURL()
	env["RELAY_ADMIN_TOKEN"] = adminToken

	first := startRelay(t, "relay with the old token", env)
	ops := first.opsAddr(15 * time.Second)
	waitReady(t, first, ops, 15*time.Second)
	var ids []string
	for range 3 {
		id, err := s.StartAlarm(sim.AlarmSpec{Level: 0})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	deadletters := func(args ...string) (string, error) {
		cmd := exec.Command(relayBinary(t), append([]string{"deadletters"}, args...)...)
		cmd.Env = []string{"RELAY_ADMIN_TOKEN=" + adminToken, "RELAY_LISTEN=" + ops}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	waitFor(t, first, 30*time.Second, "the starts dead-lettered", func() error {
		if n := strings.Count(first.stderr.String(), "dead-lettered"); n < 3 {
			return fmt.Errorf("%d dead letters", n)
		}
		return nil
	})
	for _, id := range ids[:2] {
		if err := s.EndAlarm(id, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	// The ends are parked beside their dead starts, never attempted alone.
	var out string
	waitFor(t, first, 30*time.Second, "the ends parked beside their starts", func() error {
		var err error
		if out, err = deadletters("list", "--sink", "oncall"); err != nil || !strings.Contains(out, "5 dead letters listed") {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	if !strings.Contains(out, "invalid_auth") || strings.Count(out, "parked beside its start") != 2 || strings.Count(out, "ended") != 4 {
		t.Fatalf("relay deadletters list: want 3 starts refused (invalid_auth), 2 ends parked, 2 alarms ended:\n%s", out)
	}
	if out, err := deadletters("list", "--withheld"); err != nil || !strings.Contains(out, "0 withheld or dropped entries listed") {
		t.Fatalf("relay deadletters list --withheld: %v\n%s", err, out)
	}
	if out, err := deadletters("replay"); err == nil || !strings.Contains(out, "all=true") {
		t.Fatalf("replay without a filter should be refused: %v\n%s", err, out)
	}
	if code, _ := first.terminate(20 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if n := len(slack.Calls()); n == 0 || slack.Calls()[0].Error != "invalid_auth" {
		t.Fatalf("Slack saw %d calls; want the refused ones", n)
	}
	refused := len(slack.Calls())

	// The token is fixed; the relay restarts with it, on the same state.
	env["RELAY_SLACK_TOKEN"] = goodToken
	second := startRelay(t, "relay with the fixed token", env)
	ops = second.opsAddr(15 * time.Second)
	waitReady(t, second, ops, 15*time.Second)
	out, err := deadletters("replay", "--sink", "oncall")
	if err != nil || !strings.Contains(out, "5 dead letters replayed") {
		t.Fatalf("relay deadletters replay: %v\n%s", err, out)
	}
	posted := func() []notifytest.SlackCall {
		var ok []notifytest.SlackCall
		for _, c := range slack.Calls()[refused:] {
			if c.Error == "" && c.Method == notifytest.MethodPostMessage {
				ok = append(ok, c)
			}
		}
		return ok
	}
	waitFor(t, second, 30*time.Second, "five messages posted", func() error {
		if n := len(posted()); n < 5 {
			return fmt.Errorf("%d posted", n)
		}
		return nil
	})
	time.Sleep(time.Second) // a sixth, duplicate post would show by now
	calls := posted()
	if len(calls) != 5 {
		t.Fatalf("%d messages posted, want 5 (3 starts, 2 ends): %+v", len(calls), calls)
	}
	for i, id := range ids {
		var start, end []notifytest.SlackCall
		for _, c := range calls {
			if c.ThreadTS == "" && strings.Contains(c.Text+footers(c), id) {
				start = append(start, c)
			}
		}
		if len(start) != 1 {
			t.Fatalf("alarm %s: %d starts posted, want 1", id, len(start))
		}
		for _, c := range calls {
			if c.ThreadTS == start[0].TS {
				end = append(end, c)
			}
		}
		wantEnds := 1
		if i == 2 {
			wantEnds = 0
		}
		if len(end) != wantEnds {
			t.Errorf("alarm %s: %d ends posted in its start's thread, want %d", id, len(end), wantEnds)
		}
	}
	if out, err := deadletters("list"); err != nil || !strings.Contains(out, "0 dead letters listed") {
		t.Errorf("dead letters left after the replay: %v\n%s", err, out)
	}
	if code, _ := second.terminate(20 * time.Second); code != 0 {
		t.Errorf("exit %d", code)
	}
}

func footers(c notifytest.SlackCall) string {
	var b strings.Builder
	for _, a := range c.Attachments {
		b.WriteString(a.Footer + " ")
	}
	return b.String()
}
