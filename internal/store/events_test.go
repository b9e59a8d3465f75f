package store

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// TestEventIsWhatTheStoredBytesDecodeTo checks that the event a delivery
// loop gets while it is cached equals the stored bytes decoded, whatever the
// upstream record holds: whitespace, characters Marshal escapes, a nested
// "alarm" key, a string that reads like one.
func TestEventIsWhatTheStoredBytesDecodeTo(t *testing.T) {
	raws := map[string]string{
		"compact":    `{"originId":"a1","status":1}`,
		"spaced":     "{ \"originId\" : \"a2\",\n\t\"status\": 1 }",
		"html":       `{"originId":"a3","note":"<b>&amp;</b> \u2028 > 3 kV"}`,
		"nested":     `{"originId":"a4","alarm":{"alarm":1},"x":"\"alarm\":2"}`,
		"unicode":    `{"originId":"a5","stationName":"北区 — Nord","emoji":"🔥"}`,
		"array":      `{"originId":"a6","tags":[1, 2 ,3],"deep":{"a":[{"b":null}]}}`,
		"escapes":    `{"originId":"a7","s":"tab\tquote\"backslash\\"}`,
		"lastString": `{"originId":"a8","last":"}}"}`,
	}
	s, _, _ := newStore(t, Options{})
	var alarms []event.Alarm
	for name, raw := range raws {
		a := ongoing(name)
		a.StationName = "<Alpha & \"Beta\">"
		a.Raw = json.RawMessage(raw)
		alarms = append(alarms, a)
	}
	apply(t, s, Batch{Observed: alarms}, to("bus", "chat"))
	ended := rec("spaced", event.StatusEnded, t0.Add(time.Minute))
	ended.Raw = json.RawMessage(raws["spaced"])
	apply(t, s, Batch{Observed: []event.Alarm{ended}, Inferred: []Inferred{{OriginID: "html", At: t0.Add(2 * time.Minute)}}}, to("bus"))

	pending, err := s.Pending("bus", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != len(raws)+2 {
		t.Fatalf("bus holds %d entries, want %d", len(pending), len(raws)+2)
	}
	for _, e := range pending {
		if _, ok := s.events.get(e.EventID, e.Body); !ok {
			t.Errorf("%s is not cached", e.EventID)
		}
		got, err := s.Event(e)
		if err != nil {
			t.Fatal(err)
		}
		want, err := event.Unmarshal(e.Body)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: cached event\n%+v\nwant the stored bytes decoded\n%+v", e.EventID, *got, want)
		}
	}
}

// TestCachedEventsLeaveWithTheirLastEntry checks that an event stays cached
// while any sink's entry of it waits, and that the cache keeps a bounded
// number of events, dropping the oldest.
func TestCachedEventsLeaveWithTheirLastEntry(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1"), ongoing("a2")}}, to("bus", "chat"))
	bus, err := s.Pending("bus", 10)
	if err != nil {
		t.Fatal(err)
	}
	chat, err := s.Pending("chat", 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Settle([]Delivery{{Entry: bus[0]}, {Entry: bus[1]}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.events.body("a1:start"); !ok {
		t.Fatal("a1:start left the cache while chat's entry of it waits")
	}
	if err := s.Settle([]Delivery{{Entry: chat[0]}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.DeadLetter(chat[1], "test"); err != nil {
		t.Fatal(err)
	}
	if n := len(s.events.byID); n != 0 {
		t.Fatalf("cache holds %d events after every entry left, want 0", n)
	}
	for _, ce := range s.events.order {
		if ce.ev != nil || ce.body != nil {
			t.Fatalf("%s left the cache but its event is still held", ce.id)
		}
	}

	var many []event.Alarm
	for i := range eventCacheSize + 10 {
		many = append(many, ongoing(fmt.Sprintf("m%05d", i)))
	}
	apply(t, s, Batch{Observed: many}, to("bus"))
	if n := len(s.events.byID); n != eventCacheSize {
		t.Fatalf("cache holds %d events, want its bound %d", n, eventCacheSize)
	}
	if _, ok := s.events.body("m00000:start"); ok {
		t.Fatal("the oldest event is still cached past the bound")
	}
	first, err := s.Pending("bus", 1)
	if err != nil {
		t.Fatal(err)
	}
	// Not cached: decoded from the stored bytes.
	ev, err := s.Event(first[0])
	if err != nil || ev.ID != "m00000:start" {
		t.Fatalf("Event = %v, %v; want m00000:start decoded", ev, err)
	}
}
