package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/poller"
	"github.com/relay-energy/relay/internal/store"
)

// memorySpeed is the clock speed of the memory phase: only the state at the
// end matters, so it runs as fast as the relay can poll.
const memorySpeed = 600

// memoryChildFlag makes relaybench the relay process whose memory the
// memory phase measures. The simulator runs in the parent, so that its own
// 100,000 alarms are not counted.
const memoryChildFlag = "memory-child"

// secretEnv passes the simulator's app secret to the child, which keeps it
// off the command line.
const secretEnv = "RELAYBENCH_APP_SECRET"

// memoryResult is what the memory phase measured (P6), in the relay process.
type memoryResult struct {
	// Alarms is how many alarms the relay was tracking as ongoing.
	Alarms int `json:"alarms"`
	// RSS is VmRSS after a forced GC, with its anonymous and file-backed
	// parts (the file part is mostly the bbolt file's mapped pages);
	// PeakRSS is VmHWM, the high-water mark while the alarms were read;
	// BaseRSS is VmRSS when the process started.
	RSS     uint64 `json:"rss"`
	RSSAnon uint64 `json:"rss_anon"`
	RSSFile uint64 `json:"rss_file"`
	PeakRSS uint64 `json:"peak_rss"`
	BaseRSS uint64 `json:"base_rss"`
	// RSSBinary and RSSStore are the parts of RSS that are pages of the
	// executable (its code and read-only data) and of the bbolt file's
	// memory map, from /proc/self/smaps; BaseBinary is RSSBinary when the
	// process started.
	RSSBinary  uint64 `json:"rss_binary"`
	RSSStore   uint64 `json:"rss_store"`
	BaseBinary uint64 `json:"base_binary"`
	// HeapInuse is the Go heap in use after the GC.
	HeapInuse uint64 `json:"heap_inuse"`
	// StoreBytes is the size of the bbolt file.
	StoreBytes int64 `json:"store_bytes"`
	// Seconds is how long, in real time, reading the alarms took.
	Seconds float64 `json:"seconds"`
}

// memoryPhase runs a relay (poller and store, as the service runs them) in
// a child process against a simulator holding MemoryAlarms ongoing alarms,
// and reads the child's memory once it tracks all of them.
func (b *bench) memoryPhase(ctx context.Context, figs *runFigures) error {
	clk := clock.NewScaled(time.Now().UTC().Truncate(time.Second), memorySpeed)
	opts := simOptions(b.cfg.Seed+3, clk)
	opts.RateLimit = -1 // the relay's own budget paces it; see docs/performance.md
	s, err := startSim(opts)
	if err != nil {
		return err
	}
	defer s.Close()
	s.Storm(b.cfg.MemoryAlarms)
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the relaybench binary to run the relay in: %w", err)
	}
	base, real := clk.Anchor()
	id, secret := s.Credentials()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe,
		"-"+memoryChildFlag,
		"-sim-url", s.URL(),
		"-app-id", id,
		"-clock-base", strconv.FormatInt(base.UnixNano(), 10),
		"-clock-real", strconv.FormatInt(real, 10),
		"-alarms", strconv.Itoa(b.cfg.MemoryAlarms),
		"-out", b.dir,
	)
	cmd.Env = append(os.Environ(), secretEnv+"="+secret)
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

// memoryChildArgs are the flags of the child process.
type memoryChildArgs struct {
	simURL, appID string
	base, real    int64
	alarms        int
	dir           string
}

