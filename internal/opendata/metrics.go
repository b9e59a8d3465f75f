package opendata

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the client's Prometheus metrics: upstream requests by endpoint
// and outcome, the budget's use, effective limit and waiting requests, and
// rate-limit signals.
// One Metrics serves one Client; a nil *Metrics records nothing.
type Metrics struct {
	requests *prometheus.CounterVec
	signals  prometheus.Counter
	offset   prometheus.Gauge
	refused  prometheus.Gauge
	budget   atomic.Pointer[Budget]
}

// NewMetrics creates the client's metrics and registers them with reg, which
// may be nil to leave them unregistered. It panics if reg already holds
// metrics of the same names, as prometheus.MustRegister does.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_upstream_requests_total",
			Help: "Requests sent to the Open Data Service, by endpoint and outcome (ok, auth, rate_limited, bad_request, transient, canceled).",
		}, []string{"endpoint", "outcome"}),
		signals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "relay_upstream_rate_limit_signals_total",
			Help: "Answers of the Open Data Service that said the rate limit was exceeded.",
		}),
		offset: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "relay_upstream_clock_offset_seconds",
			Help: "The upstream's clock minus the relay's, from the Date headers of its latest answers.",
		}),
		refused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "relay_upstream_credentials_refused",
			Help: "1 while the latest login was refused for its credentials (check RELAY_APP_ID and RELAY_APP_SECRET), else 0.",
		}),
	}
	inUse := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "relay_upstream_budget_in_use",
		Help: "Requests started in the last 60 s.",
	}, func() float64 {
		if b := m.budget.Load(); b != nil {
			return float64(b.InUse())
		}
		return 0
	})
	limit := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "relay_upstream_budget_limit",
		Help: "Effective limit of requests per 60 s, after halving on rate-limit signals.",
	}, func() float64 {
		if b := m.budget.Load(); b != nil {
			return float64(b.Limit())
		}
		return 0
	})
	waiting := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "relay_upstream_budget_waiting",
		Help: "Requests waiting for a slot of the rate budget.",
	}, func() float64 {
		if b := m.budget.Load(); b != nil {
			return float64(b.Waiting())
		}
		return 0
	})
	if reg != nil {
		reg.MustRegister(m.requests, m.signals, m.offset, m.refused, inUse, limit, waiting)
	}
	return m
}

func (m *Metrics) attach(b *Budget) {
	if m != nil {
		m.budget.Store(b)
	}
}

func (m *Metrics) credentialsRefused(refused bool) {
	if m != nil {
		v := 0.0
		if refused {
			v = 1
		}
		m.refused.Set(v)
	}
}

func (m *Metrics) clockOffset(d time.Duration) {
	if m != nil {
		m.offset.Set(d.Seconds())
	}
}

func (m *Metrics) request(endpoint, outcome string) {
	if m != nil {
		m.requests.WithLabelValues(endpoint, outcome).Inc()
	}
}

func (m *Metrics) rateLimitSignal() {
	if m != nil {
		m.signals.Inc()
	}
}
