package store

// This file writes testdata/v4/: a store in schema version 4 as main wrote
// it from 150d99d to 70d7ffc (the layout whose bucket ongoing holds each
// ongoing alarm's state under its originId, and whose states, of format 4,
// keep any string but a number as its length plus one and its bytes), and
// what the test of its move to version 5 expects. It only compiles in a
// checkout of that layout (commit 70d7ffc); there, copy it into
// internal/store and run
//
//	RELAY_GEN_V4=/tmp/v4 go test -run TestGenerateV4 ./internal/store/
//
// then gzip relay.db and relay.db.records.1 into testdata/v4/.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
)

// v4Manifest is what the store written by TestGenerateV4 holds.
type v4Manifest struct {
	Ongoing []string            `json:"ongoing"`
	Ended   []string            `json:"ended"`
	Pending map[string][]string `json:"pending"` // event ids per sink, in order
	Dead    map[string][]string `json:"dead"`    // event ids per sink
	Journal int                 `json:"journal"` // entries
	// Tracked is what the version-4 code showed of each alarm (Alarm).
	Tracked map[string]Tracked `json:"tracked"`
	// Ends are the events the version-4 code produced, each on its own
	// copy of the file, for an end of an ongoing alarm: observed, or
	// inferred from its stored record.
	Ends []v4End `json:"ends"`
}

// v4End is an end applied to a copy of the store, the event JSON the
// version-4 code built for it and the sinks it enqueued it for.
type v4End struct {
	OriginID   string    `json:"originId"`
	Inferred   bool      `json:"inferred"`
	At         time.Time `json:"at"`
	DetectedAt time.Time `json:"detectedAt"`
	Event      string    `json:"event"` // the exact bytes
	Sinks      []string  `json:"sinks"` // the outboxes its entry went to
}

