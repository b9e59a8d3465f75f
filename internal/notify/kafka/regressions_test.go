package kafka_test

// What an adversarial review found: each test failed on the code reviewed.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/kafka"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// A produce whose request left but was never answered (a broker stalled,
// then its connection dropped without storing anything) times out: Send
// returns a retryable failure, the Deliverer sees the fence refuse (the
// lease moved) and leaves the entry for the new holder, which sends the
// alarm's start and end. Yet franz-go's idempotent producer cannot fail a
// batch it is unsure of, ignores the record's cancelled context and sends it
// again on its own once the broker answers: the fenced replica's start lands
// after the new holder's end. A consumer of the (compacted, keyed) topic
// sees the alarm active again, forever.
func TestKafkaAFencedReplicaProducesNothingAfterSendReturned(t *testing.T) {
	k := startCluster(t, 1, []string{"energy.alarms"})
	release := make(chan struct{})
	var stalled atomic.Bool
	k.c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if !stalled.CompareAndSwap(false, true) {
			t.Logf("%s produce request", time.Now().Format("15:04:05.000"))
			return nil, nil, false
		}
		t.Logf("%s first produce request: stalled", time.Now().Format("15:04:05.000"))
		// The first produce request stalls, then its connection closes:
		// nothing of it is stored.
		k.c.SleepControl(func() { <-release })
		return nil, errors.New("connection dropped"), true
	})
	var lost atomic.Bool
	fence := func() error {
		if lost.Load() {
			return errors.New("this replica no longer holds the lease")
		}
		return nil
	}
	old := buildWith(t, "bus", "brokers: "+k.brokers()+"\ntimeout: 1s\nclient_id: replica-a\n", nil,
		sinktype.Deps{Fence: fence}.Defaults())
	start := delivery(t, "R1", 2, event.Start)
	res, err := old.Send(context.Background(), start)
	if err == nil || !res.Retry {
		t.Fatalf("send to a stalled broker: %v (retry %v), want a retryable timeout", err, res.Retry)
	}
	// The lease moves: the old replica sends nothing more (its fence
	// refuses); the new holder delivers the start and the end.
	lost.Store(true)
	if res, err := old.Send(context.Background(), start); err == nil || !res.Retry {
		t.Fatalf("the fenced replica sent: %v", err)
	}
	next := sinkFor(t, "bus", "brokers: "+k.brokers()+"\ntimeout: 5s\nclient_id: replica-b\n", nil)
	send(t, next, start)
	send(t, next, delivery(t, "R1", 2, event.End))
	// The broker recovers.
	t.Logf("%s broker released", time.Now().Format("15:04:05.000"))
	close(release)
	// Read until the client's own retry had its chance (franz-go retries
	// an unanswered batch after its request timeout).
	var order []string
	for deadline := time.Now().Add(12 * time.Second); time.Now().Before(deadline) && len(order) < 3; time.Sleep(time.Second) {
		order = order[:0]
		for _, r := range k.read("energy.alarms") {
			var ev event.Event
			if err := json.Unmarshal([]byte(r.value), &ev); err != nil {
				t.Fatal(err)
			}
			order = append(order, fmt.Sprintf("%s(producer %d)", ev.Data.Transition, r.producer))
		}
	}
	t.Logf("alarm R1's partition: %v", order)
	if len(order) != 2 {
		t.Errorf("alarm R1's partition holds %d records %v, want the new holder's start and end only: "+
			"the fenced replica's timed-out record was produced by the client's own retry after Send returned", len(order), order)
	}
	if len(order) > 0 && !strings.HasPrefix(order[len(order)-1], "end") {
		t.Errorf("the alarm's last record is %s, not its end: a keyed or compacted consumer sees the ended alarm active", order[len(order)-1])
	}
}