// memoryChild is the relay process of the memory phase: it polls the
// parent's simulator until its poller tracks args.alarms alarms, then writes
// its memory figures as JSON to stdout.
func memoryChild(ctx context.Context, args memoryChildArgs, stdout io.Writer, log *slog.Logger) error {
	baseRSS, err := readStatus()
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	baseMapped, err := readMapped("/proc/self/smaps", exe, "")
	if err != nil {
		return err
	}
	clk := clock.ScaledAt(time.Unix(0, args.base), args.real, memorySpeed)
	client, err := opendata.New(opendata.Config{
		BaseURL:   args.simURL,
		AppID:     args.appID,
		AppSecret: os.Getenv(secretEnv),
		RateLimit: upstreamRate,
		Clock:     clk,
		Logger:    log,
	})
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(args.dir, "memory-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	path := filepath.Join(dir, "relay.db")
	db, err := store.Open(path, store.Options{Clock: clk})
	if err != nil {
		return err
	}
	defer db.Close()
	var started atomic.Int64
	all := make(chan struct{})
	var once sync.Once
	p, err := poller.New(poller.Config{
		Client:    client,
		Store:     db,
		RateLimit: upstreamRate,
		Clock:     clk,
		Logger:    log,
		OnEvents: func(evs []event.Event) {
			for i := range evs {
				if evs[i].Data.Transition == event.Start && started.Add(1) >= int64(args.alarms) {
					once.Do(func() { close(all) })
				}
			}
		},
	})
	if err != nil {
		return err
	}
	began := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() { runErr = p.Run(ctx) })
	stop := func() error {
		cancel()
		wg.Wait()
		return runErr
	}
	select {
	case <-all:
	case <-time.After(4 * time.Minute):
		return errors.Join(fmt.Errorf("the relay tracked %d of %d alarms after 4 minutes", started.Load(), args.alarms), stop())
	case <-ctx.Done():
		return errors.Join(ctx.Err(), stop())
	}
	elapsed := time.Since(began)
	// The poller is still running: measure its live state.
	runtime.GC()
	debug.FreeOSMemory()
	st, err := readStatus()
	if err != nil {
		return errors.Join(err, stop())
	}
	mapped, err := readMapped("/proc/self/smaps", exe, path)
	if err != nil {
		return errors.Join(err, stop())
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if err := stop(); err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	ongoing, err := db.Ongoing()
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(memoryResult{
		Alarms:     len(ongoing),
		RSS:        st.rss,
		RSSAnon:    st.anon,
		RSSFile:    st.file,
		PeakRSS:    st.hwm,
		BaseRSS:    baseRSS.rss,
		RSSBinary:  mapped.binary,
		RSSStore:   mapped.state,
		BaseBinary: baseMapped.binary,
		HeapInuse:  ms.HeapInuse,
		StoreBytes: fi.Size(),
		Seconds:    elapsed.Seconds(),
	})
}

// procStatus holds the memory lines of /proc/self/status, in bytes.
type procStatus struct {
	rss, anon, file, hwm uint64
}

// readStatus reads this process's resident memory from /proc/self/status.
func readStatus() (procStatus, error) { return readProcStatus("/proc/self/status") }

// readProcStatus reads a process's resident memory from its status file
// path.
func readProcStatus(path string) (procStatus, error) {
	f, err := os.Open(path)
	if err != nil {
		return procStatus{}, fmt.Errorf("reading resident memory: %w", err)
	}
	defer f.Close()
	var st procStatus
	fields := map[string]*uint64{"VmRSS:": &st.rss, "RssAnon:": &st.anon, "RssFile:": &st.file, "VmHWM:": &st.hwm}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		if p, ok := fields[f[0]]; ok {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return procStatus{}, fmt.Errorf("%s: %s %q: %w", path, f[0], f[1], err)
			}
			*p = kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		return procStatus{}, fmt.Errorf("%s: %w", path, err)
	}
	if st.rss == 0 {
		return procStatus{}, fmt.Errorf("%s: no VmRSS line", path)
	}
	return st, nil
}

// mappedRSS is the resident memory of the mappings of two files.
type mappedRSS struct{ binary, state uint64 }

// readMapped sums the Rss of the mappings of the files binary and state
// (absolute paths; "" for none) in the smaps file path.
func readMapped(path, binary, state string) (mappedRSS, error) {
	f, err := os.Open(path)
	if err != nil {
		return mappedRSS{}, fmt.Errorf("reading the mappings' resident memory: %w", err)
	}
	defer f.Close()
	var m mappedRSS
	var cur *uint64 // the sum the current mapping adds to, nil for none
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") {
			// A mapping's first line: address range, permissions, offset,
			// device, inode and, for a file, its path (" (deleted)" once
			// it was removed or replaced).
			cur = nil
			if len(fields) < 6 {
				continue
			}
			switch name := strings.TrimSuffix(strings.Join(fields[5:], " "), " (deleted)"); name {
			case binary:
				cur = &m.binary
			case state:
				cur = &m.state
			}
			continue
		}
		if fields[0] != "Rss:" || cur == nil {
			continue
		}
		if len(fields) != 3 || fields[2] != "kB" {
			return mappedRSS{}, fmt.Errorf("%s: unexpected line %q", path, line)
		}
		kb, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			return mappedRSS{}, fmt.Errorf("%s: %q: %w", path, line, err)
		}
		*cur += kb << 10
	}
	if err := sc.Err(); err != nil {
		return mappedRSS{}, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
