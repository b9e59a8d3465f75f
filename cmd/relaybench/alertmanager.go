package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/relay-energy/relay/cmd/relaybench/internal/procmem"
)

// amIDLabel is the label that carries an alert's originId, by which the
// receiver counts distinct alerts.
const amIDLabel = "origin_id"

// amConfig is Alertmanager's configuration for the reference figure: one
// webhook receiver at the bench's receiver (%q), every alert its own group
// ("..." groups by every label), sent at once (group_wait 0s) and not again
// within the run.
const amConfig = `route:
  receiver: bench
  group_by: ['...']
  group_wait: 0s
  group_interval: 1h
  repeat_interval: 24h
receivers:
  - name: bench
    webhook_configs:
      - url: %q
        send_resolved: false
`

// amAnchor is the Alertmanager figure docs/performance.md quotes, which the
// report prints when relaybench runs without --alertmanager.
var amAnchor = amResult{
	Version: "0.34.2",
	PerSec:  2848,
	Date:    "2026-11-23",
}

// amResult is what one Alertmanager run measured: notifications per second
// from the first post of an alert to the receiver's getting the last
// distinct alert.
type amResult struct {
	Version    string        `json:"version"`
	Alerts     int           `json:"alerts"`
	Elapsed    time.Duration `json:"-"`
	ElapsedSec float64       `json:"elapsed_s,omitempty"`
	PerSec     float64       `json:"notifications_per_s"`
	// PeakRSS is the Alertmanager process's VmHWM at the end of the run.
	PeakRSS uint64 `json:"peak_rss,omitempty"`
	// Date is set on the anchor of docs/performance.md only: when it was
	// measured.
	Date string `json:"date,omitempty"`
}

// amBatch is how many alerts one post to /api/v2/alerts carries, as many as
// one Apply of the relay's figure gets.
const amBatch = pipelineBatch

// runAlertmanager starts the Alertmanager binary bin with its storage in a
// new directory under dir and a free port on 127.0.0.1, posts the starts of
// alarms synthetic alarms to its API, and measures until the receiver got
// each of them.
func runAlertmanager(ctx context.Context, bin, dir string, alarms int, log *slog.Logger) (amResult, error) {
	version, err := alertmanagerVersion(ctx, bin)
	if err != nil {
		return amResult{}, err
	}
	bodies, err := alertBatches(alarms)
	if err != nil {
		return amResult{}, err
	}
	recv, err := startReceiver("/alertmanager", alarms, alertIDs)
	if err != nil {
		return amResult{}, err
	}
	defer recv.close()
	am, err := startAlertmanager(ctx, bin, dir, recv.url, log)
	if err != nil {
		return amResult{}, err
	}
	defer am.stop()
	client := &http.Client{Timeout: time.Minute}
	began := time.Now()
	for _, body := range bodies {
		if err := am.post(ctx, client, body); err != nil {
			return amResult{}, err
		}
	}
	last, err := recv.wait(ctx, 5*time.Minute)
	if err != nil {
		return amResult{}, errors.Join(err, am.exited())
	}
	res := amResult{Version: version, Alerts: alarms, Elapsed: last.Sub(began)}
	res.ElapsedSec = res.Elapsed.Seconds()
	res.PerSec = float64(alarms) / res.Elapsed.Seconds()
	if st, err := procmem.ReadStatus(fmt.Sprintf("/proc/%d/status", am.cmd.Process.Pid)); err == nil {
		res.PeakRSS = st.HWM
	}
	return res, nil
}

// amVersionRE finds the version in the first line of alertmanager --version.
var amVersionRE = regexp.MustCompile(`version (\S+)`)

// alertmanagerVersion returns the version bin reports.
func alertmanagerVersion(ctx context.Context, bin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w (is it an Alertmanager binary?)", bin, err)
	}
	line, _, _ := bytes.Cut(out, []byte("\n"))
	m := amVersionRE.FindSubmatch(line)
	if !bytes.Contains(line, []byte("alertmanager")) || m == nil {
		return "", fmt.Errorf("%s --version says %q, not an Alertmanager version: build it as docs/performance.md says", bin, line)
	}
	return string(m[1]), nil
}

