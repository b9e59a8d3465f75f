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
	"reflect"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/rulefile"
	"github.com/relay-energy/relay/internal/service"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/termtext"
	"github.com/relay-energy/relay/internal/urlpath"
)

const silenceUsage = `usage: relay silence add|list|expire [flags]

Adds, lists or expires the silences of the running relay, through its ops
listener (the state file has one writer: the relay itself). A silence keeps
the alarms it matches from people from its start to its end (the shelving of
ISA-18.2).

  add --match MATCH (--for DURATION | --until TIME) --comment TEXT
      [--starts TIME] [--author NAME] [--notify-on-expire]
                         silence the alarms MATCH selects; --all instead of
                         --match silences every alarm
  list [--all] [--json]  the active and pending silences; --all: ended too
  expire ID              end a silence now

MATCH has the keys of a route's match, as YAML or JSON:
'{station_ids: [S1], levels: [urgent]}'. TIME is RFC 3339
(2026-11-24T08:00:00Z); DURATION is 90m, 2h or 3d, at most 90d.

The relay must run with RELAY_ADMIN_TOKEN set; this command sends the same
RELAY_ADMIN_TOKEN, to the ops listener at --addr (default from RELAY_LISTEN).
`

// commentWidth is how much of a comment the list table shows.
const commentWidth = 60

// cmdSilence talks to the running relay's silence endpoints.
func cmdSilence(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fmt.Fprint(stdout, silenceUsage)
			return 0
		}
		fmt.Fprint(stderr, silenceUsage)
		return 2
	}
	action, args := args[0], args[1:]
	fs := flag.NewFlagSet("relay silence "+action, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, silenceUsage+"\nflags:\n"); fs.PrintDefaults() }
	addr := opsFlags(fs)
	switch action {
	case "add":
		return silenceAdd(ctx, fs, addr, args, stdout, stderr)
	case "list":
		return silenceList(ctx, fs, addr, args, stdout, stderr)
	case "expire":
		return silenceExpire(ctx, fs, addr, args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "relay silence: unknown action %q\n%s", action, silenceUsage)
	return 2
}

func silenceAdd(ctx context.Context, fs *flag.FlagSet, addr *opsTarget, args []string, stdout, stderr io.Writer) int {
	match := fs.String("match", "", "the alarms to silence: a route's match as YAML or JSON, such as '{station_ids: [S1], levels: [urgent]}'")
	all := fs.Bool("all", false, "silence every alarm (instead of --match)")
	forD := fs.String("for", "", "how long the silence lasts from its start: 90m, 2h, 3d (at most 90d)")
	until := fs.String("until", "", "when the silence ends, RFC 3339 (2026-11-24T08:00:00Z)")
	starts := fs.String("starts", "", "when the silence begins, RFC 3339 (default now)")
	author := fs.String("author", os.Getenv("USER"), "who sets the silence")
	comment := fs.String("comment", "", "why the alarms are silenced (required)")
	notify := fs.Bool("notify-on-expire", false, "when the silence ends, announce again the alarms still ongoing")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	const name = "relay silence add"
	var problems []string
	req := service.SilenceRequest{All: *all, Author: strings.TrimSpace(*author), Comment: strings.TrimSpace(*comment), NotifyOnExpire: *notify}
	switch {
	case *match != "" && *all:
		problems = append(problems, "give --match or --all, not both")
	case *match == "" && !*all:
		problems = append(problems, "--match is missing: name the alarms to silence, such as --match '{station_ids: [S1]}', or give --all to silence every alarm")
	case *match != "":
		m, err := route.ParseMatch("--match", []byte(*match))
		if err != nil {
			problems = append(problems, matchErrors(err)...)
		} else if reflect.ValueOf(m.Match).IsZero() {
			problems = append(problems, "--match names no condition: name at least one key (station_ids, device_sns, levels, ...), or give --all to silence every alarm")
		} else if req.Match, err = json.Marshal(m.Match); err != nil {
			problems = append(problems, err.Error())
		}
	}
	switch {
	case *forD != "" && *until != "":
		problems = append(problems, "give --for or --until, not both")
	case *forD == "" && *until == "":
		problems = append(problems, "give how long the silence lasts (--for 2h) or when it ends (--until 2026-11-24T08:00:00Z)")
	case *forD != "":
		if _, err := silence.ParseDuration(*forD); err != nil {
			problems = append(problems, "--for "+err.Error())
		}
		req.Duration = *forD
	default:
		req.EndsAt = checkTime("--until", *until, &problems)
	}
	if *starts != "" {
		req.StartsAt = checkTime("--starts", *starts, &problems)
	}
	if req.Author == "" {
		problems = append(problems, "--author is missing (USER is not set either): say who sets the silence")
	}
	if req.Comment == "" {
		problems = append(problems, "--comment is missing: say why the alarms are silenced, so that others can tell when it may be expired")
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(stderr, "%s: %s\n", name, p)
		}
		return 2
	}
	ans, code := silenceCall(ctx, name, addr, http.MethodPost, "/silences", nil, req, stderr)
	if code != 0 {
		return code
	}
	s := ans.Silences[0]
	fmt.Fprintf(stdout, "silence %s added (%s): %s, from %s until %s (%s), by %s\n", s.ID, s.State, termtext.Escape(silenceMatch(s.Silence)),
		s.StartsAt.UTC().Format(time.RFC3339), s.EndsAt.UTC().Format(time.RFC3339), silence.FormatDuration(s.EndsAt.Sub(s.StartsAt)),
		termtext.Escape(s.Author))
	return 0
}

