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

// simulateFlags is what the flags of relay simulate ask for.
type simulateFlags struct {
	listen           string
	opts             sim.Options
	history, ongoing int
	// skewed devices, the first of the fleet, stamp their alarms skew off.
	skewed int
	skew   time.Duration
	// skewShare of the devices, chosen by hash, stamp their alarms skew off.
	skewShare float64
	// offline devices reconnect after their duration; devOffsets are the
	// clock errors of single devices.
	offline, devOffsets snDurations
}

// parseSimulate reads the flags of relay simulate. When it returns false,
// the command ends with the code it returns.
func parseSimulate(args []string, stderr io.Writer) (simulateFlags, int, bool) {
	fs := flag.NewFlagSet("relay simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := simulateFlags{offline: snDurations{}, devOffsets: snDurations{}}
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8090", "address to serve on; port 0 picks a free one")
	fs.Int64Var(&f.opts.Seed, "seed", 1, "seed of the generated fleet, alarms and data")
	fs.IntVar(&f.opts.Stations, "stations", 3, "stations in the fleet, each with 2 systems of 4 devices")
	fs.IntVar(&f.opts.RateLimit, "rate-limit", 10, "requests per minute per IP before A0501; negative turns the limit off")
	churn := &f.opts.Churn
	churn.InvalidFraction = 0.1
	fs.Float64Var(&churn.StartsPerMinute, "churn", 2, "alarms started per minute on random devices")
	fs.DurationVar(&churn.MeanDuration, "mean-duration", 5*time.Minute, "mean time from an alarm's start to its end")
	fs.IntVar(&f.ongoing, "ongoing", 5, "alarms ongoing from the start")
	fs.IntVar(&f.history, "history", 30, "alarms that started and ended in the last 24 h")
	h := &f.opts.Hostile
	fs.DurationVar(&h.ClockOffset, "clock-offset", 0, "misbehave: the whole upstream's clock runs this far ahead (negative: behind): its Date header and every time it writes, device stamps included")
	fs.Var(f.devOffsets, "device-clock-offset", "misbehave: `SN=DURATION`, that device stamps its alarms with a clock this far off; repeatable")
	fs.IntVar(&f.skewed, "skewed-devices", 0, "misbehave: the first N devices of the fleet stamp their alarms --device-skew off")
	fs.DurationVar(&f.skew, "device-skew", 8*time.Hour, "clock error of the skewed devices, either way, while the Date header stays right (8h: local time UTC+8 stamped as UTC; -2m: a data logger 2 minutes behind)")
	fs.Float64Var(&f.skewShare, "device-skew-share", 0, "misbehave: this share of the devices (chosen by the seed; 1 means all) stamp their alarms --device-skew off")
	fs.DurationVar(&h.IngestLag, "ingest-lag", 0, "misbehave: alarms (and recoveries) are listed this long after they happen; one over within the lag first appears already over")
	fs.Float64Var(&h.IngestLagShare, "ingest-lag-share", 0, "share of devices that lag, 0 < share < 1; 0 means all")
	fs.Var(f.offline, "offline-device", "misbehave: `SN=DURATION`, that device is offline for that long from the start, then uploads its backlog; repeatable")
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
		return f, code, false
	}
	if f.opts.RateLimit == 0 || f.opts.Stations < 1 || churn.StartsPerMinute < 0 || churn.MeanDuration <= 0 || f.ongoing < 0 || f.history < 0 {
		fmt.Fprintln(stderr, "relay simulate: --rate-limit must not be 0, --stations must be positive, --churn, --ongoing and --history must not be negative, --mean-duration must be positive")
		return f, 2, false
	}
	for _, c := range []struct {
		flag string
		bad  bool
	}{
		{"--skewed-devices", f.skewed < 0},
		{"--device-skew-share", f.skewShare < 0 || f.skewShare > 1},
		{"--ingest-lag", h.IngestLag < 0},
		{"--ingest-lag-share", h.IngestLagShare < 0 || h.IngestLagShare >= 1},
		{"--page-cap", h.PageCap < 0},
		{"--device-list-limit", h.DeviceSNListLimit < 0},
		{"--pad-records", h.PadRecords < 0},
	} {
		if c.bad {
			fmt.Fprintf(stderr, "relay simulate: %s is out of range (durations and counts must not be negative; --ingest-lag-share is from 0 to below 1, --device-skew-share from 0 to 1)\n", c.flag)
			return f, 2, false
		}
	}
	if f.skewShare > 0 {
		f.opts.Hostile.DeviceClockSkew, f.opts.Hostile.DeviceClockSkewShare = f.skew, f.skewShare
	}
	return f, 0, true
}

func cmdSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, code, ok := parseSimulate(args, stderr)
	if !ok {
		return code
	}
	f.opts.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	s := sim.New(f.opts)
	devices := s.Fleet().Devices
	for i := 0; i < f.skewed && i < len(devices); i++ {
		_ = s.SetDeviceClockOffset(devices[i].SN, f.skew)
	}
	for sn, d := range f.offline {
		if err := s.SetDeviceOffline(sn, true); err != nil {
			fmt.Fprintf(stderr, "relay simulate: --offline-device: %v\n", err)
			return 2
		}
		back := time.AfterFunc(d, func() { _ = s.SetDeviceOffline(sn, false) })
		defer back.Stop()
	}
	for sn, d := range f.devOffsets {
		if err := s.SetDeviceClockOffset(sn, d); err != nil {
			fmt.Fprintf(stderr, "relay simulate: --device-clock-offset: %v\n", err)
			return 2
		}
	}
	if f.history > 0 {
		s.Backfill(f.history, 24*time.Hour)
	}
	if f.ongoing > 0 {
		s.Storm(f.ongoing)
	}
	if err := s.Start(f.listen); err != nil {
		fmt.Fprintf(stderr, "relay simulate: listening on %s: %v\n", f.listen, err)
		return 1
	}
	id, secret := s.Credentials()
	fl := s.Fleet()
	fmt.Fprintf(stdout, "# Open Data Service simulator on %s: %d stations, %d systems, %d devices; seed %d; %d requests/min\n",
		s.URL(), len(fl.Stations), len(fl.Systems), len(fl.Devices), f.opts.Seed, f.opts.RateLimit)
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
