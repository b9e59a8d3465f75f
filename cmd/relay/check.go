package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/poller"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/service"
	"github.com/relay-energy/relay/internal/termtext"
	"github.com/relay-energy/relay/internal/urlpath"
)

// defaultRulesPath is RELAY_RULES's default, used when the environment does
// not load and --rules is not given.
const defaultRulesPath = "/etc/relay/rules.yaml"

// onlineTimeout bounds the upstream login of check --online.
const onlineTimeout = 30 * time.Second

// cmdCheck validates the environment and the rules file as relay run does
// before it starts, prints the routing table, and exits 1 with one line per
// problem on stderr when there is any.
func cmdCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("relay check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rulesFlag := fs.String("rules", "", "rules file (default $RELAY_RULES, or "+defaultRulesPath+")")
	online := fs.Bool("online", false, "also log in upstream and connect to every sink")
	rulesOnly := fs.Bool("rules-only", false, "check the rules file alone, not whether relay run would start")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: relay check [--rules FILE] [--online | --rules-only]\n\n"+
			"Makes every check relay run makes before it starts, lists every problem, one per line,\n"+
			"and prints the routing table.")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *online && *rulesOnly {
		fmt.Fprintln(stderr, "relay check: --online and --rules-only exclude each other")
		return 2
	}

	var problems []error
	path, from := *rulesFlag, "--rules"
	var (
		rules *route.Rules
		cfg   config.Config
	)
	if *rulesOnly {
		if path == "" {
			path, from = envOr("RELAY_RULES", defaultRulesPath), "RELAY_RULES"
		}
		var err error
		if rules, err = route.Load(path, os.LookupEnv); err != nil {
			problems = append(problems, config.Problems(err)...)
		}
	} else {
		var cfgErr error
		cfg, cfgErr = config.Load(ctx, envconfig.OsLookuper())
		problems = append(problems, config.Problems(cfgErr)...)
		if path == "" {
			path, from = cfg.Rules, "RELAY_RULES"
		}
		var more []error
		rules, more = service.Preflight(cfg, path, from, os.LookupEnv)
		problems = append(problems, more...)
		if len(problems) == 0 {
			fmt.Fprintln(stdout, "environment: ok")
			printScaling(stdout, cfg)
		}
	}
	if rules != nil {
		printRules(stdout, rules, time.Now())
	}

	if *online && len(problems) == 0 {
		problems = append(problems, checkUpstreams(ctx, stdout, cfg)...)
		problems = append(problems, service.ProbeSinks(ctx, stdout, rules, cfg)...)
	}

	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, p)
		}
		fmt.Fprintf(stdout, "relay check: %d problem%s\n", len(problems), termtext.Plural(len(problems)))
		return 1
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}

// printScaling writes where the state lives, this replica, and the tenants:
// for the one tenant of the environment its upstream, for a tenants file a
// table. It shows where each secret comes from, never its value.
func printScaling(w io.Writer, cfg config.Config) {
	st := cfg.Store
	tenants := cfg.Tenants()
	switch {
	case st.Backend == config.BackendJetStream:
		fmt.Fprintf(w, "state: jetstream, %d replica%s of each stream and bucket; local caches in %s\n",
			st.Replicas, termtext.Plural(st.Replicas), cfg.StateDir())
	case cfg.TenantsFile != "":
		fmt.Fprintf(w, "state: bbolt, one file per tenant in %s\n", cfg.StateDir())
	default:
		fmt.Fprintf(w, "state: bbolt, %s\n", st.Path)
	}
	group := cmp.Or(cfg.Replica.EgressGroup, "none")
	switch {
	case st.Backend == config.BackendJetStream:
		fmt.Fprintf(w, "replica: %s, lease TTL %s, egress group %s\n", cfg.Replica.ID, termtext.Duration(cfg.Replica.LeaseTTL), group)
	case cfg.Replica.EgressGroup != "":
		fmt.Fprintf(w, "replica: %s, egress group %s\n", cfg.Replica.ID, group)
	}
	if cfg.TenantsFile == "" {
		fmt.Fprintf(w, "upstream: %s (RELAY_APP_ID set, RELAY_APP_SECRET set)\n", config.RedactURL(cfg.Upstream.BaseURL))
		return
	}
	fmt.Fprintf(w, "tenants: %d from %s\n\n", len(tenants), cfg.TenantsFile)
	table(w, func(tw io.Writer) {
		fmt.Fprintln(tw, "TENANT\tUPSTREAM\tAPP SECRET\tRATE\tRULES\tSTATE")
		for _, t := range tenants {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/min\t%s\t%s\n", t.ID, config.RedactURL(t.Upstream.BaseURL), t.SecretFrom,
				t.Upstream.RateLimit, t.Rules, t.StatePath)
		}
	})
	fmt.Fprintln(w)
}

