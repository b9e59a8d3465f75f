package manage_test

import (
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/silence"
)

// TestShelvingStopsTheRemindersAndDailySummaryLinesOfAlarmsAnnouncedBefore:
// four alarms are announced on Monday morning to a channel with hourly
// reminders and a daily summary at 09:00. Then one is silenced until Tuesday
// noon, one's station is in a maintenance window on Tuesday from 08:00 to
// 10:00, and a data collector goes offline at the station of one more (which
// masks it). While shelved, an alarm gets no reminder and is not a line of
// the daily summary; once the silence or the window is over, its reminders
// resume; the alarm nothing shelves is reminded of every hour throughout.
func TestShelvingStopsTheRemindersAndDailySummaryLinesOfAlarmsAnnouncedBefore(t *testing.T) {
	s := newScenarioRules(t, `
sinks:
  - name: people
    type: slack
    channel: C1
    daily_summary: "09:00 UTC"
  - name: bus
    type: nats
    subject: "alarms.{{.Transition}}"
time_intervals:
  - name: tuesday-service
    time_intervals:
      - weekdays: [tuesday]
        times: [{start_time: '08:00', end_time: '10:00'}]
        location: UTC
maintenance:
  - name: inverter-service
    when: [tuesday-service]
    match: { station_ids: [S2] }
inhibit:
  - name: collector-masks-comms
    source: { event_codes: [DC_OFFLINE] }
    target: { event_codes: [COMM_LOST] }
    equal: station
routes:`+busRoute+`
  - name: people
    to: [people]
    repeat: 1h
`)
	silenced := s.starts("silenced", "S1", "D1", "E_SILENCED", 0)
	serviced := s.starts("serviced", "S2", "D2", "E_SERVICED", 0)
	free := s.starts("free", "S3", "D3", "E_FREE", 0)
	masked := s.starts("masked", "S4", "D4", "COMM_LOST", 0)
	s.apply(silenced, serviced, free, masked)
	s.advance(5 * time.Second)
	s.tick() // the daily summary counts from now
	if n := s.topLevel(); n != 4 {
		t.Fatalf("people got %d posts, want the 4 starts:%s", n, dump(s.slackLines()))
	}
	s.advance(30 * time.Minute)
	m, err := route.ParseMatch("--match", []byte(`{station_ids: [S1]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.silences.Add(silence.Silence{Match: m.Match, EndsAt: t0.Add(28 * time.Hour), Author: "ana",
		Comment: "replacing inverter 3"}); err != nil {
		t.Fatal(err)
	}
	reminders := func() map[string]int {
		out := map[string]int{}
		for _, l := range filter(s.slackLines(), "reply :alarm_clock:") {
			for _, code := range []string{"E_SILENCED", "E_SERVICED", "E_FREE", "COMM_LOST"} {
				if strings.Contains(l, code) {
					out[code]++
				}
			}
		}
		return out
	}
	// hourly ticks every hour (at about half past) until the hour until.
	hourly := func(until time.Time) {
		for s.clk.Now().Before(until) {
			s.advance(time.Hour)
			s.tick()
		}
	}

	hourly(t0.Add(22 * time.Hour)) // Tuesday 06:30
	s.apply(s.starts("collector", "S4", "DC4", "DC_OFFLINE", 0))
	s.advance(5 * time.Second)
	hourly(t0.Add(23 * time.Hour)) // Tuesday 07:30
	before := reminders()
	if before["E_SILENCED"] != 0 || before["E_SERVICED"] != 23 || before["E_FREE"] != 23 || before["COMM_LOST"] != 22 {
		t.Fatalf("reminders by Tuesday 07:30: %v; want none of the silenced alarm, 22 of the masked one (none since the collector went offline), 23 of the others", before)
	}
	hourly(t0.Add(25 * time.Hour)) // Tuesday 09:30, in the window
	during := reminders()
	if during["E_SILENCED"] != 0 || during["E_SERVICED"] != 23 || during["E_FREE"] != 25 || during["COMM_LOST"] != 22 {
		t.Fatalf("reminders by Tuesday 09:30: %v; want none more of the silenced, the serviced and the masked alarm, 2 more of the free one", during)
	}
	var summary string
	var lines []string
	for _, c := range s.slack.Calls() {
		if c.Method == notifytest.MethodPostMessage && c.ThreadTS == "" && strings.Contains(c.Text, "Daily summary") {
			summary = c.TS
			lines = append(lines, c.Text)
		}
	}
	for _, c := range s.slack.Calls() {
		if summary != "" && c.ThreadTS == summary {
			lines = append(lines, c.Text)
		}
	}
	if len(lines) < 2 || !strings.Contains(lines[0], "1 alarm ongoing") || !mentions(lines[1:], "D3") ||
		mentions(lines, "D1") || mentions(lines, "D2") || mentions(lines, "D4") {
		t.Fatalf("the daily summary is%s\nwant one line, of the alarm nothing shelves (D3)", dump(lines))
	}

	hourly(t0.Add(28 * time.Hour)) // Tuesday 12:30: the silence and the window are over
	after := reminders()
	if after["E_SILENCED"] != 1 || after["E_SERVICED"] != 26 || after["E_FREE"] != 28 || after["COMM_LOST"] != 22 {
		t.Errorf("reminders by Tuesday 12:30: %v; want the silenced alarm reminded of once its silence ended, the serviced one every hour since the window, none more of the masked one", after)
	}
}
