package route

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// manageRules uses every key of alarm management. The time intervals come
// last, after the routes and windows that name them.
const manageRules = `
sinks:
  - name: bus
    type: nats
    digest: false
  - name: oncall
    type: slack
    channel: C0123
    digest: { threshold: 20, window: 5m }
    daily_summary: "08:00 Asia/Shanghai"
  - name: log
    type: console
    digest: { window: 1h }
routes:
  - name: all
    to: [bus, log]
    suppress: false
    continue: true
  - name: urgent
    match: { levels: [urgent] }
    to: [oncall, log]
    hold: 2m
    suppress: true
    repeat: 4h
    active_when: [business-hours, weekend-days]
    mute_when: [night]
    continue: true
  - name: station-one
    match: { station_ids: [S1] }
    to: [oncall]
  - name: never-after-station-one
    match: { station_ids: [S1] }
    to: [oncall]
maintenance:
  - name: monthly-inverter-service
    when: [first-monday-morning]
    match: { station_ids: [S1], device_types: [inverter] }
  - name: fleet-upgrade
    when: [night, first-monday-morning]
inhibit:
  - name: collector-offline-masks-device-comms
    source: { event_codes: [DC_OFFLINE] }
    target: { event_types: [communication] }
  - name: system-down-masks-its-devices
    source: { event_codes: [SYS_DOWN] }
    target: { levels: [major, minor] }
    equal: system
time_intervals:
  - name: business-hours
    time_intervals:
      - weekdays: ['monday:friday']
        times: [{start_time: '09:00', end_time: '18:00'}]
        location: Asia/Shanghai
  - name: weekend-days
    time_intervals:
      - weekdays: [saturday, Sunday]
        location: Asia/Shanghai
  - name: night
    time_intervals:
      - times: [{start_time: '22:00', end_time: '24:00'}, {start_time: '00:00', end_time: '06:00'}]
        location: Europe/Berlin
  - name: first-monday-morning
    time_intervals:
      - weekdays: [monday]
        days_of_month: ['1:7']
        months: ['january:march', 10, november:december]
        years: ['2026:2030']
        times: [{start_time: '06:00', end_time: '12:00'}]
        location: Europe/Berlin
`

func manageEvent(edit func(a *event.Alarm)) *event.Event {
	return newEvent(event.Start, edit)
}

