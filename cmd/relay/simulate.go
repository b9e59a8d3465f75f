package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/relay-energy/relay/internal/opendata/sim"
)

func cmdSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("relay simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8090", "address to serve on; port 0 picks a free one")
	seed := fs.Int64("seed", 1, "seed of the generated fleet, alarms and data")
	stations := fs.Int("stations", 3, "stations in the fleet, each with 2 systems of 4 devices")
	rate := fs.Int("rate-limit", 10, "requests per minute per IP before A0501; negative turns the limit off")
	churn := fs.Float64("churn", 2, "alarms started per minute on random devices")
	duration := fs.Duration("mean-duration", 5*time.Minute, "mean time from an alarm's start to its end")
	ongoing := fs.Int("ongoing", 5, "alarms ongoing from the start")
	history := fs.Int("history", 30, "alarms that started and ended in the last 24 h")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: relay simulate [flags]\n  the Open Data Service simulator on its own, until interrupted")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *rate == 0 || *stations < 1 || *churn < 0 || *duration <= 0 || *ongoing < 0 || *history < 0 {
		fmt.Fprintln(stderr, "relay simulate: --rate-limit must not be 0, --stations must be positive, --churn, --ongoing and --history must not be negative, --mean-duration must be positive")
		return 2
	}
	s := sim.New(sim.Options{
		Seed:      *seed,
		Stations:  *stations,
		RateLimit: *rate,
		Churn:     sim.Churn{StartsPerMinute: *churn, MeanDuration: *duration, InvalidFraction: 0.1},
		Logger:    slog.New(slog.NewTextHandler(stderr, nil)),
	})
	if *history > 0 {
		s.Backfill(*history, 24*time.Hour)
	}
	if *ongoing > 0 {
		s.Storm(*ongoing)
	}
	if err := s.Start(*listen); err != nil {
		fmt.Fprintf(stderr, "relay simulate: listening on %s: %v\n", *listen, err)
		return 1
	}
	id, secret := s.Credentials()
	f := s.Fleet()
	fmt.Fprintf(stdout, "# Open Data Service simulator on %s: %d stations, %d systems, %d devices; seed %d; %d requests/min\n",
		s.URL(), len(f.Stations), len(f.Systems), len(f.Devices), *seed, *rate)
	fmt.Fprintf(stdout, "export RELAY_BASE_URL=%s RELAY_APP_ID=%s RELAY_APP_SECRET=%s\n", s.URL(), id, secret)
	<-ctx.Done()
	if err := s.Close(); err != nil {
		fmt.Fprintf(stderr, "relay simulate: shutting down: %v\n", err)
		return 1
	}
	return 0
}
