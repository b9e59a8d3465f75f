package manage_test

import (
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/route"
)

// Hold says what the gate holds a start for: the shortest hold of the routes
// sending it to the sink, nothing for a sink alarm management leaves alone.
func TestHoldIsTheShortestOfTheRoutesToTheSink(t *testing.T) {
	rules, err := route.Parse("rules.yaml", []byte(`
sinks:
  - {name: people, type: console}
  - {name: pager, type: console}
  - {name: bus, type: nats, subject: "alarms.{{.Transition}}"}
routes:
  - {name: all, to: [people, bus], hold: 2m, continue: true}
  - {name: urgent, match: {levels: [urgent]}, to: [people], hold: 30s, continue: true}
  - {name: severe-raw, match: {levels: [severe]}, to: [pager], hold: 1m, suppress: false, continue: true}
  - {name: severe-held, match: {levels: [severe]}, to: [pager], hold: 1m}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := func(level int) *event.Event {
		return &event.Event{Data: event.Data{Transition: event.Start, Level: level, LevelName: event.LevelName(level),
			OriginID: "a1", StationID: "S1", DeviceSN: "D1", EventCode: "E1"}}
	}
	for _, tc := range []struct {
		name  string
		level int
		sink  string
		want  time.Duration
	}{
		{"one route holds", 2, "people", 2 * time.Minute},
		{"the shortest of two", 0, "people", 30 * time.Second},
		{"a bus is not managed", 0, "bus", 0},
		{"a route says suppress: false", 1, "pager", 0},
		{"no route to the sink", 3, "pager", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := manage.Hold(rules, ev(tc.level), tc.sink, t0); got != tc.want {
				t.Errorf("Hold = %s, want %s", got, tc.want)
			}
		})
	}
}
