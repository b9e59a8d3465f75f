package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

func entryIDs(es []Entry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.EventID)
	}
	return out
}

// byLevel sends every event to bus, and urgent ones to oncall too.
func byLevel(ev *event.Event) []string {
	if ev.Data.Level == 0 {
		return []string{"bus", "oncall", "bus"}
	}
	return []string{"bus"}
}

func urgent(a event.Alarm) event.Alarm {
	a.Level = 0
	return a
}

func TestOutboxIsOrderedPerSink(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{urgent(ongoing("u1")), ongoing("m1")}}, byLevel)
	apply(t, s, Batch{Observed: []event.Alarm{
		rec("m1", event.StatusEnded, t0.Add(time.Minute)),
		urgent(rec("u2", event.StatusEnded, t0.Add(time.Minute))),
		urgent(rec("u1", event.StatusInvalid, t0.Add(2*time.Minute))),
	}}, byLevel)

	tests := []struct {
		sink string
		want []string
	}{
		{"bus", []string{"u1:start", "m1:start", "m1:end", "u2:start", "u2:end", "u1:invalid"}},
		{"oncall", []string{"u1:start", "u2:start", "u2:end", "u1:invalid"}},
		{"nobody", []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.sink, func(t *testing.T) {
			all, err := s.Pending(tt.sink, 100)
			if err != nil {
				t.Fatal(err)
			}
			if got := entryIDs(all); !slices.Equal(got, tt.want) {
				t.Fatalf("Pending(%s) = %v, want %v", tt.sink, got, tt.want)
			}
			for i := 1; i < len(all); i++ {
				if all[i].Seq <= all[i-1].Seq {
					t.Fatalf("sequence %d after %d", all[i].Seq, all[i-1].Seq)
				}
			}
			if len(all) < 2 {
				return
			}
			first, err := s.Pending(tt.sink, 2)
			if err != nil {
				t.Fatal(err)
			}
			if got := entryIDs(first); !slices.Equal(got, tt.want[:2]) {
				t.Fatalf("Pending(%s, 2) = %v, want %v", tt.sink, got, tt.want[:2])
			}
		})
	}
	depth, _ := s.Depth()
	if depth["bus"] != 6 || depth["oncall"] != 4 || len(depth) != 2 {
		t.Fatalf("Depth = %v, want bus 6, oncall 4", depth)
	}
	if _, err := s.Pending("bus", 0); err == nil {
		t.Fatal("Pending with limit 0 was accepted")
	}
}

func TestDeliveredAndDeadLetter(t *testing.T) {
	s, fake, _ := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1"), ongoing("a2"), ongoing("a3")}}, to("slack"))
	p, _ := s.Pending("slack", 10)

	if err := s.Delivered(p[0], map[string]string{"ts": "111.1"}); err != nil {
		t.Fatal(err)
	}
	fake.Advance(24 * time.Hour)
	if err := s.DeadLetter(p[1], "slack: channel_not_found"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delivered(p[2], nil); err != nil {
		t.Fatal(err)
	}

	again := []struct {
		name string
		do   func() error
	}{
		{"delivered twice", func() error { return s.Delivered(p[0], nil) }},
		{"dead-lettered after delivery", func() error { return s.DeadLetter(p[2], "late") }},
		{"delivered after dead-lettering", func() error { return s.Delivered(p[1], nil) }},
		{"unknown sink", func() error { e := p[0]; e.Sink = "other"; return s.Delivered(e, nil) }},
		{"batch with one delivered entry", func() error {
			return s.DeliveredBatch([]Delivery{{Entry: p[2]}})
		}},
	}
	for _, tt := range again {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); !errors.Is(err, ErrNotPending) {
				t.Fatalf("got %v, want ErrNotPending", err)
			}
		})
	}

	if rest, _ := s.Pending("slack", 10); len(rest) != 0 {
		t.Fatalf("Pending after delivery = %v, want none", entryIDs(rest))
	}
	dead, err := s.DeadLetters("slack")
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 {
		t.Fatalf("DeadLetters = %+v, want a2:start", dead)
	}
	d := dead[0]
	if d.EventID != "a2:start" || d.Reason != "slack: channel_not_found" || !d.At.Equal(t0.Add(24*time.Hour)) ||
		string(d.Body) != string(p[1].Body) || d.Seq != p[1].Seq || !d.EnqueuedAt.Equal(t0) {
		t.Fatalf("dead letter = %+v, want a2:start given up on at %s", d, t0.Add(24*time.Hour))
	}
	mem, _ := s.Memory("slack", "a1")
	if len(mem) != 1 || mem["ts"] != "111.1" {
		t.Fatalf("Memory(a1) = %v", mem)
	}
	if mem, _ := s.Memory("slack", "a3"); mem != nil {
		t.Fatalf("Delivered with nil memory stored %v", mem)
	}
	if depth, _ := s.Depth(); depth["slack"] != 0 {
		t.Fatalf("Depth = %v, want slack 0", depth)
	}
}