func TestAlarmManagementKeysAreParsed(t *testing.T) {
	r := mustParse(t, manageRules)

	bus, _ := r.Sink("bus")
	oncall, _ := r.Sink("oncall")
	log, _ := r.Sink("log")
	if !bus.Digest.Off || bus.DailySummary != nil {
		t.Errorf("bus: digest %+v, daily summary %v; want off and none", bus.Digest, bus.DailySummary)
	}
	if oncall.Digest != (Digest{Threshold: 20, Window: 5 * time.Minute}) {
		t.Errorf("oncall digest = %+v", oncall.Digest)
	}
	if d := oncall.DailySummary; d == nil || d.Hour != 8 || d.Minute != 0 || d.Location.String() != "Asia/Shanghai" {
		t.Errorf("oncall daily summary = %+v", d)
	}
	if log.Digest != (Digest{Threshold: DefaultDigestThreshold, Window: time.Hour}) {
		t.Errorf("log digest = %+v, want the default threshold and a window of 1h", log.Digest)
	}

	all, urgent, station := r.Routes[0], r.Routes[1], r.Routes[2]
	if all.Suppress == nil || *all.Suppress || all.Hold != 0 || all.Repeat != 0 || all.ActiveWhen != nil || all.MuteWhen != nil {
		t.Errorf("route all: %+v", all)
	}
	if urgent.Hold != 2*time.Minute || urgent.Repeat != 4*time.Hour || urgent.Suppress == nil || !*urgent.Suppress ||
		!slices.Equal(urgent.ActiveWhen, []string{"business-hours", "weekend-days"}) || !slices.Equal(urgent.MuteWhen, []string{"night"}) {
		t.Errorf("route urgent: %+v", urgent)
	}
	if station.Suppress != nil {
		t.Errorf("suppress unset = %v, want nil", *station.Suppress)
	}

	if len(r.Intervals) != 4 || r.Intervals["night"].Line != 57 || r.Intervals["night"].Location().String() != "Europe/Berlin" {
		t.Errorf("intervals: %v", r.Intervals)
	}
	if got := r.OrderedIntervals(); len(got) != 4 || got[0].Name != "business-hours" || got[3].Name != "first-monday-morning" {
		t.Errorf("OrderedIntervals = %v", got)
	}

	if len(r.Maintenance) != 2 {
		t.Fatalf("maintenance: %+v", r.Maintenance)
	}
	m := r.Maintenance[0]
	if m.Name != "monthly-inverter-service" || m.Line != 34 || !slices.Equal(m.When, []string{"first-monday-morning"}) ||
		m.Match.String() != "station_ids=S1 device_types=Inverter" {
		t.Errorf("maintenance[0] = %+v (match %s)", m, m.Match.String())
	}
	if m := r.Maintenance[1]; m.Match.String() != "any event" || !slices.Equal(m.When, []string{"night", "first-monday-morning"}) {
		t.Errorf("maintenance[1] = %+v", m)
	}

	if len(r.Inhibits) != 2 {
		t.Fatalf("inhibits: %+v", r.Inhibits)
	}
	in := r.Inhibits[0]
	if in.Name != "collector-offline-masks-device-comms" || in.Line != 40 || in.Equal != ScopeStation ||
		in.Source.String() != "event_codes=DC_OFFLINE" || in.Target.String() != "event_types=communication" {
		t.Errorf("inhibit[0] = %+v", in)
	}
	if in := r.Inhibits[1]; in.Equal != ScopeSystem || in.Target.String() != "levels=2,3" {
		t.Errorf("inhibit[1] = %+v", in)
	}
	if w := r.Warnings(); len(w) != 0 {
		t.Errorf("warnings: %q", w)
	}
}

func TestSinkDefaultsOfAlarmManagement(t *testing.T) {
	r := mustParse(t, sinksABCD+"routes:\n  - {name: all, to: [a]}\n")
	a, _ := r.Sink("a")
	if a.Digest != (Digest{Threshold: 10, Window: 10 * time.Minute}) || a.DailySummary != nil {
		t.Fatalf("defaults: digest %+v, daily summary %v", a.Digest, a.DailySummary)
	}
	if len(r.Intervals) != 0 || r.Maintenance != nil || r.Inhibits != nil {
		t.Fatalf("a file without alarm management has some: %v %v %v", r.Intervals, r.Maintenance, r.Inhibits)
	}
	if name, ok := r.MaintenanceAt(manageEvent(nil), time.Now()); ok {
		t.Fatalf("MaintenanceAt without windows = %q", name)
	}
}

func TestSinkSameSeesDigestAndDailySummary(t *testing.T) {
	parse := func(opts string) Sink {
		r := mustParse(t, "sinks:\n  - {name: a, type: console"+opts+"}\nroutes:\n  - {name: all, to: a}\n")
		s, _ := r.Sink("a")
		return s
	}
	base := parse(`, daily_summary: "08:00 UTC"`)
	for _, c := range []struct {
		opts string
		same bool
	}{
		{`, daily_summary: "08:00 UTC"`, true},
		{`, daily_summary: "08:00 UTC", digest: {threshold: 10, window: 10m}`, true},
		{`, daily_summary: "08:00 UTC", digest: true`, true},
		{`, daily_summary: "08:00 UTC", digest: false`, false},
		{`, daily_summary: "08:00 UTC", digest: {threshold: 11}`, false},
		{`, daily_summary: "08:00 UTC", digest: {window: 11m}`, false},
		{`, daily_summary: "08:01 UTC"`, false},
		{`, daily_summary: "08:00 Europe/Berlin"`, false},
		{``, false},
	} {
		if got := base.Same(parse(c.opts)); got != c.same {
			t.Errorf("Same with %q = %v, want %v", c.opts, got, c.same)
		}
	}
}

