// Package memphase is the relay side of relaybench's memory phase (P6): a
// relay process (opendata client, poller and bbolt store, as the service
// runs them) that reads the alarms of a simulator in the bench's process
// until it tracks all of them, then measures itself. cmd/relaybench/memrelay
// is that process; relaybench builds and runs it, and reads its Result.
package memphase

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relay-energy/relay/cmd/relaybench/internal/procmem"
	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/poller"
	"github.com/relay-energy/relay/internal/store"
)

// Speed is the clock speed of the memory phase: only the state at the end
// matters, so it runs as fast as the relay can poll.
const Speed = 600

// RateLimit is the relay's request budget, per minute of its clock: the
// production rate.
const RateLimit = 10

// SecretEnv passes the simulator's app secret to the relay process, which
// keeps it off the command line.
const SecretEnv = "RELAYBENCH_APP_SECRET"

// Result is what the memory phase measured (P6), in the relay process.
type Result struct {
	// Alarms is how many alarms the relay was tracking as ongoing.
	Alarms int `json:"alarms"`
	// RSS is VmRSS after a forced GC, with its anonymous and file-backed
	// parts; PeakRSS is VmHWM, the high-water mark while the alarms were
	// read; BaseRSS is VmRSS when the process started.
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

// Args are the relay process's flags.
type Args struct {
	// SimURL and AppID are the simulator's; the secret is in SecretEnv.
	SimURL, AppID string
	// Base and Real anchor the scaled clock (clock.ScaledAt): a reading
	// in Unix ns and the wall time it was taken at.
	Base, Real int64
	// Alarms is how many alarms the relay must track.
	Alarms int
	// Dir is where the state file is made (and removed at the end).
	Dir string
}

// Flags registers args' flags on fs.
func (a *Args) Flags(fs *flag.FlagSet) {
	fs.StringVar(&a.SimURL, "sim-url", "", "simulator URL")
	fs.StringVar(&a.AppID, "app-id", "", "simulator app id")
	fs.Int64Var(&a.Base, "clock-base", 0, "scaled clock reading, Unix ns")
	fs.Int64Var(&a.Real, "clock-real", 0, "wall time of that reading, Unix ns")
	fs.IntVar(&a.Alarms, "alarms", 0, "alarms the relay must track")
	fs.StringVar(&a.Dir, "dir", "", "directory of the state file")
}

// Command returns the command line of the relay process exe for args.
func (a *Args) Command(exe string) []string {
	return []string{exe,
		"-sim-url", a.SimURL,
		"-app-id", a.AppID,
		"-clock-base", fmt.Sprint(a.Base),
		"-clock-real", fmt.Sprint(a.Real),
		"-alarms", fmt.Sprint(a.Alarms),
		"-dir", a.Dir,
	}
}

// Run is the relay process: it polls the simulator until its poller tracks
// args.Alarms alarms, then writes its Result as JSON to stdout.
func Run(ctx context.Context, args Args, stdout io.Writer, log *slog.Logger) error {
	base, err := procmem.ReadStatus("/proc/self/status")
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	baseMapped, err := procmem.ReadMapped("/proc/self/smaps", exe)
	if err != nil {
		return err
	}
	clk := clock.ScaledAt(time.Unix(0, args.Base), args.Real, Speed)
	client, err := opendata.New(opendata.Config{
		BaseURL:   args.SimURL,
		AppID:     args.AppID,
		AppSecret: os.Getenv(SecretEnv),
		RateLimit: RateLimit,
		Clock:     clk,
		Logger:    log,
	})
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(args.Dir, "memory-")
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
		RateLimit: RateLimit,
		Clock:     clk,
		Logger:    log,
		OnEvents: func(evs []event.Event) {
			for i := range evs {
				if evs[i].Data.Transition == event.Start && started.Add(1) >= int64(args.Alarms) {
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
		return errors.Join(fmt.Errorf("the relay tracked %d of %d alarms after 4 minutes", started.Load(), args.Alarms), stop())
	case <-ctx.Done():
		return errors.Join(ctx.Err(), stop())
	}
	elapsed := time.Since(began)
	// The poller is still running: measure its live state.
	runtime.GC()
	debug.FreeOSMemory()
	st, err := procmem.ReadStatus("/proc/self/status")
	if err != nil {
		return errors.Join(err, stop())
	}
	mapped, err := procmem.ReadMapped("/proc/self/smaps", exe, path)
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
	return json.NewEncoder(stdout).Encode(Result{
		Alarms:     len(ongoing),
		RSS:        st.RSS,
		RSSAnon:    st.Anon,
		RSSFile:    st.File,
		PeakRSS:    st.HWM,
		BaseRSS:    base.RSS,
		RSSBinary:  mapped[0],
		RSSStore:   mapped[1],
		BaseBinary: baseMapped[0],
		HeapInuse:  ms.HeapInuse,
		StoreBytes: fi.Size(),
		Seconds:    elapsed.Seconds(),
	})
}
