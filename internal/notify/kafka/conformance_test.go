package kafka_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify/kafka"
	"github.com/relay-energy/relay/internal/notify/sinktest"
)

// The conformance suite against a kfake cluster with SCRAM-SHA-512, on a
// topic of one partition: the suite checks the order of events of
// different alarms, which Kafka keeps within a partition only.
func TestConformance(t *testing.T) {
	const user, pass = "relay", "kafka-password-0123456789"
	sinktest.Run(t, sinktest.Harness{
		Type: kafka.Type,
		Start: func(t *testing.T, _ *clock.Fake) sinktest.Vendor {
			k := startCluster(t, 1, []string{kafka.DefaultTopic}, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", user, pass))
			return sinktest.Vendor{
				Secrets: []string{pass},
				Options: func(string) (string, map[string]string) {
					return "brokers: " + k.brokers() + "\nsasl: scram-sha-512\nusername_env: KAFKA_USER\npassword_env: KAFKA_PASSWORD\ntimeout: 5s\n",
						map[string]string{"KAFKA_USER": user, "KAFKA_PASSWORD": pass}
				},
				RenderOptions: func() (string, map[string]string) {
					return "brokers: [kafka-1.example.com:9093, kafka-2.example.com:9093]\ntls: true\nsasl: scram-sha-512\nusername_env: KAFKA_USER\npassword_env: KAFKA_PASSWORD\n",
						map[string]string{"KAFKA_USER": "relay", "KAFKA_PASSWORD": "render-password-0123456789"}
				},
				// The sink is done once the leader acknowledged: the
				// records are in the log when Send returns.
				Received: func() []string {
					var out []string
					for _, r := range k.read(kafka.DefaultTopic, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())) {
						out = append(out, r.key+" "+r.value)
					}
					return out
				},
			}
		},
	})
}
