package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
