package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// TestSettleSuppressesAndKeepsState: a suppressed entry leaves the outbox
// into the sink's suppressed log, with the memory and the values written in
// the same transaction; the log is pruned with the retention.
func TestSettleSuppressesAndKeepsState(t *testing.T) {
	s, clk, _ := newStore(t, Options{Retention: 800 * time.Hour})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1"), ongoing("a2"), ongoing("a3")}}, byLevel)
	all, err := s.Pending("bus", 10)
	if err != nil || len(all) != 3 {
		t.Fatalf("Pending = %v, %v", entryIDs(all), err)
	}
	page, err := s.PendingAfter("bus", all[0].Seq, 10)
	if err != nil || !slices.Equal(entryIDs(page), entryIDs(all[1:])) {
		t.Fatalf("PendingAfter(%d) = %v, %v; want %v", all[0].Seq, entryIDs(page), err, entryIDs(all[1:]))
	}
	err = s.Settle([]Delivery{
		{Entry: all[0], Suppressed: "silence", Memory: map[string]string{"suppressed": "silence"}},
		{Entry: all[1], Memory: map[string]string{"ts": "1"}},
	}, []KV{{NS: "digest", Key: "slack:C1", Value: []byte("state")}})
	if err != nil {
		t.Fatal(err)
	}
	left, _ := s.Pending("bus", 10)
	if !slices.Equal(entryIDs(left), []string{"a3:start"}) {
		t.Fatalf("left %v, want a3:start", entryIDs(left))
	}
	sup, err := s.Suppressed("bus")
	if err != nil || len(sup) != 1 || sup[0].EventID != "a1:start" || sup[0].Reason != "silence" || len(sup[0].Body) == 0 {
		t.Fatalf("Suppressed = %+v, %v", sup, err)
	}
	if m, _ := s.Memory("bus", "a1"); m["suppressed"] != "silence" {
		t.Errorf("memory of a1 = %v", m)
	}
	if v, _ := s.Get("digest", "slack:C1"); string(v) != "state" {
		t.Errorf("Get = %q", v)
	}
	// A settle naming an entry no longer pending writes nothing, values included.
	err = s.Settle([]Delivery{{Entry: all[0]}}, []KV{{NS: "digest", Key: "slack:C1", Value: []byte("other")}})
	if !errors.Is(err, ErrNotPending) {
		t.Fatalf("Settle of a settled entry: %v", err)
	}
	if v, _ := s.Get("digest", "slack:C1"); string(v) != "state" {
		t.Errorf("after a failed Settle, Get = %q", v)
	}
	if err := s.Put(KV{NS: "digest", Key: "slack:C2", Value: []byte("x")}, KV{NS: "digest", Key: "slack:C1"}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := s.Scan("digest", "slack:", func(k string, _ []byte) error { keys = append(keys, k); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"slack:C2"}) {
		t.Errorf("Scan = %v, want the one key left", keys)
	}
	seq, err := s.Enqueue("bus", Entry{EventID: "a1:start", OriginID: "a1", Transition: event.Start, Body: sup[0].Body})
	if err != nil || seq <= all[2].Seq {
		t.Fatalf("Enqueue = %d, %v", seq, err)
	}
	if d, _ := s.Depth(); d["bus"] != 2 {
		t.Errorf("depth %d after Enqueue, want 2", d["bus"])
	}
	clk.Advance(801 * time.Hour)
	if _, err := s.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sup, _ := s.Suppressed("bus"); len(sup) != 0 {
		t.Errorf("suppressed log after the retention: %d entries", len(sup))
	}
}

// PendingPage stops before the entry that would take the page's bodies past
// its byte bound, takes the first entry whatever its size, and is bounded by
// its count alone with a bound of 0.
func TestPendingPageStopsAtItsByteBound(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	var alarms []event.Alarm
	for _, id := range []string{"a1", "a2", "a3", "a4", "a5"} {
		alarms = append(alarms, ongoing(id))
	}
	apply(t, s, Batch{Observed: alarms}, byLevel)
	all, err := s.Pending("bus", 10)
	if err != nil || len(all) != 5 {
		t.Fatalf("Pending = %v, %v", entryIDs(all), err)
	}
	size := func(es []Entry) int {
		n := 0
		for _, e := range es {
			n += len(e.Body)
		}
		return n
	}
	for _, c := range []struct {
		maxBytes, limit, want int
	}{
		{0, 10, 5},
		{0, 2, 2},
		{size(all[:3]), 10, 3},
		{size(all[:3]) - 1, 10, 2},
		{size(all[:3]), 2, 2},
		{1, 10, 1},
		{size(all), 10, 5},
	} {
		page, err := s.PendingPage("bus", 0, c.limit, c.maxBytes)
		if err != nil || !slices.Equal(entryIDs(page), entryIDs(all[:c.want])) {
			t.Errorf("PendingPage(limit %d, %d bytes) = %v, %v; want %v", c.limit, c.maxBytes, entryIDs(page), err, entryIDs(all[:c.want]))
		}
	}
	if _, err := s.PendingPage("bus", 0, 10, -1); err == nil {
		t.Error("a negative byte bound was taken")
	}
}
