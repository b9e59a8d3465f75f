package poller

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/learn"
)

// Metrics are the poller's Prometheus metrics: ongoing alarms by level,
// transitions by type, detection latency, polls by query and outcome, the
// completeness of current snapshots, the alarms awaiting confirmation, and
// what was learned of the upstream (package learn).
// One Metrics serves one Poller; a nil *Metrics records nothing.
type Metrics struct {
	ongoing     *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	polls       *prometheus.CounterVec
	snapshots   *prometheus.CounterVec
	unconfirmed prometheus.Gauge
	firstSight  prometheus.Histogram
	lateAlarms  prometheus.Counter
	incomplete  prometheus.Gauge
	refusals    *prometheus.CounterVec
	learned     *prometheus.GaugeVec
	stampOff    *prometheus.GaugeVec
	stampDevs   *prometheus.GaugeVec
	upstream    *learn.Metrics
}

// NewMetrics creates the poller's metrics and registers them with reg, which
// may be nil to leave them unregistered. It panics if reg already holds
// metrics of the same names, as prometheus.MustRegister does.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ongoing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "relay_alarms_ongoing",
			Help: "Alarms the relay tracks as ongoing, by event level (0 urgent to 3 minor).",
		}, []string{"level"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_alarm_transitions_total",
			Help: "Alarm events produced, by transition (start, end, invalid) and whether the end was inferred.",
		}, []string{"transition", "inferred"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "relay_alarm_detection_latency_seconds",
			Help: "Time from an alarm's occurrence (start) or recovery (end, invalid) to its detection; " +
				"inferred ends and alarms older than the store's first run are not counted.",
			Buckets: []float64{1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 120, 300, 600, 1800, 3600},
		}, []string{"transition"}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_poller_polls_total",
			Help: "Alarm list requests of the poller, by query (contact, confirm, current, sweep, lag_sweep, reconcile, aged) and outcome " +
				"(ok, auth, rate_limited, bad_request, transient, canceled, error).",
		}, []string{"query", "outcome"}),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_poller_snapshots_total",
			Help: "Current-alarm snapshots read to the end, by scope (all, or one level 0 to 3) and completeness; " +
				"only a complete snapshot may declare an alarm vanished.",
		}, []string{"scope", "complete"}),
		unconfirmed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "relay_poller_unconfirmed_alarms",
			Help: "Alarms missing from a snapshot read to its end and whose recovered record has not been found yet.",
		}),
		firstSight: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "relay_alarm_first_sight_lag_seconds",
			Help: "Time from an alarm's occurrence, as the upstream stamped it, to the first answer that listed it, " +
				"in the upstream's clock: ingestion lag, device clocks running behind, and polling delay.",
			Buckets: []float64{1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600},
		}),
		lateAlarms: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "relay_alarms_late_total",
			Help: "Alarms announced by reconciliation: the upstream listed them only after they were over, " +
				"behind the sweep's window.",
		}),
		incomplete: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "relay_poller_incomplete_snapshots_in_row",
			Help: "Snapshots of the ongoing alarms read to their end but incomplete since the last complete one; " +
				"while it grows, no end can be inferred.",
		}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_poller_queries_refused_total",
			Help: "Alarm queries the upstream refused as too long a deviceSnList, by query; each is asked again with fewer devices.",
		}, []string{"query"}),
		learned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "relay_poller_upstream_limit",
			Help: "Limits learnt from the upstream's answers: page_size (alarms served per page) and " +
				"device_list (devices one deviceSnList may name).",
		}, []string{"limit"}),
		stampOff: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "relay_device_stamp_offset_seconds",
			Help: "How far the devices' alarm stamps run ahead of the upstream's clock (negative: behind, " +
				"ingestion lag and polling delay included), as learnt from the answers: stat min, median and max " +
				"over the devices measured in the last two hours. The log names the devices furthest off.",
		}, []string{"stat"}),
		stampDevs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "relay_device_stamp_offset_devices",
			Help: "Devices whose stamp offset was measured in the last two hours (state measured), and those " +
				"of them whose stamps are more than a minute off the upstream's clock (state off).",
		}, []string{"state"}),
	}
	m.upstream = learn.NewMetrics(reg)
	// The successful current polls exist at 0 from the start: an alert on
	// their rate (no poll succeeds) sees a relay that started into an
	// outage, whose counter would otherwise not exist.
	m.polls.WithLabelValues(kindCurrent.String(), "ok")
	m.learned.WithLabelValues("page_size").Set(pageSize)
	m.learned.WithLabelValues("device_list").Set(lookupDevices)
	if reg != nil {
		reg.MustRegister(m.ongoing, m.transitions, m.latency, m.polls, m.snapshots, m.unconfirmed,
			m.firstSight, m.lateAlarms, m.incomplete, m.refusals, m.learned, m.stampOff, m.stampDevs)
	}
	return m
}

