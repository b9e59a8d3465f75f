package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeSection is the heading of the docs/operate.md section this file runs.
const readmeSection = "### Trying rules against the simulator"

// readmeBlocks returns the sh code blocks of the docs/operate.md section headed
// heading, in order.
func readmeBlocks(t *testing.T, heading string) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/operate.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/operate.md has no section %q", heading)
	}
	var blocks []string
	var block *strings.Builder
	for line := range strings.Lines(rest) {
		switch {
		case block == nil && (strings.HasPrefix(line, "## ") || strings.HasPrefix(line, "### ")):
			return blocks
		case block == nil && strings.TrimSpace(line) == "```sh":
			block = &strings.Builder{}
		case block != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, block.String())
			block = nil
		case block != nil:
			block.WriteString(line)
		}
	}
	return blocks
}

// shell is one terminal: bash running a block of the page in its own
// process group, so that an interrupt reaches it as Ctrl-C would.
type shell struct {
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{}
	err    error
}

func startShell(t *testing.T, env []string, script string) *shell {
	t.Helper()
	s := &shell{done: make(chan struct{})}
	// -e: the first command that fails ends the terminal's script, with its
	// exit code.
	s.cmd = exec.Command("bash", "-e", "-c", script)
	s.cmd.Env = env
	s.cmd.Dir = t.TempDir()
	s.cmd.Stdout, s.cmd.Stderr = &s.stdout, &s.stderr
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
	})
	return s
}

// waitOutput waits up to limit for re to match the shell's stdout, and
// returns the match.
func (s *shell) waitOutput(t *testing.T, re *regexp.Regexp, limit time.Duration, what string) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if m := re.FindString(s.stdout.String()); m != "" {
			return m
		}
		select {
		case <-s.done:
			t.Fatalf("the shell ended (%v) before %s\nstdout:\n%s\nstderr:\n%s", s.err, what, s.stdout.String(), s.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s\nstdout:\n%s\nstderr:\n%s", what, limit, s.stdout.String(), s.stderr.String())
		}
	}
}

// interrupt sends SIGINT to the shell's process group, as Ctrl-C does, and
// fails the test unless the shell then exits 0 within limit.
func (s *shell) interrupt(t *testing.T, name string, limit time.Duration) {
	t.Helper()
	if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatalf("Ctrl-C to %s: %v", name, err)
	}
	select {
	case <-s.done:
	case <-time.After(limit):
		t.Fatalf("%s did not stop within %s of Ctrl-C\nstdout:\n%s\nstderr:\n%s", name, limit, s.stdout.String(), s.stderr.String())
	}
	if s.err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", name, s.err, s.stdout.String(), s.stderr.String())
	}
}

// docs/operate.md's steps for trying rules against the simulator run as written:
// the first terminal's block starts the simulator, whose export line is
// pasted before the second terminal's block; every command of that block
// succeeds and prints what the page says, and relay run prints a start.
func TestReadmeSimulatorSteps(t *testing.T) {
	skipShort(t)
	blocks := readmeBlocks(t, readmeSection)
	if len(blocks) != 2 {
		t.Fatalf("docs/operate.md section %q has %d sh blocks, want 2 (one per terminal)", readmeSection, len(blocks))
	}
	// relay is the built binary, found on PATH; nothing else of the
	// caller's environment reaches the terminals.
	bin := filepath.Dir(relayBinary(t))
	tmp := t.TempDir()
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + tmp, "TMPDIR=" + tmp}

	simulator := startShell(t, env, blocks[0])
	export := simulator.waitOutput(t, regexp.MustCompile(`(?m)^export RELAY_BASE_URL=.*$`), 10*time.Second, "export line from the simulator")

	second := startShell(t, env, export+"\n"+blocks[1])
	startLine := regexp.MustCompile(`(?m)^\S+ START .*\(alarm (\d+)\)$`)
	second.waitOutput(t, startLine, 30*time.Second, "START line from relay run")
	// relay run announces every alarm relay api listed, in one batch.
	alarmsJSON, err := filepath.Glob(filepath.Join(tmp, "*", "alarms.json"))
	if err != nil || len(alarmsJSON) != 1 {
		t.Fatalf("alarms.json in the folder the page makes: %v, %v", alarmsJSON, err)
	}
	listed := regexp.MustCompile(`"originId": "(\d+)"`).FindAllStringSubmatch(readFile(t, alarmsJSON[0]), -1)
	if len(listed) == 0 {
		t.Fatalf("relay api alarms listed no alarm:\n%s", readFile(t, alarmsJSON[0]))
	}
	for _, m := range listed {
		second.waitOutput(t, regexp.MustCompile(`(?m)^\S+ START .*\(alarm `+m[1]+`\)$`), 10*time.Second, "START line of alarm "+m[1])
	}
	second.interrupt(t, "the second terminal", 30*time.Second)
	simulator.interrupt(t, "the simulator", 10*time.Second)

	out := second.stdout.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^environment: ok$`),                    // relay check
		regexp.MustCompile(`(?m)^screen +console +stdout +`),           // its routing table
		regexp.MustCompile(`(?m)^ok$`),                                 // its verdict
		regexp.MustCompile(`(?m)^alarm \d+: level \d \(\w+\), event `), // relay route, per alarm
		regexp.MustCompile(`(?m)^    -> screen +console +stdout$`),
		regexp.MustCompile(`(?m)^    goes where its start went:$`),
		regexp.MustCompile(`(?m)^starts-and-ends +[1-9]\d* +\d+\.\d +\d+ +[<\d.]+% `), // relay report: its route
	} {
		if !want.MatchString(out) {
			t.Errorf("the second terminal's output has nothing like %q\nstdout:\n%s\nstderr:\n%s", want, out, second.stderr.String())
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