// checkTime returns v when it is an RFC 3339 time, and otherwise adds a
// problem naming flag.
func checkTime(flag, v string, problems *[]string) string {
	if _, err := time.Parse(time.RFC3339, v); err != nil {
		*problems = append(*problems, fmt.Sprintf("%s %q: want an RFC 3339 time such as 2026-11-24T08:00:00Z", flag, v))
	}
	return v
}

// matchErrors returns the problems of route.ParseMatch's error, one line
// each, such as `--match: levels: "loud" is not a level (...)`.
func matchErrors(err error) []string {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = "--match: " + e.Error()
		var re *rulefile.Error
		if errors.As(e, &re) {
			out[i] = "--match: " + strings.TrimPrefix(strings.TrimPrefix(re.Field, "match"), ".")
			if re.Field != "match" && re.Field != "" {
				out[i] += ": "
			}
			out[i] += re.Msg
		}
	}
	return out
}

func silenceList(ctx context.Context, fs *flag.FlagSet, addr *opsTarget, args []string, stdout, stderr io.Writer) int {
	all := fs.Bool("all", false, "ended silences too")
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	q := url.Values{}
	if *all {
		q.Set("all", "true")
	}
	ans, code := silenceCall(ctx, "relay silence list", addr, http.MethodGet, "/silences", q, nil, stderr)
	if code != 0 {
		return code
	}
	if *asJSON {
		b, err := json.MarshalIndent(ans, "", "  ")
		if err != nil {
			fmt.Fprintln(stderr, "relay silence list:", err)
			return 1
		}
		stdout.Write(termtext.JSON(append(b, '\n')))
		return 0
	}
	if len(ans.Silences) > 0 {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATE\tFROM\tUNTIL\tMATCHERS\tAUTHOR\tCOMMENT")
		for _, s := range ans.Silences {
			until := s.End().UTC().Format(time.RFC3339)
			if !s.End().Equal(s.EndsAt) {
				until += " (expired)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.State, s.StartsAt.UTC().Format(time.RFC3339),
				until, cell(silenceMatch(s.Silence), 0), cell(s.Author, 0), cell(s.Comment, commentWidth))
		}
		tw.Flush()
	}
	fmt.Fprintf(stdout, "%d silence%s listed\n", ans.Count, termtext.Plural(ans.Count))
	return 0
}

// silenceMatch describes what s silences.
func silenceMatch(s silence.Silence) string {
	if s.All {
		return "every alarm"
	}
	return s.Match.String()
}

// cell makes s fit one table cell: on one line, safe to print, and cut to
// width runes when width > 0.
func cell(s string, width int) string {
	s = strings.Join(strings.Fields(s), " ")
	if width > 0 && utf8.RuneCountInString(s) > width {
		s = string([]rune(s)[:width-3]) + "..."
	}
	return termtext.Escape(s)
}

func silenceExpire(ctx context.Context, fs *flag.FlagSet, addr *opsTarget, args []string, stdout, stderr io.Writer) int {
	id, code, ok := parseOneArg(fs, args, "silence ID", stderr)
	if !ok {
		return code
	}
	if id == "" {
		fmt.Fprintln(stderr, "relay silence expire: give the ID of the silence to end, as relay silence list prints it")
		return 2
	}
	ans, code := silenceCall(ctx, "relay silence expire", addr, http.MethodDelete, "/silences/"+urlpath.Segment(id), nil, nil, stderr)
	if code != 0 {
		return code
	}
	s := ans.Silences[0]
	fmt.Fprintf(stdout, "silence %s expired at %s: %s\n", s.ID, s.End().UTC().Format(time.RFC3339), termtext.Escape(silenceMatch(s.Silence)))
	return 0
}

// silenceCall sends one request to the silence endpoints and returns the
// answer, or prints what went wrong, prefixed with name, and returns the
// exit code.
func silenceCall(ctx context.Context, name string, addr *opsTarget, method, path string, q url.Values, body any, stderr io.Writer) (service.SilencesAnswer, int) {
	var ans service.SilencesAnswer
	client, code, err := addr.client()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ans, code
	}
	b, err := client.call(ctx, method, path, q, body)
	var oe *opsError
	var refusal service.ErrorAnswer
	switch {
	case errors.As(err, &oe) && json.Unmarshal(oe.Body, &refusal) == nil && refusal.Error != "":
		if len(refusal.Problems) == 0 {
			fmt.Fprintf(stderr, "%s: %s\n", name, termtext.Escape(refusal.Error))
		}
		for _, p := range refusal.Problems {
			fmt.Fprintf(stderr, "%s: %s: %s\n", name, p.Field, termtext.Escape(p.Message))
		}
		return ans, 1
	case err != nil:
		fmt.Fprintf(stderr, "%s: %s\n", name, termtext.Escape(err.Error()))
		return ans, 1
	}
	if err := json.Unmarshal(b, &ans); err != nil || ans.Count != len(ans.Silences) || method != http.MethodGet && len(ans.Silences) != 1 {
		fmt.Fprintf(stderr, "%s: the answer is not what relay sends: %v\n", name, err)
		return ans, 1
	}
	return ans, 0
}