// sendsWithin reports whether s delivers d within d's wait, trying as the
// Deliverer would, and the last error.
func sendsWithin(s interface {
	Send(context.Context, notify.Delivery) (notify.Result, error)
}, d notify.Delivery, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		res, err := s.Send(context.Background(), d)
		if err == nil || !res.Retry || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A reload of the rules whose kafka sink has other settings (a rotated
// password, another timeout) but is refused (another sink of the new rules
// cannot be built: buildTargets closes what it built so far) must leave the
// running sink alone, as main's mqtt sink does since fe1a3b0. clientFor
// replaces (closes) the running client at New: the running sink's every
// send then fails "the client was replaced" until the next good reload.
func TestKafkaARefusedReloadLeavesTheRunningClientAlone(t *testing.T) {
	k := startCluster(t, 1, []string{"energy.alarms"})
	running := sinkFor(t, "bus", "brokers: "+k.brokers()+"\ntimeout: 5s\n", nil)
	send(t, running, delivery(t, "L1", 0, event.Start))

	// The reload builds the new rules' kafka sink, then another sink fails
	// to build: the new sinks are closed, the running ones stay.
	refused := sinkFor(t, "bus", "brokers: "+k.brokers()+"\ntimeout: 6s\n", nil)
	_ = refused.Close()

	if err := sendsWithin(running, delivery(t, "L2", 0, event.Start), 5*time.Second); err != nil {
		t.Errorf("the running sink after a refused reload: %v", err)
	}
}

// Two sinks of one brokers list and client_id (an operator naming the
// client for its quota) with other settings (here only the timeout) each
// replace the other's client at New: the first one built never delivers
// again. mqtt refuses such a pair; kafka builds both.
func TestKafkaTwoSinksOfOneClientIDWithOtherSettings(t *testing.T) {
	k := startCluster(t, 1, []string{"energy.alarms", "energy.alarms.audit"})
	a := sinktest.Decode(t, kafka.Type, "brokers: "+k.brokers()+"\nclient_id: relay-prod\ntimeout: 5s\n", nil)
	b := sinktest.Decode(t, kafka.Type, "brokers: "+k.brokers()+"\nclient_id: relay-prod\ntopic: energy.alarms.audit\ntimeout: 8s\n", nil)
	sa, err := a.Build(context.Background(), "stream", sinktype.Deps{}.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	defer sa.(io.Closer).Close()
	sb, err := b.Build(context.Background(), "audit", sinktype.Deps{}.Defaults())
	if err != nil {
		t.Logf("the second sink is refused: %v", err)
		return // refusing the pair is a fix
	}
	defer sb.(io.Closer).Close()
	if err := sendsWithin(sb, delivery(t, "C1", 0, event.Start), 5*time.Second); err != nil {
		t.Errorf("sink audit: %v", err)
	}
	if err := sendsWithin(sa, delivery(t, "C1", 0, event.Start), 5*time.Second); err != nil {
		t.Errorf("sink stream, built first, never delivers: %v", err)
	}
}

// A broker-side password rotation that reaches relay's environment a
// minute later (or a secret store lagging) makes every attempt meanwhile
// fail with SASL_AUTHENTICATION_FAILED: the sink says it can never
// succeed, so the Deliverer dead-letters every start at once (parking its
// end beside it) instead of holding it in the outbox until the variable is
// fixed, as mqtt does for a refused password (CONNACK 0x86/0x87 retried)
// and as this sink does when a broker closes the connection instead. The
// credentials are the process's, not the event's: no event is at fault.
func TestKafkaARefusedPasswordIsRetriedAsMQTTDoes(t *testing.T) {
	const rotated = "rotated-password-0123"
	k := startCluster(t, 1, []string{"energy.alarms"}, kfakeSASL([3]string{"PLAIN", "relay", rotated})...)
	answerAsKafka(k, rotated)
	s := sinkFor(t, "bus", "brokers: "+k.brokers()+"\nsasl: plain\nusername_env: U\npassword_env: P\ntimeout: 3s\n",
		map[string]string{"U": "relay", "P": "the-password-before-rotation"})
	res, err := s.Send(context.Background(), delivery(t, "P1", 3, event.Start))
	if err == nil {
		t.Fatal("delivered with a refused password")
	}
	if !res.Retry {
		t.Errorf("a refused password is final: %v; every event in the rotation window is dead-lettered", err)
	}
}
