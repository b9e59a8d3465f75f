package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/redact"
	"github.com/relay-energy/relay/internal/service"
)

func cmdRun(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs := flag.NewFlagSet("relay run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: relay [run]\n\nRuns the service, configured by RELAY_* environment variables (see docs/configure.md).")
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	cfg, err := config.Load(ctx, envconfig.OsLookuper())
	if err != nil {
		for _, p := range config.Problems(err) {
			fmt.Fprintln(stderr, "relay:", p)
		}
		return 1
	}
	secrets := redact.New()
	log := service.NewLogger(stderr, cfg.LogLevel, cfg.LogFmt, secrets)
	tracer, stopTracing, err := startTracing(ctx, log, secrets)
	if err != nil {
		fmt.Fprintln(stderr, "relay:", err)
		return 1
	}
	defer stopTracing()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	err = service.Run(ctx, service.Options{Config: cfg, Lookup: os.LookupEnv, Logger: log, HUP: hup, Secrets: secrets,
		Version: relayVersion(), Tracer: tracer})
	var notStarted *service.StartError
	if errors.As(err, &notStarted) {
		// Start-up problems are printed once each, as relay check prints
		// them; a failure after start has been logged by Run.
		for _, p := range notStarted.Problems {
			fmt.Fprintln(stderr, "relay:", p)
		}
	}
	if err != nil {
		return 1
	}
	return 0
}
