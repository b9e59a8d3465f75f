package route

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// intervalOf parses one time interval written as the YAML list of its
// entries.
func intervalOf(t testing.TB, entries string) *Interval {
	t.Helper()
	r := mustParse(t, `
sinks:
  - {name: a, type: console}
routes:
  - {name: all, to: [a], active_when: [it]}
time_intervals:
  - name: it
    time_intervals: `+entries+"\n")
	return r.Intervals["it"]
}

func utc(y int, mo time.Month, d, h, mi int) time.Time {
	return time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
}

// spansText writes spans in UTC, one "start/end" each.
func spansText(spans []Span) string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Start.UTC().Format("01-02 15:04")+"/"+s.End.UTC().Format("01-02 15:04"))
	}
	return strings.Join(out, ", ")
}

// Europe/Berlin goes from CET (+1) to CEST (+2) at 02:00 on 2026-03-29, and
// back at 03:00 on 2026-10-25. An interval follows the wall clock.
func TestIntervalNextAcrossDaylightSavingTime(t *testing.T) {
	for _, c := range []struct {
		name, entries string
		from          time.Time
		n             int
		want          string // UTC
	}{
		{"01:00-04:00 lasts 2h when the clocks go forward, then 3h",
			"[{times: [{start_time: '01:00', end_time: '04:00'}], location: Europe/Berlin}]",
			utc(2026, 3, 28, 12, 0), 2, "03-29 00:00/03-29 02:00, 03-29 23:00/03-30 02:00"},
		{"01:00-04:00 lasts 4h when the clocks go back",
			"[{times: [{start_time: '01:00', end_time: '04:00'}], location: Europe/Berlin}]",
			utc(2026, 10, 24, 12, 0), 2, "10-24 23:00/10-25 03:00, 10-26 00:00/10-26 03:00"},
		{"02:30-05:00 starts when the clocks jump to 03:00",
			"[{times: [{start_time: '02:30', end_time: '05:00'}], location: Europe/Berlin}]",
			utc(2026, 3, 28, 12, 0), 1, "03-29 01:00/03-29 03:00"},
		{"02:30-05:00 is left and entered again when the clocks go back from 03:00 to 02:00",
			"[{times: [{start_time: '02:30', end_time: '05:00'}], location: Europe/Berlin}]",
			utc(2026, 10, 24, 12, 0), 3, "10-25 00:30/10-25 01:00, 10-25 01:30/10-25 04:00, 10-26 01:30/10-26 04:00"},
		{"a night across midnight is one span, 7h when the clocks go forward",
			"[{times: [{start_time: '22:00', end_time: '24:00'}, {start_time: '00:00', end_time: '06:00'}], location: Europe/Berlin}]",
			utc(2026, 3, 28, 12, 0), 2, "03-28 21:00/03-29 04:00, 03-29 20:00/03-30 04:00"},
		{"a night across midnight is one span, 9h when the clocks go back",
			"[{times: [{start_time: '22:00', end_time: '24:00'}, {start_time: '00:00', end_time: '06:00'}], location: Europe/Berlin}]",
			utc(2026, 10, 24, 12, 0), 1, "10-24 20:00/10-25 05:00"},
		{"a Sunday in Berlin is 23h long in March",
			"[{weekdays: [sunday], location: Europe/Berlin}]",
			utc(2026, 3, 28, 12, 0), 1, "03-28 23:00/03-29 22:00"},
		{"a weekend is one span from Saturday to Monday",
			"[{weekdays: [saturday, sunday], location: Asia/Shanghai}]",
			utc(2026, 11, 23, 12, 0), 2, "11-27 16:00/11-29 16:00, 12-04 16:00/12-06 16:00"},
		{"the last day of the month",
			"[{days_of_month: ['-1'], times: [{start_time: '20:00', end_time: '21:00'}], location: Europe/Berlin}]",
			utc(2026, 1, 15, 0, 0), 3, "01-31 19:00/01-31 20:00, 02-28 19:00/02-28 20:00, 03-31 18:00/03-31 19:00"},
		{"entries in two zones that touch make one span",
			"[{times: [{start_time: '09:00', end_time: '18:00'}], location: Asia/Shanghai}, {times: [{start_time: '11:00', end_time: '13:00'}], location: Europe/Berlin}]",
			utc(2026, 11, 23, 12, 0), 2, "11-24 01:00/11-24 12:00, 11-25 01:00/11-25 12:00"},
		{"without location: UTC",
			"[{times: [{start_time: '09:00', end_time: '10:00'}]}]",
			utc(2026, 11, 23, 12, 0), 1, "11-24 09:00/11-24 10:00"},
		{"an interval active at the start begins there",
			"[{times: [{start_time: '09:00', end_time: '18:00'}], location: Asia/Shanghai}]",
			utc(2026, 11, 23, 5, 17), 2, "11-23 05:17/11-23 10:00, 11-24 01:00/11-24 10:00"},
		{"always: one span of a year",
			"[{}]", utc(2026, 11, 23, 12, 0), 3, "11-23 12:00/11-23 12:00"},
		{"a year outside the next: none",
			"[{years: ['2030']}]", utc(2026, 11, 23, 12, 0), 3, ""},
		{"the 30th of February: none",
			"[{months: [february], days_of_month: [30]}]", utc(2026, 11, 23, 12, 0), 3, ""},
		{"n = 0: none",
			"[{}]", utc(2026, 11, 23, 12, 0), 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			iv := intervalOf(t, c.entries)
			got := iv.Next(c.from, c.n)
			if s := spansText(got); s != c.want {
				t.Fatalf("Next = %s\nwant   %s", s, c.want)
			}
			for _, s := range got {
				if s.Start.Location() != iv.Location() || s.End.Location() != iv.Location() {
					t.Fatalf("span %v is not in the interval's zone %v", s, iv.Location())
				}
			}
		})
	}
	if got := intervalOf(t, "[{}]").Next(utc(2026, 11, 23, 12, 0), 1); len(got) != 1 || !got[0].End.Equal(utc(2027, 11, 23, 12, 0)) {
		t.Fatalf("an interval always active: %v, want one span ending a year ahead", got)
	}
}