// facts returns the metrics of what was learned of the upstream.
func (m *Metrics) facts() *learn.Metrics {
	if m == nil {
		return nil
	}
	return m.upstream
}

func (m *Metrics) setOngoing(level, n int) {
	if m != nil {
		m.ongoing.WithLabelValues(strconv.Itoa(level)).Set(float64(n))
	}
}

func (m *Metrics) poll(q kind, outcome string) {
	if m != nil {
		m.polls.WithLabelValues(q.String(), outcome).Inc()
	}
}

func (m *Metrics) snapshot(level int, complete bool) {
	if m == nil {
		return
	}
	scope := "all"
	if level >= 0 {
		scope = strconv.Itoa(level)
	}
	m.snapshots.WithLabelValues(scope, strconv.FormatBool(complete)).Inc()
}

func (m *Metrics) setUnconfirmed(n int) {
	if m != nil {
		m.unconfirmed.Set(float64(n))
	}
}

func (m *Metrics) late(n int) {
	if m != nil && n > 0 {
		m.lateAlarms.Add(float64(n))
	}
}

func (m *Metrics) setIncomplete(n int) {
	if m != nil {
		m.incomplete.Set(float64(n))
	}
}

func (m *Metrics) refused(q kind) {
	if m != nil {
		m.refusals.WithLabelValues(q.String()).Inc()
	}
}

func (m *Metrics) setPageSize(n int) {
	if m != nil {
		m.learned.WithLabelValues("page_size").Set(float64(n))
	}
}

func (m *Metrics) setStamps(s StampSummary) {
	if m == nil {
		return
	}
	m.stampOff.WithLabelValues("min").Set(s.Min.Seconds())
	m.stampOff.WithLabelValues("median").Set(s.Median.Seconds())
	m.stampOff.WithLabelValues("max").Set(s.Max.Seconds())
	m.stampDevs.WithLabelValues("measured").Set(float64(s.Devices))
	m.stampDevs.WithLabelValues("off").Set(float64(s.Off))
}

func (m *Metrics) setDeviceLimit(n int) {
	if m != nil {
		m.learned.WithLabelValues("device_list").Set(float64(n))
	}
}

// events counts evs and observes their detection latency and, for starts,
// the lag from occurrence to first sight. Times are compared in the
// upstream's clock: offset is the upstream's clock minus the relay's, which
// DetectedAt is in. Alarms that occurred (start) or recovered (end, invalid)
// before history are the bootstrap's and the store's business, not a
// measure of the poller.
func (m *Metrics) events(evs []event.Event, history time.Time, offset time.Duration) {
	if m == nil {
		return
	}
	for i := range evs {
		d := &evs[i].Data
		m.transitions.WithLabelValues(string(d.Transition), strconv.FormatBool(d.Inferred)).Inc()
		if d.Inferred {
			continue
		}
		at := d.OccurredAt
		if d.Transition != event.Start {
			at = d.RecoveredAt
		}
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil || t.Before(history) {
			continue
		}
		detected, err := time.Parse(time.RFC3339Nano, d.DetectedAt)
		if err != nil {
			continue
		}
		lag := max(0, detected.Add(offset).Sub(t).Seconds())
		m.latency.WithLabelValues(string(d.Transition)).Observe(lag)
		if d.Transition == event.Start {
			m.firstSight.Observe(lag)
		}
	}
}
