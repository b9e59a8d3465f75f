package route

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// alarm is a sample upstream alarm record for matching tests.
func alarm() event.Alarm {
	return event.Alarm{
		OriginID:           "o-1",
		Status:             event.StatusOngoing,
		Level:              2,
		EventCode:          "E100",
		EventType:          "fault",
		TenantID:           "t1",
		StationID:          "s1",
		StationName:        "North Field 1",
		SystemID:           "sys1",
		DeviceSN:           "SN1",
		DeviceName:         "Battery rack 7",
		DeviceTemplateCode: "bms",
		OccurredAt:         time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC),
	}
}

func newEvent(tr event.Transition, edit func(a *event.Alarm)) *event.Event {
	a := alarm()
	if edit != nil {
		edit(&a)
	}
	ev := event.New(a, tr, a.OccurredAt, false)
	return &ev
}

func mustParse(t testing.TB, text string) *Rules {
	t.Helper()
	r, err := Parse("rules.yaml", yamlText(text), nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const sinksABCD = `
sinks:
  - {name: a, type: console}
  - {name: b, type: console}
  - {name: c, type: console}
  - {name: d, type: console}
`

func TestRoutesMatchFirstThenContinueAndSinksGetAnEventOnce(t *testing.T) {
	r := mustParse(t, sinksABCD+`
routes:
  - name: all-to-a
    to: [a]
    continue: true
  - name: urgent
    match: {levels: [0, 1]}
    to: [b, a]
  - name: ends
    match: {transitions: [end]}
    to: [c, b]
    continue: true
  - name: north
    match: {station_names: ["North *"]}
    to: [d, c]
  - name: fallback
    to: [b]
`)
	cases := []struct {
		name       string
		ev         *event.Event
		wantRoutes []string
		wantSinks  []string
	}{
		{"the first matching route without continue stops the search",
			newEvent(event.Start, func(a *event.Alarm) { a.Level = 0 }),
			[]string{"all-to-a", "urgent"}, []string{"a", "b"}},
		{"continue goes on, and a sink named twice gets the event once",
			newEvent(event.End, func(a *event.Alarm) { a.RecoveredAt = a.OccurredAt.Add(time.Minute) }),
			[]string{"all-to-a", "ends", "north"}, []string{"a", "c", "b", "d"}},
		{"a route without match catches what earlier routes left",
			newEvent(event.Start, func(a *event.Alarm) { a.StationName = "South" }),
			[]string{"all-to-a", "fallback"}, []string{"a", "b"}},
		{"an invalid transition is a transition like the others",
			newEvent(event.Invalid, func(a *event.Alarm) { a.StationName = "South" }),
			[]string{"all-to-a", "fallback"}, []string{"a", "b"}},
		{"a level outside 0-3 only matches routes without levels",
			newEvent(event.Start, func(a *event.Alarm) { a.Level = 9 }),
			[]string{"all-to-a", "north"}, []string{"a", "d", "c"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := r.Match(c.ev)
			if !slices.Equal(got.Routes, c.wantRoutes) || !slices.Equal(got.Sinks, c.wantSinks) {
				t.Fatalf("Match = %v, want routes %v sinks %v", got, c.wantRoutes, c.wantSinks)
			}
			if s := r.SinksFor(c.ev); !slices.Equal(s, c.wantSinks) {
				t.Fatalf("SinksFor = %v, want %v", s, c.wantSinks)
			}
			if s := r.AppendSinks([]string{"x", "a"}, c.ev); !slices.Equal(s, append([]string{"x", "a"}, c.wantSinks...)) {
				t.Fatalf("AppendSinks after [x a] = %v, want [x a] then %v", s, c.wantSinks)
			}
		})
	}
}

func TestNoMatchingRouteMeansNoSinks(t *testing.T) {
	r := mustParse(t, sinksABCD+`
routes:
  - {name: urgent, match: {levels: [0]}, to: [a]}
`)
	if got := r.SinksFor(newEvent(event.Start, nil)); got != nil {
		t.Fatalf("SinksFor = %v, want nil", got)
	}
	if got := r.Match(newEvent(event.Start, nil)); got.Routes != nil || got.Sinks != nil {
		t.Fatalf("Match = %+v, want nothing", got)
	}
}

func TestEveryMatchFieldSelectsEvents(t *testing.T) {
	cases := []struct {
		field  string
		values string
		hit    func(a *event.Alarm)
		miss   func(a *event.Alarm)
		tr     event.Transition // transition of both events
		trMiss event.Transition // transition of the miss event, if it differs
	}{
		{"transitions", "[end, invalid]", nil, nil, event.End, event.Start},
		{"levels", "[0, severe]", func(a *event.Alarm) { a.Level = 1 }, func(a *event.Alarm) { a.Level = 2 }, event.Start, ""},
		{"tenant_ids", "[t9, 1001]", func(a *event.Alarm) { a.TenantID = "1001" }, nil, event.Start, ""},
		{"station_ids", "[5001]", func(a *event.Alarm) { a.StationID = "5001" }, nil, event.Start, ""},
		{"system_ids", "[7001, 7002]", func(a *event.Alarm) { a.SystemID = "7002" }, nil, event.Start, ""},
		{"device_sns", "[SN-9]", func(a *event.Alarm) { a.DeviceSN = "SN-9" }, nil, event.Start, ""},
		{"device_types", "[store_pcs]", func(a *event.Alarm) { a.DeviceTemplateCode = "Store_PCS" }, func(a *event.Alarm) { a.DeviceTemplateCode = "Store_BMS" }, event.Start, ""},
		{"event_codes", "[E-GRID-1]", func(a *event.Alarm) { a.EventCode = "E-GRID-1" }, nil, event.Start, ""},
		{"event_types", "[grid]", func(a *event.Alarm) { a.EventType = "grid" }, nil, event.Start, ""},
		{"station_names", `["Süd*", "West ?"]`, func(a *event.Alarm) { a.StationName = "West 4" }, func(a *event.Alarm) { a.StationName = "West 42" }, event.Start, ""},
		{"device_names", `["*rack ?"]`, func(a *event.Alarm) { a.DeviceName = "Battery rack 3" }, func(a *event.Alarm) { a.DeviceName = "Battery rack" }, event.Start, ""},
		{"many ids use a set", fmt.Sprintf("[%s]", strings.Repeat("x, ", 20)+"s1"), nil, func(a *event.Alarm) { a.StationID = "s2" }, event.Start, ""},
	}
	for _, c := range cases {
		t.Run(c.field, func(t *testing.T) {
			field := c.field
			if strings.HasPrefix(field, "many") {
				field = "station_ids"
			}
			r := mustParse(t, sinksABCD+fmt.Sprintf(`
routes:
  - name: picked
    match: {%s: %s}
    to: [a]
  - name: rest
    to: [b]
`, field, c.values))
			trMiss := c.tr
			if c.trMiss != "" {
				trMiss = c.trMiss
			}
			if got := r.SinksFor(newEvent(c.tr, c.hit)); !slices.Equal(got, []string{"a"}) {
				t.Fatalf("matching event went to %v, want [a]", got)
			}
			if got := r.SinksFor(newEvent(trMiss, c.miss)); !slices.Equal(got, []string{"b"}) {
				t.Fatalf("other event went to %v, want [b]", got)
			}
		})
	}
}

func TestMatchFieldsCombineWithAnd(t *testing.T) {
	r := mustParse(t, sinksABCD+`
routes:
  - name: north-urgent-bms
    match: {levels: [0], station_names: ["North *"], device_types: [bms]}
    to: [a]
`)
	for _, c := range []struct {
		name string
		edit func(a *event.Alarm)
		want bool
	}{
		{"all three hold", func(a *event.Alarm) { a.Level = 0 }, true},
		{"wrong level", func(a *event.Alarm) { a.Level = 1 }, false},
		{"wrong station", func(a *event.Alarm) { a.Level, a.StationName = 0, "South" }, false},
		{"wrong device type", func(a *event.Alarm) { a.Level, a.DeviceTemplateCode = 0, "pcs" }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := len(r.SinksFor(newEvent(event.Start, c.edit))) == 1; got != c.want {
				t.Fatalf("matched = %v, want %v", got, c.want)
			}
		})
	}
}

func TestGlobs(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"North *", "North Field 1", true},
		{"North *", "North ", true},
		{"North *", "North", false},
		{"*", "", true},
		{"*Field*", "North Field 1", true},
		{"*Field", "North Field 1", false},
		{"a*b*c", "aXXbYYbZZc", true},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXcYYb", false},
		{"??", "北京", true},
		{"?", "北京", false},
		{"站点*号", "站点12号", true},
		{`Rack \*`, "Rack *", true},
		{`Rack \*`, "Rack 7", false},
		{`a\?`, "a?", true},
		{`a\\b`, `a\b`, true},
		{"exact", "exact", true},
		{"exact", "Exact", false},
		{"**x", "yx", true},
	}
	for _, c := range cases {
		t.Run(c.pattern+" "+c.name, func(t *testing.T) {
			g, literal, err := compileGlob(c.pattern)
			if err != nil {
				t.Fatalf("compile %q: %v", c.pattern, err)
			}
			got := g.match(c.name)
			if literal {
				got = g.lit() == c.name
			}
			if got != c.want {
				t.Fatalf("%q matches %q = %v, want %v", c.pattern, c.name, got, c.want)
			}
		})
	}
}

