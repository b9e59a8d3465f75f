package service

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/store"
)

// reloadT0 is when the reload tests' fake clock starts.
var reloadT0 = time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)

// heldRules sends every alarm to the Slack sink oncall after a hold of two
// minutes, and at once to a console.
const heldRules = `sinks:
  - name: oncall
    type: slack
    channel: C0PAGER
  - name: out
    type: console
routes:
  - name: people
    to: [oncall]
    hold: 2m
  - name: log
    to: [out]
`

const reloadSlackToken = "xoxb-reload-token"

// openTestTenant opens the one tenant of a configuration whose rules file is
// rulesPath, on the fake clock clk, with its deliveries running and nothing
// polling; it is stopped when the test ends.
func openTestTenant(t *testing.T, rulesPath, slackAPI string, clk *clock.Fake) *tenantRun {
	t.Helper()
	return openTestTenantEnv(t, rulesPath, slackAPI, clk, nil)
}

// openTestTenantEnv is openTestTenant with env the variables the sinks'
// *_env options name.
func openTestTenantEnv(t *testing.T, rulesPath, slackAPI string, clk *clock.Fake, env map[string]string) *tenantRun {
	t.Helper()
	dir := filepath.Dir(rulesPath)
	cfg, err := config.Load(context.Background(), envconfig.MapLookuper(map[string]string{
		"RELAY_BASE_URL": "http://127.0.0.1:1", "RELAY_APP_ID": "app", "RELAY_APP_SECRET": "reload-test-secret",
		"RELAY_STATE_PATH": filepath.Join(dir, "relay.db"), "RELAY_RULES": rulesPath, "RELAY_LISTEN": "127.0.0.1:0",
		"RELAY_SLACK_TOKEN": reloadSlackToken, "RELAY_SLACK_API_URL": slackAPI,
	}))
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Config: cfg, Clock: clk, Console: io.Discard, Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	o.defaults()
	p := &process{o: o, cfg: cfg, log: o.Logger, nats: &lazyNATS{opts: natsOptions(cfg, "relay", o.Logger)},
		live: newLiveTenants(o.Registry, cfg.Tenants()), hup: &hupFanout{}}
	tr, err := p.openTenant(context.Background(), cfg.Tenants()[0], store.Bolt(), tenantOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tr.stop(ctx)
	})
	return tr
}

// applyStarts stores the starts of ongoing alarms, routed by the rules in
// force with alarm management observing, as the poller does.
func applyStarts(t *testing.T, tr *tenantRun, at time.Time, ids ...string) {
	t.Helper()
	var alarms []event.Alarm
	for _, id := range ids {
		raw, _ := json.Marshal(map[string]any{"originId": id, "status": event.StatusOngoing})
		alarms = append(alarms, event.Alarm{OriginID: id, Status: event.StatusOngoing, Level: 1, EventCode: "E_" + id,
			TenantID: "T1", StationID: "S-" + id, DeviceSN: "D-" + id, OccurredAt: at, Raw: raw})
	}
	_, err := tr.store.Apply(context.Background(), store.Batch{Observed: alarms, DetectedAt: at}, func(ev *event.Event) []string {
		tr.manager.Observe(ev)
		return tr.rules.Route(ev)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAReloadThatRenamesOrRemovesASinkSendsNothingASilenceWithholds: an
// alarm's start waits for its hold to a Slack channel while a silence
// matches the alarm; the rules are reloaded with the sink renamed (the same
// channel), or removed. The reload lets the old sink's deliveries finish
// under the rules they ran under, so the channel never gets the silenced
// start, during the reload or after the hold; an alarm no silence matches
// still reaches it after the rename.
func TestAReloadThatRenamesOrRemovesASinkSendsNothingASilenceWithholds(t *testing.T) {
	for _, tc := range []struct {
		name, rules string
	}{
		{"renamed", "sinks:\n  - name: pager\n    type: slack\n    channel: C0PAGER\n  - name: out\n    type: console\n" +
			"routes:\n  - name: people\n    to: [pager]\n    hold: 2m\n  - name: log\n    to: [out]\n"},
		{"removed", "sinks:\n  - name: out\n    type: console\nroutes:\n  - name: log\n    to: [out]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slack := notifytest.NewSlack(t, reloadSlackToken)
			rulesPath := filepath.Join(t.TempDir(), "rules.yaml")
			writeFile(t, rulesPath, heldRules)
			clk := clock.NewFake(reloadT0)
			tr := openTestTenant(t, rulesPath, slack.APIURL(), clk)

			m, err := route.ParseMatch("--match", []byte(`{station_ids: [S-shelved]}`))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.silences.Add(silence.Silence{Match: m.Match, EndsAt: reloadT0.Add(24 * time.Hour), Author: "ana",
				Comment: "replacing inverter 3"}); err != nil {
				t.Fatal(err)
			}
			applyStarts(t, tr, reloadT0, "shelved")
			// The channel's loop waits for the hold on the fake clock.
			if !clk.BlockUntil(2, 5*time.Second) {
				t.Fatalf("the delivery loops did not wait (%d timers)", clk.Waiters())
			}

			writeFile(t, rulesPath, tc.rules)
			if changed, err := tr.rules.Reload(); !changed || err != nil {
				t.Fatalf("reload: changed %v, %v", changed, err)
			}
			if calls := slack.Calls(); len(calls) != 0 {
				t.Fatalf("during the reload the channel got %+v; want nothing: the alarm is silenced", calls)
			}

			if tc.name == "removed" {
				return // no sink posts to the channel any more
			}
			// After the hold, the silence withholds the start under the
			// new name; a new alarm that no silence matches goes out. The
			// fake clock moves on while the test waits.
			applyStarts(t, tr, clk.Now(), "loud")
			waitUntil(t, "the alarm no silence matches in the channel, the silenced one withheld under the new name", func() bool {
				clk.Advance(10 * time.Second)
				ds, err := tr.store.Suppressed("pager")
				return len(slack.Calls()) > 0 && err == nil && len(ds) == 1 && ds[0].OriginID == "shelved" && ds[0].Reason == "silence"
			}, slack.Calls)
			for _, c := range slack.Calls() {
				if text := c.Text + attachmentsText(c); strings.Contains(text, "shelved") {
					t.Errorf("the channel got the silenced alarm: %s", text)
				}
			}
		})
	}
}
