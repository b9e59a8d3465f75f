package service

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/redact/redacttest"
	"github.com/relay-energy/relay/internal/testwait"
	"github.com/relay-energy/relay/internal/tracing"
	"github.com/relay-energy/relay/internal/tracing/tracingtest"
)

// TestEachAlarmTransitionIsOneTraceFromItsPollToEverySink runs a whole relay
// with tracing on against an OTLP/HTTP receiver that decodes what the
// exporter posts, and follows one alarm's start and end: each is one tree of
// spans (one root, every parent present) linked to the poll that saw it,
// with its store commit and a send span per sink; the traceparent a webhook
// and a NATS subscriber got is their send span's; a failed attempt shows its
// retry and a rejected one its dead letter; and no secret of the
// configuration is in any span, event, link or resource.
func TestEachAlarmTransitionIsOneTraceFromItsPollToEverySink(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for a few seconds")
	}
	const (
		appSecret  = "app-secret-of-the-tracing-test"
		hookSecret = "hook-secret-of-the-tracing-test"
		urlToken   = "url-token-of-the-tracing-test"
	)
	collector := tracingtest.Start()
	defer collector.Close()
	tracer, err := tracing.New(context.Background(), tracing.Config{EndpointURL: collector.URL(), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	upstream := sim.StartTest(t, sim.Options{RateLimit: 600, AppSecret: appSecret})
	hook := notifytest.NewReceiver(t, hookSecret)
	flaky := notifytest.NewReceiver(t, "")
	flaky.Queue(notifytest.Answer{Status: http.StatusServiceUnavailable})
	broken := notifytest.NewReceiver(t, "")
	broken.Down(notifytest.Answer{Status: http.StatusBadRequest})
	ns := natstest.StartServer(t, natstest.Config{})
	nc, err := natsgo.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var mu sync.Mutex
	natsHeaders := map[string]string{} // event id to traceparent
	if _, err := nc.Subscribe("energy.alarms.>", func(m *natsgo.Msg) {
		mu.Lock()
		natsHeaders[m.Header.Get(natsgo.MsgIdHdr)] = m.Header.Get("traceparent")
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "rules.yaml")
	writeFile(t, rulesPath, `sinks:
  - name: hook
    type: webhook
    url: `+hook.URL()+`?token=`+urlToken+`
    secret_env: HOOK_SECRET
  - name: flaky
    type: webhook
    url: `+flaky.URL()+`
  - name: broken
    type: webhook
    url: `+broken.URL()+`
  - name: bus
    type: nats
routes:
  - name: all
    to: [hook, flaky, broken, bus]
`)
	appID, _ := upstream.Credentials()
	env := map[string]string{
		"RELAY_BASE_URL": upstream.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": appSecret,
		"RELAY_RATE_LIMIT": "600", "RELAY_STATE_PATH": filepath.Join(dir, "relay.db"), "RELAY_RULES": rulesPath,
		"RELAY_NATS_URL": ns.URL(), "RELAY_LISTEN": "127.0.0.1:0", "RELAY_SHUTDOWN_GRACE": "2s",
		"HOOK_SECRET": hookSecret,
	}
	cfg, err := config.Load(context.Background(), envconfig.MapLookuper(env))
	if err != nil {
		t.Fatal(err)
	}
	_, stop := startRun(t, Options{Config: cfg, Tracer: tracer, Console: &syncBuffer{},
		Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})

	id, err := upstream.StartAlarm(sim.AlarmSpec{Level: 0})
	if err != nil {
		t.Fatal(err)
	}
	startID, endID := event.ID(id, event.Start), event.ID(id, event.End)
	testwait.For(t, 30*time.Second, "the start at the webhook, twice at the flaky one, and on NATS", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(hookRequests(hook, startID)) == 1 && len(hookRequests(flaky, startID)) == 2 && natsHeaders[startID] != ""
	})
	if err := upstream.EndAlarm(id, time.Time{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 60*time.Second, "the end at the webhook and on NATS", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(hookRequests(hook, endID)) == 1 && natsHeaders[endID] != ""
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := tracer.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if errs := collector.Errors(); len(errs) > 0 {
		t.Fatalf("the receiver could not read exports: %v", errs)
	}
	spans := collector.Spans()
	byID := map[string]tracingtest.Span{}
	for _, s := range spans {
		byID[s.ID()] = s
	}

	for _, evID := range []string{startID, endID} {
		var root *tracingtest.Span
		for _, s := range spans {
			if s.Attr("relay.event.id") == evID && s.ParentID() == "" {
				if root != nil {
					t.Fatalf("%s has two root spans", evID)
				}
				root = &s
			}
		}
		if root == nil {
			t.Fatalf("%s has no root span; spans: %s", evID, spanNames(spans))
		}
		if want := "alarm " + strings.SplitN(evID, ":", 2)[1]; root.Name != want {
			t.Errorf("%s: root span %q, want %q", evID, root.Name, want)
		}
		var trace []tracingtest.Span
		for _, s := range spans {
			if s.TraceID() == root.TraceID() {
				trace = append(trace, s)
			}
		}
		names := map[string][]tracingtest.Span{}
		for _, s := range trace {
			names[s.Name] = append(names[s.Name], s)
			if s.ParentID() == "" {
				if s.ID() != root.ID() {
					t.Errorf("%s: a second root %q in its trace", evID, s.Name)
				}
				continue
			}
			if p, ok := byID[s.ParentID()]; !ok || p.TraceID() != root.TraceID() {
				t.Errorf("%s: span %q has no parent in the trace", evID, s.Name)
			}
		}
		if len(root.Links) != 1 || !strings.HasPrefix(byID[tracingtest.HexID(root.Links[0].SpanId)].Name, "poll ") {
			t.Errorf("%s: the root does not link to the poll that saw it", evID)
		} else if poll := byID[tracingtest.HexID(root.Links[0].SpanId)]; !hasChild(spans, poll, "POST") {
			t.Errorf("%s: the poll %q has no upstream call as a child", evID, poll.Name)
		}
		if c := names["store commit"]; len(c) != 1 || c[0].ParentID() != root.ID() {
			t.Errorf("%s: store commit is not the root's one child of that name", evID)
		}
		// Every send span is the root's child, a producer with the
		// messaging attributes.
		for _, sink := range []string{"hook", "flaky", "bus"} {
			sends := names["send "+sink]
			if len(sends) == 0 {
				t.Errorf("%s: no send span for sink %s; trace: %s", evID, sink, spanNames(trace))
				continue
			}
			for _, s := range sends {
				if s.ParentID() != root.ID() || s.Attr("messaging.message.id") != evID ||
					s.Attr("messaging.destination.name") != sink || s.Attr("messaging.operation.type") != "send" {
					t.Errorf("%s: send span of %s: parent or attributes wrong: %v", evID, sink, s.Attributes)
				}
			}
		}
		hookSend := names["send hook"][0]
		if got := hookRequests(hook, evID)[0].Header.Get("traceparent"); got != hookSend.TraceParent() {
			t.Errorf("%s: the webhook got traceparent %q, its send span is %q", evID, got, hookSend.TraceParent())
		}
		if got := hookSend.Attr("messaging.system"); got != "webhook" {
			t.Errorf("%s: messaging.system %q", evID, got)
		}
		mu.Lock()
		got := natsHeaders[evID]
		mu.Unlock()
		if want := names["send bus"][0].TraceParent(); got != want {
			t.Errorf("%s: NATS header traceparent %q, its send span is %q", evID, got, want)
		}
	}

	// The start failed once at flaky and was retried; broken rejected it.
	var retried, recovered, dead bool
	for _, s := range spans {
		if s.Attr("relay.event.id") != "" || s.Attr("messaging.message.id") != startID {
			continue
		}
		switch {
		case s.Name == "send flaky" && s.HasEvent("retry") && s.GetStatus().GetCode() == 2 && s.Attr("relay.attempt") == "1":
			retried = true
		case s.Name == "send flaky" && s.Attr("relay.attempt") == "2" && !s.HasEvent("retry"):
			recovered = true
		case s.Name == "send broken" && s.HasEvent("dead letter") && s.GetStatus().GetCode() == 2:
			dead = true
		}
	}
	if !retried || !recovered || !dead {
		t.Errorf("flaky retried %v and then delivered %v; broken dead-lettered %v; spans: %s", retried, recovered, dead, spanNames(spans))
	}
	redacttest.AssertNoSecret(t, []string{appSecret, hookSecret, urlToken}, tracingtest.Texts(spans))
}

// hookRequests returns the requests r got for event id.
func hookRequests(r *notifytest.Receiver, id string) []notifytest.Request {
	var out []notifytest.Request
	for _, req := range r.Requests() {
		if req.Header.Get("webhook-id") == id || strings.Contains(string(req.Body), `"id":"`+id+`"`) {
			out = append(out, req)
		}
	}
	return out
}

func hasChild(spans []tracingtest.Span, parent tracingtest.Span, name string) bool {
	for _, s := range spans {
		if s.ParentID() == parent.ID() && s.Name == name {
			return true
		}
	}
	return false
}

func spanNames(spans []tracingtest.Span) string {
	var b strings.Builder
	for _, s := range spans {
		b.WriteString(s.Name + "[" + s.Attr("relay.event.id") + s.Attr("messaging.message.id") + "] ")
	}
	return b.String()
}
