package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/store"
)

// The relay binary is built once per test run, into a folder TestMain owns.
var (
	buildDir  string
	buildOnce sync.Once
	relayPath string
	buildErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "relay-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	buildDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// relayBinary returns the path of the relay binary, building it on first use.
func relayBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		// go test puts the go command of its own GOROOT first in PATH.
		goTool, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("finding the go command to build ./cmd/relay: %w", err)
			return
		}
		path := filepath.Join(buildDir, "relay")
		args := []string{"build", "-o", path}
		if raceEnabled {
			// Built as the tests are, the binary reuses the packages the
			// test build compiled (a non-race build compiles every
			// dependency again, minutes of a cold CI run), and its races
			// are caught too.
			args = append(args, "-race")
		}
		cmd := exec.Command(goTool, append(args, "github.com/relay-energy/relay/cmd/relay")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/relay: %w\n%s", err, out)
			return
		}
		relayPath = path
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return relayPath
}

// skipShort skips the long tests of this package under -short.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: runs the relay binary for many seconds; skipped with -short")
	}
}

// syncBuffer collects a process's output while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// lines returns the complete lines written so far.
func (s *syncBuffer) lines() []string {
	text := s.String()
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	} else {
		return nil
	}
	return strings.Split(text, "\n")
}

// relayProc is one run of the relay binary as a child process.
type relayProc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // cmd.Wait's result, set before done is closed
}

// startRelay runs `relay run` with exactly env as its environment. The
// process is killed when the test ends, if it still runs; if the test
// failed, the end of its log is written to the test log.
func startRelay(t *testing.T, name string, env map[string]string) *relayProc {
	t.Helper()
	p := &relayProc{t: t, name: name, done: make(chan struct{})}
	p.cmd = exec.Command(relayBinary(t), "run")
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	sort.Strings(p.cmd.Env)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			p.logTail(30)
		}
	})
	return p
}

func (p *relayProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// alive returns an error when the process has exited.
func (p *relayProc) alive() error {
	if p.exited() {
		return fmt.Errorf("%s exited unexpectedly: %v", p.name, p.err)
	}
	return nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *relayProc) kill() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !p.exited() {
		p.t.Fatalf("killing %s: %v", p.name, err)
	}
	<-p.done
}

