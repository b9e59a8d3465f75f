package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/isa"
	"github.com/relay-energy/relay/internal/store"
)

// alarmFiguresEvery is how often the ISA-18.2 metrics are brought up to
// date.
const alarmFiguresEvery = 30 * time.Second

// alarmFigures keeps the ISA-18.2 metrics (docs/design.md §11) from the
// store: the alarms started in the last 10 minutes, the seconds spent in
// flood, the stale alarms and the chattering device and event code pairs of
// the last hour. Each update reads the journal's last hour and the ongoing
// alarms' times, never the whole history. Alarms count by occurrence time,
// as the journal holds them when the update runs: one detected late counts
// toward the next updates.
type alarmFigures struct {
	store *store.Store
	clock clock.Clock
	log   *slog.Logger

	started, stale, chattering prometheus.Gauge
	flood                      prometheus.Counter

	// counted is the end of the time already counted into flood.
	counted time.Time
}

// floodLookback bounds the time one update counts into the flood seconds,
// so that the hour it reads holds every start that weighs on it.
const floodLookback = time.Hour - isa.FloodWindow

func newAlarmFigures(reg prometheus.Registerer, st *store.Store, clk clock.Clock, log *slog.Logger) *alarmFigures {
	m := &alarmFigures{
		store: st, clock: clk, log: log, counted: clk.Now(),
		started: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "relay_alarms_started_10m",
			Help: "Alarms that started in the last 10 minutes, by occurrence time: above 10, an operator who receives them all is in flood (ISA-18.2).",
		}),
		flood: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "relay_alarm_flood_seconds_total",
			Help: "Seconds during which more than 10 alarms had started in the 10 minutes before (ISA-18.2 flood).",
		}),
		stale: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "relay_alarms_stale",
			Help: "Alarms ongoing for more than 24 hours (ISA-18.2 stale alarms).",
		}),
		chattering: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "relay_alarms_chattering",
			Help: "Device and event code pairs that started 3 or more times within 60 s in the last hour (ISA-18.2 chattering).",
		}),
	}
	reg.MustRegister(m.started, m.flood, m.stale, m.chattering)
	return m
}

// run updates the metrics every interval until ctx ends.
func (m *alarmFigures) run(ctx context.Context, every time.Duration) {
	t := m.clock.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := m.update(m.clock.Now()); err != nil {
				m.log.Error("updating the ISA-18.2 alarm metrics", "err", err)
			}
			t.Reset(every)
		}
	}
}

// update brings the metrics up to now.
func (m *alarmFigures) update(now time.Time) error {
	var recent []store.JournalEntry
	var starts []time.Time
	err := m.store.Journal(now.Add(-time.Hour), now, func(e *store.JournalEntry) error {
		if !e.Silent {
			recent = append(recent, *e)
			starts = append(starts, e.OccurredAt)
		}
		return nil
	})
	if err != nil {
		return err
	}
	stale, err := m.store.CountOngoingBefore(now.Add(-isa.StaleAfter))
	if err != nil {
		return err
	}
	tenAgo := now.Add(-isa.FloodWindow)
	n := 0
	for _, t := range starts {
		if !t.Before(tenAgo) {
			n++
		}
	}
	m.started.Set(float64(n))
	from := m.counted
	if earliest := now.Add(-floodLookback); from.Before(earliest) {
		from = earliest
	}
	if now.After(from) {
		m.flood.Add(isa.FloodSeconds(starts, from, now))
		m.counted = now
	}
	m.stale.Set(float64(stale))
	m.chattering.Set(float64(isa.Chattering(recent)))
	return nil
}
