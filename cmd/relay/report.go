package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/isa"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

const reportUsage = `usage: relay report [--since 7d] [--until TIME] [--format text|markdown|json] [--svg FILE]
                    [--state FILE [--rules FILE] | --addr ADDR]

Prints the ISA-18.2 figures of the alarms relay saw over a period: alarms per
day and per operator position (each route of the rules), the peak 10-minute
rate, the share of time in flood (more than 10 alarms in 10 minutes), the top
10 bad actors (device and event code) and their share of all alarms, the
stale (ongoing over 24 h) and chattering (3 or more starts within 60 s)
alarms, and the priority mix against the 5% / 15% / 80% guideline.

Without --state it asks the running relay's ops listener at --addr (default
from RELAY_LISTEN), sending RELAY_ADMIN_TOKEN as relay deadletters does; the
positions are the routes of the relay's rules. With --state it reads a copy of
the state file, read-only (the running relay's own file is locked: copy it,
or ask the relay), and the positions are the routes of --rules (default
$RELAY_RULES or /etc/relay/rules.yaml when the file exists; without one, the
overall figures alone).
`

// cmdReport prints the ISA-18.2 figures of the running relay, or of a copied
// state file.
func cmdReport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("relay report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sinceFlag := fs.String("since", "7d", "the period's length: days (7d), a duration (36h, 90m) or both (1d12h)")
	untilFlag := fs.String("until", "", "the period's end, an RFC 3339 time (default now)")
	format := fs.String("format", "text", "output format: "+strings.Join(isa.Formats, ", "))
	svg := fs.String("svg", "", "also write a chart of the alarms per hour, with the flood threshold, to this SVG file")
	state := fs.String("state", "", "read this copy of a state file instead of asking the running relay")
	rulesFlag := fs.String("rules", "", "with --state: the rules whose routes are the operator positions (default $RELAY_RULES, or "+defaultRulesPath+", if it exists)")
	addr := opsFlags(fs)
	fs.Usage = func() { fmt.Fprint(stderr, reportUsage+"\nflags:\n"); fs.PrintDefaults() }
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stderr, "relay report: "+format+"\n", args...)
		return code
	}
	since, err := isa.ParseSince(*sinceFlag)
	if err != nil {
		return fail(2, "--%v", err)
	}
	var until time.Time
	if *untilFlag != "" {
		if until, err = time.Parse(time.RFC3339, *untilFlag); err != nil {
			return fail(2, "--until %q: want an RFC 3339 time such as 2026-11-23T08:00:00Z", *untilFlag)
		}
	}
	if !slices.Contains(isa.Formats, *format) {
		return fail(2, "--format %q: want %s", *format, strings.Join(isa.Formats, ", "))
	}
	switch {
	case *state == "" && *rulesFlag != "":
		return fail(2, "--rules goes with --state: the running relay reports on the routes of its own rules")
	case *state != "" && (*addr.addr != "" || *addr.tenant != ""):
		return fail(2, "--state and --addr or --tenant exclude each other: read a copied state file, or ask the running relay")
	}

	var rep isa.Report
	if *state != "" {
		if rep, err = localReport(*state, *rulesFlag, since, until, stderr); err != nil {
			if errors.Is(err, store.ErrLocked) {
				err = fmt.Errorf("%w\n(the running relay holds its state file: copy it, or run relay report without --state to ask the relay)", err)
			}
			return fail(1, "%v", err)
		}
	} else {
		client, code, err := addr.client()
		if err != nil {
			return fail(code, "%v", err)
		}
		if rep, err = remoteReport(ctx, client, *sinceFlag, *untilFlag); err != nil {
			return fail(1, "%v", err)
		}
	}
	if err := rep.Write(stdout, *format); err != nil {
		return fail(1, "%v", err)
	}
	if *svg != "" {
		if err := writeSVG(*svg, &rep); err != nil {
			return fail(1, "%v", err)
		}
	}
	return 0
}

// localReport computes the report of a copied state file, with the routes
// of the rules at rulesPath, or of the default rules file when it exists.
func localReport(statePath, rulesPath string, since time.Duration, until time.Time, stderr io.Writer) (isa.Report, error) {
	rules, err := reportRules(rulesPath, stderr)
	if err != nil {
		return isa.Report{}, err
	}
	st, err := store.OpenReadOnly(statePath)
	if err != nil {
		return isa.Report{}, err
	}
	defer st.Close()
	if until.IsZero() {
		until = time.Now()
	}
	acks, err := manage.FirstAcks(st)
	if err != nil {
		return isa.Report{}, err
	}
	return isa.FromStore(st, rules, until, since, acks)
}

// reportRules loads the rules at path; with no path, those of RELAY_RULES
// or the default path if the file exists, else none.
func reportRules(path string, stderr io.Writer) (*route.Rules, error) {
	if path == "" {
		path = envOr("RELAY_RULES", defaultRulesPath)
		if _, err := os.Stat(path); err != nil {
			fmt.Fprintf(stderr, "note: no rules file at %s (--rules, RELAY_RULES): the figures are overall only\n", path)
			return nil, nil
		}
	}
	var unset []string
	rules, err := route.Load(path, placeholderLookup(&unset))
	if err != nil {
		return nil, errors.Join(config.Problems(err)...)
	}
	return rules, nil
}

// remoteReport asks the running relay for its report.
func remoteReport(ctx context.Context, client *opsClient, since, until string) (isa.Report, error) {
	q := url.Values{"since": {since}}
	if until != "" {
		q.Set("until", until)
	}
	body, err := client.call(ctx, http.MethodGet, "/report", q, nil)
	if err != nil {
		return isa.Report{}, err
	}
	var rep isa.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		return isa.Report{}, fmt.Errorf("the answer is not what relay sends: %w", err)
	}
	return rep, nil
}

// writeSVG writes the report's chart to path.
func writeSVG(path string, rep *isa.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--svg: %w", err)
	}
	err = rep.WriteSVG(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--svg %s: %w", path, err)
	}
	return nil
}