func TestIntervalContainsFollowsTheWallClock(t *testing.T) {
	iv := intervalOf(t, "[{times: [{start_time: '01:00', end_time: '04:00'}], location: Europe/Berlin}]")
	for _, c := range []struct {
		t    time.Time
		want bool
	}{
		{utc(2026, 3, 28, 23, 59), false}, // 00:59 CET
		{utc(2026, 3, 29, 0, 0), true},    // 01:00 CET
		{utc(2026, 3, 29, 0, 59), true},   // 01:59 CET
		{utc(2026, 3, 29, 1, 0), true},    // 03:00 CEST
		{utc(2026, 3, 29, 1, 59), true},   // 03:59 CEST
		{utc(2026, 3, 29, 2, 0), false},   // 04:00 CEST
		{utc(2026, 10, 25, 0, 59), true},  // 02:59 CEST
		{utc(2026, 10, 25, 1, 0), true},   // 02:00 CET
		{utc(2026, 10, 25, 2, 59), true},  // 03:59 CET
		{utc(2026, 10, 25, 3, 0), false},  // 04:00 CET
	} {
		if got := iv.Contains(c.t); got != c.want {
			t.Errorf("Contains(%s) = %v, want %v", c.t.In(iv.Location()).Format("2006-01-02 15:04 MST"), got, c.want)
		}
	}
	if (&Interval{}).Contains(utc(2026, 1, 1, 0, 0)) || (&Interval{}).Next(utc(2026, 1, 1, 0, 0), 3) != nil {
		t.Error("the zero Interval is active")
	}
}

// bruteSpans finds the spans of iv from t up to limit by testing every
// minute.
func bruteSpans(iv *Interval, t, limit time.Time) []Span {
	var out []Span
	active := iv.Contains(t)
	start := t
	for x := t.Truncate(time.Minute).Add(time.Minute); x.Before(limit); x = x.Add(time.Minute) {
		if now := iv.Contains(x); now != active {
			if now {
				start = x
			} else {
				out = append(out, Span{start, x})
			}
			active = now
		}
	}
	return out
}

