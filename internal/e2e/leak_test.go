package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/redact/redacttest"
)

const leakRules = `
sinks:
  - name: ops
    type: webhook
    url: %s/hook?key=%s
    secret_env: LEAK_WEBHOOK_SECRET
    headers:
      Authorization: Bearer %s
  - name: chat
    type: slack
    webhook_url_env: LEAK_SLACK_WEBHOOK_URL
  - name: oncall
    type: slack
    channel: C0LEAK
routes:
  - name: all
    to: [ops, chat, oncall]
`

// TestDebugLogHoldsNoConfiguredSecret is the acceptance: the built
// relay runs at debug level, with every kind of secret configured (app
// secret, Slack token, Slack webhook URL, webhook signing secret, header
// credential, URL query credential, NATS password), against receivers that
// echo whole requests in their error answers; its log holds none of them.
func TestDebugLogHoldsNoConfiguredSecret(t *testing.T) {
	skipShort(t)
	const rate = 600
	s := startSim(t, sim.Options{Seed: 9, RateLimit: rate, AppSecret: newSecret(t, "app-")})
	echo := notifytest.NewEcho(t, http.StatusBadRequest)
	slackAPI := notifytest.NewEcho(t, http.StatusBadRequest)
	ns := natstest.StartServer(t, natstest.Config{User: "relay", Password: "nats-right-password"})
	var (
		webhookSecret = newSecret(t, "whsec_")
		bearer        = newSecret(t, "bearer-")
		query         = newSecret(t, "query-")
		slackToken    = newSecret(t, "xoxb-")
		hookPath      = strings.NewReplacer("/", "A", "+", "B", "=", "C").Replace(newSecret(t, "hook"))
		natsPassword  = newSecret(t, "nats-")
	)
	dir := t.TempDir()
	env := relayEnv(s, rate, dir, writeRules(t, dir, fmt.Sprintf(leakRules, echo.URL, query, bearer)))
	env["RELAY_LOG_LEVEL"] = "debug"
	env["LEAK_WEBHOOK_SECRET"] = webhookSecret
	env["LEAK_SLACK_WEBHOOK_URL"] = echo.URL + "/services/T0/B0/" + hookPath
	env["RELAY_SLACK_TOKEN"] = slackToken
	env["RELAY_SLACK_API_URL"] = slackAPI.URL + "/api/"
	env["RELAY_NATS_URL"] = ns.URL()
	env["RELAY_NATS_USER"], env["RELAY_NATS_PASSWORD"] = "relay", natsPassword
	_, appSecret := s.Credentials()

	if _, err := s.StartAlarm(sim.AlarmSpec{Level: 0}); err != nil {
		t.Fatal(err)
	}
	p := startRelay(t, "relay", env)
	waitFor(t, p, 30*time.Second, "dead letters of the refusing sinks", func() error {
		text := p.stderr.String()
		if strings.Count(text, "dead-lettered") < 3 {
			return fmt.Errorf("%d dead letters logged", strings.Count(text, "dead-lettered"))
		}
		return nil
	})
	if code, _ := p.terminate(20 * time.Second); code != 0 {
		t.Errorf("exit %d", code)
	}
	log := p.stderr.String() + p.stdout.String()
	if !strings.Contains(log, `"level":"DEBUG"`) {
		t.Fatal("the log has no debug lines: the check would prove little")
	}
	redacttest.AssertNoSecret(t, []string{appSecret, webhookSecret, strings.TrimPrefix(webhookSecret, "whsec_"),
		bearer, query, slackToken, hookPath, natsPassword}, map[string]string{"the debug log": log})
}
