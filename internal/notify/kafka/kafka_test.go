package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/testwait"
)

// 1,000 alarms' starts and ends go through the sink while the brokers'
// connections are cut: twice just after a broker stored a produce, before
// its acknowledgement left (the client sends the batch again), and twice
// every connection at once between two produces. An independent consumer
// reads every event exactly once, keyed by its alarm, each alarm's events
// on one partition in order, with its CloudEvents headers; every produce
// request asked for every in-sync replica, from an idempotent producer.
func TestEveryEventOnceAndInOrderThroughConnectionCuts(t *testing.T) {
	const alarms = 1000
	k := startCluster(t, 8, []string{"energy.alarms"})
	s := sinkFor(t, "bus", "brokers: "+k.brokers()+"\ntimeout: 10s\n", nil)

	// Every alarm starts; each ends 25 events after its start, so that
	// starts and ends of different alarms interleave.
	var ds []notify.Delivery
	for i := range alarms {
		ds = append(ds, delivery(t, fmt.Sprintf("A%04d", i), i%4, event.Start))
		if i >= 25 {
			ds = append(ds, delivery(t, fmt.Sprintf("A%04d", i-25), (i-25)%4, event.End))
		}
	}
	for i := alarms - 25; i < alarms; i++ {
		ds = append(ds, delivery(t, fmt.Sprintf("A%04d", i), i%4, event.End))
	}
	failed, cut := 0, 0
	for i, d := range ds {
		switch i {
		case 400:
			k.ln.swallowProduceAnswers(1)
		case 900, 1700:
			cut += k.ln.cutAll()
		case 1300:
			k.ln.swallowProduceAnswers(1)
		}
		failed += send(t, s, d)
	}
	got := k.read("energy.alarms")
	t.Logf("%d events produced through the sink, %d records read back; %d produce requests on the wire; "+
		"%d acknowledgements swallowed after the broker stored the record, %d connections cut between produces; %d sends failed and were retried",
		len(ds), len(got), k.produces.Load(), k.ln.swallows.Load(), cut, failed)

	if k.ln.swallows.Load() != 2 || cut == 0 {
		t.Fatalf("the cuts did not happen (%d acknowledgements swallowed, %d connections cut): the test proves nothing", k.ln.swallows.Load(), cut)
	}
	if k.produces.Load() < int64(len(ds))+2 {
		t.Errorf("%d produce requests for %d events: the batches whose acknowledgement was lost were not sent again", k.produces.Load(), len(ds))
	}
	if k.weakAcks.Load() != 0 || k.notIdempotent.Load() != 0 {
		t.Errorf("%d produce requests without acks=all, %d batches from no idempotent producer", k.weakAcks.Load(), k.notIdempotent.Load())
	}
	seen := map[string]int{}
	partitionOf := map[string]int32{}
	order := map[string][]string{}
	for _, r := range got {
		var ev event.Event
		if err := json.Unmarshal([]byte(r.value), &ev); err != nil {
			t.Fatalf("record %d/%d: the value is no event: %v", r.partition, r.offset, err)
		}
		seen[ev.ID]++
		if r.key != ev.Data.OriginID {
			t.Errorf("record %s has key %q, want its alarm's origin id %q", ev.ID, r.key, ev.Data.OriginID)
		}
		if p, ok := partitionOf[r.key]; ok && p != r.partition {
			t.Errorf("alarm %s's events are on partitions %d and %d", r.key, p, r.partition)
		}
		partitionOf[r.key] = r.partition
		order[r.key] = append(order[r.key], string(ev.Data.Transition))
		checkHeaders(t, r, &ev)
	}
	dups := 0
	for id, n := range seen {
		if n > 1 {
			dups++
			t.Errorf("event %s stored %d times", id, n)
		}
	}
	t.Logf("%d distinct events read, %d stored more than once", len(seen), dups)
	for _, d := range ds {
		if seen[d.EventID] == 0 {
			t.Errorf("event %s is missing", d.EventID)
		}
	}
	for key, trs := range order {
		if strings.Join(trs, ",") != "start,end" {
			t.Errorf("alarm %s: its partition holds %v, want [start end]", key, trs)
		}
	}
	if len(got) != len(ds) {
		t.Errorf("%d records read, want %d", len(got), len(ds))
	}
}

