package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/relay-energy/relay/internal/service"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/termtext"
	"github.com/relay-energy/relay/internal/urlpath"
)

const ackUsage = `usage: relay ack ALARM [--comment TEXT] [--by NAME]
       relay unack ALARM [--comment TEXT] [--by NAME]
       relay shelve ALARM [--for DURATION] [--comment TEXT] [--by NAME]
       relay ack --list [--json]

Acknowledges an alarm of the running relay (or takes the acknowledgement
back), through its ops listener, as the buttons of Slack, Telegram and
Feishu do: escalation stops, and reminders too unless the route says
repeat_until: cleared; the bus gets an ack event. ALARM is the alarm's
originId, as chat messages and relay ack --list show it. shelve silences the
alarm's point (its device and event code) for DURATION (90m, 2h, 3d; at
most 90d), or until the alarm clears when --for is left out. --list shows
the ongoing alarms and who acknowledged each.

The actor is --by, default $USER. The relay must run with RELAY_ADMIN_TOKEN
set; this command sends the same RELAY_ADMIN_TOKEN, to the ops listener at
--addr (default from RELAY_LISTEN).
`

// cmdAck is relay ack: acknowledge, or --list.
func cmdAck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return ackCommand(ctx, "ack", args, stdout, stderr)
}

// cmdUnack is relay unack.
func cmdUnack(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return ackCommand(ctx, "unack", args, stdout, stderr)
}

// cmdShelve is relay shelve.
func cmdShelve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return ackCommand(ctx, "shelve", args, stdout, stderr)
}

func ackCommand(ctx context.Context, action string, args []string, stdout, stderr io.Writer) int {
	name := "relay " + action
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, ackUsage+"\nflags:\n"); fs.PrintDefaults() }
	addr := opsFlags(fs)
	comment := fs.String("comment", "", "why, or what is being done (up to 1000 bytes)")
	by := fs.String("by", os.Getenv("USER"), "who acts (default $USER)")
	var list, asJSON *bool
	var shelveFor *string
	switch action {
	case "ack":
		list = fs.Bool("list", false, "list the ongoing alarms and who acknowledged each, instead")
		asJSON = fs.Bool("json", false, "with --list: print the answer as JSON")
	case "shelve":
		shelveFor = fs.String("for", "", "how long (90m, 2h, 3d; at most 90d); left out: until the alarm clears")
	}
	alarm, code, ok := parseOneArg(fs, args, "alarm", stderr)
	if !ok {
		return code
	}
	client, code, err := addr.client()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return code
	}
	if list != nil && *list {
		if alarm != "" {
			fmt.Fprintf(stderr, "%s: --list takes no alarm\n", name)
			return 2
		}
		return ackList(ctx, client, *asJSON, stdout, stderr)
	}
	if alarm == "" {
		fmt.Fprintf(stderr, "%s: give the alarm's originId, as the chat message or relay ack --list shows it\n", name)
		return 2
	}
	if strings.TrimSpace(*by) == "" {
		fmt.Fprintf(stderr, "%s: say who acts with --by NAME ($USER is not set)\n", name)
		return 2
	}
	req := service.AckRequest{By: *by, Comment: *comment}
	if shelveFor != nil {
		req.Duration = *shelveFor
	}
	body, err := client.call(ctx, http.MethodPost, "/alarms/"+urlpath.Segment(alarm)+"/"+action, nil, req)
	var oe *opsError
	if errors.As(err, &oe) && (oe.Status == http.StatusConflict || oe.Status == http.StatusNotFound) {
		body, err = oe.Body, nil
		code = 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	var ans service.AckAnswer
	if err := json.Unmarshal(body, &ans); err != nil || ans.Result == nil {
		fmt.Fprintf(stderr, "%s: the relay's answer does not read: %s\n", name, termtext.Escape(string(body)))
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s\n", termtext.Escape(alarm), termtext.Escape(ans.Result.Text))
	return code
}

func ackList(ctx context.Context, client *opsClient, asJSON bool, stdout, stderr io.Writer) int {
	body, err := client.call(ctx, http.MethodGet, "/alarms", nil, nil)
	if err != nil {
		fmt.Fprintf(stderr, "relay ack --list: %v\n", err)
		return 1
	}
	if asJSON {
		_, _ = stdout.Write(body)
		return 0
	}
	var ans service.AckAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		fmt.Fprintf(stderr, "relay ack --list: the relay's answer does not read: %v\n", err)
		return 1
	}
	sort.SliceStable(ans.Alarms, func(i, j int) bool { return ans.Alarms[i].Level < ans.Alarms[j].Level })
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ALARM\tLEVEL\tSTATION\tDEVICE\tSINCE\tACKNOWLEDGED\tESCALATED TO")
	for _, a := range ans.Alarms {
		ack := "no"
		if a.Acknowledged && a.Ack != nil && a.Ack.At != nil {
			ack = fmt.Sprintf("by %s via %s at %s", a.Ack.By, a.Ack.Via, a.Ack.At.UTC().Format("15:04 UTC"))
		}
		// Each sink an escalation step named, and what became of the
		// alarm there when it is not delivered: why a page did not arrive.
		var esc []string
		for _, e := range a.Escalation {
			switch e.State {
			case store.StartDelivered, store.StartDigested:
				esc = append(esc, e.Sink)
			case store.StartPending:
				esc = append(esc, e.Sink+" (pending)")
			default:
				esc = append(esc, fmt.Sprintf("%s (%s: %s)", e.Sink, e.State, e.Reason))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", termtext.Escape(a.OriginID), a.LevelName, termtext.Escape(a.StationID),
			termtext.Escape(a.DeviceSN), a.OccurredAt.UTC().Format(time.RFC3339), termtext.Escape(ack), termtext.Escape(strings.Join(esc, ", ")))
	}
	_ = tw.Flush()
	fmt.Fprintf(stdout, "%d ongoing alarm(s)\n", len(ans.Alarms))
	return 0
}
