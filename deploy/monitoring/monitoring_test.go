package monitoring_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/relay-energy/relay/deploy/monitoring"
)

// promtool returns the path of Prometheus's promtool, skipping t without
// it outside CI (CI=true, where .ci/run installs Debian's prometheus
// package) and failing t in CI.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	const why = "promtool is not installed: apt-get install prometheus (Debian's package has promtool), or put Prometheus's promtool on PATH"
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// run runs promtool with args in this directory and fails t with its
// output when it fails.
func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The rules parse, and pass their unit tests, as Prometheus's own promtool
// reads them.
func TestRulesParseAndPassTheirTests(t *testing.T) {
	t.Log(run(t, "check", "rules", "alerts.yaml"))
	t.Log(run(t, "test", "rules", "alerts_test.yaml"))
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type ruleTests struct {
	Tests []struct {
		Name   string `yaml:"name"`
		Alerts []struct {
			Alert string `yaml:"alertname"`
			Exp   []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// Every alert says how bad it is and what it means, and its unit tests
// show it both firing and not firing: an alert added without tests fails
// here rather than at 3 a.m.
func TestEveryAlertIsDescribedAndTestedBothWays(t *testing.T) {
	var rules ruleFile
	if err := yaml.Unmarshal([]byte(monitoring.Alerts), &rules); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("alerts_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tests ruleTests
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.Alerts {
			if len(a.Exp) > 0 {
				fires[a.Alert] = true
			} else {
				quiet[a.Alert] = true
			}
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "" {
				t.Errorf("group %s: a rule that is no alert (%s): this file holds alerts only", g.Name, r.Expr)
				continue
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: want a summary and a description", r.Alert)
			}
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s: alerts_test.yaml shows it firing %v and not firing %v, want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
	if n == 0 {
		t.Fatal("alerts.yaml holds no rule")
	}
}

type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		GridPos struct {
			H, W, X, Y int
		} `json:"gridPos"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
}

// grafanaVar is a variable of the dashboard in a query.
var grafanaVar = regexp.MustCompile(`\$\{?(__rate_interval|[a-z]+)\}?`)

// The dashboard is Grafana JSON whose every query is PromQL that
// Prometheus parses (each checked as a recording rule by promtool, the
// dashboard's variables replaced by what Grafana puts there), whose
// variables are all defined, and whose panels do not overlap.
func TestTheDashboardsQueriesParse(t *testing.T) {
	var d dashboard
	if err := json.Unmarshal([]byte(monitoring.Dashboard), &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q, title %q: want both", d.UID, d.Title)
	}
	defined := map[string]bool{"__rate_interval": true}
	for _, v := range d.Templating.List {
		defined[v.Name] = true
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	queries, ids := 0, map[int]bool{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Fatalf("panels %q and %q overlap at %d,%d", other, p.Title, x, y)
				}
				taken[cell{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			for _, m := range grafanaVar.FindAllStringSubmatch(q.Expr, -1) {
				if !defined[m[1]] {
					t.Errorf("panel %q: query %s uses $%s, which the dashboard does not define", p.Title, q.RefID, m[1])
				}
			}
			expr := strings.NewReplacer("$__rate_interval", "5m", "$job", ".*", "$tenant", ".*").Replace(q.Expr)
			queries++
			fmt.Fprintf(&rules, "      - record: dashboard:q%d\n        expr: %q\n", queries, expr)
		}
	}
	if queries == 0 {
		t.Fatal("the dashboard has no query")
	}
	path := filepath.Join(t.TempDir(), "queries.yaml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "check", "rules", path)
	t.Logf("%d queries in %d panels parse", queries, len(d.Panels))
}

// MetricNames finds every metric of the rules and the dashboard (the test
// of a running relay checks that each exists: internal/service).
func TestMetricNamesFindsTheMetricsNamed(t *testing.T) {
	names := monitoring.MetricNames()
	for _, want := range []string{"relay_deliveries_total", "relay_alarm_detection_latency_seconds", "relay_tenant_served", "relay_unacknowledged_alarms"} {
		if !slices.Contains(names, want) {
			t.Errorf("MetricNames() = %v, want %s among them", names, want)
		}
	}
	for _, n := range names {
		if strings.HasSuffix(n, "_bucket") {
			t.Errorf("MetricNames() holds %s, a histogram's series, not its name", n)
		}
	}
}
