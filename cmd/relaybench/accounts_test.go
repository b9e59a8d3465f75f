package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

// TestAccountSharesFollowTheMix: tenant 1 has half the alarms, tenants 2
// to 5 a tenth each, the others share the last tenth; fewer tenants keep
// the proportions of those there are.
func TestAccountSharesFollowTheMix(t *testing.T) {
	for _, tc := range []struct {
		n                 int
		first, mid, quiet float64
	}{
		{20, 0.5, 0.1, 0.1 / 15},
		{50, 0.5, 0.1, 0.1 / 45},
		{5, 0.5 / 0.9, 0.1 / 0.9, 0},
	} {
		s := accountShares(tc.n)
		sum := 0.0
		for _, v := range s {
			sum += v
		}
		if math.Abs(sum-1) > 1e-9 || math.Abs(s[0]-tc.first) > 1e-9 || math.Abs(s[1]-tc.mid) > 1e-9 || math.Abs(s[4]-tc.mid) > 1e-9 {
			t.Errorf("%d tenants: shares %v (sum %g); want %g, %g for tenants 2-5", tc.n, s, sum, tc.first, tc.mid)
		}
		if tc.n > 5 && math.Abs(s[tc.n-1]-tc.quiet) > 1e-9 {
			t.Errorf("%d tenants: the last has %g; want %g", tc.n, s[tc.n-1], tc.quiet)
		}
	}
}

// TestSqrtRuleBound: equal rates give half the time between a tenant's
// reads; skewed rates less than equal sharing would.
func TestSqrtRuleBound(t *testing.T) {
	// Four tenants, one read a second: each read every 4 s, a start waits
	// 2 s on average.
	if got := sqrtRuleBound([]float64{1, 1, 1, 1}, 60, time.Minute); math.Abs(got-2) > 1e-9 {
		t.Errorf("equal rates: %g s; want 2", got)
	}
	// Rates 9 : 1, one read a second: (3 + 1)² / (2 × 10 × 1) = 0.8 s,
	// where reading them in turn would give 1 s.
	if got := sqrtRuleBound([]float64{9, 1}, 60, time.Minute); math.Abs(got-0.8) > 1e-9 {
		t.Errorf("rates 9 : 1: %g s; want 0.8", got)
	}
	if got := sqrtRuleBound([]float64{1}, 0, time.Minute); !math.IsNaN(got) {
		t.Errorf("no reads: %g; want NaN (not measured)", got)
	}
}

// TestAccountsReportChecksTheAcceptance builds the report of two runs and
// checks the medians, the verdicts at 20 tenants and the chart.
func TestAccountsReportChecksTheAcceptance(t *testing.T) {
	cfg := fullConfig()
	cfg.Phases = []string{phaseAccounts}
	cfg.AccountsTenants = []int{5, 20}
	run := func(relayMean float64, violations int) runFigures {
		f := runFigures{Systems: map[string]*systemFigures{}}
		for _, sys := range systemNames {
			f.Systems[sys] = &systemFigures{}
		}
		for _, n := range cfg.AccountsTenants {
			pt := accountsPoint{Tenants: n, Systems: map[string]*accountsSystemFigures{}, Bound: 40}
			for _, sys := range accountsSystems {
				sf := &accountsSystemFigures{Classes: map[string]*accountsClassFigures{}}
				for _, c := range accountsClasses {
					if c == classQuiet && n == 5 {
						continue
					}
					sf.Classes[c] = &accountsClassFigures{StartP50: 50, StartMean: 100, StartP99: 300, EndP50: 60, EndMean: 110, EndP99: 320}
				}
				pt.Systems[sys] = sf
			}
			rl := pt.Systems[accountsRelay]
			rl.Classes[classAll].StartMean = num(relayMean)
			if n == 20 {
				rl.Classes[classQuiet].StartP99 = 700
				rl.Violations, rl.RealRateViolations = violations, 0
			}
			f.Accounts = append(f.Accounts, pt)
		}
		return f
	}
	rep := buildReport(cfg, []runFigures{run(44, 0), run(46, 3)}, "cmd", time.Now())
	var b bytes.Buffer
	if err := writeMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"relay's mean start latency ≤ 0.6× first come, first served's: 0.45× — met",
		"within 15% of the square-root rule's bound: 1.12× the bound — met",
		"the worst is 2.33× (class 6-N) — **NOT MET**",
		"rate-limit violations at the real rate: 0, 0 (relay), 0, 0 (first come, first served) — met",
		"| 20 | 40.0 s | 0.45 | 1.12 | 2.33 (6-N) | 0, 3 / 0, 0 (0, 0 / 0, 0) | 0 |",
		"| 20 | relay | all | 50.0 s | 45.0 s | 300.0 s | 60.0 s | 110.0 s | 320.0 s | 0, 0 / 0, 0 |",
		"| 5 | fifo | 2-5 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| 5 | relay | 6-N |") {
		t.Errorf("a class without tenants at 5 tenants has a row:\n%s", md)
	}
	b.Reset()
	if err := writeAccountsChart(&b, rep); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	for _, want := range []string{`class="accounts-relay"`, `class="accounts-fifo"`, `class="accounts-bound"`, "Square-root bound of the mean: 40.0 s, 40.0 s."} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart lacks %q:\n%s", want, svg)
		}
	}
}
