package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/relay-energy/relay/internal/config"
	"github.com/relay-energy/relay/internal/opendata"
	"github.com/relay-energy/relay/internal/service"
	"github.com/relay-energy/relay/internal/termtext"
)

// apiEndpoint is one upstream endpoint that `relay api` can call.
type apiEndpoint struct {
	name    string // the command-line name, such as alarms
	spec    string // the spec's name, such as getAlarmList
	summary string
	// define declares the endpoint's flags on fs and returns the call,
	// which reads them once fs is parsed.
	define func(fs *flag.FlagSet, cfg config.Config) func(context.Context, *opendata.Client) (any, error)
}

func apiEndpoints() []apiEndpoint {
	return []apiEndpoint{
		{"login", "login", "log in and print the login result (the token itself is never printed)",
			func(*flag.FlagSet, config.Config) func(context.Context, *opendata.Client) (any, error) {
				return func(ctx context.Context, c *opendata.Client) (any, error) { return c.Login(ctx) }
			}},
		{"stations", "getTenantStationList", "the tenant's stations",
			func(fs *flag.FlagSet, _ config.Config) func(context.Context, *opendata.Client) (any, error) {
				firmware := fs.Bool("firmware", false, "ask for firmware information (isGetFirmwareVersion=1)")
				return func(ctx context.Context, c *opendata.Client) (any, error) {
					return c.TenantStations(ctx, opendata.StationListQuery{FirmwareVersion: *firmware})
				}
			}},
		{"systems", "getTenantSystemList", "the tenant's systems",
			func(fs *flag.FlagSet, _ config.Config) func(context.Context, *opendata.Client) (any, error) {
				firmware := fs.Bool("firmware", false, "ask for firmware information (isGetFirmwareVersion=1)")
				scope := scopeFlag(fs)
				return func(ctx context.Context, c *opendata.Client) (any, error) {
					return c.TenantSystems(ctx, opendata.SystemListQuery{FirmwareVersion: *firmware, AssetScope: scope.value})
				}
			}},
		{"devices", "getTenantDeviceList", "the tenant's devices",
			func(fs *flag.FlagSet, _ config.Config) func(context.Context, *opendata.Client) (any, error) {
				firmware := fs.Bool("firmware", false, "ask for firmware information (isGetFirmwareVersion=1)")
				types := listFlag(fs, "device-type", "device type (templateCode) such as Inverter; repeatable or a comma list")
				scope := scopeFlag(fs)
				return func(ctx context.Context, c *opendata.Client) (any, error) {
					return c.TenantDevices(ctx, opendata.DeviceListQuery{FirmwareVersion: *firmware, DeviceTypes: *types, AssetScope: scope.value})
				}
			}},
		{"station-devices", "getStationDeviceList", "the devices of one station",
			func(fs *flag.FlagSet, _ config.Config) func(context.Context, *opendata.Client) (any, error) {
				station := fs.String("station-id", "", "station id (required)")
				firmware := fs.Bool("firmware", false, "ask for firmware information (isGetFirmwareVersion=1)")
				types := listFlag(fs, "device-type", "device type (templateCode) such as Inverter; repeatable or a comma list")
				return func(ctx context.Context, c *opendata.Client) (any, error) {
					return c.StationDevices(ctx, opendata.StationDevicesQuery{StationID: *station, FirmwareVersion: *firmware, DeviceTypes: *types})
				}
			}},
		{"station-detail", "getStationDetail", "the detail of one station",
			func(fs *flag.FlagSet, _ config.Config) func(context.Context, *opendata.Client) (any, error) {
				station := fs.String("station-id", "", "station id (required)")
				return func(ctx context.Context, c *opendata.Client) (any, error) { return c.StationDetail(ctx, *station) }
			}},
		{"alarms", "getAlarmList", "alarms: ongoing, or with --recovered ended and invalid ones",
			func(fs *flag.FlagSet, cfg config.Config) func(context.Context, *opendata.Client) (any, error) {
				from := &timeFlag{ago: cfg.Poll.Lookback}
				to := &timeFlag{}
				fs.Var(from, "from", "start of the window: a duration before now (24h), RFC 3339 or epoch ms (default: RELAY_LOOKBACK before now)")
				fs.Var(to, "to", "end of the window, written as --from (default: now)")
				recovered := fs.Bool("recovered", false, "history alarms (isRecovery=true) instead of ongoing ones")
				levels := listFlag(fs, "levels", "event levels 0 (urgent) to 3 (minor); repeatable or a comma list")
				stations := listFlag(fs, "station-id", "station ids; repeatable or a comma list")
				systems := listFlag(fs, "system-id", "system ids; repeatable or a comma list")
				sns := listFlag(fs, "device-sn", "device serial numbers; repeatable or a comma list")
				codes := listFlag(fs, "event-code", "event codes; repeatable or a comma list")
				types := listFlag(fs, "device-type", "device types (deviceTemplateCodes); repeatable or a comma list")
				page := fs.Int("page", 1, "page number")
				size := fs.Int("size", 500, "page size; above 500 it is read as several upstream pages")
				all := fs.Bool("all", false, "read every page from --page on and merge them")
				return func(ctx context.Context, c *opendata.Client) (any, error) {
					var lv []int
					for _, s := range *levels {
						n, err := strconv.Atoi(s)
						if err != nil {
							return nil, fmt.Errorf("--levels %q: want numbers 0 to 3", s)
						}
						lv = append(lv, n)
					}
					now := time.Now()
					q := opendata.AlarmQuery{
						Page: *page, Size: *size, Start: from.at(now), End: to.at(now),
						StationIDs: *stations, SystemIDs: *systems, DeviceSNs: *sns, Recovered: *recovered,
						Levels: lv, EventCodes: *codes, DeviceTemplateCodes: *types,
					}
					if *all {
						return c.Alarms(ctx, q)
					}
					return c.AlarmPage(ctx, q)
				}
			}},
		{"realtime", "getDeviceRealTimeData", "the latest measurements of devices (more than 100 are split)",
			func(fs *flag.FlagSet, _ config.Config) func(context.Context, *opendata.Client) (any, error) {
				nodes := listFlag(fs, "node", "device node ids (required); repeatable or a comma list")
				return func(ctx context.Context, c *opendata.Client) (any, error) { return c.DeviceRealTime(ctx, *nodes) }
			}},
		historyEndpoint("system-history", "getSystemPointsDayMonthYearDataList", "history data of systems", "system-id", "system ids", true,
			(*opendata.Client).SystemHistory),
		historyEndpoint("station-history", "getStationPointsDayMonthYearDataList", "history data of stations", "station-id", "station ids", true,
			(*opendata.Client).StationHistory),
		historyEndpoint("device-history", "getDevicePointsDayMonthYearDataList", "history data of devices", "node", "device node ids", false,
			(*opendata.Client).DeviceHistory),
	}
}

