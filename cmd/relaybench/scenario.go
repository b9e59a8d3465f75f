package main

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// The upstream and relay settings every system runs with: production
// defaults, on the scaled clock.
const (
	upstreamRate  = 10 // requests per minute
	slot          = time.Minute / upstreamRate
	relayLookback = 720 * time.Hour
)

// simOptions configure a simulator of a tenant of 20 stations of 3 systems
// of 10 devices (600 devices), limited to 10 requests per minute per IP as
// the real service is, on clk.
func simOptions(seed int64, clk clock.Clock) sim.Options {
	return sim.Options{
		Seed:              seed,
		Stations:          20,
		SystemsPerStation: 3,
		DevicesPerSystem:  10,
		Clock:             clk,
	}
}

// startSim starts a simulator on a free loopback port.
func startSim(opts sim.Options) (*sim.Server, error) {
	s := sim.New(opts)
	if err := s.Start("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("simulator: %w", err)
	}
	return s, nil
}

// churn is steady alarm traffic: Ongoing alarms at the start (in steady
// state: their ages and remaining durations drawn from the duration
// distribution), then starts as a Poisson process of StartsPerMinute, each
// lasting an exponentially distributed time of mean MeanDuration.
type churn struct {
	Ongoing         int           `json:"ongoing_at_start"`
	StartsPerMinute float64       `json:"starts_per_minute"`
	MeanDuration    time.Duration `json:"-"`
	MeanMinutes     float64       `json:"mean_duration_minutes"`
	// InvalidFraction is the share of alarms that end as invalid (-1).
	InvalidFraction float64 `json:"invalid_fraction"`
	// ChatterBursts are bursts of chattering at random times: one alarm
	// of a device and event code starts chatterStarts times, chatterGap
	// apart, and lasts chatterLength each time.
	ChatterBursts int `json:"chatter_bursts,omitempty"`
}

// A chattering burst: 3 starts within a minute (ISA-18.2 chattering).
const (
	chatterStarts = 3
	chatterGap    = 20 * time.Second
	chatterLength = 5 * time.Second
	chatterCode   = "BENCH-CHATTER"
)

// plannedAlarm is one alarm of a scenario, scheduled identically on every
// simulator so that the three systems see the same alarms at the same times.
type plannedAlarm struct {
	Device   string
	Level    int
	Occurred time.Time
	// End is the recovery time.
	End     time.Time
	Invalid bool
	// Code is the event code; empty lets the simulator pick one the device
	// can raise.
	Code string
}

// levelWeights are the relative frequencies of levels 0 (urgent) to 3
// (minor), the simulator's default.
var levelWeights = [4]float64{1, 2, 3, 4}

func pickLevel(rng *rand.Rand) int {
	r := rng.Float64() * (levelWeights[0] + levelWeights[1] + levelWeights[2] + levelWeights[3])
	for l := range 3 {
		if r < levelWeights[l] {
			return l
		}
		r -= levelWeights[l]
	}
	return 3
}

// expDuration draws an exponentially distributed duration of the given
// mean, at least a second, truncated to the millisecond the upstream keeps.
func expDuration(rng *rand.Rand, mean time.Duration) time.Duration {
	d := time.Duration(rng.ExpFloat64() * float64(mean))
	return max(d, time.Second).Truncate(time.Millisecond)
}

// planChurn draws the alarms of c from t0 to until on devices.
func planChurn(rng *rand.Rand, devices []string, t0, until time.Time, c churn) []plannedAlarm {
	t0 = t0.Truncate(time.Millisecond)
	var plan []plannedAlarm
	alarm := func(occ, end time.Time) plannedAlarm {
		return plannedAlarm{
			Device:   devices[rng.IntN(len(devices))],
			Level:    pickLevel(rng),
			Occurred: occ,
			End:      end,
			Invalid:  rng.Float64() < c.InvalidFraction,
		}
	}
	for range c.Ongoing {
		plan = append(plan, alarm(t0.Add(-expDuration(rng, c.MeanDuration)), t0.Add(expDuration(rng, c.MeanDuration))))
	}
	if c.StartsPerMinute > 0 {
		gap := float64(time.Minute) / c.StartsPerMinute
		for t := t0.Add(time.Duration(rng.ExpFloat64() * gap)).Truncate(time.Millisecond); !t.After(until); {
			plan = append(plan, alarm(t, t.Add(expDuration(rng, c.MeanDuration))))
			t = t.Add(time.Duration(rng.ExpFloat64() * gap)).Truncate(time.Millisecond)
		}
	}
	for range c.ChatterBursts {
		first := t0.Add(time.Duration(rng.Int64N(int64(until.Sub(t0))))).Truncate(time.Millisecond)
		a := alarm(first, first)
		a.Code = chatterCode
		for i := range chatterStarts {
			a.Occurred = first.Add(time.Duration(i) * chatterGap)
			a.End = a.Occurred.Add(chatterLength)
			plan = append(plan, a)
		}
	}
	return plan
}

// schedule registers plan on s and returns the originIds, in plan order.
func schedule(s *sim.Server, plan []plannedAlarm) ([]string, error) {
	ids := make([]string, len(plan))
	for i, p := range plan {
		id, err := s.Schedule(sim.Scheduled{
			Alarm:   sim.AlarmSpec{DeviceSN: p.Device, Level: p.Level, EventCode: p.Code, OccurredAt: p.Occurred},
			StartAt: p.Occurred,
			EndAt:   p.End,
			Invalid: p.Invalid,
		})
		if err != nil {
			return nil, fmt.Errorf("simulator: scheduling alarm %d: %w", i, err)
		}
		ids[i] = id
	}
	return ids, nil
}

// deviceSNs returns the serial numbers of the simulated fleet.
func deviceSNs(s *sim.Server) []string {
	devs := s.Fleet().Devices
	sns := make([]string, len(devs))
	for i, d := range devs {
		sns[i] = d.SN
	}
	return sns
}
