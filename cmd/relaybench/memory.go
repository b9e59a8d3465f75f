package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/relay-energy/relay/cmd/relaybench/internal/memphase"
	"github.com/relay-energy/relay/internal/clock"
)

// memrelayPkg is the relay process of the memory phase.
const memrelayPkg = "github.com/relay-energy/relay/cmd/relaybench/memrelay"

// buildMemrelay builds the memory phase's relay process into dir as relay's
// image is built (Dockerfile: static, without cgo, trimmed paths, no
// symbol table) and returns its path. It needs the go command and a working
// directory inside relay's module, as go run ./cmd/relaybench has.
func buildMemrelay(ctx context.Context, dir string) (string, error) {
	exe := filepath.Join(dir, "memrelay")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", exe, memrelayPkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the memory phase's relay process (%s; run relaybench from relay's module): %w: %s",
			memrelayPkg, err, strings.TrimSpace(string(out)))
	}
	return exe, nil
}

// memoryPhase runs a relay (poller and store, as the service runs them) in
// a child process built from relay's code alone (memrelay) against a
// simulator holding MemoryAlarms ongoing alarms, and reads the child's
// memory once it tracks all of them.
func (b *bench) memoryPhase(ctx context.Context, figs *runFigures) error {
	clk := clock.NewScaled(time.Now().UTC().Truncate(time.Second), memphase.Speed)
	opts := simOptions(b.cfg.Seed+3, clk)
	opts.RateLimit = -1 // the relay's own budget paces it; see docs/performance.md
	s, err := startSim(opts)
	if err != nil {
		return err
	}
	defer s.Close()
	s.Storm(b.cfg.MemoryAlarms)
	base, real := clk.Anchor()
	id, secret := s.Credentials()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	args := memphase.Args{SimURL: s.URL(), AppID: id, Base: base.UnixNano(), Real: real, Alarms: b.cfg.MemoryAlarms, Dir: b.dir}
	line := args.Command(b.memrelay)
	cmd := exec.CommandContext(ctx, line[0], line[1:]...)
	cmd.Env = append(os.Environ(), memphase.SecretEnv+"="+secret)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("relay process: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(stdout.Bytes(), &figs.Memory); err != nil {
		return fmt.Errorf("relay process: reading its figures %q: %w", stdout.String(), err)
	}
	return nil
}