func TestBadGlobsAreRefused(t *testing.T) {
	for _, c := range []struct{ pattern, want string }{
		{"", "empty pattern"},
		{`Rack \`, "lone"},
		{`100\%`, "escapes only"},
	} {
		t.Run(c.pattern, func(t *testing.T) {
			if _, _, err := compileGlob(c.pattern); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("compileGlob(%q) = %v, want an error containing %q", c.pattern, err, c.want)
			}
		})
	}
}

func TestManyRoutesKeepTheirOrder(t *testing.T) {
	var y strings.Builder
	y.WriteString(sinksABCD + "routes:\n")
	for i := range 600 {
		switch i {
		case 70:
			y.WriteString("  - {name: r70, match: {device_sns: [SN1]}, to: [a], continue: true}\n")
		case 550:
			y.WriteString("  - {name: r550, match: {station_names: [\"North*\"]}, to: [c]}\n")
		default:
			fmt.Fprintf(&y, "  - {name: r%d, match: {station_ids: [s%d]}, to: [b]}\n", i, i+2)
		}
	}
	r := mustParse(t, y.String())
	got := r.Match(newEvent(event.Start, nil))
	if !slices.Equal(got.Routes, []string{"r70", "r550"}) || !slices.Equal(got.Sinks, []string{"a", "c"}) {
		t.Fatalf("Match = %+v, want routes r70 r550, sinks a c", got)
	}
}

func TestAppendSinksDoesNotAllocate(t *testing.T) {
	r := mustParse(t, sinksABCD+`
routes:
  - {name: all, to: [a, b], continue: true}
  - {name: north, match: {station_names: ["North *"], levels: [2]}, to: [b, c]}
`)
	ev := newEvent(event.Start, nil)
	dst := make([]string, 0, 8)
	if n := testing.AllocsPerRun(100, func() { dst = r.AppendSinks(dst[:0], ev) }); n != 0 {
		t.Fatalf("AppendSinks allocates %v times per call", n)
	}
	if !slices.Equal(dst, []string{"a", "b", "c"}) {
		t.Fatalf("sinks = %v", dst)
	}
}

// TestARouteOfEndsAloneIsWarnedAbout: an end goes where its start went, so
// a route that matches only ends or invalidations sends nothing; relay
// check says so.
func TestARouteOfEndsAloneIsWarnedAbout(t *testing.T) {
	rules, err := Parse("rules.yaml", []byte(`sinks:
  - name: audit
    type: console
routes:
  - name: closures
    match: {transitions: [end, invalid]}
    to: [audit]
    continue: true
  - name: all
    to: [audit]
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	w := rules.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], `route "closures" matches no start, so it sends nothing`) {
		t.Fatalf("warnings %q, want one about closures", w)
	}
}
