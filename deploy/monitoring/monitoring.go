// Package monitoring holds what watches relay itself: Prometheus alerting
// rules (alerts.yaml, unit-tested in alerts_test.yaml) and a Grafana
// dashboard (dashboard.json). The package embeds them so that a test of a
// running relay can check that every metric they name exists; nothing in
// relay imports it.
package monitoring

import (
	_ "embed"
	"regexp"
	"slices"
	"strings"
)

// Alerts is alerts.yaml: the alerting rules.
//
//go:embed alerts.yaml
var Alerts string

// Dashboard is dashboard.json: the Grafana dashboard.
//
//go:embed dashboard.json
var Dashboard string

var metricName = regexp.MustCompile(`\brelay_[a-z0-9_]*[a-z0-9]\b`)

// MetricNames returns the names of the metrics the rules and the dashboard
// name, sorted, a histogram's _bucket, _sum and _count series by the
// histogram's own name.
func MetricNames() []string {
	var out []string
	for _, m := range metricName.FindAllString(Alerts+Dashboard, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(m, suffix); ok && strings.HasSuffix(base, "_seconds") {
				m = base
			}
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}
