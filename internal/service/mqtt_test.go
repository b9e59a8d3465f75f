package service

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify/mqtt/mqtttest"
	"github.com/relay-energy/relay/internal/testwait"
)

// A sink holding a connection of its own is closed when relay lets it go:
// an MQTT sink that a reload removes, and one whose tenant this replica
// stops serving (its lease lost), disconnect from the broker, so that the
// replica serving the tenant now keeps the client id's session instead of
// the two taking it from each other at every reconnection.
func TestMQTTSinksRelayLetsGoDisconnect(t *testing.T) {
	b := mqtttest.Start(t)
	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "rules.yaml")
	mqttRules := func(id string) string {
		return "sinks:\n  - name: scada\n    type: mqtt\n    url: " + b.URL() + "\n    username_env: MQTT_USER\n    password_env: MQTT_PASSWORD\n" +
			"    client_id: " + id + "\n  - name: out\n    type: console\nroutes:\n  - name: all\n    to: [scada, out]\n"
	}
	writeFile(t, rulesPath, mqttRules("relay-removed"))
	clk := clock.NewFake(reloadT0)
	env := map[string]string{"MQTT_USER": b.User, "MQTT_PASSWORD": b.Pass}
	tr := openTestTenantEnv(t, rulesPath, "http://127.0.0.1:1", clk, env)

	applyStarts(t, tr, reloadT0, "A1")
	testwait.For(t, 10*time.Second, "the sink to connect", func() bool { return strings.Contains(b.Log(), " as relay-removed ") })
	writeFile(t, rulesPath, "sinks:\n  - name: out\n    type: console\nroutes:\n  - name: all\n    to: [out]\n")
	if changed, err := tr.rules.Reload(); !changed || err != nil {
		t.Fatalf("reload: %v, %v", changed, err)
	}
	testwait.For(t, 10*time.Second, "the removed sink to disconnect", func() bool {
		return strings.Contains(b.Log(), "Client relay-removed disconnected")
	})

	writeFile(t, rulesPath, mqttRules("relay-stopped"))
	if changed, err := tr.rules.Reload(); !changed || err != nil {
		t.Fatalf("reload: %v, %v", changed, err)
	}
	applyStarts(t, tr, reloadT0, "A2")
	testwait.For(t, 10*time.Second, "the sink to connect", func() bool { return strings.Contains(b.Log(), " as relay-stopped ") })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tr.stop(ctx)
	testwait.For(t, 10*time.Second, "the stopped tenant's sink to disconnect", func() bool {
		return strings.Contains(b.Log(), "Client relay-stopped disconnected")
	})
}
