package service

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

const removedRules = `sinks:
  - name: %s
    type: webhook
    url: %u
routes:
  - name: all
    to: [%s]
    hold: 1h
`

// TestARemovedSinksWaitingEntriesAreDroppedCountedAndListed: a start waits
// for its hold at the webhook "chat"; a reload removes chat (the new rules
// name another webhook). The start is recorded as dropped, never sent; so
// is its end when the alarm ends; both are listed by relay deadletters list
// --withheld with the reason and counted in relay_dropped_total; the new
// sink, which never saw the start, gets no end.
func TestARemovedSinksWaitingEntriesAreDroppedCountedAndListed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for a few seconds")
	}
	upstream := sim.StartTest(t, sim.Options{RateLimit: 600})
	chat, other := notifytest.NewReceiver(t, ""), notifytest.NewReceiver(t, "")
	rules := func(name, url string) string {
		return strings.ReplaceAll(strings.ReplaceAll(removedRules, "%s", name), "%u", url)
	}
	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "rules.yaml")
	writeFile(t, rulesPath, rules("chat", chat.URL()))
	appID, secret := upstream.Credentials()
	const admin = "admin-token-0123456789abcdef"
	cfg, err := config.Load(context.Background(), envconfig.MapLookuper(map[string]string{
		"RELAY_BASE_URL": upstream.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": secret,
		"RELAY_RATE_LIMIT": "600", "RELAY_STATE_PATH": filepath.Join(dir, "relay.db"), "RELAY_RULES": rulesPath,
		"RELAY_LISTEN": "127.0.0.1:0", "RELAY_SHUTDOWN_GRACE": "1s", "RELAY_ADMIN_TOKEN": admin,
	}))
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	hup := make(chan os.Signal, 1)
	reg := prometheus.NewRegistry()
	addrs := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var started atomic.Bool
	go func() {
		done <- Run(ctx, Options{Config: cfg, HUP: hup, Registry: reg, Logger: NewLogger(&logs, "info", "text", nil),
			Ready: func(addr string) { addrs <- addr },
			OnEvents: func(evs []event.Event) {
				for _, ev := range evs {
					started.Store(started.Load() || ev.Data.Transition == event.Start)
				}
			}})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	addr := <-addrs
	id, err := upstream.StartAlarm(sim.AlarmSpec{Level: 0})
	if err != nil {
		t.Fatal(err)
	}
	withheld := func() DeadLettersAnswer {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/deadletters/withheld?sink=chat", nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ans DeadLettersAnswer
		if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
			t.Fatalf("GET /deadletters/withheld: %d: %v", resp.StatusCode, err)
		}
		return ans
	}
	metric := func(name string, want map[string]string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
		next:
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				for k, v := range want {
					if labels[k] != v {
						continue next
					}
				}
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
		return 0
	}
	waitUntil(t, "the start waiting for its hold", started.Load, nil)

	waitUntil(t, "the start in chat's outbox", func() bool {
		return metric("relay_outbox_depth", map[string]string{"sink": "chat"}) == 1
	}, nil)
	writeFile(t, rulesPath, rules("other", other.URL()))
	hup <- syscall.SIGHUP
	waitUntil(t, "the start recorded as dropped", func() bool { return withheld().Count == 1 }, nil)
	if err := upstream.EndAlarm(id, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the end recorded as dropped too", func() bool { return withheld().Count == 2 }, nil)
	ans := withheld()
	for _, d := range ans.DeadLetters {
		if !strings.HasPrefix(d.Reason, "dropped (sink-removed)") || d.OriginID != id {
			t.Errorf("withheld entry %+v, want alarm %s dropped with its sink", d, id)
		}
	}
	// The store counts what a batch dropped just after the batch commits,
	// so a reader of the store may see the entry an instant before the
	// counter does.
	dropped := func() float64 {
		return metric("relay_dropped_total", map[string]string{"sink": "chat", "reason": "sink-removed"})
	}
	waitUntil(t, "relay_dropped_total to count both", func() bool { return dropped() >= 2 }, nil)
	if got := dropped(); got != 2 {
		t.Errorf("relay_dropped_total{sink=chat,reason=sink-removed} = %g, want 2", got)
	}
	if n := len(chat.Requests()) + len(other.Requests()); n != 0 {
		t.Errorf("the webhooks got %d requests, want none: the start waited for its hold, and its end follows it", n)
	}
	if !strings.Contains(logs.String(), "sink removed from the rules") {
		t.Errorf("the log does not say the sink was removed:\n%s", logs.String())
	}
}