// checkHeaders checks r's headers against the event its value holds.
func checkHeaders(t *testing.T, r consumed, ev *event.Event) {
	t.Helper()
	want := map[string]string{
		"content-type": "application/cloudevents+json", "ce_specversion": "1.0", "ce_id": ev.ID, "ce_source": ev.Source,
		"ce_type": ev.Type, "ce_subject": ev.Subject, "ce_time": ev.Time, "level": strconv.Itoa(ev.Data.Level),
	}
	for k, v := range want {
		if r.headers[k] != v {
			t.Errorf("record %s: header %s = %q, want %q", ev.ID, k, r.headers[k], v)
		}
	}
	if len(r.headers) != len(want) {
		t.Errorf("record %s: headers %v, want %v", ev.ID, r.order, want)
	}
}

// The cut the test above survives is one a producer without idempotence
// does not: a plain franz-go producer with idempotence off, whose
// acknowledgement is swallowed after the broker stored the record, stores
// it twice. So the count of the test above would catch a sink that turned
// idempotence off.
func TestWithoutIdempotenceTheSameCutStoresARecordTwice(t *testing.T) {
	k := startCluster(t, 1, []string{"energy.alarms"})
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.addrs...), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "energy.alarms", Value: []byte("warm-up")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	k.ln.swallowProduceAnswers(1)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "energy.alarms", Value: []byte("once")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range k.read("energy.alarms") {
		if r.value == "once" {
			n++
		}
	}
	if k.ln.swallows.Load() != 1 || n != 2 {
		t.Fatalf("without idempotence, after %d swallowed acknowledgement: the record stored %d times, want 2", k.ln.swallows.Load(), n)
	}
}

// A consumer that follows CloudEvents' Kafka protocol binding decodes the
// record as the event relay sent. The binding (Kafka Protocol Binding for
// CloudEvents, version 1.0.3-wip, in the CloudEvents specification's
// repository) says:
//
//	§3: "The receiver of the event can distinguish between the two content
//	modes by inspecting the content-type Header of the Kafka message. If the
//	header is present and its value is prefixed with the CloudEvents media
//	type application/cloudevents (matched case-insensitively), indicating
//	the use of a known event format, the receiver uses structured mode,
//	otherwise it defaults to binary mode."
//
//	§3.3.3: "Implementations MAY include the same Kafka headers as defined
//	for the binary mode."
//
//	§3.2.3.1: "CloudEvent attributes are prefixed with ce_ for use in the
//	message-headers section." (time maps to ce_time, id to ce_id,
//	specversion to ce_specversion)
//
// So a record with content-type application/cloudevents+json is read in
// structured mode whatever ce_ headers it carries, its value being the
// whole event in the JSON format; the CloudEvents SDKs for Go (its
// kafka_sarama binding), Java and JavaScript decide the same way, by
// content-type first. The ce_ headers repeat the attributes for consumers
// that route without reading the value: each must equal the value's.
func TestACloudEventsConsumerDecodesTheRecordAsTheEvent(t *testing.T) {
	k := startCluster(t, 3, []string{"energy.alarms"})
	s := sinkFor(t, "bus", "brokers: "+k.brokers()+"\n", nil)
	sent := delivery(t, "1862223400000000001", 2, event.Start)
	// With tracing on: the transition's trace context in the event (the
	// distributed tracing extension) and the attempt's beside it.
	sent.Event.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	body, err := sent.Event.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	sent.Body = body
	sent.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
	send(t, s, sent)
	got := k.read("energy.alarms")
	if len(got) != 1 {
		t.Fatalf("%d records, want 1", len(got))
	}
	r := got[0]
	ct := r.headers["content-type"]
	if !strings.HasPrefix(strings.ToLower(ct), "application/cloudevents") {
		t.Fatalf("content-type %q: a CloudEvents consumer would read the record in binary mode, the value as the event's data", ct)
	}
	// Structured mode, JSON event format: the value is the event.
	var attrs map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.value), &attrs); err != nil {
		t.Fatalf("the value is not a JSON event: %v", err)
	}
	if r.value != string(sent.Body) {
		t.Errorf("the value is not the event's bytes, the same every sink sends:\n got %s\nwant %s", r.value, sent.Body)
	}
	if r.headers["traceparent"] != sent.TraceParent {
		t.Errorf("header traceparent = %q, want the attempt's %q", r.headers["traceparent"], sent.TraceParent)
	}
	for _, name := range []string{"specversion", "id", "source", "type", "subject", "time", "traceparent"} {
		var v string
		if err := json.Unmarshal(attrs[name], &v); err != nil || v == "" {
			t.Errorf("the event lacks the attribute %s", name)
		}
		if h := r.headers["ce_"+name]; h != v {
			t.Errorf("header ce_%s = %q, the event's %s is %q", name, h, name, v)
		}
	}
	for key := range r.headers {
		if strings.HasPrefix(key, "ce_") {
			if _, ok := attrs[strings.TrimPrefix(key, "ce_")]; !ok {
				t.Errorf("header %s names no attribute of the event", key)
			}
		}
	}
	if _, ok := r.headers["ce_data"]; ok {
		t.Error("a ce_data header: data is never a header")
	}
}