func TestGenerateV4(t *testing.T) {
	dir := os.Getenv("RELAY_GEN_V4")
	if dir == "" {
		t.Skip("RELAY_GEN_V4 is not set")
	}
	ctx := context.Background()
	path := filepath.Join(dir, "relay.db")
	fake := clock.NewFake(t0)
	s, err := Open(path, Options{Clock: fake})
	if err != nil {
		t.Fatal(err)
	}
	must := func(_ Result, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Starts of 30 alarms: the first 20 routed to bus and ops, the others
	// to bus alone (the ledger's sets); then ends of 6, invalids of 2, and a
	// level change of 4 more (their records rewritten).
	alarms := make([]event.Alarm, 30)
	for i := range alarms {
		alarms[i] = benchAlarm(i)
		if i%2 == 1 {
			// Every other id a number, as the upstream sends most, of
			// 19 digits and of fewer.
			n := uint64(1185685023527438795) + uint64(i)*10000
			if i%3 == 0 {
				n = uint64(i) * 7
			}
			id := strconv.FormatUint(n, 10)
			alarms[i].Raw = bytes.ReplaceAll(alarms[i].Raw, []byte(alarms[i].OriginID), []byte(id))
			alarms[i].OriginID = id
		}
		if i%5 == 2 {
			// A serial number of letters, then a number.
			sn := "ENV92054987" + strconv.Itoa(10+i)
			alarms[i].Raw = bytes.ReplaceAll(alarms[i].Raw, []byte(alarms[i].DeviceSN), []byte(sn))
			alarms[i].DeviceSN = sn
		}
	}
	must(s.Apply(ctx, Batch{Observed: alarms[:20], DetectedAt: t0}, to("bus", "ops")))
	must(s.Apply(ctx, Batch{Observed: alarms[20:], CompleteCurrent: true, DetectedAt: t0}, to("bus")))
	fake.Advance(time.Minute)
	var next []event.Alarm
	for i := range 8 {
		a := alarms[i]
		a.Status = event.StatusEnded
		if i >= 6 {
			a.Status = event.StatusInvalid
		}
		a.RecoveredAt = fake.Now().Add(-10 * time.Second)
		next = append(next, a)
	}
	for i := 8; i < 12; i++ {
		a := alarms[i]
		a.Level = (a.Level + 1) % 4
		a.EventDesc += " (rising)"
		next = append(next, a)
	}
	must(s.Apply(ctx, Batch{Observed: next, DetectedAt: fake.Now()}, to("bus", "ops")))
	fake.Advance(time.Minute)
	// Deliveries: the first 10 entries of bus with memory, 5 of ops; one
	// dead letter on ops, whose start the ledger records dead.
	bus, err := s.Pending("bus", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range bus {
		if err := s.Delivered(e, map[string]string{"ts": "1700000000." + e.OriginID, "channel": "C1"}); err != nil {
			t.Fatal(err)
		}
	}
	ops, err := s.Pending("ops", 6)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ops[:5] {
		if err := s.Delivered(e, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeadLetter(ops[5], "receiver answered 400"); err != nil {
		t.Fatal(err)
	}
	// The start of an alarm still ongoing, given up on at ops too.
	ops, err = s.Pending("ops", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var deadOngoing Entry
	for _, e := range ops {
		if e.OriginID == alarms[14].OriginID && e.Transition == event.Start {
			deadOngoing = e
		}
	}
	if err := s.DeadLetter(deadOngoing, "receiver answered 410"); err != nil {
		t.Fatal(err)
	}

	m := v4Manifest{Pending: map[string][]string{}, Dead: map[string][]string{}}
	ongoing, err := s.Ongoing()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ongoing {
		m.Ongoing = append(m.Ongoing, a.OriginID)
	}
	for i := range 8 {
		m.Ended = append(m.Ended, alarms[i].OriginID)
	}
	m.Tracked = map[string]Tracked{}
	for _, id := range append(append([]string(nil), m.Ongoing...), m.Ended...) {
		a, ok, err := s.Alarm(id)
		if err != nil || !ok {
			t.Fatalf("alarm %s: %v, %v", id, ok, err)
		}
		m.Tracked[id] = a
	}
	for _, sink := range []string{"bus", "ops"} {
		es, err := s.Pending(sink, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			m.Pending[sink] = append(m.Pending[sink], e.EventID)
		}
		ds, err := s.DeadLetters(sink)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			m.Dead[sink] = append(m.Dead[sink], d.EventID)
		}
	}
	if err := s.Journal(t0.Add(-1000*time.Hour), t0.Add(time.Hour), func(*JournalEntry) error { m.Journal++; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Ends of ongoing alarms, each applied to its own copy of the file and
	// its record log: inferred (one after a level change, one routed to bus
	// alone, one whose start is a dead letter at ops), and observed; routed
	// by rules that name another sink, which the ledger overrules.
	db, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	records, err := os.ReadFile(path + ".records.1")
	if err != nil {
		t.Fatal(err)
	}
	ends := []v4End{
		{OriginID: alarms[8].OriginID, Inferred: true},
		{OriginID: alarms[12].OriginID, Inferred: true},
		{OriginID: alarms[29].OriginID, Inferred: true},
		{OriginID: alarms[14].OriginID, Inferred: true},
		{OriginID: alarms[15].OriginID},
		{OriginID: alarms[9].OriginID, Inferred: true},
	}
	for _, end := range ends {
		cdir := t.TempDir()
		cp := filepath.Join(cdir, "relay.db")
		if err := os.WriteFile(cp, db, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cp+".records.1", records, 0o600); err != nil {
			t.Fatal(err)
		}
		now := t0.Add(3 * time.Minute)
		c, err := Open(cp, Options{Clock: clock.NewFake(now)})
		if err != nil {
			t.Fatal(err)
		}
		end.At, end.DetectedAt = now.Add(-30*time.Second), now
		b := Batch{Inferred: []Inferred{{OriginID: end.OriginID, At: end.At}}, DetectedAt: now}
		if !end.Inferred {
			a := alarms[15]
			a.Status, a.RecoveredAt = event.StatusEnded, end.At
			b = Batch{Observed: []event.Alarm{a}, DetectedAt: now}
		}
		before := map[string]int{}
		for _, sink := range []string{"bus", "ops", "other"} {
			es, err := c.Pending(sink, 1000)
			if err != nil {
				t.Fatal(err)
			}
			before[sink] = len(es)
		}
		res, err := c.Apply(ctx, b, to("other"))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Events) != 1 {
			t.Fatalf("end of %s: %d events", end.OriginID, len(res.Events))
		}
		body, err := res.Events[0].Marshal()
		if err != nil {
			t.Fatal(err)
		}
		end.Event = string(body)
		for _, sink := range []string{"bus", "ops", "other"} {
			es, err := c.Pending(sink, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(es) > before[sink] {
				end.Sinks = append(end.Sinks, sink)
			}
		}
		m.Ends = append(m.Ends, end)
		_ = c.Close()
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "expected.json"), append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
