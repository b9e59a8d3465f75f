package manage

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are alarm management's figures of acknowledgement and
// escalation.
type Metrics struct {
	timeToAck   *prometheus.SummaryVec
	escalations prometheus.Counter
}

// NewMetrics registers alarm management's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		timeToAck: prometheus.NewSummaryVec(prometheus.SummaryOpts{
			Name:       "relay_time_to_acknowledge_seconds",
			Help:       "Time from an alarm's first sight to its first acknowledgement, by the first route its start matched (p50 and p90 over the last 24 h).",
			Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01},
			MaxAge:     24 * time.Hour,
			AgeBuckets: 6,
		}, []string{"route"}),
		escalations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "relay_escalations_total",
			Help: "Sinks an unacknowledged alarm was escalated to (route option escalate).",
		}),
	}
	reg.MustRegister(m.timeToAck, m.escalations)
	return m
}

func (m *Metrics) acked(route string, d time.Duration) {
	m.timeToAck.WithLabelValues(route).Observe(d.Seconds())
}

func (m *Metrics) escalated(n int) { m.escalations.Add(float64(n)) }