// Kafka's Java clients (and librdkafka's murmur2 partitioner) put a keyed
// record on partition toPositive(murmur2(key)) % partitions. The hashes
// here are Kafka's own test vectors (UtilsTest.testMurmur2 in Apache
// Kafka's clients), not computed by the code under test: an alarm's events
// land on the partition a Java producer of the same key would choose, so
// that the topic can be joined with others keyed by alarm.
func TestAnAlarmsEventsLandWhereAJavaProducerPutsItsKey(t *testing.T) {
	const partitions = 7
	vectors := map[string]int32{
		"21": -973932308, "foobar": -790332482, "a-little-bit-long-string": -985981536,
		"a-little-bit-longer-string": -1486304829, "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, "abc": 479470107,
	}
	k := startCluster(t, partitions, []string{"energy.alarms"})
	s := sinkFor(t, "bus", "brokers: "+k.brokers()+"\n", nil)
	for key := range vectors {
		send(t, s, delivery(t, key, 0, event.Start))
	}
	got := k.read("energy.alarms")
	if len(got) != len(vectors) {
		t.Fatalf("%d records, want %d", len(got), len(vectors))
	}
	for _, r := range got {
		want := (vectors[r.key] & 0x7fffffff) % partitions
		if r.partition != want {
			t.Errorf("key %q on partition %d, a Java producer puts it on %d", r.key, r.partition, want)
		}
	}
}

// Alarm ids from upstream are text from outside: a key of any bytes is
// sent as they are and read back the same, on one partition per alarm.
func TestAdversarialAlarmIDsAreKeysAsTheyAre(t *testing.T) {
	ids := []string{"a/b/../c", "line\nbreak\r\n", strings.Repeat("x", 256), "告警-Ω-🔥", "tab\tand\x00nul", " ", "-"}
	k := startCluster(t, 4, []string{"energy.alarms"})
	s := sinkFor(t, "bus", "brokers: "+k.brokers()+"\n", nil)
	for _, id := range ids {
		send(t, s, delivery(t, id, 1, event.Start))
		send(t, s, delivery(t, id, 1, event.End))
	}
	got := k.read("energy.alarms")
	byKey := map[string][]consumed{}
	for _, r := range got {
		byKey[r.key] = append(byKey[r.key], r)
	}
	for _, id := range ids {
		rs := byKey[id]
		if len(rs) != 2 || rs[0].partition != rs[1].partition || rs[0].headers["ce_id"] != id+":start" || rs[1].headers["ce_id"] != id+":end" {
			t.Errorf("alarm %q: %d records %+v, want its start then its end on one partition", id, len(rs), rs)
		}
	}
	if len(got) != 2*len(ids) {
		t.Errorf("%d records, want %d", len(got), 2*len(ids))
	}
}

