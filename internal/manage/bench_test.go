package manage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

// benchRules route every alarm to people and hook, held 10m, and escalate
// it to oncall after 10m.
const benchRules = `
sinks:
  - {name: people, type: console}
  - {name: hook, type: console}
  - {name: oncall, type: console}
routes:
  - name: people
    to: [people, hook]
    hold: 10m
    escalate:
      - {after: 10m, to: [oncall]}
`

// benchManager is a store holding n ongoing alarms, each routed to people
// and hook, and alarm management over it.
func benchManager(b *testing.B, n int, rulesFile string) (*store.Store, *manage.Manager, *clock.Fake, *route.Rules) {
	b.Helper()
	rules, err := route.Parse("rules.yaml", []byte(rulesFile), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	clk := clock.NewFake(t0)
	st, err := store.Open(filepath.Join(b.TempDir(), "relay.db"), store.Options{Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	var alarms []event.Alarm
	for i := range n {
		raw, _ := json.Marshal(map[string]any{"originId": fmt.Sprint("A", i), "status": 1})
		alarms = append(alarms, event.Alarm{OriginID: fmt.Sprint("A", i), Status: 1, Level: 0, EventCode: "E1",
			TenantID: "T1", StationID: "S1", DeviceSN: fmt.Sprint("D", i), OccurredAt: t0, Raw: raw})
	}
	if _, err := st.Apply(context.Background(), store.Batch{Observed: alarms, DetectedAt: t0},
		func(ev *event.Event) []string { return rules.SinksFor(ev) }); err != nil {
		b.Fatal(err)
	}
	m, err := manage.New(manage.Options{Store: st, Rules: func() *route.Rules { return rules }, Clock: clk,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return st, m, clk, rules
}

// BenchmarkEscalatePass takes the first escalation step of n
// unacknowledged alarms, ten minutes into a storm, while their starts still
// wait in the outboxes of the route's sinks (waiting: receivers slow or
// down) or after those outboxes drained. It reports the time per alarm.
func BenchmarkEscalatePass(b *testing.B) {
	for _, waiting := range []bool{false, true} {
		for _, n := range []int{1000, 2000, 4000, 8000} {
			b.Run(fmt.Sprintf("waiting=%v/alarms=%d", waiting, n), func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					st, m, clk, _ := benchManager(b, n, benchRules)
					if !waiting {
						for _, sink := range []string{"people", "hook"} {
							es, err := st.Pending(sink, n)
							if err != nil {
								b.Fatal(err)
							}
							var ds []store.Delivery
							for _, e := range es {
								ds = append(ds, store.Delivery{Entry: e})
							}
							if err := st.Settle(ds, nil); err != nil {
								b.Fatal(err)
							}
						}
					}
					clk.Advance(11 * time.Minute)
					b.StartTimer()
					if err := m.Escalate(context.Background()); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if got, _ := st.Depth(); got["oncall"] != n && waiting {
						b.Fatalf("oncall's outbox holds %d starts, want %d", got["oncall"], n)
					}
					_ = st.Close()
					b.StartTimer()
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/alarm")
			})
		}
	}
}

// BenchmarkDecideHeldStart is the gate's verdict on a start within its
// route's hold, which the delivery loop asks again at each pass over the
// outbox while it waits.
func BenchmarkDecideHeldStart(b *testing.B) {
	for _, escalates := range []bool{false, true} {
		b.Run(fmt.Sprintf("escalates=%v", escalates), func(b *testing.B) {
			r := benchRules
			if !escalates {
				r = r[:len(r)-len("    escalate:\n      - {after: 10m, to: [oncall]}\n")]
			}
			st, m, _, _ := benchManager(b, 1000, r)
			es, err := st.Pending("people", 1000)
			if err != nil {
				b.Fatal(err)
			}
			ds := make([]notify.Delivery, len(es))
			for i, e := range es {
				ev, err := event.Unmarshal(e.Body)
				if err != nil {
					b.Fatal(err)
				}
				ds[i] = notify.Delivery{EventID: e.EventID, OriginID: e.OriginID, Body: e.Body, EnqueuedAt: e.EnqueuedAt, Event: &ev, Attempt: 1}
			}
			i := 0
			for b.Loop() {
				v, err := m.Decide(context.Background(), "people", &ds[i%len(ds)])
				if err != nil || v.Until.IsZero() {
					b.Fatalf("verdict %+v, %v; want held", v, err)
				}
				i++
			}
		})
	}
}
