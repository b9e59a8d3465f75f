//go:build !nodemo

package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/feed"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/service"
)

// demoRules routes every event to the bus, and urgent and severe ones to the
// signed webhook as well. The demo's feed stands in for a console sink.
const demoRules = `# The demo's rules: see rules.example.yaml for every option.
sinks:
  - name: bus
    type: nats
    subject: "energy.alarms.{{.TenantID}}.{{.StationID}}.{{.Level}}.{{.Transition}}"
    jetstream: true
    create_stream: RELAY_DEMO
  - name: ops-webhook
    type: webhook
    url: %s
    secret_env: RELAY_DEMO_WEBHOOK_SECRET
routes:
  - name: everything-to-bus
    to: [bus]
    continue: true
  - name: urgent-and-severe
    match: { levels: [0, 1] }
    to: [ops-webhook]
`

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("relay demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runFor := fs.Duration("for", 0, "stop after this long (default: until Ctrl-C)")
	rate := fs.Int("rate", 60, "upstream requests per minute for the simulator and the relay (production: 10)")
	seed := fs.Int64("seed", 1, "simulator seed")
	keep := fs.Bool("keep", false, "keep the demo's temporary folder (state, rules) after exit")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *runFor)
		defer cancel()
	}
	out := &lockedWriter{w: stdout}
	if err := runDemo(ctx, out, stderr, *rate, *seed, *keep); err != nil {
		fmt.Fprintln(stderr, "relay demo:", err)
		return 1
	}
	return 0
}

func runDemo(ctx context.Context, out io.Writer, stderr io.Writer, rate int, seed int64, keep bool) error {
	dir, err := os.MkdirTemp("", "relay-demo-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}

	// The upstream: a simulated fleet with alarms starting and ending every few seconds.
	simulator := sim.New(sim.Options{Seed: seed, RateLimit: rate, Churn: sim.Churn{
		StartsPerMinute: 12, MeanDuration: 20 * time.Second, InvalidFraction: 0.1,
	}})
	if err := simulator.Start("127.0.0.1:0"); err != nil {
		return fmt.Errorf("simulator: %w", err)
	}
	defer simulator.Close()
	for level := 0; level < 4; level++ {
		if _, err := simulator.StartAlarm(sim.AlarmSpec{Level: level}); err != nil {
			return fmt.Errorf("simulator: %w", err)
		}
	}

	// NATS with JetStream, in process.
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(dir, "nats"), NoLog: true, NoSigs: true,
	})
	if err != nil {
		return fmt.Errorf("nats server: %w", err)
	}
	go ns.Start()
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	if !ns.ReadyForConnections(10 * time.Second) {
		return errors.New("nats server did not start within 10s")
	}
	// A subscriber counts what reaches NATS, for the summary.
	sub, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	defer sub.Close()
	var natsMsgs atomic.Int64
	if _, err := sub.Subscribe("energy.alarms.>", func(*nats.Msg) { natsMsgs.Add(1) }); err != nil {
		return fmt.Errorf("nats: %w", err)
	}

	// A webhook receiver that checks the Standard Webhooks signature.
	secret := newDemoSecret()
	hook, err := startDemoReceiver(secret)
	if err != nil {
		return err
	}
	defer hook.Close()

	rulesPath := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rulesPath, fmt.Appendf(nil, demoRules, "http://"+hook.Addr().String()+"/alarms"), 0o600); err != nil {
		return err
	}
	appID, appSecret := simulator.Credentials()
	env := map[string]string{
		"RELAY_BASE_URL": simulator.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": appSecret,
		"RELAY_RATE_LIMIT": strconv.Itoa(rate), "RELAY_STATE_PATH": filepath.Join(dir, "relay.db"),
		"RELAY_RULES": rulesPath, "RELAY_NATS_URL": ns.ClientURL(), "RELAY_LISTEN": "127.0.0.1:0",
		"RELAY_CONFIRM_TIMEOUT": "30s", "RELAY_SWEEP_OVERLAP": "30s", "RELAY_LOG_LEVEL": "warn",
		"RELAY_LOG_FORMAT": "text", "RELAY_SHUTDOWN_GRACE": "5s",
	}
	cfg, err := config.Load(ctx, envconfig.MapLookuper(env))
	if err != nil {
		return err
	}
	lookup := func(name string) (string, bool) {
		if name == "RELAY_DEMO_WEBHOOK_SECRET" {
			return secret, true
		}
		v, ok := env[name]
		return v, ok
	}

	rules, err := route.Load(rulesPath, lookup)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, `relay demo: everything runs in this process; Ctrl-C stops it.
  upstream  simulator at %s (%d requests/min; production default 10)
  nats      %s, JetStream stream RELAY_DEMO on energy.alarms.>
            (from another terminal: nats sub --server %s 'energy.alarms.>')
  webhook   http://%s/alarms, Standard Webhooks signatures checked
`, simulator.URL(), rate, ns.ClientURL(), ns.ClientURL(), hook.Addr())
	f := feed.New(out, feed.Options{Rules: rules})

	feedCtx, stopFeed := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { f.Run(feedCtx) })
	err = service.Run(ctx, service.Options{
		Config:   cfg,
		Lookup:   lookup,
		Logger:   service.NewLogger(stderr, cfg.LogLevel, cfg.LogFmt, nil),
		Console:  out,
		OnEvents: f.Events,
		OnReport: f.Report,
		Ready: func(addr string) {
			fmt.Fprintf(out, "  metrics   http://%s/metrics /healthz /readyz\n\n", addr)
			f.Legend()
		},
	})
	stopFeed()
	wg.Wait()
	// What is still pending was drained, or given up on, by service.Run.
	f.Close()
	_ = sub.Flush()
	fmt.Fprintf(out, "  the webhook receiver verified %d signatures and refused %d; the NATS subscriber got %d messages\n",
		hook.verified.Load(), hook.refused.Load(), natsMsgs.Load())
	return err
}

func newDemoSecret() string {
	key := make([]byte, 24)
	_, _ = rand.Read(key)
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

// demoReceiver serves POST /alarms, checking each request's Standard
// Webhooks signature and counting what it verified and refused.
type demoReceiver struct {
	net.Listener
	verified, refused atomic.Int64
}

func startDemoReceiver(secret string) (*demoReceiver, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	rcv := &demoReceiver{Listener: ln}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
		mac := hmac.New(sha256.New, key)
		fmt.Fprintf(mac, "%s.%s.", id, ts)
		mac.Write(body)
		want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
		ok := false
		for _, sig := range strings.Fields(r.Header.Get("webhook-signature")) {
			ok = ok || hmac.Equal([]byte(sig), []byte(want))
		}
		if !ok {
			rcv.refused.Add(1)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		rcv.verified.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(ln) }()
	return rcv, nil
}

// lockedWriter serialises writes from the feed's goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
