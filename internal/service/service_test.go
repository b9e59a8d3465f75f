package service

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/route"
)

const goodRules = `sinks:
  - name: out
    type: console
routes:
  - name: all
    to: [out]
`

const otherRules = `sinks:
  - name: out
    type: console
  - name: more
    type: console
routes:
  - name: urgent
    match: { levels: [0] }
    to: [more]
  - name: all
    to: [out]
`

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	// Write and rename, as a ConfigMap update swaps the file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func urgentEvent() *event.Event {
	ev := event.New(event.Alarm{OriginID: "1", Status: 1, Level: 0, TenantID: "t", StationID: "s"}, event.Start, time.Now(), false)
	return &ev
}

func TestABadRulesFileIsRefusedAndTheRulesInForceAreKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, goodRules)
	var logs bytes.Buffer
	r, err := LoadRules(path, func(string) (string, bool) { return "", false }, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var applied, refused int
	r.OnReload(nil, func(err error) {
		if err != nil {
			refused++
		} else {
			applied++
		}
	})
	if got := r.Route(urgentEvent()); len(got) != 1 || got[0] != "out" {
		t.Fatalf("initial route = %v", got)
	}

	writeFile(t, path, "sinks:\n  - name: out\n    type: carrier-pigeon\nroutes:\n  - name: all\n    to: [out]\n")
	changed, err := r.Reload()
	if err == nil || changed {
		t.Fatalf("bad file: changed %v err %v, want refused", changed, err)
	}
	if !strings.Contains(err.Error(), "rules.yaml:3") || r.LastError() == "" {
		t.Fatalf("error %q / LastError %q should name the file and line", err, r.LastError())
	}
	if got := r.Route(urgentEvent()); len(got) != 1 || got[0] != "out" {
		t.Fatalf("after a refused reload, route = %v, want the old rules", got)
	}
	if changed, err := r.Reload(); changed || err != nil {
		t.Fatalf("the same bad file again: changed %v err %v, want a quiet no-op", changed, err)
	}

	writeFile(t, path, otherRules)
	if changed, err := r.Reload(); !changed || err != nil {
		t.Fatalf("good file: changed %v err %v", changed, err)
	}
	if got := r.Route(urgentEvent()); len(got) != 1 || got[0] != "more" {
		t.Fatalf("after reload, route = %v, want [more]", got)
	}
	if applied != 1 || refused != 1 || r.LastError() != "" {
		t.Fatalf("applied %d refused %d lastErr %q", applied, refused, r.LastError())
	}
	if !strings.Contains(logs.String(), "reload refused") {
		t.Fatalf("no log line for the refused reload:\n%s", logs.String())
	}
}

func TestWatchReloadsOnSIGHUPAndWhenTheFileChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, goodRules)
	r, err := LoadRules(path, func(string) (string, bool) { return "", false }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	changes := make(chan struct{}, 4)
	r.OnReload(nil, func(err error) {
		if err == nil {
			changes <- struct{}{}
		}
	})
	clk := clock.NewFake(time.Unix(0, 0))
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Watch(ctx, hup, 5*time.Second, clk); close(done) }()
	defer func() { cancel(); <-done }()

	writeFile(t, path, otherRules)
	hup <- syscall.SIGHUP
	select {
	case <-changes:
	case <-time.After(5 * time.Second):
		t.Fatal("SIGHUP did not reload the changed file")
	}

	writeFile(t, path, goodRules)
	if !clk.BlockUntil(1, 5*time.Second) {
		t.Fatal("the watcher has no timer")
	}
	clk.Advance(5 * time.Second)
	select {
	case <-changes:
	case <-time.After(5 * time.Second):
		t.Fatal("a changed file was not reloaded at the next check")
	}
	if got := r.Route(urgentEvent()); len(got) != 1 || got[0] != "out" {
		t.Fatalf("route = %v after the file went back", got)
	}
}

