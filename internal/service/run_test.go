package service

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/store"
)

// syncBuffer is a console the test reads while the service writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestANATSServerDownAtStartHoldsOnlyItsOwnOutbox(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the service for a few seconds")
	}
	upstream := sim.StartTest(t, sim.Options{RateLimit: 600})
	id, err := upstream.StartAlarm(sim.AlarmSpec{Level: 0})
	if err != nil {
		t.Fatal(err)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	natsURL := "nats://" + closed.Addr().String()
	closed.Close()

	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "rules.yaml")
	writeFile(t, rulesPath, `sinks:
  - name: bus
    type: nats
    jetstream: true
  - name: out
    type: console
routes:
  - name: all
    to: [bus, out]
`)
	appID, secret := upstream.Credentials()
	cfg, err := config.Load(context.Background(), envconfig.MapLookuper(map[string]string{
		"RELAY_BASE_URL": upstream.URL(), "RELAY_APP_ID": appID, "RELAY_APP_SECRET": secret,
		"RELAY_RATE_LIMIT": "600", "RELAY_STATE_PATH": filepath.Join(dir, "relay.db"), "RELAY_RULES": rulesPath,
		"RELAY_NATS_URL": natsURL, "RELAY_LISTEN": "127.0.0.1:0", "RELAY_SHUTDOWN_GRACE": "1s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	var console syncBuffer
	addr, stop := startRun(t, Options{Config: cfg, Console: &console})
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(console.String(), id) {
		if time.Now().After(deadline) {
			t.Fatalf("the console never got the start of %s while NATS was down; console:\n%s", id, console.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	st, err := store.Open(cfg.Store.Path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	depth, err := st.Depth()
	if err != nil {
		t.Fatal(err)
	}
	if depth["bus"] != 1 || depth["out"] != 0 {
		t.Fatalf("outbox depth %v, want the start waiting for bus only", depth)
	}
}
