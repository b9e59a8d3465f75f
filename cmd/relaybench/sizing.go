package main

import (
	"fmt"
	"math"
	"time"
)

// The phases that measure the sizing rows.
var (
	inTenants  = []string{phaseTenants}
	inTakeover = []string{phaseTakeover}
)

// tenantsFigure reads a figure of the tenants phase; NaN when it did not run.
func tenantsFigure(f func(*tenantsResult) float64) func(*runFigures, string) float64 {
	return func(r *runFigures, _ string) float64 {
		if r.Tenants == nil {
			return math.NaN()
		}
		return f(r.Tenants)
	}
}

// takeoverFigure reads a figure of the takeover phase at the lease TTL ttl;
// NaN when it did not run.
func takeoverFigure(ttl time.Duration, f func(takeoverResult) float64) func(*runFigures, string) float64 {
	return func(r *runFigures, _ string) float64 {
		for _, t := range r.Takeover {
			if t.TTL == ttl {
				return f(t)
			}
		}
		return math.NaN()
	}
}

// takeoverTotal sums a count of the takeover phase over its lease TTLs; NaN
// when it did not run.
func takeoverTotal(f func(takeoverResult) int) func(*runFigures, string) float64 {
	return func(r *runFigures, _ string) float64 {
		if len(r.Takeover) == 0 {
			return math.NaN()
		}
		n := 0
		for _, t := range r.Takeover {
			n += f(t)
		}
		return float64(n)
	}
}

// sizingMetrics are the rows of the tenants and takeover phases: how many
// tenants one process serves and what each costs (S1 to S3), and how soon a
// replica's tenants are taken over when it is killed (S4 to S6), one pair of
// rows per lease TTL of cfg.
func sizingMetrics(cfg config) []metric {
	ms := []metric{
		{id: "S1", what: "tenants served by one relay process", target: "reported", unit: unitCount, systems: relayOnly, phases: inTenants,
			value: tenantsFigure(func(t *tenantsResult) float64 { return float64(t.Tenants) })},
		{id: "S1", what: "tenants phase: events due not delivered", target: "0", unit: unitCount, goal: atMost(0), systems: relayOnly, phases: inTenants,
			value: tenantsFigure(func(t *tenantsResult) float64 { return float64(t.Deliveries.missing()) })},
		{id: "S1", what: "tenants phase: rate-limit violations counted by the simulators" + measuredLabel, unit: unitCount, systems: relayOnly, phases: inTenants,
			value: tenantsFigure(func(t *tenantsResult) float64 { return float64(t.Violations) })},
		{id: "S1", what: "tenants phase: rate-limit violations" + realLabel, target: "0", unit: unitCount, goal: atMost(0), systems: relayOnly, phases: inTenants,
			value: tenantsFigure(func(t *tenantsResult) float64 { return float64(t.RealRateViolations) })},
		{id: "S2", what: "CPU per tenant per hour of upstream time (the process's CPU ÷ tenants)", unit: unitCPU, systems: relayOnly, phases: inTenants,
			value: tenantsFigure((*tenantsResult).cpuPerTenantHour)},
		{id: "S2", what: "CPU of one more tenant per hour of upstream time (over a one-tenant process)", unit: unitCPU, systems: relayOnly, phases: inTenants,
			value: tenantsFigure((*tenantsResult).marginalCPUPerTenantHour)},
		{id: "S2", what: "tenants one core serves at the real rate (3,600 s ÷ CPU per tenant-hour)", unit: unitCount, systems: relayOnly, phases: inTenants,
			value: tenantsFigure(func(t *tenantsResult) float64 { return 3600 / t.cpuPerTenantHour() })},
		{id: "S3", what: "resident memory of the process (VmRSS)", unit: unitMiB, systems: relayOnly, phases: inTenants,
			value: tenantsFigure(func(t *tenantsResult) float64 { return float64(t.RSS) / mib })},
		{id: "S3", what: "resident memory per tenant (VmRSS over a one-tenant process)", unit: unitKiB, systems: relayOnly, phases: inTenants,
			value: tenantsFigure(func(t *tenantsResult) float64 { return t.rssPerTenant() / 1024 })},
		{id: "S3", what: "of which anonymous (RssAnon over a one-tenant process)", unit: unitKiB, systems: relayOnly, phases: inTenants,
			value: tenantsFigure(func(t *tenantsResult) float64 { return t.anonPerTenant() / 1024 })},
		{id: "S3", what: "state file per tenant, on disk", unit: unitKiB, systems: relayOnly, phases: inTenants,
			value: tenantsFigure(func(t *tenantsResult) float64 { return float64(t.StateBytes) / float64(t.Tenants) / 1024 })},
	}
	for i, ttl := range cfg.TakeoverTTLs {
		id := fmt.Sprintf("S%d", 4+min(i, 1))
		ms = append(ms,
			metric{id: id, what: fmt.Sprintf("takeover after SIGKILL of the holder, median (RELAY_LEASE_TTL=%s)", ttl), unit: unitSeconds, systems: relayOnly, phases: inTakeover,
				value: takeoverFigure(ttl, func(t takeoverResult) float64 { p50, _ := t.summary(); return p50 })},
			metric{id: id, what: fmt.Sprintf("takeover after SIGKILL of the holder, max (RELAY_LEASE_TTL=%s)", ttl),
				target: fmt.Sprintf("≤ %g s (2 × TTL)", (2 * ttl).Seconds()), unit: unitSeconds, goal: atMost((2 * ttl).Seconds()), systems: relayOnly, phases: inTakeover,
				value: takeoverFigure(ttl, func(t takeoverResult) float64 { _, mx := t.summary(); return mx })},
		)
	}
	return append(ms,
		metric{id: "S6", what: "takeover: pairs of replicas that polled one tenant at once", target: "0", unit: unitCount, goal: atMost(0), systems: relayOnly, phases: inTakeover,
			value: takeoverTotal(func(t takeoverResult) int { return t.Overlaps })},
		metric{id: "S6", what: "takeover: events due not delivered across the kills", target: "0", unit: unitCount, goal: atMost(0), systems: relayOnly, phases: inTakeover,
			value: takeoverTotal(func(t takeoverResult) int { return t.Deliveries.missing() })},
	)
}
