// Command memrelay is the relay process of relaybench's memory phase (P6):
// it reads the alarms of the bench's simulator with the relay's client,
// poller and store until it tracks all of them, then prints what it
// measured of its own memory as JSON. relaybench builds it as relay's image
// is built and runs it; it is not meant to be run by hand.
//
// It links what relay links (as its image is built, with -tags nodemo),
// and nothing else: neither the bench's simulator driver nor the
// nats-server the bench embeds. The executable's pages are part of the
// resident memory measured, so they are those of relay's code.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/relay-energy/relay/cmd/relaybench/internal/memphase"

	// What relay links besides the poller and the store: the service, its
	// sinks and console, the simulator of relay simulate and the time
	// zones relay embeds.
	_ "github.com/relay-energy/relay/internal/opendata/sim"
	_ "github.com/relay-energy/relay/internal/service"
	_ "time/tzdata"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fs := flag.NewFlagSet("memrelay", flag.ExitOnError)
	var args memphase.Args
	args.Flags(fs)
	_ = fs.Parse(os.Args[1:])
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	if err := memphase.Run(ctx, args, os.Stdout, log); err != nil {
		fmt.Fprintf(os.Stderr, "memrelay: %v\n", err)
		stop()
		os.Exit(1)
	}
}
