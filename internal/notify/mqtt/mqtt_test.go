package mqtt_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/mqtt"
	"github.com/relay-energy/relay/internal/notify/mqtt/mqtttest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

var t0 = time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)

// watchedBroker starts a broker and an independent subscriber of topic on
// it, with the persistent session id, subscribed when it returns.
func watchedBroker(t *testing.T, id, topic string) (*mqtttest.Broker, *mqtttest.Subscriber) {
	t.Helper()
	b := mqtttest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sub := b.Subscribe(ctx, id, topic)
	time.Sleep(300 * time.Millisecond) // subscribed
	return b, sub
}

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

// sinkFor builds the mqtt sink of yaml, with env, as relay builds it.
func sinkFor(t *testing.T, name, yaml string, env map[string]string) notify.Sink {
	t.Helper()
	cfg := sinktest.Decode(t, mqtt.Type, yaml, env)
	s, err := cfg.Build(context.Background(), name, sinktype.Deps{}.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// send delivers d as the Deliverer would: again after a retryable failure,
// within a minute.
func send(t *testing.T, s notify.Sink, d notify.Delivery) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		res, err := s.Send(context.Background(), d)
		if err == nil {
			return
		}
		if !res.Retry || time.Now().After(deadline) {
			t.Fatalf("send %s: %v (retry %v)", d.EventID, err, res.Retry)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Over TLS with a password, every event reaches an independent subscriber
// on its topic, and a subscriber that connects afterwards reads exactly the
// ongoing alarms from the broker's retained messages.
func TestEventsAndTheOngoingAlarmsReachTheBroker(t *testing.T) {
	b, sub := watchedBroker(t, "watcher", "energy/alarms/#")
	s := sinkFor(t, "plant-bus", "url: "+b.TLSURL()+"\nca_file: "+b.TLSFiles.CA+
		"\nusername_env: MQTT_USER\npassword_env: MQTT_PASSWORD\nretain_state: true\n",
		map[string]string{"MQTT_USER": b.User, "MQTT_PASSWORD": b.Pass})
	ds := []notify.Delivery{delivery(t, "A1", 0, event.Start), delivery(t, "A2", 1, event.Start), delivery(t, "A3", 2, event.Start),
		delivery(t, "A2", 1, event.End), delivery(t, "a/b+#", 3, event.Start)}
	for _, d := range ds {
		send(t, s, d)
	}
	var wants []string
	for _, d := range ds {
		wants = append(wants, `"id":"`+d.EventID+`"`)
	}
	sub.WaitFor(t, 10*time.Second, wants...)
	for _, l := range sub.Got() {
		if strings.Contains(l, `"id":"A1:start"`) && !strings.HasPrefix(l, "energy/alarms/1001/5001/0/start ") {
			t.Errorf("A1's start arrived as %q, want on energy/alarms/1001/5001/0/start", l[:min(len(l), 80)])
		}
	}

	state := b.Retained(t, "energy/alarm-state/#")
	want := []string{"energy/alarm-state/1001/5001/A1", "energy/alarm-state/1001/5001/A3", "energy/alarm-state/1001/5001/a%2Fb%2B%23"}
	if strings.Join(state, ",") != strings.Join(want, ",") {
		t.Errorf("a late subscriber reads the retained state %v, want the ongoing alarms %v", state, want)
	}
}

// The acceptance run: 1,000 alarms over TLS with a password, their starts
// and two ends in three, while the broker is restarted in the middle, with
// publishes in flight. An independent subscriber with a persistent session
// reads every start and end, each alarm's start before its end; one that
// connects after the run reads exactly the ongoing alarms from the
// retained topics.
func TestABrokerRestartMidStormLosesNothing(t *testing.T) {
	b, sub := watchedBroker(t, "storm-watcher", "energy/alarms/#")
	s := sinkFor(t, "storm-bus", "url: "+b.TLSURL()+"\nca_file: "+b.TLSFiles.CA+
		"\nusername_env: MQTT_USER\npassword_env: MQTT_PASSWORD\nretain_state: true\ntimeout: 2s\n",
		map[string]string{"MQTT_USER": b.User, "MQTT_PASSWORD": b.Pass})
	const alarms = 1000
	id := func(i int) string { return "M" + strconv.Itoa(i) }
	var wants, ongoing []string
	restarted := make(chan struct{})
	for i := range alarms {
		if i == alarms/2 {
			// Not between two sends: while the next ones are on the wire.
			go func() {
				defer close(restarted)
				time.Sleep(2 * time.Millisecond)
				b.Stop()
				time.Sleep(500 * time.Millisecond)
				b.Start()
			}()
		}
		ds := []notify.Delivery{delivery(t, id(i), i%4, event.Start)}
		if i > 0 && (i-1)%3 != 0 {
			ds = append(ds, delivery(t, id(i-1), (i-1)%4, event.End))
		}
		for _, d := range ds {
			send(t, s, d)
			wants = append(wants, `"id":"`+d.EventID+`"`)
		}
		if i%3 == 0 {
			ongoing = append(ongoing, "energy/alarm-state/1001/5001/"+id(i))
		}
	}
	<-restarted
	if n := strings.Count(b.Log(), "mosquitto version"); n < 2 {
		t.Fatalf("the broker was started %d times, want a restart in the run", n)
	}
	sub.WaitFor(t, 60*time.Second, wants...)
	// Each alarm's start before its end (a retried publish may come twice).
	seen := map[string]bool{}
	for _, l := range sub.Got() {
		_, body, _ := strings.Cut(l, " ")
		var ev event.Event
		if err := json.Unmarshal([]byte(body), &ev); err != nil {
			t.Fatalf("the subscriber read %.100q: %v", l, err)
		}
		switch ev.Data.Transition {
		case event.Start:
			seen[ev.Data.OriginID] = true
		case event.End:
			if !seen[ev.Data.OriginID] {
				t.Errorf("the end of %s arrived before its start", ev.Data.OriginID)
			}
		}
	}
	slices.Sort(ongoing)
	if state := b.Retained(t, "energy/alarm-state/#"); !slices.Equal(state, ongoing) {
		t.Errorf("a late subscriber reads %d retained states, want the %d ongoing alarms\nread: %.300v\nwant: %.300v", len(state), len(ongoing), state, ongoing)
	}
}

// The broker's refusal of the password is an error that says so, and is
// retried (the operator fixes the variable); the password never shows.
func TestAWrongPasswordIsSaidAndNotShown(t *testing.T) {
	b := mqtttest.Start(t)
	const wrong = "not-the-password-987654321"
	s := sinkFor(t, "bus", "url: "+b.URL()+"\nusername_env: MQTT_USER\npassword_env: MQTT_PASSWORD\ntimeout: 2s\n",
		map[string]string{"MQTT_USER": b.User, "MQTT_PASSWORD": wrong})
	res, err := s.Send(context.Background(), delivery(t, "W1", 0, event.Start))
	if err == nil || !res.Retry {
		t.Fatalf("with a wrong password: %v (retry %v), want a retryable error", err, res.Retry)
	}
	if !strings.Contains(err.Error(), "password") || strings.Contains(err.Error(), wrong) {
		t.Errorf("error %q: want it to say the password was refused, without the password", err)
	}
}

// relay check --online: the probe connects and says the broker accepted
// the credentials, or says why it refused them.
func TestProbeSaysWhetherTheBrokerAcceptsTheCredentials(t *testing.T) {
	b := mqtttest.Start(t)
	for _, tc := range []struct {
		pass, want string
		ok         bool
	}{{b.Pass, "accepted the credentials", true}, {"not-the-password-987654321", "user name or password", false}} {
		cfg := sinktest.Decode(t, mqtt.Type, "url: "+b.TLSURL()+"\nca_file: "+b.TLSFiles.CA+"\nusername_env: U\npassword_env: P\ntimeout: 3s\n",
			map[string]string{"U": b.User, "P": tc.pass})
		line, err := cfg.Probe(context.Background(), sinktype.Deps{}.Defaults())
		got := line
		if err != nil {
			got = err.Error()
		}
		if (err == nil) != tc.ok || !strings.Contains(got, tc.want) || strings.Contains(got, tc.pass) {
			t.Errorf("probe with password %q: %q, %v; want ok %v and %q, without the password", tc.pass, line, err, tc.ok, tc.want)
		}
	}
}

// A fence that refuses (a replica that lost the tenant's lease) stops the
// publish after the wait for a connection: nothing reaches the broker, and
// the delivery is retried (by the replica that holds the lease).
func TestAFenceThatRefusesSendsNothing(t *testing.T) {
	b, sub := watchedBroker(t, "fence-watcher", "energy/#")
	cfg := sinktest.Decode(t, mqtt.Type, "url: "+b.URL()+"\nusername_env: U\npassword_env: P\nclient_id: fenced\n",
		map[string]string{"U": b.User, "P": b.Pass})
	deps := sinktype.Deps{Fence: func() error { return errors.New("this replica no longer holds the lease") }}.Defaults()
	s, err := cfg.Build(context.Background(), "fenced", deps)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Send(context.Background(), delivery(t, "F1", 0, event.Start))
	if err == nil || !res.Retry || !strings.Contains(err.Error(), "lease") {
		t.Fatalf("send past a refusing fence: %v (retry %v), want a retryable refusal naming the fence", err, res.Retry)
	}
	time.Sleep(300 * time.Millisecond)
	if got := sub.Got(); len(got) != 0 {
		t.Errorf("the broker got %q past a refusing fence", got)
	}
}

// A reload with rotated credentials builds the sink again with the same
// client id: the new sink's connection replaces the old one, which is
// closed (two connections with one client id would take the session from
// each other at every reconnection), and the old sink's sends fail and
// are retried.
func TestRotatedCredentialsReplaceTheConnection(t *testing.T) {
	b, sub := watchedBroker(t, "rotation-watcher", "energy/#")
	yaml := "url: " + b.URL() + "\nusername_env: U\npassword_env: P\nclient_id: rotating\ntimeout: 2s\n"
	old := sinkFor(t, "bus", yaml, map[string]string{"U": b.User, "P": b.Pass})
	send(t, old, delivery(t, "R1", 0, event.Start))
	rotated := sinkFor(t, "bus", yaml, map[string]string{"U": b.User + "-rotated", "P": b.Pass + "-rotated"})
	for i := range 5 {
		send(t, rotated, delivery(t, "R"+strconv.Itoa(i+2), 0, event.Start))
	}
	sub.WaitFor(t, 10*time.Second, `"id":"R1:start"`, `"id":"R6:start"`)
	res, err := old.Send(context.Background(), delivery(t, "R9", 0, event.Start))
	if err == nil || !res.Retry {
		t.Errorf("the replaced sink's send: %v (retry %v), want a retryable error", err, res.Retry)
	}
	time.Sleep(500 * time.Millisecond)
	log, _ := os.ReadFile(filepath.Join(b.Dir, "mosquitto.log"))
	// One takeover at the replacement may be seen (the broker may read the
	// new CONNECT before the old DISCONNECT); two connections living on
	// with one client id take it over again at every reconnection.
	if n := strings.Count(string(log), "already connected, closing old connection"); n > 1 {
		t.Errorf("the broker saw the client id taken over %d times: two connections with one client id\n%s", n, log)
	}
}

// With a tenants file, two tenants' sinks of one name connect with client
// ids of their own (relay-<tenant>-<sink>): served by two replicas, one id
// would take the session from the other at every reconnection.
func TestTenantsSinksOfOneNameHaveClientIDsOfTheirOwn(t *testing.T) {
	b, sub := watchedBroker(t, "tenant-watcher", "energy/#")
	for _, tenant := range []string{"north", "south"} {
		cfg := sinktest.Decode(t, mqtt.Type, "url: "+b.URL()+"\nusername_env: U\npassword_env: P\n", map[string]string{"U": b.User, "P": b.Pass})
		s, err := cfg.Build(context.Background(), "scada", sinktype.Deps{Tenant: tenant}.Defaults())
		if err != nil {
			t.Fatal(err)
		}
		send(t, s, delivery(t, "T-"+tenant, 0, event.Start))
	}
	sub.WaitFor(t, 10*time.Second, `"id":"T-north:start"`, `"id":"T-south:start"`)
	log, _ := os.ReadFile(filepath.Join(b.Dir, "mosquitto.log"))
	for _, id := range []string{"relay-north-scada", "relay-south-scada"} {
		if !strings.Contains(string(log), " as "+id+" ") {
			t.Errorf("no client connected as %s:\n%s", id, log)
		}
	}
}
