package main

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/opendata/sim"
)

func TestSimulateMisbehaviourFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"every mode", []string{"--listen", "127.0.0.1:0", "--clock-offset", "-2m", "--device-clock-offset", "DEV=8h",
			"--skewed-devices", "2", "--ingest-lag", "3m", "--ingest-lag-share", "0.5", "--page-cap", "100",
			"--total-offset", "2", "--device-list-limit", "10", "--filter-on-recovery", "--ignore-levels",
			"--pad-records", "1000"}, 2, `no device "DEV"`},
		{"bad pair", []string{"--device-clock-offset", "8h"}, 2, `"8h": want SN=DURATION`},
		{"bad duration", []string{"--offline-device", "X=soon"}, 2, `"soon" is not a duration`},
		{"negative cap", []string{"--page-cap", "-1"}, 2, "--page-cap is out of range"},
		{"share of one", []string{"--ingest-lag-share", "1"}, 2, "--ingest-lag-share is out of range"},
		{"skew share over one", []string{"--device-skew-share", "1.5"}, 2, "--device-skew-share is out of range"},
		{"offset not a duration", []string{"--clock-offset", "soon"}, 2, `invalid value "soon" for flag -clock-offset`},
		{"lag not a duration", []string{"--ingest-lag", "3"}, 2, `invalid value "3" for flag -ingest-lag`},
		{"negative lag", []string{"--ingest-lag", "-1m"}, 2, "--ingest-lag is out of range"},
		{"negative skewed devices", []string{"--skewed-devices", "-1"}, 2, "--skewed-devices is out of range"},
		{"negative list limit", []string{"--device-list-limit", "-1"}, 2, "--device-list-limit is out of range"},
		{"negative padding", []string{"--pad-records", "-1"}, 2, "--pad-records is out of range"},
		{"padding not a number", []string{"--pad-records", "60MiB"}, 2, `invalid value "60MiB" for flag -pad-records`},
		{"offline device unknown", []string{"--listen", "127.0.0.1:0", "--offline-device", "X=1m"}, 2, `--offline-device: sim: no device "X"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errs bytes.Buffer
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if code := cmdSimulate(ctx, tc.args, &out, &errs); code != tc.code || !strings.Contains(errs.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errs.String(), tc.code, tc.want)
			}
		})
	}
	t.Run("runs with every mode", func(t *testing.T) {
		t.Parallel()
		var out, errs bytes.Buffer
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		args := []string{"--listen", "127.0.0.1:0", "--clock-offset", "-2m", "--skewed-devices", "2",
			"--ingest-lag", "3m", "--page-cap", "100", "--total-offset", "2", "--device-list-limit", "10",
			"--filter-on-recovery", "--ignore-levels", "--pad-records", "1000"}
		if code := cmdSimulate(ctx, args, &out, &errs); code != 0 || !strings.Contains(out.String(), "export RELAY_BASE_URL=") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errs.String())
		}
	})
}

func TestSimulateFlagsReachTheSimulator(t *testing.T) {
	t.Parallel()
	args := []string{"--clock-offset", "-2m", "--device-clock-offset", "INV1=8h", "--device-clock-offset", "INV2=-30s",
		"--skewed-devices", "2", "--device-skew", "-1h", "--device-skew-share", "0.1", "--ingest-lag", "3m", "--ingest-lag-share", "0.5",
		"--offline-device", "INV3=10m", "--page-cap", "100", "--total-offset", "-2", "--device-list-limit", "10",
		"--filter-on-recovery", "--ignore-levels", "--pad-records", "120000"}
	var errs bytes.Buffer
	f, code, ok := parseSimulate(args, &errs)
	if !ok {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	want := sim.Hostile{ClockOffset: -2 * time.Minute, DeviceClockSkew: -time.Hour, DeviceClockSkewShare: 0.1, IngestLag: 3 * time.Minute, IngestLagShare: 0.5, PageCap: 100,
		TotalOffset: -2, DeviceSNListLimit: 10, FilterOnRecovery: true, IgnoreLevels: true, PadRecords: 120000}
	if !reflect.DeepEqual(f.opts.Hostile, want) {
		t.Errorf("Hostile = %+v; want %+v", f.opts.Hostile, want)
	}
	for _, c := range []struct{ what, got, want string }{
		{"--device-clock-offset", f.devOffsets.String(), "INV1=8h0m0s,INV2=-30s"},
		{"--offline-device", f.offline.String(), "INV3=10m0s"},
		{"--skewed-devices and --device-skew", fmt.Sprint(f.skewed, f.skew), "2 -1h0m0s"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s; want %s", c.what, c.got, c.want)
		}
	}
	if f, _, _ := parseSimulate(nil, &errs); !reflect.DeepEqual(f.opts.Hostile, sim.Hostile{}) || f.skewed != 0 ||
		len(f.offline) != 0 || len(f.devOffsets) != 0 {
		t.Errorf("without flags the simulator misbehaves: %+v", f)
	}
}
