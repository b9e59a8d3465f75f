package mqtt_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/mqtt"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

var t0 = time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)

// watchedBroker starts a broker and an independent subscriber of topic on
// it, with the persistent session id, subscribed when it returns.
func watchedBroker(t *testing.T, id, topic string) (*broker, *subscriber) {
	t.Helper()
	b := startBroker(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sub := b.subscribe(ctx, id, topic)
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
	s := sinkFor(t, "plant-bus", "url: "+b.tlsURL()+"\nca_file: "+b.tlsFiles.CA+
		"\nusername_env: MQTT_USER\npassword_env: MQTT_PASSWORD\nretain_state: true\n",
		map[string]string{"MQTT_USER": b.user, "MQTT_PASSWORD": b.pass})
	ds := []notify.Delivery{delivery(t, "A1", 0, event.Start), delivery(t, "A2", 1, event.Start), delivery(t, "A3", 2, event.Start),
		delivery(t, "A2", 1, event.End), delivery(t, "a/b+#", 3, event.Start)}
	for _, d := range ds {
		send(t, s, d)
	}
	var wants []string
	for _, d := range ds {
		wants = append(wants, `"id":"`+d.EventID+`"`)
	}
	sub.waitFor(t, 10*time.Second, wants...)
	for _, l := range sub.got() {
		if strings.Contains(l, `"id":"A1:start"`) && !strings.HasPrefix(l, "energy/alarms/1001/5001/0/start ") {
			t.Errorf("A1's start arrived as %q, want on energy/alarms/1001/5001/0/start", l[:min(len(l), 80)])
		}
	}

	out, err := exec.Command(need(t, "mosquitto_sub"), "-h", "127.0.0.1", "-p", strconv.Itoa(b.port), "-u", b.user, "-P", b.pass,
		"-t", "energy/alarm-state/#", "-v", "-W", "2").Output()
	if err != nil && !strings.Contains(err.Error(), "exit status 27") { // 27: the -W timeout
		t.Fatalf("late mosquitto_sub: %v\n%s", err, out)
	}
	var state []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if topic, _, ok := strings.Cut(l, " "); ok {
			state = append(state, topic)
		}
	}
	want := []string{"energy/alarm-state/1001/5001/A1", "energy/alarm-state/1001/5001/A3", "energy/alarm-state/1001/5001/a%2Fb%2B%23"}
	if strings.Join(state, ",") != strings.Join(want, ",") {
		t.Errorf("a late subscriber reads the retained state %v, want the ongoing alarms %v\n%s", state, want, out)
	}
}

// A broker restarted in the middle of a storm loses nothing: the sink's
// deliveries fail while it is down and are retried, and a subscriber with
// a persistent session reads every event.
func TestABrokerRestartMidStormLosesNothing(t *testing.T) {
	b, sub := watchedBroker(t, "storm-watcher", "energy/alarms/#")
	s := sinkFor(t, "storm-bus", "url: "+b.url()+"\nusername_env: MQTT_USER\npassword_env: MQTT_PASSWORD\ntimeout: 2s\n",
		map[string]string{"MQTT_USER": b.user, "MQTT_PASSWORD": b.pass})
	var wants []string
	for i := range 200 {
		if i == 80 {
			b.stop()
			go func() { time.Sleep(time.Second); b.start() }()
		}
		d := delivery(t, "S"+strconv.Itoa(i), i%4, event.Start)
		send(t, s, d)
		wants = append(wants, `"id":"`+d.EventID+`"`)
	}
	sub.waitFor(t, 30*time.Second, wants...)
}

// The broker's refusal of the password is an error that says so, and is
// retried (the operator fixes the variable); the password never shows.
func TestAWrongPasswordIsSaidAndNotShown(t *testing.T) {
	b := startBroker(t)
	const wrong = "not-the-password-987654321"
	s := sinkFor(t, "bus", "url: "+b.url()+"\nusername_env: MQTT_USER\npassword_env: MQTT_PASSWORD\ntimeout: 2s\n",
		map[string]string{"MQTT_USER": b.user, "MQTT_PASSWORD": wrong})
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
	b := startBroker(t)
	for _, tc := range []struct {
		pass, want string
		ok         bool
	}{{b.pass, "accepted the credentials", true}, {"not-the-password-987654321", "user name or password", false}} {
		cfg := sinktest.Decode(t, mqtt.Type, "url: "+b.tlsURL()+"\nca_file: "+b.tlsFiles.CA+"\nusername_env: U\npassword_env: P\ntimeout: 3s\n",
			map[string]string{"U": b.user, "P": tc.pass})
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
	cfg := sinktest.Decode(t, mqtt.Type, "url: "+b.url()+"\nusername_env: U\npassword_env: P\nclient_id: fenced\n",
		map[string]string{"U": b.user, "P": b.pass})
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
	if got := sub.got(); len(got) != 0 {
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
	yaml := "url: " + b.url() + "\nusername_env: U\npassword_env: P\nclient_id: rotating\ntimeout: 2s\n"
	old := sinkFor(t, "bus", yaml, map[string]string{"U": b.user, "P": b.pass})
	send(t, old, delivery(t, "R1", 0, event.Start))
	rotated := sinkFor(t, "bus", yaml, map[string]string{"U": b.user + "-rotated", "P": b.pass + "-rotated"})
	for i := range 5 {
		send(t, rotated, delivery(t, "R"+strconv.Itoa(i+2), 0, event.Start))
	}
	sub.waitFor(t, 10*time.Second, `"id":"R1:start"`, `"id":"R6:start"`)
	res, err := old.Send(context.Background(), delivery(t, "R9", 0, event.Start))
	if err == nil || !res.Retry {
		t.Errorf("the replaced sink's send: %v (retry %v), want a retryable error", err, res.Retry)
	}
	time.Sleep(500 * time.Millisecond)
	log, _ := os.ReadFile(filepath.Join(b.dir, "mosquitto.log"))
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
		cfg := sinktest.Decode(t, mqtt.Type, "url: "+b.url()+"\nusername_env: U\npassword_env: P\n", map[string]string{"U": b.user, "P": b.pass})
		s, err := cfg.Build(context.Background(), "scada", sinktype.Deps{Tenant: tenant}.Defaults())
		if err != nil {
			t.Fatal(err)
		}
		send(t, s, delivery(t, "T-"+tenant, 0, event.Start))
	}
	sub.waitFor(t, 10*time.Second, `"id":"T-north:start"`, `"id":"T-south:start"`)
	log, _ := os.ReadFile(filepath.Join(b.dir, "mosquitto.log"))
	for _, id := range []string{"relay-north-scada", "relay-south-scada"} {
		if !strings.Contains(string(log), " as "+id+" ") {
			t.Errorf("no client connected as %s:\n%s", id, log)
		}
	}
}
