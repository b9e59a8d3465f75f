package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// upstreamVariant is an upstream the relay is measured against in the
// upstream phase, all with the churn phase's traffic.
type upstreamVariant struct {
	name string
	// hostile returns the misbehaviour, given the fleet's serial numbers.
	hostile func(devices []string) sim.Hostile
}

// upstreamVariants are the upstreams of the upstream phase: one that
// behaves, its clock a quarter of an hour off either way, and one that does
// everything at once: a tenth of the devices stamping their own clocks (two
// minutes behind, or local UTC+8 as UTC), a fifth of them uploading three
// minutes late, pages capped at 100 rows and deviceSnLists of at most 5.
var upstreamVariants = []upstreamVariant{
	{"clean", func([]string) sim.Hostile { return sim.Hostile{} }},
	{"clock 15 min ahead", func([]string) sim.Hostile { return sim.Hostile{ClockOffset: 15 * time.Minute} }},
	{"clock 15 min behind", func([]string) sim.Hostile { return sim.Hostile{ClockOffset: -15 * time.Minute} }},
	{"hostile", func(devices []string) sim.Hostile {
		offsets := map[string]time.Duration{}
		for i := 0; i < len(devices); i += 10 {
			offsets[devices[i]] = -2 * time.Minute
			if i%20 == 0 {
				offsets[devices[i]] = 8 * time.Hour
			}
		}
		return sim.Hostile{
			DeviceClockOffsets: offsets, IngestLag: 3 * time.Minute, IngestLagShare: 0.2,
			PageCap: 100, DeviceSNListLimit: 5,
		}
	}},
}

// upstreamGraceSlots run after the measured window of the upstream phase:
// the hostile upstream lists alarms 3 minutes (30 slots) late.
const upstreamGraceSlots = graceSlots + 60

// upstreamFigures are the relay's figures against one upstream variant.
type upstreamFigures struct {
	Start latencies `json:"p1_start_latency_slots"`
	End   latencies `json:"p2_end_latency_slots"`
	// Violations are the rate-limit refusals the simulator counted.
	Violations int `json:"p3_violations"`
	// ReconcileShare is the share of the relay's answered requests spent
	// on reconciliation.
	ReconcileShare float64 `json:"reconcile_share"`
}

// upstreamPhase measures the relay alone against every upstream variant in
// turn, each on its own simulator with the same churn, for ChurnSlots/4.
// One at a time: relays polling side by side on two cores delay each other
// by their order of start, which would weigh on their latencies and not on
// the upstream's.
func (b *bench) upstreamPhase(ctx context.Context, figs *runFigures) error {
	seed := b.cfg.Seed + 7
	devices := deviceSNs(sim.New(simOptions(seed, clock.Real())))
	slots := max(b.cfg.ChurnSlots/4, 40)
	figs.Upstream = map[string]*upstreamFigures{}
	for i, v := range upstreamVariants {
		f, err := b.upstreamVariant(ctx, fmt.Sprintf("upstream-%d", i), seed, slots, v.hostile(devices))
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		figs.Upstream[v.name] = f
	}
	return nil
}

// upstreamVariant runs the relay against one upstream that misbehaves as
// hostile says, with the churn of seed, and returns its figures.
func (b *bench) upstreamVariant(ctx context.Context, name string, seed int64, slots int, hostile sim.Hostile) (*upstreamFigures, error) {
	run, err := b.runChurn(ctx, churnSpec{
		name: name, seed: seed, salt: 0xc5, names: []string{sysRelay}, pace: b.pace(), hostile: hostile, churn: b.cfg.Churn,
		warm: warmSlots * slot, measure: time.Duration(slots) * slot, grace: upstreamGraceSlots * slot,
	})
	if err != nil {
		return nil, err
	}
	p := run.p
	use, uerr := p.systems[sysRelay].(*relaySystem).slotUse()
	err = p.stopSystems()
	f := &upstreamFigures{Violations: p.sims[sysRelay].Stats().Violations}
	f.Start, f.End = run.latencies(sysRelay)
	total := 0
	for _, n := range use {
		total += n
	}
	if total > 0 {
		f.ReconcileShare = float64(use["reconcile"]) / float64(total)
	}
	return f, errors.Join(err, uerr, p.close())
}