// terminate sends SIGTERM and waits up to limit for the exit; it returns the
// exit code and how long the process took to exit.
func (p *relayProc) terminate(limit time.Duration) (int, time.Duration) {
	p.t.Helper()
	if err := p.alive(); err != nil {
		p.t.Fatal(err)
	}
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("SIGTERM to %s: %v", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(limit):
		p.t.Fatalf("%s did not exit within %s of SIGTERM", p.name, limit)
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(start)
}

// logTail writes the last n lines of the process's stderr to the test log.
func (p *relayProc) logTail(n int) {
	lines := p.stderr.lines()
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	p.t.Logf("last %d lines of %s's stderr:\n%s", len(lines), p.name, strings.Join(lines, "\n"))
}

// logLine is one JSON log line of the relay.
type logLine map[string]any

func (l logLine) str(key string) string {
	s, _ := l[key].(string)
	return s
}

// logLines parses the process's stderr, which RELAY_LOG_FORMAT=json makes
// one JSON object per line; a line that is not one is an error.
func (p *relayProc) logLines() ([]logLine, error) {
	var out []logLine
	for i, text := range p.stderr.lines() {
		var l logLine
		if err := json.Unmarshal([]byte(text), &l); err != nil {
			return out, fmt.Errorf("%s stderr line %d is not a JSON log line: %q", p.name, i+1, text)
		}
		out = append(out, l)
	}
	return out, nil
}

// opsAddr waits for the "relay started" line and returns the address of the
// ops endpoints it names (RELAY_LISTEN=127.0.0.1:0 picks a free port).
func (p *relayProc) opsAddr(timeout time.Duration) string {
	p.t.Helper()
	var addr string
	waitFor(p.t, p, timeout, p.name+" logs \"relay started\"", func() error {
		lines, _ := p.logLines()
		for _, l := range lines {
			if l.str("msg") == "relay started" && l.str("listen") != "" {
				addr = l.str("listen")
				return nil
			}
		}
		return errors.New("no \"relay started\" line with a listen address yet")
	})
	return addr
}

// waitFor polls cond every 100ms until it returns nil, and fails the test
// with cond's last error when timeout passes first, or at once when p (if
// not nil) has exited.
func waitFor(t *testing.T, p *relayProc, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if p != nil {
			if perr := p.alive(); perr != nil {
				t.Fatalf("waiting for %s: %v (last check: %v)", what, perr, err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not done after %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// httpGet fetches one ops endpoint and returns its status and body.
func httpGet(url string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// waitReady waits until /readyz answers 200.
func waitReady(t *testing.T, p *relayProc, addr string, timeout time.Duration) {
	t.Helper()
	waitFor(t, p, timeout, "/readyz to answer 200", func() error {
		code, body, err := httpGet("http://" + addr + "/readyz")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("HTTP %d: %s", code, strings.TrimSpace(body))
		}
		return nil
	})
}

// relayEnv is the environment every test's relay starts from: the
// simulator's credentials, the rate limit, a state file in dir, the rules
// file, JSON logs and ops endpoints on a free port.
func relayEnv(s *sim.Server, rate int, dir, rules string) map[string]string {
	appID, appSecret := s.Credentials()
	return map[string]string{
		"RELAY_BASE_URL":        s.URL(),
		"RELAY_APP_ID":          appID,
		"RELAY_APP_SECRET":      appSecret,
		"RELAY_RATE_LIMIT":      fmt.Sprint(rate),
		"RELAY_STATE_PATH":      filepath.Join(dir, "relay.db"),
		"RELAY_RULES":           rules,
		"RELAY_LISTEN":          "127.0.0.1:0",
		"RELAY_LOG_FORMAT":      "json",
		"RELAY_LOG_LEVEL":       "info",
		"RELAY_SHUTDOWN_GRACE":  "10s",
		"RELAY_CONFIRM_TIMEOUT": "10m",
		"RELAY_SWEEP_OVERLAP":   "2m",
	}
}

// writeRules writes a rules file into dir and returns its path.
func writeRules(t *testing.T, dir, text string) string {
	t.Helper()
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newSecret returns a random secret with prefix: "whsec_" gives a Standard
// Webhooks secret, base64 of 24 random bytes.
func newSecret(t *testing.T, prefix string) string {
	t.Helper()
	key := make([]byte, 24)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return prefix + base64.StdEncoding.EncodeToString(key)
}

// startSim starts a simulator on 127.0.0.1 for the test.
func startSim(t *testing.T, opts sim.Options) *sim.Server {
	t.Helper()
	s := sim.New(opts)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatalf("starting the simulator: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// streamMsg is one message stored in a JetStream stream.
type streamMsg struct {
	Seq     uint64
	Subject string
	Header  nats.Header
	Data    []byte
}

// msgID returns the message's Nats-Msg-Id, the event id.
func (m streamMsg) msgID() string { return m.Header.Get(nats.MsgIdHdr) }

// streamReader reads a JetStream stream back, over a connection of its own
// that survives server restarts.
type streamReader struct {
	js     jetstream.JetStream
	stream string
}

func newStreamReader(t *testing.T, url, stream string) *streamReader {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("connecting to NATS to read the stream: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &streamReader{js: js, stream: stream}
}

// count returns how many messages the stream holds; 0 before the relay has
// created it.
func (r *streamReader) count() (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := r.js.Stream(ctx, r.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", r.stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", r.stream, err)
	}
	return info.State.Msgs, nil
}

// all returns every message of the stream, in stream order.
func (r *streamReader) all() ([]streamMsg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := r.js.Stream(ctx, r.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", r.stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", r.stream, err)
	}
	want := info.State.Msgs
	if want == 0 {
		return nil, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{InactiveThreshold: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("stream %s: ordered consumer: %w", r.stream, err)
	}
	out := make([]streamMsg, 0, want)
	for uint64(len(out)) < want {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if errors.Is(err, nats.ErrNoResponders) && ctx.Err() == nil {
			// On a cluster, the consumer may not answer yet.
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stream %s: fetch: %w", r.stream, err)
		}
		n := 0
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				return nil, fmt.Errorf("stream %s: message metadata: %w", r.stream, err)
			}
			out = append(out, streamMsg{Seq: meta.Sequence.Stream, Subject: m.Subject(), Header: m.Headers(), Data: m.Data()})
			n++
		}
		if err := batch.Error(); err != nil && !(errors.Is(err, nats.ErrNoResponders) && ctx.Err() == nil) {
			return nil, fmt.Errorf("stream %s: fetch: %w", r.stream, err)
		}
		if n == 0 {
			// A cluster's consumer may answer its first fetches empty
			// while a loaded machine elects its leader; nothing for the
			// whole deadline is a failure.
			if ctx.Err() != nil {
				return nil, fmt.Errorf("stream %s: read %d of %d messages, then nothing more for 30s", r.stream, len(out), want)
			}
			continue
		}
	}
	return out, nil
}

// idsOf returns the Nats-Msg-Ids of msgs with how often each occurs.
func idsOf(msgs []streamMsg) map[string]int {
	ids := map[string]int{}
	for _, m := range msgs {
		ids[m.msgID()]++
	}
	return ids
}

// scrape reads /metrics.
func scrape(addr string) (map[string]*dto.MetricFamily, error) {
	code, body, err := httpGet("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("/metrics: HTTP %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(strings.NewReader(body))
}

// metricValue returns the value of the series of family name whose labels
// include labels: a counter's or gauge's value, a histogram's sample count.
// Several matching series are summed. ok is false when none matches.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (v float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		match := true
		for k, want := range labels {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == want {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		ok = true
		switch {
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		case m.Histogram != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			v += m.GetUntyped().GetValue()
		}
	}
	return v, ok
}

// checkStore opens the state file of a stopped relay and checks that every
// sink's outbox is empty and nothing was dead-lettered.
func checkStore(t *testing.T, path string, sinks []string) {
	t.Helper()
	st, err := store.Open(path, store.Options{LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("opening the stopped relay's store: %v", err)
	}
	defer st.Close()
	depth, err := st.Depth()
	if err != nil {
		t.Fatalf("outbox depth: %v", err)
	}
	for _, sink := range sinks {
		if _, ok := depth[sink]; !ok {
			t.Errorf("store has no outbox for sink %q (outboxes: %v)", sink, depth)
		}
	}
	for sink, n := range depth {
		if n != 0 {
			t.Errorf("outbox of sink %q holds %d entries after a clean stop, want 0", sink, n)
		}
		dead, err := st.DeadLetters(sink)
		if err != nil {
			t.Fatalf("dead letters of %q: %v", sink, err)
		}
		if len(dead) != 0 {
			t.Errorf("sink %q dead-lettered %d entries, want none; first: %s: %s", sink, len(dead), dead[0].EventID, dead[0].Reason)
		}
	}
}

// checkNoSecrets fails the test if any secret appears in the output.
func checkNoSecrets(t *testing.T, where, output string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(output, s) {
			t.Errorf("%s contains a secret (%d characters starting %q)", where, len(s), s[:min(4, len(s))])
		}
	}
}

// checkStopped checks a relay's log after a SIGTERM: no panic, the stop
// lines, and an empty outbox reported.
func checkStopped(t *testing.T, p *relayProc) {
	t.Helper()
	lines, err := p.logLines()
	if err != nil {
		t.Error(err)
	}
	var stopping, stopped bool
	for _, l := range lines {
		switch l.str("msg") {
		case "relay stopping: polling stopped, draining deliveries":
			stopping = true
		case "relay stopped":
			stopped = true
		}
	}
	if !stopping || !stopped {
		t.Errorf("%s log lacks the stop lines (stopping %v, stopped %v)", p.name, stopping, stopped)
	}
}

// expectedEvents returns, from the simulator's alarm history, the event ids
// the alarms ids imply: a start for every alarm that started, and an end or
// invalid for every alarm that ended so. Alarms not started yet imply none.
func expectedEvents(s *sim.Server, ids []string) (map[string]sim.Alarm, []string) {
	alarms := map[string]sim.Alarm{}
	var events []string
	for _, id := range ids {
		a, ok := s.Alarm(id)
		if !ok {
			continue
		}
		alarms[id] = a
		events = append(events, id+":start")
		switch a.Status {
		case sim.StatusEnded:
			events = append(events, id+":end")
		case sim.StatusInvalid:
			events = append(events, id+":invalid")
		}
	}
	return alarms, events
}

// diffIDs describes how the set got differs from the set want.
func diffIDs(got map[string]int, want []string) error {
	wantSet := map[string]bool{}
	var missing, extra []string
	for _, id := range want {
		wantSet[id] = true
		if got[id] == 0 {
			missing = append(missing, id)
		}
	}
	for id := range got {
		if !wantSet[id] {
			extra = append(extra, id)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return nil
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return fmt.Errorf("%d of %d expected missing (first %v), %d unexpected (first %v)",
		len(missing), len(want), head(missing, 5), len(extra), head(extra, 5))
}

func head(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// consoleCounts counts the console lines of several runs by line.
func consoleCounts(procs ...*relayProc) map[string]int {
	counts := map[string]int{}
	for _, p := range procs {
		sc := bufio.NewScanner(strings.NewReader(p.stdout.String()))
		for sc.Scan() {
			counts[sc.Text()]++
		}
	}
	return counts
}

// waitAlarmsOver waits until lastEnd has passed and no alarm of s is
// ongoing.
func waitAlarmsOver(t *testing.T, p *relayProc, s *sim.Server, lastEnd time.Time) {
	t.Helper()
	waitFor(t, p, time.Until(lastEnd)+10*time.Second, "the alarms to be over in the simulator", func() error {
		if n := s.AlarmCounts().Ongoing; n > 0 || time.Now().Before(lastEnd) {
			return fmt.Errorf("%d alarms still ongoing", n)
		}
		return nil
	})
}

// waitDelivered waits until bus holds n events and, when hook is set, hook
// accepted every one of wantHook.
func waitDelivered(t *testing.T, p *relayProc, timeout time.Duration, bus *streamReader, n int, hook *notifytest.Receiver, wantHook []string) {
	t.Helper()
	what := "every event in JetStream"
	if hook != nil {
		what += " and at the webhook"
	}
	waitFor(t, p, timeout, what, func() error {
		got, err := bus.count()
		if err != nil {
			return err
		}
		if got < uint64(n) {
			return fmt.Errorf("stream holds %d of %d events", got, n)
		}
		if hook == nil {
			return nil
		}
		if err := diffIDs(acceptedIDs(hook), wantHook); err != nil {
			return fmt.Errorf("webhook: %w", err)
		}
		return nil
	})
}