func TestDeliveredBatchIsAllOrNothing(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1"), ongoing("a2"), ongoing("a3")}}, to("bus"))
	p, _ := s.Pending("bus", 10)
	wrong := p[2]
	wrong.EventID = "a9:start"
	err := s.DeliveredBatch([]Delivery{{Entry: p[0], Memory: map[string]string{"k": "v"}}, {Entry: p[1]}, {Entry: wrong}})
	if !errors.Is(err, ErrNotPending) {
		t.Fatalf("batch naming a wrong event = %v, want ErrNotPending", err)
	}
	if rest, _ := s.Pending("bus", 10); len(rest) != 3 {
		t.Fatalf("a failed batch delivered %d entries", 3-len(rest))
	}
	if m, _ := s.Memory("bus", "a1"); m != nil {
		t.Fatalf("a failed batch stored memory %v", m)
	}
	if err := s.DeliveredBatch([]Delivery{{Entry: p[0]}, {Entry: p[1]}, {Entry: p[2]}}); err != nil {
		t.Fatal(err)
	}
	if depth, _ := s.Depth(); depth["bus"] != 0 {
		t.Fatalf("Depth = %v, want bus 0", depth)
	}
}

func TestWake(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	bus, oncall := s.Wake("bus"), s.Wake("oncall")
	if s.Wake("bus") != bus {
		t.Fatal("Wake returned a new channel for the same sink")
	}
	woken := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	steps := []struct {
		name        string
		batch       Batch
		bus, oncall bool
	}{
		{"nothing new", Batch{}, false, false},
		{"one event for bus", Batch{Observed: []event.Alarm{ongoing("m1")}}, true, false},
		{"the same again", Batch{Observed: []event.Alarm{ongoing("m1")}}, false, false},
		{"urgent events for both", Batch{Observed: []event.Alarm{urgent(ongoing("u1")), urgent(ongoing("u2"))}}, true, true},
	}
	for _, step := range steps {
		apply(t, s, step.batch, byLevel)
		if got := woken(bus); got != step.bus {
			t.Fatalf("%s: bus woken = %t, want %t", step.name, got, step.bus)
		}
		if got := woken(oncall); got != step.oncall {
			t.Fatalf("%s: oncall woken = %t, want %t", step.name, got, step.oncall)
		}
	}
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("m2")}}, byLevel)
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("m3")}}, byLevel)
	if !woken(bus) || woken(bus) {
		t.Fatal("two applies did not leave exactly one pending signal")
	}
}

// TestConcurrentApplyAndDelivery runs a poller and a delivery loop on one
// store: every event arrives once, in order, and the outbox ends empty.
func TestConcurrentApplyAndDelivery(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	const batches, perBatch = 20, 25
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var want []string
	for i := range batches * perBatch {
		want = append(want, fmt.Sprintf("a%04d:start", i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Add(3)
	go func() { // the poller
		defer wg.Done()
		for b := range batches {
			var obs []event.Alarm
			for i := range perBatch {
				obs = append(obs, ongoing(fmt.Sprintf("a%04d", b*perBatch+i)))
			}
			if _, err := s.Apply(ctx, Batch{Observed: obs, DetectedAt: t0}, to("bus")); err != nil {
				errs <- err
				return
			}
		}
	}()
	var got []string
	go func() { // the delivery loop
		defer wg.Done()
		for len(got) < len(want) {
			select {
			case <-s.Wake("bus"):
			case <-ctx.Done():
				errs <- fmt.Errorf("delivered %d of %d: %w", len(got), len(want), ctx.Err())
				return
			}
			for {
				p, err := s.Pending("bus", 16)
				if err != nil {
					errs <- err
					return
				}
				if len(p) == 0 {
					break
				}
				ds := make([]Delivery, 0, len(p))
				for i, e := range p {
					got = append(got, e.EventID)
					if i == 0 {
						if err := s.Delivered(e, map[string]string{"n": e.EventID}); err != nil {
							errs <- err
							return
						}
						continue
					}
					ds = append(ds, Delivery{Entry: e})
				}
				if err := s.DeliveredBatch(ds); err != nil {
					errs <- err
					return
				}
			}
		}
	}()
	go func() { // readers: metrics and the poller's view
		defer wg.Done()
		for ctx.Err() == nil {
			o, err := s.Ongoing()
			if err != nil {
				errs <- err
				return
			}
			if d, _ := s.Depth(); d["bus"] < 0 {
				errs <- fmt.Errorf("negative depth %v", d)
				return
			}
			if len(o) == len(want) {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("delivered %d events out of order or twice (first %v)", len(got), got[:min(5, len(got))])
	}
	if d, _ := s.Depth(); d["bus"] != 0 {
		t.Fatalf("Depth = %v after delivering everything", d)
	}
}