// at is a time in a zone, to the minute.
func at(zone string, y int, mo time.Month, d, h, mi int) time.Time {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		panic(err)
	}
	return time.Date(y, mo, d, h, mi, 0, 0, loc)
}

func TestMaintenanceAtIsTheFirstOpenWindowThatAdmitsTheAlarm(t *testing.T) {
	r := mustParse(t, manageRules)
	inverterS1 := manageEvent(func(a *event.Alarm) { a.StationID = "S1"; a.DeviceTemplateCode = "INVERTER" })
	meterS1 := manageEvent(func(a *event.Alarm) { a.StationID = "S1"; a.DeviceTemplateCode = "ElectricMeter" })
	inverterS2 := manageEvent(func(a *event.Alarm) { a.StationID = "S2"; a.DeviceTemplateCode = "Inverter" })
	firstMonday := at("Europe/Berlin", 2026, 12, 7, 9, 30) // the first Monday of December
	secondMonday := at("Europe/Berlin", 2026, 12, 14, 9, 30)
	night := at("Europe/Berlin", 2026, 12, 14, 23, 30)
	for _, c := range []struct {
		name string
		ev   *event.Event
		t    time.Time
		want string
	}{
		{"an inverter of S1 on the first Monday", inverterS1, firstMonday, "monthly-inverter-service"},
		{"a meter of S1: only the fleet-wide window", meterS1, firstMonday, "fleet-upgrade"},
		{"an inverter of S2: only the fleet-wide window", inverterS2, firstMonday, "fleet-upgrade"},
		{"the second Monday", inverterS1, secondMonday, ""},
		{"at night: the fleet-wide window", inverterS1, night, "fleet-upgrade"},
		{"the first Monday, one minute before the window: still the night", inverterS1, firstMonday.Add(-3*time.Hour - 31*time.Minute), "fleet-upgrade"},
		{"the first Monday, as it opens", inverterS1, firstMonday.Add(-3*time.Hour - 30*time.Minute), "monthly-inverter-service"},
		{"the first Monday, as it closes", inverterS1, firstMonday.Add(2*time.Hour + 30*time.Minute), ""},
		{"the first Monday of a month it does not name", inverterS1, at("Europe/Berlin", 2026, 6, 1, 9, 0), ""},
		{"the first Monday of a year it does not name", inverterS1, at("Europe/Berlin", 2031, 12, 1, 9, 0), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			name, ok := r.MaintenanceAt(c.ev, c.t)
			if name != c.want || ok != (c.want != "") {
				t.Fatalf("MaintenanceAt = %q, %v; want %q", name, ok, c.want)
			}
		})
	}
}

func TestRouteMutedOutsideActiveWhenAndInsideMuteWhen(t *testing.T) {
	r := mustParse(t, manageRules)
	urgent := &r.Routes[1]
	for _, c := range []struct {
		name  string
		t     time.Time
		muted string
	}{
		{"a weekday in business hours", at("Asia/Shanghai", 2026, 11, 24, 14, 0), ""},
		{"a weekday in business hours and the Berlin night", at("Asia/Shanghai", 2026, 11, 24, 10, 0), "night"},
		{"a weekday before business hours", at("Asia/Shanghai", 2026, 11, 24, 4, 59), "outside business-hours, weekend-days"},
		{"a weekday as business hours end", at("Asia/Shanghai", 2026, 11, 24, 18, 0), "outside business-hours, weekend-days"},
		{"a weekday just before they end", at("Asia/Shanghai", 2026, 11, 24, 17, 59), ""},
		{"a Saturday, all day", at("Asia/Shanghai", 2026, 11, 28, 3, 0), ""},
		{"a Saturday, in the Berlin night", at("Europe/Berlin", 2026, 11, 28, 23, 0), "night"},
		{"a Sunday just before the Berlin night ends", at("Europe/Berlin", 2026, 11, 29, 5, 59), "night"},
		{"a Sunday as the Berlin night ends", at("Europe/Berlin", 2026, 11, 29, 6, 0), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			why, muted := r.RouteMuted(urgent, c.t)
			if why != c.muted || muted != (c.muted != "") {
				t.Fatalf("RouteMuted = %q, %v; want %q", why, muted, c.muted)
			}
		})
	}
	if why, muted := r.RouteMuted(&r.Routes[0], at("Europe/Berlin", 2026, 11, 28, 23, 0)); muted {
		t.Fatalf("a route without active_when and mute_when is muted: %q", why)
	}
}

