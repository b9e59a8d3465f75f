package kafka_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/kafka"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

var t0 = time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)

// delivery is the delivery of alarm id's transition tr.
func delivery(t *testing.T, id string, level int, tr event.Transition) notify.Delivery {
	t.Helper()
	a := event.Alarm{OriginID: id, Status: 1, Level: level, EventCode: "E1023", TenantID: "1001", StationID: "5001",
		DeviceSN: "SN-" + id, OccurredAt: t0}
	if tr != event.Start {
		a.Status, a.RecoveredAt = 0, t0.Add(time.Minute)
	}
	ev := event.New(a, tr, t0.Add(2*time.Minute), false)
	body, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return notify.Delivery{EventID: ev.ID, OriginID: id, Level: level, Body: body, Event: &ev, Attempt: 1}
}

// sinkFor builds the kafka sink of yaml, with env, as relay builds it, and
// closes its client when the test ends.
func sinkFor(t *testing.T, name, yaml string, env map[string]string) *kafka.Sink {
	t.Helper()
	return buildWith(t, name, yaml, env, sinktype.Deps{}.Defaults())
}

func buildWith(t *testing.T, name, yaml string, env map[string]string, deps sinktype.Deps) *kafka.Sink {
	t.Helper()
	cfg := sinktest.Decode(t, kafka.Type, yaml, env)
	s, err := cfg.Build(context.Background(), name, deps)
	if err != nil {
		t.Fatal(err)
	}
	ks := s.(*kafka.Sink)
	t.Cleanup(func() { _ = ks.Close() })
	return ks
}

// send delivers d as the Deliverer would: again after a retryable failure,
// within a minute. It returns how many attempts failed.
func send(t *testing.T, s notify.Sink, d notify.Delivery) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for failed := 0; ; failed++ {
		res, err := s.Send(context.Background(), d)
		if err == nil {
			return failed
		}
		if !res.Retry || time.Now().After(deadline) {
			t.Fatalf("send %s: %v (retry %v)", d.EventID, err, res.Retry)
		}
		t.Logf("send %s: %v; retrying", d.EventID, err)
		time.Sleep(100 * time.Millisecond)
	}
}

// probeOf decodes yaml and probes it, as relay check --online does.
func probeOf(t *testing.T, yaml string, env map[string]string) (string, error) {
	t.Helper()
	return sinktest.Decode(t, kafka.Type, yaml, env).Probe(context.Background(), sinktype.Deps{}.Defaults())
}

// kfakeMaxMessageBytes makes the brokers refuse batches over n bytes.
func kfakeMaxMessageBytes(n int) kfake.Opt {
	return kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(n)})
}

// kfakeSASL makes the brokers require SASL, with users of {mechanism,
// user, password}, mechanism as kfake names it (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512).
func kfakeSASL(users ...[3]string) []kfake.Opt {
	out := []kfake.Opt{kfake.EnableSASL()}
	for _, u := range users {
		out = append(out, kfake.Superuser(u[0], u[1], u[2]))
	}
	return out
}

// kgoPlain is the consumer's option to authenticate with PLAIN.
func kgoPlain(user, pass string) kgo.Opt {
	return kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())
}
