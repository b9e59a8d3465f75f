package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// amBinaryEnv names an Alertmanager binary for TestAlertmanagerDeliversEveryAlert.
const amBinaryEnv = "RELAYBENCH_ALERTMANAGER"

// TestAlertmanagerDeliversEveryAlert runs the reference on the binary that
// RELAYBENCH_ALERTMANAGER names, and is skipped without one.
func TestAlertmanagerDeliversEveryAlert(t *testing.T) {
	bin := os.Getenv(amBinaryEnv)
	if bin == "" {
		t.Skipf("set %s to an Alertmanager binary (docs/performance.md) to run the reference", amBinaryEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := runAlertmanager(ctx, bin, t.TempDir(), 1001, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if res.Alerts != 1001 || res.PerSec <= 0 || res.Version == "" || res.PeakRSS == 0 {
		t.Fatalf("result = %+v, want 1001 alerts at a positive rate, a version and a peak RSS", res)
	}
}

func TestAlertBatchesCarryEveryAlarmWithAKilobyteOfAnnotations(t *testing.T) {
	bodies, err := alertBatches(1001)
	if err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 3 {
		t.Fatalf("%d batches, want 3 of at most %d", len(bodies), amBatch)
	}
	ids := map[string]bool{}
	for _, b := range bodies {
		var alerts []struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
			StartsAt    time.Time         `json:"startsAt"`
		}
		if err := json.Unmarshal(b, &alerts); err != nil {
			t.Fatal(err)
		}
		for _, a := range alerts {
			ids[a.Labels[amIDLabel]] = true
			size := 0
			for k, v := range a.Annotations {
				size += len(k) + len(v)
			}
			if size < 900 || a.Labels["alertname"] == "" || a.StartsAt.IsZero() {
				t.Fatalf("alert %v: %d bytes of annotations, want about 1 KB, an alertname and a start", a.Labels, size)
			}
		}
	}
	if len(ids) != 1001 || ids[""] {
		t.Fatalf("%d distinct %s labels, want 1001", len(ids), amIDLabel)
	}
}

func TestAlertmanagerVersionReadsTheBinarysVersion(t *testing.T) {
	dir := t.TempDir()
	script := func(name, out string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho '"+out+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx := context.Background()
	v, err := alertmanagerVersion(ctx, script("am", "alertmanager, version 0.34.2 (branch: , revision: unknown)"))
	if err != nil || v != "0.34.2" {
		t.Fatalf("version = %q, %v; want 0.34.2", v, err)
	}
	for _, out := range []string{"alertmanager, version  (branch: , revision: unknown)", "nats-server: v2.15.2"} {
		if _, err := alertmanagerVersion(ctx, script("other", out)); err == nil || !strings.Contains(err.Error(), "not an Alertmanager version") {
			t.Fatalf("%q: err = %v, want one saying it is not an Alertmanager version", out, err)
		}
	}
	if _, err := alertmanagerVersion(ctx, filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing binary gave no error")
	}
}

// TestReadmeQuotesTheAlertmanagerAnchor checks that the figure the report
// prints without --alertmanager is the one docs/performance.md
// gives, with its date and version.
func TestReadmeQuotesTheAlertmanagerAnchor(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "performance.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(readme)
	for _, want := range []string{
		"measured on " + amAnchor.Date + " on this machine",
		"| Alertmanager " + amAnchor.Version + ", 20,000 alerts to the local receiver | " + groupThousands(int64(amAnchor.PerSec)) + " notifications/s |",
		"v=v" + amAnchor.Version + "\n",
	} {
		if !strings.Contains(md, want) {
			t.Fatalf("docs/performance.md does not say %q: keep amAnchor and the Performance section's anchor the same", want)
		}
	}
}