func historyEndpoint(name, spec, summary, idFlag, idWhat string, identity bool,
	call func(*opendata.Client, context.Context, opendata.HistoryQuery) ([]opendata.HistoryItem, error),
) apiEndpoint {
	return apiEndpoint{name, spec, summary + " (more than 50 ids, 31 days or 12 months are split and merged)",
		func(fs *flag.FlagSet, _ config.Config) func(context.Context, *opendata.Client) (any, error) {
			ids := listFlag(fs, idFlag, idWhat+" (required); repeatable or a comma list")
			dim := fs.String("dimension", "day", "day, month, year or total")
			start := fs.String("start-date", "", "first date, yyyy-MM-dd (default: the upstream's)")
			end := fs.String("end-date", "", "last date, yyyy-MM-dd (default: the upstream's)")
			code := new(string)
			if identity {
				code = fs.String("identity-code", "", "owner identity: assetsManage (the upstream's default), care, powerMonitorInvested, powerMonitor or vpp")
			}
			return func(ctx context.Context, c *opendata.Client) (any, error) {
				return call(c, ctx, opendata.HistoryQuery{
					IDs: *ids, Dimension: opendata.Dimension(*dim), StartDate: *start, EndDate: *end, IdentityCode: *code,
				})
			}
		}}
}

const apiUsage = `usage: relay api ENDPOINT [flags]

Calls one endpoint of the Open Data Service and prints its typed answer as
indented JSON. Reads RELAY_BASE_URL, RELAY_APP_ID and RELAY_APP_SECRET
(required), RELAY_GRANT_TYPE, RELAY_AUTH_SCHEME, RELAY_RATE_LIMIT,
RELAY_UPSTREAM_TZ, RELAY_LOOKBACK and RELAY_LOG_LEVEL. Every call, the login
included, spends the upstream's rate budget, which a running relay on the same
IP shares; asks that need more calls than the budget allows wait for it.

Endpoints (either name works) and their flags:
`