// envOr returns the environment variable name, or def when it is unset or
// empty.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// printRules writes the routing table: every sink, every route, the time
// intervals with their next occurrences after now, the maintenance windows,
// the inhibit rules, and the warnings. It shows no secret: only the names of
// the variables they come from, and header names without values.
func printRules(w io.Writer, r *route.Rules, now time.Time) {
	fmt.Fprintf(w, "rules: %s: %d sink%s, %d route%s\n\n", r.File, len(r.Sinks), termtext.Plural(len(r.Sinks)), len(r.Routes), termtext.Plural(len(r.Routes)))
	table(w, func(tw io.Writer) {
		fmt.Fprintln(tw, "SINK\tTYPE\tTARGET\tOPTIONS")
		for _, s := range r.Sinks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, s.Type, s.Target(), strings.Join(sinkOptions(s), ", "))
		}
	})
	fmt.Fprintln(w)
	table(w, func(tw io.Writer) {
		fmt.Fprintln(tw, "ROUTE\tMATCH\tTO\tCONTINUE\tOPTIONS")
		for _, rt := range r.Routes {
			cont := "no"
			if rt.Continue {
				cont = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", rt.Name, rt.Match, strings.Join(rt.To, ", "), cont, strings.Join(rt.Options(), ", "))
		}
	})
	printManagement(w, r, now)
	if len(r.Variables) > 0 {
		fmt.Fprintf(w, "\nvariables the sinks read (values not shown): %s\n", strings.Join(r.Variables, ", "))
	}
	if warn := r.Warnings(); len(warn) > 0 {
		fmt.Fprintln(w)
		for _, s := range warn {
			fmt.Fprintln(w, "warning:", s)
		}
	}
	fmt.Fprintln(w)
}

// table writes the rows fill writes as aligned columns, without the spaces
// that pad an empty last column.
func table(w io.Writer, fill func(tw io.Writer)) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fill(tw)
	tw.Flush()
	for line := range strings.Lines(b.String()) {
		fmt.Fprintln(w, strings.TrimRight(line, " \n"))
	}
}

func sinkOptions(s route.Sink) []string {
	out := s.Config.Summary()
	out = append(out, "max_age "+termtext.Duration(s.MaxAge), "max_retry_after "+termtext.Duration(s.MaxRetryAfter))
	switch {
	case s.Digest.Off:
		out = append(out, "digest off")
	case s.Digest.Threshold != route.DefaultDigestThreshold || s.Digest.Window != route.DefaultDigestWindow:
		out = append(out, fmt.Sprintf("digest %d per %s", s.Digest.Threshold, termtext.Duration(s.Digest.Window)))
	}
	if s.DailySummary != nil {
		out = append(out, "daily_summary "+s.DailySummary.String())
	}
	return out
}

// occurrences shown per time interval.
const shownOccurrences = 3

// printManagement writes each time interval with its next occurrences after
// now in its zone, and each maintenance window and inhibit rule, one line
// each.
func printManagement(w io.Writer, r *route.Rules, now time.Time) {
	if ivs := r.OrderedIntervals(); len(ivs) > 0 {
		fmt.Fprintf(w, "\ntime intervals, next %d occurrences:\n", shownOccurrences)
		for _, iv := range ivs {
			fmt.Fprintf(w, "  %s: %s\n", iv.Name, occurrences(iv, now))
		}
	}
	if len(r.Maintenance) > 0 {
		fmt.Fprintln(w, "\nmaintenance windows (alarms suppressed while one of the intervals is active):")
		for _, m := range r.Maintenance {
			fmt.Fprintf(w, "  %s: %s during %s\n", m.Name, m.Match.String(), strings.Join(m.When, ", "))
		}
	}
	if len(r.Inhibits) > 0 {
		fmt.Fprintln(w, "\ninhibit rules (alarms suppressed while a masking alarm is ongoing):")
		for _, in := range r.Inhibits {
			fmt.Fprintf(w, "  %s: %s masks %s on the same %s\n", in.Name, in.Source.String(), in.Target.String(), in.Equal)
		}
	}
}

