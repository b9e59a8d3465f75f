package service

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/redact/redacttest"
	"github.com/relay-energy/relay/internal/testwait"
)

// The secrets of the System page test's configuration and rules: none may
// reach the page.
const (
	sysHookKey = "hook-query-key-7c1e9a"
	// sysHookPath is the path of the webhook's URL, a secret as in a
	// Discord or Zapier hook: before the fix the System page showed it.
	sysHookPath    = "T0-hook-path-secret-5d2a"
	sysSlackToken  = "xoxb-system-page-token"
	sysDingToken   = "ding-access-token-4b2f8d"
	sysDingSecret  = "SECsystem-page-ding-secret"
	sysViewToken   = "view-system-0123456789"
	sysAdminToken  = "admin-system-0123456789"
	sysRulesRoutes = `routes:
  - name: all
    to: [hook]
  - name: minor
    match: { levels: [3] }
    to: [chat, ding]
`
)

// sysRules are rules whose sinks carry a secret each: a webhook URL with a
// key in its query, a Slack channel sink (RELAY_SLACK_TOKEN), a signed
// DingTalk robot.
func sysRules(hookURL string) string {
	return `sinks:
  - name: hook
    type: webhook
    url: ` + hookURL + `/` + sysHookPath + `?key=` + sysHookKey + `
  - name: chat
    type: slack
    channel: C0PAGER
  - name: ding
    type: dingtalk
    url_env: DING_URL
    secret_env: DING_SECRET
` + sysRulesRoutes
}

// The System page of the running service lists the rules' sinks with the
// webhook's last error after it answered 500, tells when the rules were
// loaded and that a reload was refused, then that the next one was
// applied, and shows no secret of the configuration or the rules.
func TestSystemPageOfTheRunningService(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for a few seconds")
	}
	clk := clock.NewScaled(time.Now().UTC().Truncate(time.Second), 10)
	up := sim.StartTest(t, sim.Options{Clock: clk, RateLimit: 60})
	hook := notifytest.NewReceiver(t, "")
	hook.Down(notifytest.Answer{Status: 500})
	slack := notifytest.NewSlack(t, sysSlackToken)
	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "rules.yaml")
	writeFile(t, rulesPath, sysRules(hook.URL()))
	appID, appSecret := up.Credentials()
	cfg, err := config.Load(context.Background(), envconfig.MapLookuper(map[string]string{
		"RELAY_BASE_URL": up.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": appSecret,
		"RELAY_RATE_LIMIT": "60", "RELAY_STATE_PATH": filepath.Join(dir, "relay.db"), "RELAY_RULES": rulesPath,
		"RELAY_SLACK_TOKEN": sysSlackToken, "RELAY_SLACK_API_URL": slack.APIURL(),
		"RELAY_ADMIN_TOKEN": sysAdminToken, "RELAY_VIEW_TOKEN": sysViewToken,
		"RELAY_LISTEN": "127.0.0.1:0", "RELAY_SHUTDOWN_GRACE": "1s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"DING_URL":    "https://oapi.dingtalk.com/robot/send?access_token=" + sysDingToken,
		"DING_SECRET": sysDingSecret,
	}
	var logs syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the relay's log:\n%s", logs.String())
		}
	})
	ops, _ := startRun(t, Options{Config: cfg, Clock: clk, Console: io.Discard, Logger: NewLogger(&logs, "debug", "text", nil),
		Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, ReloadEvery: time.Second})

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base := "http://" + ops + "/console/"
	login, err := http.NewRequest("POST", base+"login", strings.NewReader(url.Values{"token": {sysViewToken}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(login)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login with the view token: %s, want 303", resp.Status)
	}
	var pages []string
	get := func() string {
		t.Helper()
		resp, err := c.Get(base + "system")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /console/system: %s\n%s", resp.Status, b)
		}
		pages = append(pages, string(b))
		return string(b)
	}

	page := get()
	for _, want := range []string{`<tr id="sink-hook">`, `<tr id="sink-chat">`, `<tr id="sink-ding">`, "<td>webhook</td>",
		"<td>dingtalk</td>", "<code>" + rulesPath + "</code>", "the file in force is the file on disk",
		"2 routes, 3 sinks", "Standalone", "This process serves one tenant", "<td>all</td>", "<td>chat, ding</td>",
		`<table class="system" id="sys-facts">`, `<th scope="row">totals_honest</th>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	loaded := regexp.MustCompile(`<dd id="sys-loaded"><time datetime="([^"]+)"`).FindStringSubmatch(page)
	digest := regexp.MustCompile(`<code id="sys-digest">([0-9a-f]{64})</code>`).FindStringSubmatch(page)
	if loaded == nil || digest == nil {
		t.Fatalf("no load time or SHA-256 of the rules on the page:\n%s", page)
	}

	if _, err := up.StartAlarm(sim.AlarmSpec{Level: 0}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the webhook's 500 on the System page", func() bool {
		return regexp.MustCompile(`(?s)<tr id="sink-hook" class="failing">.*?HTTP 500.*?</tr>`).MatchString(get())
	})
	testwait.For(t, 20*time.Second, "a successful poll on the page", func() bool {
		return !strings.Contains(get(), "Last successful poll</dt><dd>none yet")
	})

	writeFile(t, rulesPath, "sinks: [\n")
	testwait.For(t, 20*time.Second, "the refused reload on the page", func() bool {
		return strings.Contains(get(), "<strong>refused</strong>")
	})
	if p := pages[len(pages)-1]; !strings.Contains(p, digest[1]) {
		t.Errorf("after a refused reload the page does not show the digest of the rules in force %s:\n%s", digest[1], p)
	}
	writeFile(t, rulesPath, sysRules(hook.URL())+"  - name: extra\n    match: { levels: [2] }\n    to: [hook]\n")
	testwait.For(t, 20*time.Second, "the applied reload on the page", func() bool {
		p := get()
		return strings.Contains(p, "the file in force is the file on disk") && strings.Contains(p, "<td>extra</td>")
	})
	page = pages[len(pages)-1]
	if strings.Contains(page, digest[1]) || !strings.Contains(page, "3 routes, 3 sinks") {
		t.Errorf("the reloaded rules show the old digest %s or are not counted:\n%s", digest[1], page)
	}
	reloaded := regexp.MustCompile(`<dd id="sys-loaded"><time datetime="([^"]+)"`).FindStringSubmatch(page)
	first, _ := time.Parse(time.RFC3339, loaded[1])
	if reloaded == nil {
		t.Fatalf("no load time after the reload:\n%s", page)
	}
	if again, err := time.Parse(time.RFC3339, reloaded[1]); err != nil || again.Before(first) {
		t.Errorf("the rules were loaded at %s and reloaded at %s (%v): want the later load", loaded[1], reloaded[1], err)
	}

	secrets := []string{sysHookKey, sysHookPath, sysSlackToken, sysDingToken, sysDingSecret, sysViewToken, sysAdminToken, appSecret}
	texts := map[string]string{}
	for i, p := range pages {
		texts[fmt.Sprintf("page %d", i)] = p
		texts[fmt.Sprintf("page %d unescaped", i)] = html.UnescapeString(p)
	}
	redacttest.AssertNoSecret(t, secrets, texts)
}