func cmdAPI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, apiUsage)
		printEndpoints(stderr)
		return 2
	}
	if a := args[0]; a == "-h" || a == "-help" || a == "--help" || a == "help" {
		fmt.Fprint(stdout, apiUsage)
		printEndpoints(stdout)
		return 0
	}
	ep, ok := findEndpoint(args[0])
	if !ok {
		fmt.Fprintf(stderr, "relay api: unknown endpoint %q; run 'relay api -h' for the list\n", args[0])
		return 2
	}
	cfg, cfgErr := config.Load(ctx, envconfig.OsLookuper())
	fs := flag.NewFlagSet("relay api "+ep.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	run := ep.define(fs, cfg)
	tenantID := fs.String("tenant", "", "with RELAY_TENANTS_FILE: the id of the tenant whose upstream to call")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: relay api %s [flags]\n  %s (%s)\n", ep.name, ep.summary, ep.spec)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "relay api %s: unexpected argument %q\n", ep.name, fs.Arg(0))
		return 2
	}
	if cfgErr == nil {
		cfgErr = cfg.RequireUpstream()
	}
	if cfgErr != nil {
		fmt.Fprintf(stderr, "relay api: %v\n", cfgErr)
		return 1
	}
	// A one-shot command shows warnings unless RELAY_LOG_LEVEL asks for
	// debug or error; config.Load has checked the value.
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	if level == slog.LevelInfo {
		level = slog.LevelWarn
	}
	tenants := cfg.Tenants()
	t := tenants[0]
	switch {
	case *tenantID != "":
		var ok bool
		if t, ok = cfg.Tenant(*tenantID); !ok {
			fmt.Fprintf(stderr, "relay api: tenant %q is not in RELAY_TENANTS_FILE\n", *tenantID)
			return 2
		}
	case len(tenants) > 1:
		fmt.Fprintf(stderr, "relay api: RELAY_TENANTS_FILE lists %d tenants: name one with --tenant\n", len(tenants))
		return 2
	}
	upstream := service.TenantUpstream(cfg, t)
	upstream.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if upstream.BudgetFile == "" {
		fmt.Fprintf(stderr, "relay api: note: the state directory %s does not exist: "+
			"this call does not share a running relay's request budget\n", filepath.Dir(t.StatePath))
	}
	client, err := opendata.New(upstream)
	if err != nil {
		fmt.Fprintf(stderr, "relay api: %v\n", err)
		return 1
	}
	res, err := run(ctx, client)
	if err != nil {
		fmt.Fprintf(stderr, "relay api %s: %v\n", ep.name, err)
		return 1
	}
	out, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "relay api %s: writing the answer as JSON: %v\n", ep.name, err)
		return 1
	}
	// The answer is the upstream's text: characters that a terminal would
	// act on are written as JSON escapes.
	out = append(termtext.JSON(out), '\n')
	if _, err := stdout.Write(out); err != nil {
		fmt.Fprintf(stderr, "relay api %s: %v\n", ep.name, err)
		return 1
	}
	return 0
}

func findEndpoint(name string) (apiEndpoint, bool) {
	for _, ep := range apiEndpoints() {
		if name == ep.name || strings.EqualFold(name, ep.spec) {
			return ep, true
		}
	}
	return apiEndpoint{}, false
}

// printEndpoints lists every endpoint with its flags.
func printEndpoints(w io.Writer) {
	for _, ep := range apiEndpoints() {
		fmt.Fprintf(w, "\n  %s (%s): %s\n", ep.name, ep.spec, ep.summary)
		fs := flag.NewFlagSet(ep.name, flag.ContinueOnError)
		ep.define(fs, config.Config{Poll: config.Poll{Lookback: 720 * time.Hour}})
		fs.VisitAll(func(f *flag.Flag) {
			def := ""
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" {
				def = " (default " + f.DefValue + ")"
			}
			fmt.Fprintf(w, "      --%-14s %s%s\n", f.Name, f.Usage, def)
		})
	}
}

// stringList is a flag that may be repeated and takes comma lists.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*l = append(*l, part)
		}
	}
	return nil
}

func listFlag(fs *flag.FlagSet, name, usage string) *[]string {
	l := &stringList{}
	fs.Var(l, name, usage)
	return (*[]string)(l)
}

// assetScope is the --asset-scope flag.
type assetScope struct{ value opendata.AssetScope }

func scopeFlag(fs *flag.FlagSet) *assetScope {
	s := &assetScope{}
	fs.Var(s, "asset-scope", "all, owned or shared (default: the upstream's, owned)")
	return s
}

func (s *assetScope) String() string {
	switch s.value {
	case opendata.ScopeAll:
		return "all"
	case opendata.ScopeOwned:
		return "owned"
	case opendata.ScopeShared:
		return "shared"
	}
	return ""
}

func (s *assetScope) Set(v string) error {
	switch strings.ToLower(v) {
	case "all", "0":
		s.value = opendata.ScopeAll
	case "owned", "1":
		s.value = opendata.ScopeOwned
	case "shared", "2":
		s.value = opendata.ScopeShared
	default:
		return fmt.Errorf("want all, owned or shared")
	}
	return nil
}

// timeFlag is a point in time: a duration before now, RFC 3339, or epoch
// milliseconds. Unset, it is ago before now (now when ago is zero).
type timeFlag struct {
	ago   time.Duration
	fixed time.Time
}

// String returns the time when it was set as one; the defaults are told in
// the flags' usage.
func (f *timeFlag) String() string {
	if f.fixed.IsZero() {
		return ""
	}
	return f.fixed.Format(time.RFC3339)
}

func (f *timeFlag) Set(v string) error {
	v = strings.TrimSpace(v)
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return errors.New("want a duration before now, such as 24h")
		}
		f.ago, f.fixed = d, time.Time{}
		return nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		f.fixed = t
		return nil
	}
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 0 {
		f.fixed = time.UnixMilli(ms)
		return nil
	}
	return errors.New("want a duration before now (24h), an RFC 3339 time or epoch milliseconds")
}

func (f *timeFlag) at(now time.Time) time.Time {
	if !f.fixed.IsZero() {
		return f.fixed
	}
	return now.Add(-f.ago)
}