// alertBatches returns the bodies of the posts to /api/v2/alerts: the starts
// of alarms synthetic alarms, their fields as labels and their upstream
// record (about 1 KB) as an annotation.
func alertBatches(alarms int) ([][]byte, error) {
	all, err := syntheticAlarms(alarms, time.Now().Add(-time.Hour))
	if err != nil {
		return nil, err
	}
	type postable struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
		StartsAt    time.Time         `json:"startsAt"`
	}
	var out [][]byte
	for i := 0; i < len(all); i += amBatch {
		batch := make([]postable, 0, amBatch)
		for _, a := range all[i:min(i+amBatch, len(all))] {
			batch = append(batch, postable{
				Labels: map[string]string{
					"alertname": a.EventCode, amIDLabel: a.OriginID, "tenant_id": a.TenantID,
					"station_id": a.StationID, "system_id": a.SystemID, "device_id": a.DeviceID,
					"device_sn": a.DeviceSN, "level": strconv.Itoa(a.Level), "event_type": a.EventType,
				},
				Annotations: map[string]string{
					"summary": a.EventDesc + " on " + a.DeviceName + " at " + a.StationName,
					"record":  string(a.Raw),
				},
				StartsAt: a.OccurredAt,
			})
		}
		b, err := json.Marshal(batch)
		if err != nil {
			return nil, fmt.Errorf("alerts: %w", err)
		}
		out = append(out, b)
	}
	return out, nil
}

// alertmanager is a running Alertmanager process.
type alertmanager struct {
	cmd    *exec.Cmd
	url    string
	stderr *tailWriter
	// waited is closed when the process exited; err is then its error.
	waited chan struct{}
	err    error
}

// startAlertmanager starts bin with amConfig pointing at receiverURL, its
// storage in a new directory under dir, its API on a free port of
// 127.0.0.1 and clustering off, and waits until it is ready.
func startAlertmanager(ctx context.Context, bin, dir, receiverURL string, log *slog.Logger) (*alertmanager, error) {
	amDir, err := os.MkdirTemp(dir, "alertmanager-")
	if err != nil {
		return nil, fmt.Errorf("storage directory: %w", err)
	}
	conf := filepath.Join(amDir, "alertmanager.yml")
	if err := os.WriteFile(conf, fmt.Appendf(nil, amConfig, receiverURL), 0o644); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	am := &alertmanager{url: "http://" + addr, stderr: &tailWriter{max: 4096}, waited: make(chan struct{})}
	am.cmd = exec.Command(bin,
		"--config.file="+conf,
		"--storage.path="+filepath.Join(amDir, "data"),
		"--web.listen-address="+addr,
		"--cluster.listen-address=",
		"--log.level=warn",
	)
	am.cmd.Stdout, am.cmd.Stderr = am.stderr, am.stderr
	if err := am.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		am.err = am.cmd.Wait()
		close(am.waited)
	}()
	log.Debug("alertmanager started", "pid", am.cmd.Process.Pid, "url", am.url)
	if err := am.ready(ctx, 30*time.Second); err != nil {
		am.stop()
		return nil, err
	}
	return am, nil
}

// ready waits until /-/ready answers 200.
func (am *alertmanager) ready(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, am.url+"/-/ready", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-am.waited:
			return am.exited()
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s; its output ends: %s", limit, am.stderr)
		}
	}
}

