package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/cmd/relaybench/internal/procmem"
	"github.com/relay-energy/relay/internal/clock"
	relayconfig "github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/redact"
	"github.com/relay-energy/relay/internal/service"
)

// relayChildFlag makes relaybench a relay process of the tenants and
// takeover phases: the service as relay run runs it, configured by the
// RELAY_ variables of its environment, on the clock its flags give. Its CPU
// time and memory are its own, apart from the simulators and receivers of
// the parent.
const relayChildFlag = "relay-child"

// secretEnv passes the simulators' app secret to the relay processes, which
// keeps it off their command lines.
const secretEnv = "RELAYBENCH_APP_SECRET"

// relayChildArgs are the clock flags of a relay child: the scaled clock of
// clock.ScaledAt, or the wall clock at speed 1.
type relayChildArgs struct {
	base, real int64
	speed      float64
}

// relayChild runs the relay service until ctx ends (SIGTERM), logging JSON
// lines to stderr as relay run does.
func relayChild(ctx context.Context, args relayChildArgs, stderr io.Writer) error {
	cfg, err := relayconfig.Load(ctx, envconfig.OsLookuper())
	if err != nil {
		return err
	}
	secrets := redact.New()
	log := service.NewLogger(stderr, cfg.LogLevel, cfg.LogFmt, secrets)
	var clk clock.Clock = clock.Real()
	if args.speed != 1 {
		clk = clock.ScaledAt(time.Unix(0, args.base), args.real, args.speed)
	}
	return service.Run(ctx, service.Options{Config: cfg, Lookup: os.LookupEnv, Logger: log, Clock: clk, Secrets: secrets, Version: "relaybench"})
}

// relayProc is a relay child process seen from the parent: its pid for
// /proc, and what its log says about the tenants it serves.
type relayProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the exit, once done is closed
	// logged is closed when the log has been read to its end.
	logged chan struct{}

	mu sync.Mutex
	// serving holds, for each tenant it serves, when (wall time) it logged
	// "tenant started".
	serving map[string]time.Time
	// tail holds the last log lines, for errors.
	tail []string
	// errors counts its log lines at level ERROR.
	errors int
	// killed says the bench killed it: its exit is no failure.
	killed bool
}

// relayTailLines is how many of a child's last log lines an error quotes.
const relayTailLines = 20

// startRelayProc starts a relay child named name with the variables of env
// (and none of the parent's RELAY_ variables) on the clock clk (nil: the
// wall clock).
func startRelayProc(name string, env map[string]string, clk *clock.Scaled) (*relayProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the relaybench binary to run the relay in: %w", err)
	}
	args := []string{"-" + relayChildFlag}
	if clk != nil {
		base, real := clk.Anchor()
		args = append(args,
			"-clock-base", strconv.FormatInt(base.UnixNano(), 10),
			"-clock-real", strconv.FormatInt(real, 10),
			"-clock-speed", strconv.FormatFloat(clk.Speed(), 'g', -1, 64))
	} else {
		args = append(args, "-clock-speed", "1")
	}
	cmd := exec.Command(exe, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RELAY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	slices.Sort(cmd.Env)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = io.Discard
	p := &relayProc{name: name, cmd: cmd, done: make(chan struct{}), logged: make(chan struct{}), serving: map[string]time.Time{}}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("relay %s: %w", name, err)
	}
	go func() {
		defer close(p.logged)
		p.readLog(stderr)
	}()
	go func() {
		<-p.logged
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// readLog follows the child's JSON log until it ends.
func (p *relayProc) readLog(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var l struct {
			Time   time.Time `json:"time"`
			Level  string    `json:"level"`
			Msg    string    `json:"msg"`
			Tenant string    `json:"tenant"`
		}
		err := json.Unmarshal([]byte(line), &l)
		p.mu.Lock()
		p.tail = append(p.tail, line)
		if len(p.tail) > relayTailLines {
			p.tail = p.tail[len(p.tail)-relayTailLines:]
		}
		if err == nil {
			switch l.Msg {
			case "tenant started":
				p.serving[l.Tenant] = l.Time
			case "tenant stopped":
				delete(p.serving, l.Tenant)
			}
			if l.Level == slog.LevelError.String() {
				p.errors++
			}
		}
		p.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, r)
}

// serves reports whether the child serves tenant now, by its log, and since
// when.
func (p *relayProc) serves(tenant string) (time.Time, bool) {
	if p.exited() {
		return time.Time{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.serving[tenant]
	return at, ok
}

// servingNow returns the tenants the child serves now, by its log.
func (p *relayProc) servingNow() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, 0, len(p.serving))
	for id := range p.serving {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// errorLines returns how many lines the child logged at level ERROR.
func (p *relayProc) errorLines() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errors
}

// exited reports whether the child has exited.
func (p *relayProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// alive returns an error, quoting the end of its log, once the child has
// exited.
func (p *relayProc) alive() error {
	if !p.exited() {
		return nil
	}
	return fmt.Errorf("relay %s exited: %v; its last log lines:\n%s", p.name, p.err, p.logTail())
}

// logTail returns the child's last log lines.
func (p *relayProc) logTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// kill sends SIGKILL and waits for the child to be gone.
func (p *relayProc) kill() error {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !p.exited() {
		return fmt.Errorf("killing relay %s: %w", p.name, err)
	}
	<-p.done
	return nil
}

// stop sends SIGTERM and waits up to limit for the child's exit, then kills
// it. It returns an error when the child had exited before, did not exit
// in time, or exited with a failure.
func (p *relayProc) stop(limit time.Duration) error {
	if err := p.alive(); err != nil {
		return err
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM to relay %s: %w", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(limit):
		_ = p.kill()
		return fmt.Errorf("relay %s did not exit within %s of SIGTERM; its last log lines:\n%s", p.name, limit, p.logTail())
	}
	if p.err != nil {
		return fmt.Errorf("relay %s: %w; its last log lines:\n%s", p.name, p.err, p.logTail())
	}
	return nil
}

// clockTicks is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// cpu returns the CPU time (user and system) the child has used so far.
func (p *relayProc) cpu() (time.Duration, error) {
	if err := p.alive(); err != nil {
		return 0, err
	}
	return readProcCPU(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
}

// readProcCPU reads utime + stime from a /proc/<pid>/stat file.
func readProcCPU(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading CPU time: %w", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after it start at the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("%s: no command name in %q", path, b)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("%s: %d fields after the command name, want at least 13", path, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: utime or stime %q: %w", path, s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// memory returns the child's resident memory.
func (p *relayProc) memory() (procmem.Status, error) {
	if err := p.alive(); err != nil {
		return procmem.Status{}, err
	}
	return procmem.ReadStatus(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
}

// stopAll stops every child of procs that the bench did not kill, at once,
// and joins their errors: one that exited by itself is one.
func stopAll(procs []*relayProc, limit time.Duration) error {
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		p.mu.Lock()
		killed := p.killed
		p.mu.Unlock()
		if killed {
			continue
		}
		wg.Go(func() { errs[i] = p.stop(limit) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
