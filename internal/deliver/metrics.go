package deliver

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of one delivery attempt, the outcome label of
// relay_deliveries_total.
const (
	OutcomeDelivered = "delivered"
	OutcomeFailed    = "failed"
)

// Reasons an entry is dead-lettered, the reason label of
// relay_dead_letters_total.
const (
	// ReasonRejected: the sink answered with a failure no retry can fix.
	ReasonRejected = "rejected"
	// ReasonExpired: the entry was not delivered within the sink's max_age.
	ReasonExpired = "expired"
	// ReasonUndecodable: the entry's body is not an event.
	ReasonUndecodable = "undecodable"
)

// Metrics are the delivery loop's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	deliveries   *prometheus.CounterVec
	retries      *prometheus.CounterVec
	deadLetters  *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	depth        *prometheus.GaugeVec
	templates    *prometheus.CounterVec
	suppressions *prometheus.CounterVec
}

// NewMetrics creates the delivery metrics and registers them with reg (when
// not nil). Like promauto, it panics when a metric is already registered.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_deliveries_total",
			Help: "Delivery attempts by sink and outcome (delivered or failed).",
		}, []string{"sink", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_delivery_retries_total",
			Help: "Failed delivery attempts that were scheduled for another attempt, by sink.",
		}, []string{"sink"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_dead_letters_total",
			Help: "Outbox entries given up on, by sink and reason (rejected, expired, undecodable).",
		}, []string{"sink", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "relay_delivery_latency_seconds",
			Help:    "Time from an event entering a sink's outbox to its delivery, by sink.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400},
		}, []string{"sink"}),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "relay_outbox_depth",
			Help: "Entries waiting in a sink's outbox.",
		}, []string{"sink"}),
		templates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_template_failures_total",
			Help: "Messages sent with the sink's default text because its title or text template failed on the event, by sink.",
		}, []string{"sink"}),
		suppressions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_suppressed_total",
			Help: "Outbox entries alarm management withheld from a sink, by sink and reason (hold, silence, maintenance, muted, inhibited, chattering); each is kept in the sink's suppressed log.",
		}, []string{"sink", "reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.deliveries, m.retries, m.deadLetters, m.latency, m.depth, m.templates, m.suppressions)
	}
	return m
}

// initSink creates sink's series at zero, so that dashboards and alerts see
// them before the first failure.
func (m *Metrics) initSink(sink string) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(sink, OutcomeDelivered)
	m.deliveries.WithLabelValues(sink, OutcomeFailed)
	m.retries.WithLabelValues(sink)
	for _, r := range []string{ReasonRejected, ReasonExpired, ReasonUndecodable} {
		m.deadLetters.WithLabelValues(sink, r)
	}
	m.latency.WithLabelValues(sink)
	m.depth.WithLabelValues(sink)
	m.templates.WithLabelValues(sink)
}

// TemplateFailed counts a message sent with the default text because a
// template of sink failed on the event.
func (m *Metrics) TemplateFailed(sink string) {
	if m == nil {
		return
	}
	m.templates.WithLabelValues(sink).Inc()
}

func (m *Metrics) delivered(sink string, latency time.Duration) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(sink, OutcomeDelivered).Inc()
	m.latency.WithLabelValues(sink).Observe(max(latency, 0).Seconds())
}

func (m *Metrics) failed(sink string) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(sink, OutcomeFailed).Inc()
}

func (m *Metrics) retry(sink string) {
	if m == nil {
		return
	}
	m.retries.WithLabelValues(sink).Inc()
}

func (m *Metrics) deadLetter(sink, reason string) {
	if m == nil {
		return
	}
	m.deadLetters.WithLabelValues(sink, reason).Inc()
}

func (m *Metrics) suppressed(sink, reason string) {
	if m == nil {
		return
	}
	m.suppressions.WithLabelValues(sink, reason).Inc()
}

func (m *Metrics) setDepth(sink string, n int) {
	if m == nil {
		return
	}
	m.depth.WithLabelValues(sink).Set(float64(n))
}