func TestCheckOnlineReachesEverySinkAndNamesTheOnesItCannot(t *testing.T) {
	ns := natstest.StartServer(t, natstest.Config{})
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "ALARMS", Subjects: []string{"energy.alarms.>"}}); err != nil {
		t.Fatal(err)
	}
	slackAPI := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if token == "" {
			token = r.FormValue("token")
		}
		if r.URL.Path != "/api/auth.test" || token != "xoxb-good" {
			_, _ = w.Write([]byte(`{"ok":false,"error":"invalid_auth"}`))
			return
		}
		_, _ = w.Write([]byte(`{"ok":true,"team":"Acme","user":"relay-bot"}`))
	}))
	defer slackAPI.Close()
	hook := httptest.NewServer(http.NotFoundHandler())
	defer hook.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + closed.Addr().String() + "/x"
	closed.Close()

	rules, err := route.Parse("rules.yaml", []byte(`sinks:
  - name: bus
    type: nats
    jetstream: true
  - name: audit
    type: nats
    subject: "audit.{{.Transition}}"
    jetstream: true
  - name: oncall
    type: slack
    channel: C1
  - name: ops
    type: webhook
    url: `+hook.URL+`/alarms
  - name: gone
    type: webhook
    url: `+closedURL+`
  - name: console
    type: console
routes:
  - name: all
    to: [bus, audit, oncall, ops, gone, console]
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{NATS: config.NATS{URL: ns.URL()}, Slack: config.Slack{Token: "xoxb-good", APIURL: slackAPI.URL + "/api/"}}
	var out bytes.Buffer
	problems := ProbeSinks(context.Background(), &out, rules, cfg)
	if len(problems) != 2 {
		t.Fatalf("problems %v, want two (audit has no stream, gone is unreachable)\n%s", problems, out.String())
	}
	for i, want := range []string{`sink "audit"`, `sink "gone"`} {
		if !strings.Contains(problems[i].Error(), want) || !strings.Contains(problems[i].Error(), "rules.yaml:") {
			t.Fatalf("problem %d = %q, want it to name %s with file and line", i, problems[i], want)
		}
	}
	for _, want := range []string{"stream ALARMS captures energy.alarms.1001.5001.1.start", "team Acme", "reachable; nothing was sent"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}

	cfg.Slack.Token = "xoxb-revoked"
	problems = ProbeSinks(context.Background(), &out, rules, cfg)
	if len(problems) != 3 || !strings.Contains(problems[1].Error(), "invalid_auth") || strings.Contains(problems[1].Error(), "xoxb-revoked") {
		t.Fatalf("with a bad token: %v", problems)
	}
}

func TestLogLinesWriteDurationsAsText(t *testing.T) {
	var buf bytes.Buffer
	NewLogger(&buf, "info", "json", nil).Info("retrying", "retry_in", 830*time.Millisecond)
	if !strings.Contains(buf.String(), `"retry_in":"830ms"`) {
		t.Fatalf("log line %s", buf.String())
	}
	buf.Reset()
	NewLogger(&buf, "warn", "text", nil).Info("hidden")
	if buf.Len() != 0 {
		t.Fatalf("info line at warn level: %s", buf.String())
	}
}

func TestRulesWhoseSinksCannotBeBuiltAreRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, goodRules)
	r, err := LoadRules(path, func(string) (string, bool) { return "", false }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	r.OnReload(func(nr *route.Rules) error {
		return errors.Join(SinkEnvProblems(nr, config.Config{})...)
	}, nil)
	writeFile(t, path, "sinks:\n  - name: pager\n    type: slack\n    channel: C1\nroutes:\n  - name: all\n    to: [pager]\n")
	if changed, err := r.Reload(); changed || err == nil || !strings.Contains(err.Error(), "RELAY_SLACK_TOKEN") {
		t.Fatalf("changed %v err %v, want refused naming RELAY_SLACK_TOKEN", changed, err)
	}
	if got := r.Route(urgentEvent()); len(got) != 1 || got[0] != "out" {
		t.Fatalf("route = %v, want the rules in force", got)
	}
}

func TestSinksOfOneDestinationShareOneLimiter(t *testing.T) {
	l := notify.NewLimits(clock.NewFake(time.Unix(0, 0)))
	if l.Get("slack:channel C1") != l.Get("slack:channel C1") || l.Get("slack:channel C1") == l.Get("slack:channel C2") {
		t.Fatal("limiters are not one per destination")
	}
}