// post posts one batch of alerts.
func (am *alertmanager) post(ctx context.Context, client *http.Client, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, am.url+"/api/v2/alerts", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("posting alerts: %w", errors.Join(err, am.exited()))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("posting alerts: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// exited returns an error saying the process exited and what it wrote
// last, or nil while it runs.
func (am *alertmanager) exited() error {
	select {
	case <-am.waited:
		return fmt.Errorf("alertmanager exited (%v); its output ends: %s", am.err, am.stderr)
	default:
		return nil
	}
}

// stop ends the process, with SIGTERM and after 10 s SIGKILL, and waits for
// it.
func (am *alertmanager) stop() {
	_ = am.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-am.waited:
	case <-time.After(10 * time.Second):
		_ = am.cmd.Process.Kill()
		<-am.waited
	}
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// String returns what was kept, quoted.
func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strconv.Quote(string(bytes.TrimSpace(t.b)))
}

// amReference is the Alertmanager figure the report puts beside the relay's
// webhook figure: measured in the same run with --alertmanager, else the
// anchor of docs/performance.md.
type amReference struct {
	// SameRun says Alertmanager was measured in this run; otherwise the
	// figure is the anchor of docs/performance.md, measured on Date.
	SameRun bool   `json:"same_run"`
	Version string `json:"version"`
	Date    string `json:"date,omitempty"`
	// PerSec is Alertmanager's notifications per second (median over the
	// runs), PeakRSS its VmHWM in MiB (same run only).
	PerSec  num `json:"notifications_per_s"`
	PeakRSS num `json:"peak_rss_mib"`
	// Relay is the relay's webhook figure (median over the runs), and
	// Ratio the relay's over Alertmanager's: the median of the runs' ratios
	// when measured in the same run, else the relay's median over the
	// anchor.
	Relay num `json:"relay_events_per_s"`
	Ratio num `json:"relay_vs_alertmanager"`
}

// alertmanagerReference builds the reference of runs.
func alertmanagerReference(runs []runFigures) *amReference {
	var relay, am, ratio, rss []float64
	version := ""
	for i := range runs {
		r := &runs[i]
		relay = append(relay, r.Webhook.EventsPerSec)
		if a := r.Alertmanager; a != nil && a.PerSec > 0 {
			version = a.Version
			am = append(am, a.PerSec)
			ratio = append(ratio, r.Webhook.EventsPerSec/a.PerSec)
			rss = append(rss, float64(a.PeakRSS)/mib)
		}
	}
	ref := &amReference{Relay: num(median(relay))}
	if len(am) == 0 {
		ref.Version, ref.Date = amAnchor.Version, amAnchor.Date
		ref.PerSec, ref.PeakRSS = num(amAnchor.PerSec), num(math.NaN())
		ref.Ratio = num(median(relay) / amAnchor.PerSec)
		return ref
	}
	ref.SameRun, ref.Version = true, version
	ref.PerSec, ref.PeakRSS, ref.Ratio = num(median(am)), num(median(rss)), num(median(ratio))
	return ref
}

// writeAlertmanager writes the reference as a small table after the main
// one.
func writeAlertmanager(w io.Writer, ref *amReference) {
	source := "measured in this run"
	if !ref.SameRun {
		source = "the anchor of docs/performance.md of " + ref.Date + " (20,000 alerts), not this run (measure it in the run with --alertmanager)"
	}
	fmt.Fprintf(w, "\nThe webhook figure beside Prometheus Alertmanager (the same alarms, each its own group with group_wait 0s, "+
		"to the same kind of local receiver), Alertmanager %s:\n\n", source)
	io.WriteString(w, "| system | delivered | relay vs Alertmanager |\n|---|---|---|\n")
	fmt.Fprintf(w, "| relay: store + route + alarm management + signed webhook sink | %s | %.2f× |\n",
		formatValue(unitRate, ref.Relay), float64(ref.Ratio))
	mem := ""
	if !math.IsNaN(float64(ref.PeakRSS)) {
		mem = fmt.Sprintf(", peak %.0f MiB VmHWM", float64(ref.PeakRSS))
	}
	fmt.Fprintf(w, "| Alertmanager %s | %s notifications/s%s | 1.00× |\n",
		ref.Version, groupThousands(int64(math.Round(float64(ref.PerSec)))), mem)
}
