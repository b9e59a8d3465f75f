package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/rulefile"
	"github.com/relay-energy/relay/internal/termtext"
)

// maxAlarmFile bounds the alarm file relay route reads.
const maxAlarmFile = 16 << 20

// unsetPlaceholder stands in for variables the rules name but the
// environment lacks: relay route delivers nothing, so it needs no secret.
const unsetPlaceholder = rulefile.Placeholder

// cmdRoute prints, for each transition of an upstream alarm record, the
// routes it matches, the sinks it goes to and the first request of each (a
// NATS sink's subject, a webhook's URL); with --render, every request each
// sink would send.
func cmdRoute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("relay route", flag.ContinueOnError)
	fs.SetOutput(stderr)
	alarmFlag := fs.String("alarm", "", "file holding an upstream alarm record as JSON (- for stdin): one object, a list, or a getAlarmList answer")
	rulesFlag := fs.String("rules", "", "rules file (default $RELAY_RULES, or "+defaultRulesPath+")")
	renderFlag := fs.Bool("render", false, "also print every request each sink would send, body and all (secrets and signatures left out)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: relay route --alarm FILE [--rules FILE] [--render]\n\nShows which routes and sinks each transition of an alarm record would reach,\nand with --render exactly what each sink would send.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *alarmFlag == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}

	cfg, err := config.Load(ctx, envconfig.OsLookuper())
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	path := *rulesFlag
	if path == "" {
		path = cfg.Rules
	}
	var unset []string
	rules, err := route.Load(path, placeholderLookup(&unset))
	if err != nil {
		for _, e := range config.Problems(err) {
			fmt.Fprintln(stderr, e)
		}
		return 1
	}
	for _, name := range unset {
		fmt.Fprintf(stderr, "note: %s is not set: relay check and relay run would refuse these rules\n", name)
	}

	data, err := readAlarmFile(*alarmFlag)
	if err != nil {
		fmt.Fprintf(stderr, "relay route: %v\n", err)
		return 1
	}
	alarms, err := decodeAlarms(data, cfg.Upstream.Location())
	if err != nil {
		fmt.Fprintf(stderr, "relay route: %s: %v\n", *alarmFlag, err)
		return 1
	}
	fmt.Fprintf(stdout, "rules: %s\n", rules.File)
	now := time.Now()
	for _, a := range alarms {
		printRouting(stdout, rules, a, now, *renderFlag)
	}
	return 0
}

// placeholderLookup reads the variables a rules file names from the
// environment, and gives those it lacks unsetPlaceholder, adding their names
// to unset: for commands that read the rules but deliver nothing.
func placeholderLookup(unset *[]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if v, ok := os.LookupEnv(name); ok && strings.TrimSpace(v) != "" {
			return v, true
		}
		if !slices.Contains(*unset, name) {
			*unset = append(*unset, name)
		}
		return unsetPlaceholder, true
	}
}

func readAlarmFile(name string) ([]byte, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxAlarmFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > maxAlarmFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxAlarmFile)
	}
	return data, nil
}

// printRouting writes where each transition of a would go and, with
// render, every request each sink would send, body and all.
func printRouting(w io.Writer, rules *route.Rules, a event.Alarm, now time.Time, render bool) {
	// Every value is the upstream's text: escaped, so that it cannot move
	// the cursor or recolour the terminal.
	esc := termtext.Escape
	fmt.Fprintf(w, "\nalarm %s: level %d (%s), event %s \"%s\", device %s \"%s\" (%s), station %s \"%s\", system %s, tenant %s\n",
		esc(a.OriginID), a.Level, event.LevelName(a.Level), esc(a.EventCode), esc(a.EventDesc), esc(a.DeviceSN),
		esc(a.DeviceName), esc(a.DeviceTemplateCode), esc(a.StationID), esc(a.StationName), esc(a.SystemID), esc(a.TenantID))
	startEv := event.New(a, event.Start, now, false)
	start := rules.Match(&startEv)
	for _, tr := range event.Transitions {
		ev := event.New(a, tr, now, false)
		// The rules route the start; an end or invalid goes wherever its
		// start went (the delivery ledger, docs/design.md §5).
		res := start
		fmt.Fprintf(w, "  %s:\n", tr)
		if tr != event.Start {
			fmt.Fprintln(w, "    goes where its start went:")
		}
		if len(res.Routes) == 0 {
			fmt.Fprintln(w, "    no route matches: the event goes nowhere")
			continue
		}
		names := make([]string, len(res.Routes))
		for i, name := range res.Routes {
			names[i] = name
			if i < len(res.Routes)-1 {
				names[i] += " (continue)"
			}
		}
		fmt.Fprintf(w, "    routes: %s\n", strings.Join(names, ", "))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		rendered := make([][]sinktype.Request, len(res.Sinks))
		for i, name := range res.Sinks {
			s, _ := rules.Sink(name)
			if tr != event.Start && !s.SendResolved {
				fmt.Fprintf(tw, "    -> %s\t%s\t%s\n", s.Name, s.Type, "not sent: the sink says send_resolved: false")
				continue
			}
			// A template that fails renders the sink's default text, as
			// sending would, and says why.
			reqs, err := s.Config.Render(&ev)
			target := s.Target()
			switch {
			case len(reqs) > 0 && err != nil:
				target = reqs[0].What + " (default text: " + err.Error() + ")"
			case len(reqs) > 0:
				target = reqs[0].What
			case err != nil:
				target = "cannot render: " + err.Error()
			}
			rendered[i] = reqs
			fmt.Fprintf(tw, "    -> %s\t%s\t%s\n", s.Name, s.Type, esc(target))
		}
		tw.Flush()
		if !render {
			continue
		}
		for i, name := range res.Sinks {
			for _, r := range rendered[i] {
				fmt.Fprintf(w, "    %s sends %s:\n", name, esc(r.What))
				for line := range strings.SplitSeq(strings.TrimRight(string(r.Body), "\n"), "\n") {
					fmt.Fprintf(w, "      %s\n", esc(line))
				}
			}
		}
	}
}