// A topic with {tenant} puts each tenant's events in a topic of its own; a
// tenant id that Kafka would refuse in a topic name is not escaped into a
// topic nobody reads: its events are dead-lettered (no retry), saying why.
func TestATopicPerTenant(t *testing.T) {
	k := startCluster(t, 2, []string{"energy.alarms.1001"})
	s := sinkFor(t, "bus", "brokers: "+k.brokers()+"\ntopic: energy.alarms.{tenant}\n", nil)
	send(t, s, delivery(t, "T1", 0, event.Start))
	if got := k.read("energy.alarms.1001"); len(got) != 1 || got[0].key != "T1" {
		t.Fatalf("energy.alarms.1001 holds %+v, want T1's start", got)
	}
	for _, tenant := range []string{"a/b", "", strings.Repeat("t", 240), "tenant 7"} {
		d := delivery(t, "T2", 0, event.Start)
		d.Event.Data.TenantID = tenant
		res, err := s.Send(context.Background(), d)
		if err == nil || res.Retry || !strings.Contains(err.Error(), "energy.alarms.{tenant}") {
			t.Errorf("tenant %q: %v (retry %v), want a refusal naming the topic, not retried", tenant, err, res.Retry)
		}
	}
}

// A record larger than the topic takes can never be stored: the broker's
// MESSAGE_TOO_LARGE, and the client's refusal of a record over its batch
// size before it leaves, dead-letter the event at once.
func TestARecordTooLargeIsNotRetried(t *testing.T) {
	k := startCluster(t, 1, []string{"energy.alarms"}, kfakeMaxMessageBytes(4096))
	s := sinkFor(t, "bus", "brokers: "+k.brokers()+"\n", nil)
	send(t, s, delivery(t, "small", 0, event.Start))
	for _, size := range []int{8 << 10, 2 << 20} {
		d := delivery(t, "big", 0, event.Start)
		d.Event.Data.Alarm = []byte(`{"blob":"` + strings.Repeat("x", size) + `"}`)
		body, err := d.Event.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		d.Body = body
		before := k.produces.Load()
		res, err := s.Send(context.Background(), d)
		if err == nil || res.Retry || !strings.Contains(err.Error(), "larger than the topic takes") {
			t.Errorf("a record of %d bytes: %v (retry %v), want a refusal that is not retried", size, err, res.Retry)
		}
		t.Logf("a record of %d bytes: %d produce requests; %v", len(body), k.produces.Load()-before, err)
	}
	if got := k.read("energy.alarms"); len(got) != 1 {
		t.Errorf("%d records stored, want the small one", len(got))
	}
}

// A topic that does not exist is not created: the delivery is retried,
// saying so, until the operator creates it.
func TestAMissingTopicIsRetriedAndNotCreated(t *testing.T) {
	k := startCluster(t, 1, []string{"energy.alarms"})
	s := sinkFor(t, "bus", "brokers: "+k.brokers()+"\ntopic: not.created\ntimeout: 5s\n", nil)
	res, err := s.Send(context.Background(), delivery(t, "M1", 0, event.Start))
	if err == nil || !res.Retry || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("a missing topic: %v (retry %v), want a retried error saying it does not exist", err, res.Retry)
	}
	probe, err := probeOf(t, "brokers: "+k.brokers()+"\ntopic: not.created\n", nil)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("probe of a missing topic: %q, %v", probe, err)
	}
}

