package mqtt_test

import (
	"context"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/mqtt"
	"github.com/relay-energy/relay/internal/notify/mqtt/mqtttest"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/testwait"
)

// takeovers counts the broker's session takeovers of one client id.
func takeovers(b *mqtttest.Broker) int {
	return strings.Count(b.Log(), "already connected, closing old connection")
}

// A closed sink (its rules reloaded without it, or its tenant no longer
// served by this replica) disconnects: the replica that serves the tenant
// now connects with the same client id and keeps it, instead of the two
// taking the session from each other at every reconnection.
func TestAClosedSinkLetsItsClientIDGo(t *testing.T) {
	b := mqtttest.Start(t)
	s := sinkFor(t, "ha", "url: "+b.URL()+"\nusername_env: U\npassword_env: P\nclient_id: relay-ha\ntimeout: 2s\n",
		map[string]string{"U": b.User, "P": b.Pass})
	send(t, s, delivery(t, "H1", 0, event.Start))
	if err := s.(*mqtt.Sink).Close(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "the broker to see the closed sink disconnect", func() bool {
		return strings.Contains(b.Log(), "Client relay-ha disconnected")
	})
	// The other replica's connection, with the same client id.
	u, _ := url.Parse(b.URL())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cm, err := autopaho.NewConnection(ctx, autopaho.ClientConfig{ServerUrls: []*url.URL{u}, KeepAlive: 30,
		ConnectUsername: b.User, ConnectPassword: []byte(b.Pass), CleanStartOnInitialConnection: true,
		ReconnectBackoff: autopaho.NewConstantBackoff(200 * time.Millisecond),
		ClientConfig:     paho.ClientConfig{ClientID: "relay-ha"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cm.AwaitConnection(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if n := takeovers(b); n > 0 {
		t.Errorf("in 3 s the broker saw client id relay-ha taken over %d times after the sink was closed", n)
	}
	res, err := s.Send(context.Background(), delivery(t, "H2", 0, event.Start))
	if err == nil || !res.Retry {
		t.Errorf("a closed sink's send: %v (retry %v), want a retryable error", err, res.Retry)
	}
}

// A sink rebuilt by a reload takes over its predecessor's connection before
// the predecessor is closed: closing the old one leaves the new one's
// connection up.
func TestClosingAReloadedSinksPredecessorKeepsTheConnection(t *testing.T) {
	b, sub := watchedBroker(t, "reload-watcher", "energy/#")
	yaml := "url: " + b.URL() + "\nusername_env: U\npassword_env: P\nclient_id: reloaded\ntimeout: 2s\n"
	env := map[string]string{"U": b.User, "P": b.Pass}
	old := sinkFor(t, "bus", yaml, env)
	send(t, old, delivery(t, "K1", 0, event.Start))
	successor := sinkFor(t, "bus", yaml, env)
	if err := old.(*mqtt.Sink).Close(); err != nil {
		t.Fatal(err)
	}
	send(t, successor, delivery(t, "K2", 0, event.Start))
	sub.WaitFor(t, 10*time.Second, `"id":"K1:start"`, `"id":"K2:start"`)
	if n := strings.Count(b.Log(), " as reloaded "); n != 1 {
		t.Errorf("the sink and its successor connected %d times, want once: they share the connection", n)
	}
}

// A reload that corrects ca_file, with the same broker, client id and
// credentials, replaces the connection made with the wrong authorities.
func TestAReloadedCAFileReplacesTheConnection(t *testing.T) {
	b := mqtttest.Start(t)
	other := notifytest.NewTLSFiles(t)
	env := map[string]string{"U": b.User, "P": b.Pass}
	wrong := sinkFor(t, "ca", "url: "+b.TLSURL()+"\nca_file: "+other.CA+"\nusername_env: U\npassword_env: P\ntimeout: 1s\n", env)
	if _, err := wrong.Send(context.Background(), delivery(t, "C1", 0, event.Start)); err == nil {
		t.Fatal("a broker whose certificate the authorities did not sign was trusted")
	}
	fixed := sinkFor(t, "ca", "url: "+b.TLSURL()+"\nca_file: "+b.TLSFiles.CA+"\nusername_env: U\npassword_env: P\ntimeout: 2s\n", env)
	send(t, fixed, delivery(t, "C1", 0, event.Start))
}

// A broker that keeps no retained messages refuses the retained state in
// the client, before anything leaves: the delivery is not retried (each
// retry would publish again until max_age), the error says why, the event
// does not go out without its state, and the probe says so beforehand.
func TestABrokerWithoutRetainedMessagesIsSaidNotRetried(t *testing.T) {
	b := mqtttest.Start(t)
	b.Reconfigure("retain_available false\n")
	// The watcher subscribes once the broker restarted with its new
	// configuration: one that had to reconnect first could miss N2 on a
	// busy machine.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sub := b.Subscribe(ctx, "noretain-watcher", "energy/#")
	time.Sleep(300 * time.Millisecond) // subscribed
	yaml := "url: " + b.URL() + "\nusername_env: U\npassword_env: P\nretain_state: true\ntimeout: 2s\n"
	env := map[string]string{"U": b.User, "P": b.Pass}
	s := sinkFor(t, "noretain", yaml, env)
	var (
		res notify.Result
		err error
	)
	testwait.For(t, 10*time.Second, "an answer other than a retry", func() bool {
		res, err = s.Send(context.Background(), delivery(t, "N1", 0, event.Start))
		return err == nil || !res.Retry
	})
	if err == nil || res.Retry || !strings.Contains(err.Error(), "retain") {
		t.Errorf("the retained state on a broker without retained messages: %v (retry %v), want a final error saying so", err, res.Retry)
	}
	// A marker sent after it by a sink without retain_state: once the
	// watcher has it, it would have had N1's start.
	send(t, sinkFor(t, "marker", "url: "+b.URL()+"\nusername_env: U\npassword_env: P\ntimeout: 2s\n", env), delivery(t, "N2", 0, event.Start))
	sub.WaitFor(t, 10*time.Second, `"id":"N2:start"`)
	for _, l := range sub.Got() {
		if strings.Contains(l, "N1:start") {
			t.Errorf("the event went out although its state could not: %.100q", l)
		}
	}
	cfg := sinktest.Decode(t, mqtt.Type, yaml, env)
	if _, err := cfg.Probe(context.Background(), sinktype.Deps{Sink: "noretain"}.Defaults()); err == nil || !strings.Contains(err.Error(), "retain") {
		t.Errorf("the probe of retain_state on a broker without retained messages: %v, want a problem naming it", err)
	}
}

// A broker restarted without persistence (Mosquitto's default) has
// forgotten the retained state: the sink publishes the ongoing alarms'
// state again at the reconnection, so a late subscriber reads them.
func TestRetainedStateIsPublishedAgainAfterARestartWithoutPersistence(t *testing.T) {
	b := mqtttest.Start(t)
	b.Reconfigure("persistence false\n")
	s := sinkFor(t, "rs", "url: "+b.URL()+"\nusername_env: U\npassword_env: P\nretain_state: true\ntimeout: 2s\n",
		map[string]string{"U": b.User, "P": b.Pass})
	send(t, s, delivery(t, "RS1", 0, event.Start))
	send(t, s, delivery(t, "RS2", 0, event.Start))
	send(t, s, delivery(t, "RS2", 0, event.End))
	b.Stop()
	b.Start()
	want := []string{"energy/alarm-state/1001/5001/RS1"}
	testwait.For(t, 15*time.Second, "the ongoing alarm's state published again", func() bool {
		return slices.Equal(b.Retained(t, "energy/alarm-state/#"), want)
	})
}

// A message over the maximum packet size the broker announced is refused
// for good before it leaves: sent, it would make the broker drop the
// connection, and every retry would again.
func TestAMessageOverTheBrokersMaximumPacketSizeIsRefused(t *testing.T) {
	b := mqtttest.Start(t)
	b.Reconfigure("max_packet_size 4000\n")
	s := sinkFor(t, "big", "url: "+b.URL()+"\nusername_env: U\npassword_env: P\ntimeout: 2s\n",
		map[string]string{"U": b.User, "P": b.Pass})
	send(t, s, delivery(t, "small-1", 0, event.Start))
	res, err := s.Send(context.Background(), delivery(t, strings.Repeat("x", 5000), 0, event.Start))
	if err == nil || res.Retry || !strings.Contains(err.Error(), "maximum packet size of 4000") {
		t.Fatalf("a 5 KB event on a broker that takes 4000 bytes: %.200v (retry %v), want a final error naming the maximum", err, res.Retry)
	}
	send(t, s, delivery(t, "small-2", 0, event.Start))
	if n := strings.Count(b.Log(), " as relay-big "); n != 1 {
		t.Errorf("the sink connected %d times, want once: the big message was sent and the broker dropped the connection", n)
	}
}

// relay check's probe connects as the sink's client id with "-check", not
// taking the sink's own session, and leaves nothing running.
func TestProbeConnectsAsTheSinksClientIDAndLeavesNothing(t *testing.T) {
	b := mqtttest.Start(t)
	before := runtime.NumGoroutine()
	for _, pass := range []string{b.Pass, "wrong-password-xyz"} {
		cfg := sinktest.Decode(t, mqtt.Type, "url: "+b.URL()+"\nusername_env: U\npassword_env: P\ntimeout: 3s\n",
			map[string]string{"U": b.User, "P": pass})
		if _, err := cfg.Probe(context.Background(), sinktype.Deps{Sink: "scada"}.Defaults()); (err == nil) != (pass == b.Pass) {
			t.Errorf("probe with password %q: %v", pass, err)
		}
	}
	if !strings.Contains(b.Log(), " as relay-scada-check ") {
		t.Errorf("the probe did not connect as relay-scada-check:\n%s", b.Log())
	}
	testwait.For(t, 5*time.Second, "the probes' goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

// The ack and unack of an alarm reach the broker on their own topics (the
// bus learns who took it); the retained state stays the alarm's start, and
// an acknowledgement after the alarm ended does not bring its state back.
func TestAcksReachTheBrokerAndLeaveTheRetainedState(t *testing.T) {
	b, sub := watchedBroker(t, "ack-watcher", "energy/alarms/#")
	s := sinkFor(t, "acks", "url: "+b.URL()+"\nusername_env: U\npassword_env: P\nretain_state: true\ntimeout: 2s\n",
		map[string]string{"U": b.User, "P": b.Pass})
	if c, ok := s.(notify.AckCarrier); !ok || !c.CarriesAcks() {
		t.Fatal("the mqtt sink does not carry acks")
	}
	ack := func(id string, tr event.Transition) notify.Delivery {
		d := delivery(t, id, 0, event.Start)
		a := event.Alarm{OriginID: id, Status: 1, EventCode: "E1023", TenantID: "1001", StationID: "5001", DeviceSN: "SN-" + id, OccurredAt: t0}
		ev := event.NewAck(a, tr, 1, event.AckInfo{By: "ops <on call>", Via: "api", At: event.FormatTime(t0.Add(3 * time.Minute))}, t0.Add(2*time.Minute))
		body, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		d.EventID, d.Body, d.Event = ev.ID, body, &ev
		return d
	}
	for _, d := range []notify.Delivery{delivery(t, "K1", 0, event.Start), ack("K1", event.Ack), ack("K1", event.Unack),
		delivery(t, "K2", 0, event.Start), delivery(t, "K2", 0, event.End), ack("K2", event.Ack)} {
		send(t, s, d)
	}
	sub.WaitFor(t, 10*time.Second, `"id":"K1:ack"`, `"id":"K1:unack"`, `"id":"K2:ack"`)
	for _, l := range sub.Got() {
		if strings.Contains(l, `"id":"K1:ack"`) && !strings.HasPrefix(l, "energy/alarms/1001/5001/0/ack ") {
			t.Errorf("K1's ack arrived as %.80q, want on energy/alarms/1001/5001/0/ack", l)
		}
	}
	if got, want := b.Retained(t, "energy/alarm-state/#"), []string{"energy/alarm-state/1001/5001/K1"}; !slices.Equal(got, want) {
		t.Errorf("retained state %v, want the one ongoing alarm %v", got, want)
	}
}

// With tracing on, a message carries the attempt's trace context as the
// user property traceparent (W3C trace context in MQTT 5), beside ce_id and
// ce_type, as an independent MQTT 5 subscriber reads them.
func TestMessagesCarryTheirUserProperties(t *testing.T) {
	b := mqtttest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := b.Subscribe(ctx, "props-watcher", "energy/alarms/#", "-V", "mqttv5", "-F", "%t %P")
	time.Sleep(300 * time.Millisecond) // subscribed
	s := sinkFor(t, "traced", "url: "+b.URL()+"\nusername_env: U\npassword_env: P\ntimeout: 2s\n", map[string]string{"U": b.User, "P": b.Pass})
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	d := delivery(t, "TP1", 0, event.Start)
	d.TraceParent = tp
	send(t, s, d)
	send(t, s, delivery(t, "TP2", 0, event.Start))
	sub.WaitFor(t, 10*time.Second, "ce_id:TP1:start", "ce_id:TP2:start")
	for _, l := range sub.Got() {
		switch {
		case strings.Contains(l, "ce_id:TP1:start") && (!strings.Contains(l, "traceparent:"+tp) || !strings.Contains(l, "ce_type:energy.alarm.start")):
			t.Errorf("TP1's properties %q: want ce_type energy.alarm.start and traceparent %s", l, tp)
		case strings.Contains(l, "ce_id:TP2:start") && strings.Contains(l, "traceparent"):
			t.Errorf("TP2 was sent without trace context, and carries %q", l)
		}
	}
}