// decodeAlarms reads upstream alarm records: one JSON object, a list of
// them, or a getAlarmList answer (its data.dataList). Ids and timestamps
// may be strings or numbers; zone-less time strings are read in loc.
func decodeAlarms(data []byte, loc *time.Location) ([]event.Alarm, error) {
	data = bytes.TrimSpace(data)
	var records []json.RawMessage
	switch {
	case len(data) == 0:
		return nil, errors.New("empty file: want an alarm record (a JSON object)")
	case data[0] == '[':
		if err := json.Unmarshal(data, &records); err != nil {
			return nil, fmt.Errorf("not a JSON list of alarm records: %w", err)
		}
	case data[0] == '{':
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(data, &obj); err != nil {
			return nil, fmt.Errorf("not a JSON object: %w", err)
		}
		records = []json.RawMessage{data}
		if list, ok := obj["alarms"]; ok {
			// What relay api alarms prints: each alarm keeps the
			// upstream record in raw.
			var items []struct {
				Raw json.RawMessage `json:"raw"`
			}
			if err := json.Unmarshal(list, &items); err != nil {
				return nil, fmt.Errorf("alarms is not a list of alarms as relay api alarms prints them: %w", err)
			}
			records = records[:0]
			for i, it := range items {
				if len(it.Raw) == 0 {
					return nil, fmt.Errorf("alarms[%d] has no raw upstream record", i)
				}
				records = append(records, it.Raw)
			}
		}
		if d, ok := obj["data"]; ok {
			var inner struct {
				DataList []json.RawMessage `json:"dataList"`
			}
			if json.Unmarshal(d, &inner) == nil && inner.DataList != nil {
				records = inner.DataList
			}
		}
	default:
		return nil, errors.New("not JSON: want an alarm record (a JSON object)")
	}
	if len(records) == 0 {
		return nil, errors.New("no alarm records in the file")
	}
	out := make([]event.Alarm, 0, len(records))
	for i, raw := range records {
		a, err := decodeAlarm(raw, loc)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// decodeAlarm decodes one alarm record tolerantly (docs/design.md §3):
// ids are kept as text whatever their JSON type, numbers may be strings,
// and the record is kept as received.
func decodeAlarm(raw json.RawMessage, loc *time.Location) (event.Alarm, error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(raw, &f); err != nil || f == nil {
		return event.Alarm{}, errors.New("not a JSON object")
	}
	text := func(key string) string {
		v := bytes.TrimSpace(f[key])
		if len(v) == 0 || string(v) == "null" {
			return ""
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			return strings.TrimSpace(s)
		}
		return string(v)
	}
	integer := func(key string) (int64, bool, error) {
		s := text(key)
		if s == "" {
			return 0, false, nil
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, true, nil
		}
		if x, err := strconv.ParseFloat(s, 64); err == nil && x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), true, nil
		}
		return 0, false, fmt.Errorf("%s: %q is not a whole number", key, s)
	}
	timeOf := func(msKey, strKey string) (time.Time, error) {
		ms, ok, err := integer(msKey)
		if err != nil {
			return time.Time{}, err
		}
		if ok && ms > 0 {
			return time.UnixMilli(ms).UTC(), nil
		}
		if s := text(strKey); s != "" {
			t, err := time.ParseInLocation(time.DateTime, s, loc)
			if err != nil {
				return time.Time{}, fmt.Errorf("%s: %q is not yyyy-MM-dd HH:mm:ss", strKey, s)
			}
			return t.UTC(), nil
		}
		return time.Time{}, nil
	}

	a := event.Alarm{
		OriginID:           text("originId"),
		EventCode:          text("eventCode"),
		EventDesc:          text("eventDesc"),
		EventType:          text("eventType"),
		TenantID:           text("tenantId"),
		TenantName:         text("tenantName"),
		StationID:          text("stationId"),
		StationName:        text("stationName"),
		SystemID:           text("systemId"),
		DeviceID:           text("deviceId"),
		DeviceSN:           text("deviceSn"),
		DeviceName:         text("deviceName"),
		DeviceTemplateCode: text("deviceTemplateCode"),
		Raw:                slices.Clone(raw),
	}
	if a.OriginID == "" {
		return event.Alarm{}, errors.New("no originId: want an alarm record of getAlarmList")
	}
	status, ok, err := integer("status")
	switch {
	case err != nil:
		return event.Alarm{}, err
	case !ok:
		a.Status = event.StatusOngoing
	default:
		if _, valid := event.ForStatus(int(status)); !valid {
			return event.Alarm{}, fmt.Errorf("status: %d is not 1, 0 or -1", status)
		}
		a.Status = int(status)
	}
	level, ok, err := integer("eventLevel")
	if err != nil {
		return event.Alarm{}, err
	}
	a.Level = -1
	if ok {
		a.Level = int(level)
	}
	if a.OccurredAt, err = timeOf("occurrenceTime", "occurrenceTimeStr"); err != nil {
		return event.Alarm{}, err
	}
	if a.RecoveredAt, err = timeOf("recoveryTime", "recoveryTimeStr"); err != nil {
		return event.Alarm{}, err
	}
	return a, nil
}