// A fence that refuses (a replica that lost the tenant's lease) stops the
// record after the wait for a broker: nothing reaches the cluster, and the
// delivery is retried (by the replica that holds the lease).
func TestAFenceThatRefusesSendsNothing(t *testing.T) {
	k := startCluster(t, 1, []string{"energy.alarms"})
	deps := sinktype.Deps{Fence: func() error { return errors.New("this replica no longer holds the lease") }}.Defaults()
	s := buildWith(t, "fenced", "brokers: "+k.brokers()+"\n", nil, deps)
	res, err := s.Send(context.Background(), delivery(t, "F1", 0, event.Start))
	if err == nil || !res.Retry || !strings.Contains(err.Error(), "lease") {
		t.Fatalf("send past a refusing fence: %v (retry %v), want a retryable refusal naming the fence", err, res.Retry)
	}
	if n := k.produces.Load(); n != 0 {
		t.Errorf("%d produce requests past a refusing fence", n)
	}
	if got := k.read("energy.alarms"); len(got) != 0 {
		t.Errorf("the cluster holds %d records past a refusing fence", len(got))
	}
}

// A replica that does not serve the tenant never connects: the sink is
// built at every rules load, and connects at its first delivery.
func TestASinkConnectsAtItsFirstDelivery(t *testing.T) {
	k := startCluster(t, 1, []string{"energy.alarms"})
	s := sinkFor(t, "standby", "brokers: "+k.brokers()+"\n", nil)
	time.Sleep(200 * time.Millisecond)
	if n := k.ln.accepted.Load(); n != 0 {
		t.Fatalf("the brokers accepted %d connections before any delivery", n)
	}
	send(t, s, delivery(t, "L1", 0, event.Start))
	if k.ln.accepted.Load() == 0 {
		t.Fatal("no connection after a delivery")
	}
}

// A reload builds the sink again, then closes its predecessor, as the
// service does: with the same settings the client is kept (one producer id
// across the reload); rotated credentials replace it (the old sink's sends
// fail and are retried, the new one's records come from a new producer).
// Closing the last sink of a client closes it and its connections (a
// reload that removes the sink, a tenant whose lease moved): a sink built
// afterwards starts a client of its own.
func TestAReloadKeepsTheClientAndClosingTheLastSinkClosesIt(t *testing.T) {
	k := startCluster(t, 1, []string{"energy.alarms"}, kfakeSASL(
		[3]string{"PLAIN", "relay", "first-password-0123"}, [3]string{"PLAIN", "relay-rotated", "second-password-0123"})...)
	yaml := "brokers: " + k.brokers() + "\nsasl: plain\nusername_env: U\npassword_env: P\nclient_id: reloading\n"
	first := map[string]string{"U": "relay", "P": "first-password-0123"}
	old := sinkFor(t, "bus", yaml, first)
	send(t, old, delivery(t, "R1", 0, event.Start))
	reloaded := sinkFor(t, "bus", yaml, first)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	send(t, reloaded, delivery(t, "R2", 0, event.Start))
	if res, err := old.Send(context.Background(), delivery(t, "R7", 0, event.Start)); err == nil || !res.Retry || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a closed sink whose client lives on sent: %v (retry %v), want a retryable refusal", err, res.Retry)
	}
	rotated := sinkFor(t, "bus", yaml, map[string]string{"U": "relay-rotated", "P": "second-password-0123"})
	send(t, rotated, delivery(t, "R3", 0, event.Start))
	res, err := reloaded.Send(context.Background(), delivery(t, "R9", 0, event.Start))
	if err == nil || !res.Retry || !strings.Contains(err.Error(), "replaced") {
		t.Errorf("the replaced sink's send: %v (retry %v), want a retryable error saying the client was replaced", err, res.Retry)
	}
	if err := reloaded.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rotated.Close(); err != nil {
		t.Fatal(err)
	}
	res, err = rotated.Send(context.Background(), delivery(t, "R8", 0, event.Start))
	if err == nil || !res.Retry || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a closed sink's send: %v (retry %v), want a retryable error saying it was closed", err, res.Retry)
	}
	testwait.For(t, 5*time.Second, "the closed clients' connections to close", func() bool { return k.ln.open.Load() == 0 })
	after := sinkFor(t, "bus", yaml, first)
	send(t, after, delivery(t, "R4", 0, event.Start))

	got := k.read("energy.alarms", kgoPlain("relay", "first-password-0123"))
	if len(got) != 4 {
		t.Fatalf("%d records, want R1 to R4", len(got))
	}
	if got[0].producer != got[1].producer {
		t.Errorf("the reload started a new producer (%d, then %d): the client was not kept", got[0].producer, got[1].producer)
	}
	if got[2].producer == got[1].producer {
		t.Errorf("rotated credentials kept the producer %d: the client was not replaced", got[2].producer)
	}
	if got[3].producer == got[2].producer || got[3].producer == got[0].producer {
		t.Errorf("a sink built after every sink of the client was closed produced as %d (before: %d, %d): the client was not closed",
			got[3].producer, got[0].producer, got[2].producer)
	}
}

