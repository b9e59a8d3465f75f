package route

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("../../rules.example.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	for _, seed := range []string{
		"",
		"sinks: []\nroutes: []\n",
		sinksABCD + "routes:\n  - {name: all, to: [a, b], continue: true}\n  - {name: n, match: {station_names: ['N*?\\\\*'], levels: [0, minor]}, to: c}\n",
		"sinks:\n  - &s {name: bus, type: nats, subject: '{{.Event.Data.StationName}}.x'}\nroutes:\n  - &r {name: a, to: [bus], match: {tenant_ids: &ids [1, 2]}}\n  - {name: b, to: [bus], match: {device_sns: *ids}}\n",
		"a: [1, 2\n",
		"--- 1\n--- 2\n",
		"sinks:\n  - name: ops\n    type: webhook\n    url: http://x\n    headers: {A: b, a: c}\n    secret_env: S\nroutes:\n  - {name: r, to: ops}\n",
		manageRules,
		"sinks:\n  - {name: a, type: console, digest: {threshold: 2, window: 1m}, daily_summary: '23:59 Europe/Berlin'}\n" +
			"routes:\n  - {name: r, to: a, hold: 0, repeat: 10m, mute_when: [n, n], active_when: n}\n" +
			"time_intervals:\n  - {name: n, time_intervals: [{days_of_month: ['-7:-1'], months: [2], years: [2028], weekdays: [sunday]}]}\n" +
			"maintenance:\n  - {name: m, when: n}\ninhibit:\n  - {name: i, source: {levels: [0]}, target: {levels: [3]}, equal: device}\n",
	} {
		f.Add([]byte(seed))
	}
	lookup := env(map[string]string{"OPS_WEBHOOK_SECRET": "whsec_c2VjcmV0", "SLACK_WEBHOOK_URL": "https://hooks.slack.com/x", "S": "raw"})
	events := []*event.Event{
		newEvent(event.Start, nil),
		newEvent(event.End, func(a *event.Alarm) { a.Level = 0; a.StationName = "North 1" }),
		newEvent(event.Invalid, func(a *event.Alarm) { a.Level = -1; a.StationName = "" }),
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse("fuzz.yaml", data, lookup)
		if err != nil {
			if r != nil {
				t.Fatal("Parse returned rules and an error")
			}
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var re *Error
				if !errors.As(e, &re) || re.File != "fuzz.yaml" {
					t.Fatalf("problem %v is not a *route.Error of fuzz.yaml", e)
				}
			}
			return
		}
		if len(r.Sinks) == 0 || len(r.Routes) == 0 {
			t.Fatal("accepted rules without sinks or routes")
		}
		for _, ev := range events {
			for _, name := range r.SinksFor(ev) {
				s, ok := r.Sink(name)
				if !ok {
					t.Fatalf("routed to undefined sink %q", name)
				}
				if _, err := s.Config.Render(ev); err != nil {
					t.Logf("render: %v", err)
				}
			}
		}
		_ = r.Warnings()
		from := time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC)
		for _, iv := range r.Intervals {
			spans := iv.Next(from, 3)
			for i, s := range spans {
				if !s.Start.Before(s.End) || i > 0 && !spans[i-1].End.Before(s.Start) || !iv.Contains(s.Start) || iv.Contains(s.End) && s.End.Before(from.AddDate(1, 0, 0)) {
					t.Fatalf("interval %s: bad spans %v", iv.Name, spans)
				}
			}
		}
		for _, ev := range events {
			for i := range r.Routes {
				r.RouteMuted(&r.Routes[i], from)
			}
			r.MaintenanceAt(ev, from)
		}
	})
}
