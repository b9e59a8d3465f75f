package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/relay-energy/relay/internal/service"
	"github.com/relay-energy/relay/internal/termtext"
	"github.com/relay-energy/relay/internal/urlpath"
)

const deadLettersUsage = `usage: relay deadletters list|show|replay|drop [flags]

Lists, shows, replays or drops the dead letters of the running relay, through
its ops listener (the state file has one writer: the relay itself).

  list                       the dead letters, one line each; --withheld: the
                             entries alarm management withheld and those
                             recorded as dropped (a removed sink, a dropped start)
  show --sink S --seq N      one dead letter, with its event (JSON)
  replay [filters | --all]   put them back into their sinks' outboxes, in order
  drop [filters | --all]     delete them

The relay must run with RELAY_ADMIN_TOKEN set; this command sends the same
RELAY_ADMIN_TOKEN, to the ops listener at --addr (default from RELAY_LISTEN).
`

// cmdDeadLetters talks to the running relay's dead-letter endpoints.
func cmdDeadLetters(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fmt.Fprint(stdout, deadLettersUsage)
			return 0
		}
		fmt.Fprint(stderr, deadLettersUsage)
		return 2
	}
	action, args := args[0], args[1:]
	switch action {
	case "list", "show", "replay", "drop":
	default:
		fmt.Fprintf(stderr, "relay deadletters: unknown action %q\n%s", action, deadLettersUsage)
		return 2
	}
	fs := flag.NewFlagSet("relay deadletters "+action, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := opsFlags(fs)
	sink := fs.String("sink", "", "only the dead letters of this sink")
	since := fs.String("since", "", "only those given up on since this RFC 3339 time, or this long ago (2h)")
	eventID := fs.String("event", "", "only those of this event id (<originId>:<transition>), or of every transition of an originId")
	seq := fs.Uint64("seq", 0, "show: the dead letter's number, as list prints it")
	all := fs.Bool("all", false, "replay, drop: every dead letter, when no filter is given")
	asJSON := fs.Bool("json", false, "list, replay, drop: print the answer as JSON")
	withheld := fs.Bool("withheld", false, "list: the entries withheld or dropped instead of sent, with why")
	fs.Usage = func() { fmt.Fprint(stderr, deadLettersUsage+"\nflags:\n"); fs.PrintDefaults() }
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	client, code, err := addr.client()
	if err != nil {
		fmt.Fprintln(stderr, "relay deadletters:", err)
		return code
	}
	q := url.Values{}
	for k, v := range map[string]string{"sink": *sink, "since": *since, "event": *eventID} {
		if v != "" {
			q.Set(k, v)
		}
	}
	method, path := http.MethodGet, "/deadletters"
	if *withheld && action != "list" {
		fmt.Fprintln(stderr, "relay deadletters: --withheld goes with list only")
		return 2
	}
	if *withheld {
		path = "/deadletters/withheld"
	}
	switch action {
	case "show":
		if *sink == "" || *seq == 0 {
			fmt.Fprintln(stderr, "relay deadletters show: give --sink and --seq, as list prints them")
			return 2
		}
		path, q = "/deadletters/"+urlpath.Segment(*sink)+"/"+fmt.Sprint(*seq), nil
	case "replay", "drop":
		method, path = http.MethodPost, "/deadletters/"+action
		if *all {
			q.Set("all", "true")
		}
	}
	body, err := client.call(ctx, method, path, q, nil)
	if err != nil {
		fmt.Fprintln(stderr, "relay deadletters:", err)
		return 1
	}
	var ans service.DeadLettersAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		fmt.Fprintf(stderr, "relay deadletters: the answer is not what relay sends: %v\n", err)
		return 1
	}
	if *asJSON || action == "show" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if action == "show" && len(ans.DeadLetters) == 1 {
			_ = enc.Encode(ans.DeadLetters[0])
		} else {
			_ = enc.Encode(ans)
		}
		return 0
	}
	if len(ans.DeadLetters) > 0 {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SINK\tSEQ\tEVENT\tLEVEL\tALARM\tAT\tREASON")
		for _, d := range ans.DeadLetters {
			reason := d.Reason
			if len(reason) > 120 {
				reason = reason[:117] + "..."
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\n", termtext.Escape(d.Sink), d.Seq, termtext.Escape(d.EventID), d.Level, d.Alarm,
				d.At.Format(time.RFC3339), termtext.Escape(reason))
		}
		tw.Flush()
	}
	verb := map[string]string{"list": "listed", "replay": "replayed", "drop": "dropped"}[action]
	what := "dead letter" + termtext.Plural(ans.Count)
	if *withheld {
		what = "withheld or dropped entries"
		if ans.Count == 1 {
			what = "withheld or dropped entry"
		}
	}
	fmt.Fprintf(stdout, "%d %s %s\n", ans.Count, what, verb)
	for _, r := range ans.Refused {
		fmt.Fprintf(stderr, "not replayed: sink %s seq %d (%s): %s\n", termtext.Escape(r.Sink), r.Seq, termtext.Escape(r.EventID), termtext.Escape(r.Why))
	}
	if len(ans.Refused) > 0 {
		return 1
	}
	return 0
}