// The ack and unack events of an alarm reach the topic like its other
// events, keyed by the alarm: on its partition, between its start and end.
func TestAcksReachTheTopicInOrderWithTheAlarmsEvents(t *testing.T) {
	k := startCluster(t, 3, []string{"energy.alarms"})
	s := sinkFor(t, "bus", "brokers: "+k.brokers()+"\n", nil)
	if !s.CarriesAcks() {
		t.Fatal("the kafka sink does not carry acks")
	}
	a := event.Alarm{OriginID: "K1", Status: 1, Level: 0, EventCode: "E1023", TenantID: "1001", StationID: "5001", DeviceSN: "SN-K1", OccurredAt: t0}
	ack := func(tr event.Transition, n int) notify.Delivery {
		ev := event.NewAck(a, tr, n, event.AckInfo{By: "ops <on call>", Via: "api", At: event.FormatTime(t0.Add(3 * time.Minute))}, t0.Add(2*time.Minute))
		body, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return notify.Delivery{EventID: ev.ID, OriginID: "K1", Body: body, Event: &ev, Attempt: 1}
	}
	for _, d := range []notify.Delivery{delivery(t, "K1", 0, event.Start), ack(event.Ack, 1), ack(event.Unack, 2), delivery(t, "K1", 0, event.End)} {
		send(t, s, d)
	}
	var types []string
	for _, r := range k.read("energy.alarms") {
		if r.key != "K1" {
			t.Errorf("record %s keyed %q", r.headers["ce_id"], r.key)
		}
		types = append(types, r.headers["ce_type"])
	}
	if got := strings.Join(types, ","); got != "energy.alarm.start,energy.alarm.ack,energy.alarm.unack,energy.alarm.end" {
		t.Errorf("K1's partition holds %s", got)
	}
}

// With a tenants file, two tenants' sinks of one name have client ids of
// their own, relay-<tenant>-<sink>, and so clients of their own.
func TestTenantsSinksOfOneNameHaveClientIDsOfTheirOwn(t *testing.T) {
	k := startCluster(t, 1, []string{"energy.alarms"})
	for _, tenant := range []string{"north", "south"} {
		s := buildWith(t, "scada", "brokers: "+k.brokers()+"\n", nil, sinktype.Deps{Tenant: tenant}.Defaults())
		send(t, s, delivery(t, "T-"+tenant, 0, event.Start))
	}
	got := k.read("energy.alarms")
	if len(got) != 2 || got[0].producer == got[1].producer {
		t.Errorf("two tenants' sinks of one name: %d records from producers %v, want two producers", len(got), got)
	}
}
