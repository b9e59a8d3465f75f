package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/opendata/sim"
)

func cmdSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("relay simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8090", "address to serve on; port 0 picks a free one")
	seed := fs.Int64("seed", 1, "seed of the generated fleet, alarms and data")
	stations := fs.Int("stations", 3, "stations in the fleet, each with 2 systems of 4 devices")
	rate := fs.Int("rate-limit", 10, "requests per minute per IP before A0501; negative turns the limit off")
	churn := fs.Float64("churn", 2, "alarms started per minute on random devices")
	duration := fs.Duration("mean-duration", 5*time.Minute, "mean time from an alarm's start to its end")
	ongoing := fs.Int("ongoing", 5, "alarms ongoing from the start")
	history := fs.Int("history", 30, "alarms that started and ended in the last 24 h")
	var h sim.Hostile
	fs.DurationVar(&h.ClockOffset, "clock-offset", 0, "misbehave: the whole upstream's clock runs this far ahead (negative: behind)")
	devOffsets := snDurations{}
	fs.Var(devOffsets, "device-clock-offset", "misbehave: `SN=DURATION`, that device stamps its alarms with a clock this far off; repeatable")
	skewed := fs.Int("skewed-devices", 0, "misbehave: the first N devices of the fleet stamp their alarms --device-skew off")
	skew := fs.Duration("device-skew", 8*time.Hour, "clock error of the --skewed-devices (8h: local time UTC+8 stamped as UTC)")
	fs.DurationVar(&h.IngestLag, "ingest-lag", 0, "misbehave: alarms (and recoveries) are listed this long after they happen; one over within the lag first appears already over")
	fs.Float64Var(&h.IngestLagShare, "ingest-lag-share", 0, "share of devices that lag, 0 < share < 1; 0 means all")
	offline := snDurations{}
	fs.Var(offline, "offline-device", "misbehave: `SN=DURATION`, that device is offline for that long from the start, then uploads its backlog; repeatable")
	fs.IntVar(&h.PageCap, "page-cap", 0, "misbehave: serve at most this many alarms per page, whatever size asks")
	fs.IntVar(&h.TotalOffset, "total-offset", 0, "misbehave: add this to every alarm list's total (rows never served, or missing)")
	fs.IntVar(&h.DeviceSNListLimit, "device-list-limit", 0, "misbehave: refuse (A0410) an alarm query naming more devices than this")
	fs.BoolVar(&h.FilterOnRecovery, "filter-on-recovery", false, "misbehave: startTime/endTime of recovered-alarm queries filter on the recovery time")
	fs.BoolVar(&h.IgnoreLevels, "ignore-levels", false, "misbehave: ignore the eventLevels filter")
	fs.IntVar(&h.PadRecords, "pad-records", 0, "misbehave: give every alarm record a payload of this many bytes (huge answers)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: relay simulate [flags]\n  the Open Data Service simulator on its own, until interrupted")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *rate == 0 || *stations < 1 || *churn < 0 || *duration <= 0 || *ongoing < 0 || *history < 0 {
		fmt.Fprintln(stderr, "relay simulate: --rate-limit must not be 0, --stations must be positive, --churn, --ongoing and --history must not be negative, --mean-duration must be positive")
		return 2
	}
	for _, c := range []struct {
		flag string
		bad  bool
	}{
		{"--skewed-devices", *skewed < 0},
		{"--ingest-lag", h.IngestLag < 0},
		{"--ingest-lag-share", h.IngestLagShare < 0 || h.IngestLagShare >= 1},
		{"--page-cap", h.PageCap < 0},
		{"--device-list-limit", h.DeviceSNListLimit < 0},
		{"--pad-records", h.PadRecords < 0},
	} {
		if c.bad {
			fmt.Fprintf(stderr, "relay simulate: %s is out of range (durations and counts must not be negative; a share is from 0 to below 1)\n", c.flag)
			return 2
		}
	}
	s := sim.New(sim.Options{
		Seed:      *seed,
		Stations:  *stations,
		RateLimit: *rate,
		Churn:     sim.Churn{StartsPerMinute: *churn, MeanDuration: *duration, InvalidFraction: 0.1},
		Logger:    slog.New(slog.NewTextHandler(stderr, nil)),
		Hostile:   h,
	})
	devices := s.Fleet().Devices
	for i := 0; i < *skewed && i < len(devices); i++ {
		_ = s.SetDeviceClockOffset(devices[i].SN, *skew)
	}
	for sn, d := range offline {
		if err := s.SetDeviceOffline(sn, true); err != nil {
			fmt.Fprintf(stderr, "relay simulate: --offline-device: %v\n", err)
			return 2
		}
		time.AfterFunc(d, func() { _ = s.SetDeviceOffline(sn, false) })
	}
	for sn := range devOffsets {
		if err := s.SetDeviceClockOffset(sn, devOffsets[sn]); err != nil {
			fmt.Fprintf(stderr, "relay simulate: --device-clock-offset: %v\n", err)
			return 2
		}
	}
	if *history > 0 {
		s.Backfill(*history, 24*time.Hour)
	}
	if *ongoing > 0 {
		s.Storm(*ongoing)
	}
	if err := s.Start(*listen); err != nil {
		fmt.Fprintf(stderr, "relay simulate: listening on %s: %v\n", *listen, err)
		return 1
	}
	id, secret := s.Credentials()
	f := s.Fleet()
	fmt.Fprintf(stdout, "# Open Data Service simulator on %s: %d stations, %d systems, %d devices; seed %d; %d requests/min\n",
		s.URL(), len(f.Stations), len(f.Systems), len(f.Devices), *seed, *rate)
	fmt.Fprintf(stdout, "export RELAY_BASE_URL=%s RELAY_APP_ID=%s RELAY_APP_SECRET=%s\n", s.URL(), id, secret)
	<-ctx.Done()
	if err := s.Close(); err != nil {
		fmt.Fprintf(stderr, "relay simulate: shutting down: %v\n", err)
		return 1
	}
	return 0
}

// snDurations is a repeatable flag of SN=DURATION pairs.
type snDurations map[string]time.Duration

func (m snDurations) String() string {
	var parts []string
	for sn, d := range m {
		parts = append(parts, sn+"="+d.String())
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func (m snDurations) Set(v string) error {
	sn, ds, ok := strings.Cut(v, "=")
	if !ok || sn == "" {
		return fmt.Errorf("%q: want SN=DURATION, such as INV0001=-2m", v)
	}
	d, err := time.ParseDuration(ds)
	if err != nil {
		return fmt.Errorf("%q: %q is not a duration such as -2m or 8h", v, ds)
	}
	m[sn] = d
	return nil
}