// TestIntervalNextAgreesWithAMinuteByMinuteScan checks Next against testing
// every minute, from random starts through the year, for intervals with
// every kind of condition in zones with and without daylight saving time.
func TestIntervalNextAgreesWithAMinuteByMinuteScan(t *testing.T) {
	intervals := []string{
		"[{weekdays: ['monday:friday'], times: [{start_time: '09:00', end_time: '18:00'}], location: Asia/Shanghai}]",
		"[{times: [{start_time: '22:00', end_time: '24:00'}, {start_time: '00:00', end_time: '06:00'}], location: Europe/Berlin}]",
		"[{times: [{start_time: '02:15', end_time: '02:45'}, {start_time: '01:30', end_time: '03:10'}], location: Europe/Berlin}]",
		"[{times: [{start_time: '00:30', end_time: '02:30'}], location: America/New_York}, {weekdays: [tuesday], times: [{start_time: '05:00', end_time: '07:00'}], location: Australia/Lord_Howe}]",
		"[{days_of_month: ['-3:-1'], location: Europe/London}, {days_of_month: ['1:2'], months: [march, october, november], location: UTC}]",
		"[{weekdays: [monday], days_of_month: ['1:7'], times: [{start_time: '06:00', end_time: '12:00'}], location: Europe/Berlin}]",
		"[{times: [{start_time: '23:59', end_time: '24:00'}], location: Asia/Kolkata}]",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	starts := []time.Time{
		utc(2026, 3, 28, 20, 0), utc(2026, 10, 24, 20, 0), utc(2026, 3, 8, 5, 0), utc(2026, 11, 1, 4, 0),
		utc(2026, 4, 4, 14, 0), utc(2026, 10, 3, 15, 0), // Lord Howe changes by 30 minutes
	}
	for range 4 {
		starts = append(starts, utc(2026, 1, 1, 0, 0).Add(time.Duration(rng.Int64N(int64(365*24*time.Hour)))).Truncate(time.Minute))
	}
	for i, entries := range intervals {
		iv := intervalOf(t, entries)
		for _, from := range starts {
			t.Run(fmt.Sprintf("interval %d from %s", i, from.Format(time.RFC3339)), func(t *testing.T) {
				limit := from.Add(40 * 24 * time.Hour)
				want := bruteSpans(iv, from, limit)
				got := iv.Next(from, len(want)+1)
				// The last span Next finds may end after the scan's limit.
				if len(got) > len(want) {
					got = got[:len(want)]
				}
				if spansText(got) != spansText(want) {
					t.Fatalf("Next = %s\nscan = %s", spansText(got), spansText(want))
				}
			})
		}
	}
}

func TestIntervalNextFromASecondInsideAMinute(t *testing.T) {
	iv := intervalOf(t, "[{times: [{start_time: '09:00', end_time: '10:00'}]}]")
	from := time.Date(2026, 11, 23, 9, 30, 15, 0, time.UTC)
	got := iv.Next(from, 2)
	if len(got) != 2 || !got[0].Start.Equal(from) || !got[0].End.Equal(utc(2026, 11, 23, 10, 0)) || !got[1].Start.Equal(utc(2026, 11, 24, 9, 0)) {
		t.Fatalf("Next = %v", got)
	}
	before := time.Date(2026, 11, 23, 8, 59, 59, 0, time.UTC)
	if got := iv.Next(before, 1); len(got) != 1 || !got[0].Start.Equal(utc(2026, 11, 23, 9, 0)) {
		t.Fatalf("Next one second before the start = %v", got)
	}
}

func TestDailyTimeNextIsOncePerDayInItsZone(t *testing.T) {
	shanghai, _ := time.LoadLocation("Asia/Shanghai")
	berlin, _ := time.LoadLocation("Europe/Berlin")
	eight := DailyTime{Hour: 8, Location: shanghai}
	for _, c := range []struct {
		d     DailyTime
		after time.Time
		want  time.Time
	}{
		{eight, utc(2026, 11, 22, 23, 59), utc(2026, 11, 23, 0, 0)},
		{eight, utc(2026, 11, 23, 0, 0), utc(2026, 11, 24, 0, 0)}, // strictly after
		{eight, utc(2026, 11, 23, 12, 0), utc(2026, 11, 24, 0, 0)},
		{DailyTime{Hour: 8, Minute: 30, Location: berlin}, utc(2026, 3, 28, 12, 0), utc(2026, 3, 29, 6, 30)},   // CEST
		{DailyTime{Hour: 8, Minute: 30, Location: berlin}, utc(2026, 10, 24, 12, 0), utc(2026, 10, 25, 7, 30)}, // CET
		{DailyTime{Hour: 2, Minute: 30, Location: berlin}, utc(2026, 3, 28, 12, 0), utc(2026, 3, 29, 1, 30)},   // skipped: shown as 03:30
		{DailyTime{Hour: 23, Minute: 15}, utc(2026, 12, 31, 23, 15), utc(2027, 1, 1, 23, 15)},                  // no zone: UTC
	} {
		if got := c.d.Next(c.after); !got.Equal(c.want) {
			t.Errorf("%s after %s = %s, want %s", c.d, c.after.Format(time.RFC3339), got.UTC().Format(time.RFC3339), c.want.Format(time.RFC3339))
		}
	}
	// 02:30 happens twice in Berlin on 2026-10-25: once that day, and once
	// on each other day of the week.
	twoThirty := DailyTime{Hour: 2, Minute: 30, Location: berlin}
	x := utc(2026, 10, 22, 12, 0)
	days := map[string]bool{}
	for range 7 {
		x = twoThirty.Next(x)
		days[x.In(berlin).Format("2006-01-02")] = true
		if got := x.In(berlin).Format("15:04"); got != "02:30" {
			t.Fatalf("daily time at %s", got)
		}
	}
	if len(days) != 7 || !days["2026-10-25"] {
		t.Fatalf("7 summaries fell on %d days: %v", len(days), days)
	}
	if got := eight.String(); got != "08:00 Asia/Shanghai" {
		t.Fatalf("String = %q", got)
	}
}

// A maintenance window is open while any of its intervals is active: its
// next occurrences are the union of theirs, in the zone of its first
// interval, following the wall clock across a change of daylight saving
// time.
func TestMaintenanceNextOccurrences(t *testing.T) {
	r := mustParse(t, `
sinks:
  - {name: a, type: console}
routes:
  - {name: all, to: [a]}
maintenance:
  - {name: berlin-night, when: [berlin-night], match: {station_ids: [S1]}}
  - {name: shanghai-morning, when: [shanghai-morning]}
  - {name: both, when: [shanghai-morning, berlin-night]}
  - {name: never, when: [never]}
time_intervals:
  - name: berlin-night
    time_intervals: [{times: [{start_time: '01:00', end_time: '04:00'}], location: Europe/Berlin}]
  - name: shanghai-morning
    time_intervals: [{times: [{start_time: '06:00', end_time: '08:00'}], location: Asia/Shanghai}]
  - name: never
    time_intervals: [{years: ['2030']}]
`)
	for _, c := range []struct {
		window string
		from   time.Time
		zone   string
		want   string // UTC
	}{
		// Europe/Berlin moves to CEST (+2) at 02:00 on 2026-03-29 and back
		// to CET (+1) at 03:00 on 2026-10-25.
		{"berlin-night", utc(2026, 3, 28, 12, 0), "Europe/Berlin", "03-29 00:00/03-29 02:00, 03-29 23:00/03-30 02:00, 03-30 23:00/03-31 02:00"},
		{"berlin-night", utc(2026, 10, 24, 12, 0), "Europe/Berlin", "10-24 23:00/10-25 03:00, 10-26 00:00/10-26 03:00, 10-27 00:00/10-27 03:00"},
		// Asia/Shanghai has no daylight saving time: 22:00-24:00 UTC the day
		// before, all year.
		{"shanghai-morning", utc(2026, 3, 28, 12, 0), "Asia/Shanghai", "03-28 22:00/03-29 00:00, 03-29 22:00/03-30 00:00, 03-30 22:00/03-31 00:00"},
		{"shanghai-morning", utc(2026, 10, 24, 12, 0), "Asia/Shanghai", "10-24 22:00/10-25 00:00, 10-25 22:00/10-26 00:00, 10-26 22:00/10-27 00:00"},
		// Shanghai's 06:00-08:00 is Berlin's 23:00-01:00 in winter, touching
		// the night from 01:00: one span from 23:00 to 04:00. In summer it is
		// 00:00-02:00, overlapping the night's 01:00-04:00.
		{"both", utc(2026, 10, 26, 12, 0), "Asia/Shanghai", "10-26 22:00/10-27 03:00, 10-27 22:00/10-28 03:00, 10-28 22:00/10-29 03:00"},
		{"both", utc(2026, 3, 29, 12, 0), "Asia/Shanghai", "03-29 22:00/03-30 02:00, 03-30 22:00/03-31 02:00, 03-31 22:00/04-01 02:00"},
		{"never", utc(2026, 3, 28, 12, 0), "UTC", ""},
	} {
		t.Run(c.window+" from "+c.from.Format("01-02"), func(t *testing.T) {
			i := slices.IndexFunc(r.Maintenance, func(m Maintenance) bool { return m.Name == c.window })
			m := &r.Maintenance[i]
			if z := r.MaintenanceZone(m).String(); z != c.zone {
				t.Fatalf("zone %s, want %s", z, c.zone)
			}
			got := r.MaintenanceNext(m, c.from, 3)
			if s := spansText(got); s != c.want {
				t.Fatalf("MaintenanceNext = %s\nwant             %s", s, c.want)
			}
			for _, s := range got {
				if s.Start.Location().String() != c.zone {
					t.Fatalf("span %v is not in the window's zone %s", s, c.zone)
				}
			}
		})
	}
}