// occurrences writes the next spans of iv after now, in its zone, such as
// "Mon 2026-11-23 09:00–18:00 Asia/Shanghai".
func occurrences(iv *route.Interval, now time.Time) string {
	spans := iv.Next(now, shownOccurrences)
	if len(spans) == 0 {
		return "none within a year"
	}
	zone := iv.Location().String()
	yearAhead := now.AddDate(1, 0, 0)
	out := make([]string, len(spans))
	for i, s := range spans {
		start := s.Start.Format("Mon 2006-01-02 15:04")
		if s.Start.Equal(now) {
			start = "now"
		}
		var end string
		y, m, d := s.Start.Date()
		switch ey, em, ed := s.End.Date(); {
		case s.End.Equal(yearAhead):
			out[i] = "from " + start + " throughout the year ahead " + zone
			continue
		case ey == y && em == m && ed == d:
			end = s.End.Format("15:04")
		case s.End.Equal(time.Date(y, m, d+1, 0, 0, 0, 0, s.End.Location())):
			end = "24:00"
		default:
			end = s.End.Format("Mon 2006-01-02 15:04")
		}
		out[i] = start + "–" + end + " " + zone
	}
	return strings.Join(out, ", ")
}

// checkUpstreams logs in once to the Open Data Service of every tenant, and
// returns one problem per tenant that could not; with a tenants file each
// line names its tenant.
func checkUpstreams(ctx context.Context, stdout io.Writer, cfg config.Config) []error {
	var problems []error
	for _, t := range cfg.Tenants() {
		prefix := ""
		if cfg.TenantsFile != "" {
			prefix = "tenant " + t.ID + ": "
		}
		// The tenant's upstream, with the request budget relay run shares.
		tenant := ""
		if cfg.TenantsFile != "" {
			tenant = t.ID
		}
		if err := checkUpstream(ctx, stdout, prefix, tenant, service.TenantUpstream(cfg, t), cfg.Poll); err != nil {
			problems = append(problems, fmt.Errorf("%s%w", prefix, err))
		}
	}
	return problems
}

// checkUpstream logs in to the Open Data Service of upstream once, and says
// so on a line that starts with prefix, with the upstream's clock. Then it
// shows the devices' stamp offsets: those the running relay learnt of
// tenant (learntStamps), or, when it has none to tell, what one look at the
// upstream's alarms shows (lookAtStamps), so that the upstream's budget is
// spent on that look only when it tells something new.
func checkUpstream(ctx context.Context, stdout io.Writer, prefix, tenant string, upstream opendata.Config, poll config.Poll) error {
	client, err := opendata.New(upstream)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, onlineTimeout)
	defer cancel()
	res, err := client.Login(ctx)
	if err != nil {
		return fmt.Errorf("upstream login: %w", err)
	}
	name := termtext.Escape(res.TenantID)
	if res.Tenant.Name != "" {
		name += " (" + termtext.Escape(res.Tenant.Name) + ")"
	}
	fmt.Fprintf(stdout, "%supstream: logged in to %s as tenant %s; token valid until %s\n",
		prefix, config.RedactURL(upstream.BaseURL), name, res.ExpiresAt.UTC().Format(time.RFC3339))
	if offset, ok := client.ClockOffset(); ok {
		fmt.Fprintf(stdout, "%supstream clock: %s off this machine's (its Date header; windows are taken in its clock)\n",
			prefix, signed(offset.Round(time.Second)))
	} else {
		fmt.Fprintf(stdout, "%supstream clock: no Date header; windows are taken in this machine's clock\n", prefix)
	}
	if learntStamps(ctx, stdout, prefix, tenant) {
		return nil
	}
	return lookAtStamps(ctx, stdout, prefix, client, poll)
}