func TestRoutesToFollowsFirstMatchAndContinue(t *testing.T) {
	r := mustParse(t, manageRules)
	names := func(rts []*Route) string {
		var out []string
		for _, rt := range rts {
			out = append(out, rt.Name)
		}
		return strings.Join(out, ",")
	}
	urgentS1 := manageEvent(func(a *event.Alarm) { a.Level = 0; a.StationID = "S1" })
	minorS1 := manageEvent(func(a *event.Alarm) { a.Level = 3; a.StationID = "S1" })
	minorS2 := manageEvent(func(a *event.Alarm) { a.Level = 3; a.StationID = "S2" })
	for _, c := range []struct {
		ev         *event.Event
		sink, want string
	}{
		{urgentS1, "log", "all,urgent"},
		{urgentS1, "oncall", "urgent,station-one"}, // station-one stops the search: never-after-station-one is not reached
		{urgentS1, "bus", "all"},
		{minorS1, "oncall", "station-one"},
		{minorS2, "oncall", ""},
		{minorS2, "nowhere", ""},
	} {
		got := r.RoutesTo(c.ev, c.sink)
		if names(got) != c.want {
			t.Errorf("RoutesTo(level %d at %s, %s) = %q, want %q", c.ev.Data.Level, c.ev.Data.StationID, c.sink, names(got), c.want)
		}
		for _, rt := range got {
			if rt != &r.Routes[slices.IndexFunc(r.Routes, func(x Route) bool { return x.Name == rt.Name })] {
				t.Errorf("RoutesTo returned a copy of route %s, want a pointer into Rules.Routes", rt.Name)
			}
		}
	}
}

func TestScopeKeyJoinsTenantAndID(t *testing.T) {
	d := &event.Data{TenantID: "10001", StationID: "20001", SystemID: "7001", DeviceSN: "SN-9"}
	for _, c := range []struct {
		scope Scope
		data  *event.Data
		want  string
	}{
		{ScopeStation, d, "10001/20001"},
		{ScopeSystem, d, "10001/7001"},
		{ScopeDevice, d, "10001/SN-9"},
		{ScopeSystem, &event.Data{TenantID: "10001", StationID: "20001"}, ""},
		{ScopeDevice, &event.Data{TenantID: "10001"}, ""},
		{Scope("rack"), d, ""},
	} {
		if got := c.scope.Key(c.data); got != c.want {
			t.Errorf("%s.Key = %q, want %q", c.scope, got, c.want)
		}
	}
	other := &event.Data{TenantID: "10002", StationID: "20001"}
	if ScopeStation.Key(d) == ScopeStation.Key(other) {
		t.Error("the same station id in two tenants has one key")
	}
}

func TestUnusedIntervalIsAWarning(t *testing.T) {
	r := mustParse(t, `
sinks:
  - {name: a, type: console}
routes:
  - {name: all, to: [a]}
time_intervals:
  - name: spare
    time_intervals: [{}]
`)
	w := r.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], `rules.yaml:6: time interval "spare" is not named by any route or maintenance window`) {
		t.Fatalf("warnings = %q", w)
	}
}
