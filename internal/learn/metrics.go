package learn

import "github.com/prometheus/client_golang/prometheus"

// Metrics export what was learned of the upstream. One Metrics serves one
// Upstream; a nil *Metrics records nothing.
type Metrics struct {
	fact     *prometheus.GaugeVec
	pageCap  prometheus.Gauge
	devices  prometheus.Gauge
	lateness *prometheus.GaugeVec
	rates    *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them with reg, which may be
// nil to leave them unregistered. It panics if reg already holds metrics of
// the same names, as prometheus.MustRegister does.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		fact: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "relay_upstream_fact",
			Help: "What relay learned of the upstream's behaviour, by fact: 1 holds, 0 unknown, -1 refuted " +
				"(docs/design.md §4, \"What relay learns of the upstream\").",
		}, []string{"fact"}),
		pageCap: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "relay_upstream_page_cap",
			Help: "The most alarms a page of the upstream serves while more exist, when fewer than asked; 0 while no cap is known.",
		}),
		devices: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "relay_upstream_device_list_limit",
			Help: "The most devices a deviceSnList was accepted with, once a longer one was refused (kept across restarts); 0 while none was refused.",
		}),
		lateness: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "relay_upstream_lateness_seconds",
			Help: "How late the upstream lists alarms (first seen minus occurrence, upstream clock) over the last one to two hours: " +
				"stat p50, p99, max; ahead_max is how far before its stamped occurrence an alarm was seen (a device clock ahead).",
		}, []string{"stat"}),
		rates: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "relay_upstream_transitions_per_hour",
			Help: "How often the upstream account's alarms start and end, by transition (start, end), as learned over the last one to two hours: " +
				"a budget shared by several tenants serves each by the square root of its rate (docs/design.md §4, \"Tenants of one budget\").",
		}, []string{"transition"}),
	}
	if reg != nil {
		reg.MustRegister(m.fact, m.pageCap, m.devices, m.lateness, m.rates)
	}
	return m
}

func (m *Metrics) setFact(f Fact) {
	if m != nil {
		m.fact.WithLabelValues(f.Name).Set(float64(f.State))
	}
}

func (m *Metrics) setPageCap(n int) {
	if m != nil {
		m.pageCap.Set(float64(n))
	}
}

func (m *Metrics) setDeviceLimit(n int) {
	if m != nil {
		m.devices.Set(float64(n))
	}
}

func (m *Metrics) setLateness(l Lateness) {
	if m == nil {
		return
	}
	m.lateness.WithLabelValues("p50").Set(l.P50.Seconds())
	m.lateness.WithLabelValues("p99").Set(l.P99.Seconds())
	m.lateness.WithLabelValues("max").Set(l.Max.Seconds())
	m.lateness.WithLabelValues("ahead_max").Set(l.MaxAhead.Seconds())
}

func (m *Metrics) setRates(r Rates) {
	if m == nil {
		return
	}
	m.rates.WithLabelValues("start").Set(r.StartsPerHour)
	m.rates.WithLabelValues("end").Set(r.EndsPerHour)
}

// Fact returns the gauge of the named fact (relay_upstream_fact).
func (m *Metrics) Fact(name string) prometheus.Gauge { return m.fact.WithLabelValues(name) }

// PageCap returns the gauge of the page cap (relay_upstream_page_cap).
func (m *Metrics) PageCap() prometheus.Gauge { return m.pageCap }

// DeviceLimit returns the gauge of the deviceSnList limit
// (relay_upstream_device_list_limit).
func (m *Metrics) DeviceLimit() prometheus.Gauge { return m.devices }
