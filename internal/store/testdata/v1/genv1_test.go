package dedupe

// This file writes testdata/v1/: a store in schema version 1 (the layout
// with the records bucket) and what the test of its migration expects. It
// only compiles in a checkout of that layout (commit 4b5f142); there, copy it
// into internal/dedupe and run
//
//	RELAY_GEN_V1=/tmp/v1 go test -run TestGenerateV1 ./internal/dedupe/
//
// then gzip relay.db into testdata/v1/relay.db.gz.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
)

// v1Manifest is what the store written by TestGenerateV1 holds.
type v1Manifest struct {
	Ongoing  []string            `json:"ongoing"`
	Ended    []string            `json:"ended"`
	Pending  map[string][]string `json:"pending"` // event ids per sink, in order
	Memory   map[string]string   `json:"memory"`  // sink/originId to memory JSON
	Dead     map[string][]string `json:"dead"`    // event ids per sink
	KV       map[string]string   `json:"kv"`
	Journal  int                 `json:"journal"` // entries
	Inferred []v1Inferred        `json:"inferred"`
}

// v1Inferred is an inferred end applied to a copy of the store, and the
// event JSON the version-1 code built for it from the stored record.
type v1Inferred struct {
	OriginID   string    `json:"originId"`
	At         time.Time `json:"at"`
	DetectedAt time.Time `json:"detectedAt"`
	Now        time.Time `json:"now"`
	Event      string    `json:"event"` // the exact bytes
}

func TestGenerateV1(t *testing.T) {
	dir := os.Getenv("RELAY_GEN_V1")
	if dir == "" {
		t.Skip("RELAY_GEN_V1 is not set")
	}
	ctx := context.Background()
	path := filepath.Join(dir, "relay.db")
	fake := clock.NewFake(t0)
	s, err := Open(path, Options{Clock: fake})
	if err != nil {
		t.Fatal(err)
	}
	route := to("bus", "ops")
	alarms := make([]event.Alarm, 30)
	for i := range alarms {
		alarms[i] = benchAlarm(i)
	}
	must := func(_ Result, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Starts of 30 alarms, then ends of 6 and invalids of 2, and a level
	// change of 4 more (their records rewritten).
	must(s.Apply(ctx, Batch{Observed: alarms, CompleteCurrent: true, DetectedAt: t0}, route))
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
	must(s.Apply(ctx, Batch{Observed: next, DetectedAt: fake.Now()}, route))
	fake.Advance(time.Minute)
	// Deliveries: the first 10 entries of bus with memory, 5 of ops; one
	// dead letter on ops; a value of alarm management.
	bus, err := s.Pending("bus", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range bus {
		if err := s.Delivered(e, map[string]string{"ts": "1700000000." + e.OriginID[:6], "channel": "C1"}); err != nil {
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
	if err := s.Put(KV{NS: "digest", Key: "ops", Value: []byte(`{"n":3}`)}); err != nil {
		t.Fatal(err)
	}

	m := v1Manifest{Pending: map[string][]string{}, Memory: map[string]string{}, Dead: map[string][]string{}, KV: map[string]string{}}
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
	for _, e := range bus {
		mem, err := s.Memory("bus", e.OriginID)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(mem)
		m.Memory["bus/"+e.OriginID] = string(b)
	}
	v, err := s.Get("digest", "ops")
	if err != nil {
		t.Fatal(err)
	}
	m.KV["digest/ops"] = string(v)
	if err := s.Journal(t0.Add(-1000*time.Hour), t0.Add(time.Hour), func(*JournalEntry) error { m.Journal++; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The inferred ends of three ongoing alarms (one of them with a level
	// change), each applied to its own copy of the file.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{8, 12, 29} {
		cp := filepath.Join(t.TempDir(), "copy.db")
		if err := os.WriteFile(cp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		now := t0.Add(3 * time.Minute)
		c, err := Open(cp, Options{Clock: clock.NewFake(now)})
		if err != nil {
			t.Fatal(err)
		}
		inf := v1Inferred{OriginID: alarms[i].OriginID, At: now.Add(-30 * time.Second), DetectedAt: now, Now: now}
		res, err := c.Apply(ctx, Batch{Inferred: []Inferred{{OriginID: inf.OriginID, At: inf.At}}, DetectedAt: now}, route)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Events) != 1 {
			t.Fatalf("inferred end of %s: %d events", inf.OriginID, len(res.Events))
		}
		body, err := res.Events[0].Marshal()
		if err != nil {
			t.Fatal(err)
		}
		inf.Event = string(body)
		m.Inferred = append(m.Inferred, inf)
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