// lookAtStamps reads one page of the ongoing alarms and one of the alarms
// recovered within the late horizon, and says which devices stamp their
// alarms ahead of the upstream's clock (a stamp in its future is impossible
// without an offset), at least by how much. An offset is a warning, not a
// problem.
func lookAtStamps(ctx context.Context, stdout io.Writer, prefix string, client *opendata.Client, poll config.Poll) error {
	offset, _ := client.ClockOffset()
	up := time.Now().Add(offset)
	var recs []event.Alarm
	for _, q := range []opendata.AlarmQuery{
		{Page: 1, Size: 500, Start: up.Add(-poll.Lookback), End: up.Add(poll.MaxClockSkew)},
		{Page: 1, Size: 500, Start: up.Add(-poll.LateHorizon), End: up.Add(poll.MaxClockSkew), Recovered: true},
	} {
		pg, err := client.AlarmPage(ctx, q)
		if err != nil {
			return fmt.Errorf("upstream alarm list: %w", err)
		}
		recs = append(recs, pg.Alarms...)
	}
	offset, _ = client.ClockOffset()
	sum := poller.LookAtStamps(recs, time.Now().Add(offset))
	devices := map[string]bool{}
	for i := range recs {
		devices[recs[i].DeviceSN] = true
	}
	if sum.Off == 0 {
		fmt.Fprintf(stdout, "%sdevice stamps: none of the %d alarms listed (%d devices) is stamped ahead of the upstream's clock\n",
			prefix, len(recs), len(devices))
		return nil
	}
	fmt.Fprintf(stdout, "%sdevice stamps: %d of %d devices stamp alarms ahead of the upstream's clock, at least by: %s\n",
		prefix, sum.Off, len(devices), offsetList(sum.Worst))
	// One look gives the least each device is off, not its offset: one
	// warning, for the device furthest ahead.
	if advice, ok := poller.AheadAdvice(sum.Worst[0].Offset); ok {
		fmt.Fprintf(stdout, "%swarning: device %s: %s\n", prefix, termtext.Escape(sum.Worst[0].SN), advice)
	}
	return nil
}

// offsetList formats devices' offsets as "SN +8h0m0s, SN -2m0s".
func offsetList(ds []poller.DeviceOffset) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = termtext.Escape(d.SN) + " " + signed(d.Offset)
	}
	return strings.Join(out, ", ")
}

// stampsTimeout bounds check --online's question to the running relay.
const stampsTimeout = 5 * time.Second

// learntStamps asks the running relay's ops listener (RELAY_LISTEN, with
// RELAY_ADMIN_TOKEN) for the stamp offsets its poller learnt of tenant's
// devices (empty: the one tenant), which stamps behind the upstream's clock
// need: they show only as new alarms are listed. It reports whether the
// relay had devices measured to show. Not reaching it is said, not a
// problem: check --online also runs before relay does.
func learntStamps(ctx context.Context, stdout io.Writer, prefix, tenant string) bool {
	behind := "stamps behind the upstream's clock show only as new alarms are listed: the running relay measures them " +
		"(relay_device_stamp_offset_seconds, its log, and relay check --online beside it)"
	c, _, err := newOpsClient("")
	if err != nil {
		fmt.Fprintf(stdout, "%sdevice stamps: %s; %v\n", prefix, behind, err)
		return false
	}
	if tenant != "" {
		c.base += "/tenants/" + urlpath.Segment(tenant)
	}
	ctx, cancel := context.WithTimeout(ctx, stampsTimeout)
	defer cancel()
	answer, err := c.call(ctx, http.MethodGet, "/stamps", nil, nil)
	if err != nil {
		fmt.Fprintf(stdout, "%sdevice stamps: %s; the running relay did not answer: %s\n", prefix, behind, termtext.Escape(err.Error()))
		return false
	}
	var sum poller.StampSummary
	if err := json.Unmarshal(answer, &sum); err != nil {
		fmt.Fprintf(stdout, "%sdevice stamps: the running relay's answer is not readable: %v\n", prefix, err)
		return false
	}
	if sum.Devices == 0 {
		fmt.Fprintf(stdout, "%sdevice stamps, as the running relay learnt them: no device measured yet (a device is measured "+
			"when an alarm of it is first listed ongoing)\n", prefix)
		return false
	}
	fmt.Fprintf(stdout, "%sdevice stamps, as the running relay learnt them: %d devices measured, %d more than a minute off "+
		"the upstream's clock; offsets from %s to %s, median %s\n",
		prefix, sum.Devices, sum.Off, signed(sum.Min), signed(sum.Max), signed(sum.Median))
	if len(sum.Worst) > 0 {
		fmt.Fprintf(stdout, "%sdevice stamps: furthest off: %s\n", prefix, offsetList(sum.Worst))
	}
	warned := map[int]bool{}
	for _, d := range sum.Worst {
		if h, ok := d.Zone(); ok && !warned[h] {
			warned[h] = true
			fmt.Fprintf(stdout, "%swarning: device %s: %s\n", prefix, termtext.Escape(d.SN), poller.ZoneAdvice(h))
		}
	}
	return true
}

// signed formats d with its sign: +8h0m0s, -2m0s, 0s.
func signed(d time.Duration) string {
	if d > 0 {
		return "+" + d.String()
	}
	return d.String()
}
