package kafka_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/kafka"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/rulefile"
)

// What the options refuse, each with the field and a reason.
func TestOptionsRefuseWhatCannotWork(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"U": "relay", "P": "secret-password-1"}
	for _, c := range []struct{ yaml, want string }{
		{"topic: x\n", "brokers: missing"},
		{"brokers: kafka://b1:9092\n", "without a scheme"},
		{"brokers: b1\n", "want host:port"},
		{"brokers: [b1:9092, b2:0]\n", `port "0"`},
		{"brokers: []\n", "empty list"},
		{"brokers: b1:9092\ntopic: energy/alarms\n", "'/' is not allowed in a Kafka topic"},
		{"brokers: b1:9092\ntopic: ..\n", `a topic cannot be ".."`},
		{"brokers: b1:9092\ntopic: __consumer_offsets\n", "brokers' own"},
		{"brokers: b1:9092\ntopic: " + strings.Repeat("t", 250) + "\n", "250 characters, over Kafka's 249"},
		{"brokers: b1:9092\ntopic: energy.{station}\n", "the only placeholder a Kafka topic takes is {tenant}"},
		{"brokers: b1:9092\ntopic: energy.{tenant\n", "the only placeholder"},
		{"brokers: b1:9092\ntopic: 'energy {tenant}'\n", "' ' is not allowed"},
		{"brokers: b1:9092\nca_file: " + ca + "\ntls: true\n", "holds no PEM certificate"},
		{"brokers: b1:9092\nsasl: oauthbearer\nusername_env: U\npassword_env: P\n", `"oauthbearer" is not allowed here`},
		{"brokers: b1:9092\nsasl: plain\n", "username_env: missing"},
		{"brokers: b1:9092\nsasl: plain\nusername_env: U\n", "password_env: missing"},
		{"brokers: b1:9092\nusername_env: U\npassword_env: P\n", "sasl: missing"},
		{"brokers: b1:9092\nsasl: plain\nusername_env: U\npassword_env: UNSET\n", "UNSET"},
		{"brokers: b1:9092\nclient_id: \"a\\nb\"\n", "printable"},
		{"brokers: b1:9092\ntimeout: soon\n", "timeout"},
		{"brokers: b1:9092\nacks: 1\n", `unknown key "acks"`},
	} {
		_, err := sinktest.DecodeErr(kafka.Type, c.yaml, env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("options %q: %v, want %q", c.yaml, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), env["P"]) {
			t.Errorf("options %q: the error holds the password: %v", c.yaml, err)
		}
	}
}

// A valid sink's options, as relay check shows them.
func TestOptionsAsRelayCheckShowsThem(t *testing.T) {
	cfg := sinktest.Decode(t, kafka.Type, "brokers: \"b1:9092, b2:9093\"\ntopic: energy.{tenant}.alarms\ntls: true\nsasl: scram-sha-256\n"+
		"username_env: U\npassword_env: P\nclient_id: relay-plant\ntimeout: 5s\n", map[string]string{"U": "relay", "P": "secret-password-1"})
	if got, want := cfg.Target(), "kafka+tls://b1:9092,b2:9093 topic energy.{tenant}.alarms"; got != want {
		t.Errorf("Target = %q, want %q", got, want)
	}
	if got, want := strings.Join(cfg.Summary(), "; "), "acks all, idempotent; timeout 5s; tls; sasl scram-sha-256, username_env U, password_env P (set); client_id relay-plant"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	ev := sinktest.Event("o/1", 0, event.End)
	reqs, err := cfg.Render(&ev)
	if err != nil || len(reqs) != 1 || !strings.HasPrefix(reqs[0].What, `PRODUCE energy.1001.alarms key "o/1" (acks all, idempotent; headers content-type: application/cloudevents+json, ce_specversion: 1.0, ce_id: o/1:end,`) {
		t.Errorf("Render = %+v, %v", reqs, err)
	}
	// relay route without the environment: placeholders stand in for the
	// variables.
	if _, err := sinktest.DecodeErr(kafka.Type, "brokers: b1:9092\nsasl: plain\nusername_env: U\npassword_env: P\n",
		map[string]string{"U": rulefile.Placeholder, "P": rulefile.Placeholder}); err != nil {
		t.Errorf("with placeholders: %v", err)
	}
	if _, err := cfg.Build(t.Context(), "bus", sinktype.Deps{}.Defaults()); err != nil {
		t.Errorf("Build: %v", err)
	}
}

// Kafka's own rule for topic names (its Topic.validate: not empty, not "."
// or "..", at most 249 characters of ASCII letters, digits, '.', '_' and
// '-'), and the names relay takes.
func TestTopicNamesFollowKafkasRule(t *testing.T) {
	for name, ok := range map[string]bool{
		"energy.alarms": true, "Energy_Alarms-2": true, strings.Repeat("a", 249): true, "...": true,
		"": false, ".": false, "..": false, strings.Repeat("a", 250): false, "a b": false, "a/b": false, "ä": false, "a,b": false,
		"__consumer_offsets": false,
	} {
		if err := kafka.ValidTopic(name); (err == nil) != ok {
			t.Errorf("ValidTopic(%q) = %v, want ok %v", name, err, ok)
		}
	}
}
