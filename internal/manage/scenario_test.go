package manage_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/store"
)

// busRoute sends everything to the bus and goes on: the bus stays complete
// whatever people get.
const busRoute = `
  - name: everything-to-bus
    to: [bus]
    continue: true
`

// waitBus waits (in real time) until the bus has received n events.
func (s *scenario) waitBus(n int) []string {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ids := s.busIDs()
		if len(ids) >= n || time.Now().After(deadline) {
			if len(ids) != n {
				s.t.Fatalf("the bus received %d events, want %d: %v", len(ids), n, ids)
			}
			return ids
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Item 1: a start reaches the route's sinks only if the alarm is still
// ongoing after the hold; one over within it sends neither start nor end
// there. The hold lives in the store: a restart in the middle keeps it.
func TestScenarioHoldDown(t *testing.T) {
	s := newScenario(t, `
routes:`+busRoute+`
  - name: people
    to: [people]
    hold: 2m
`)
	blip := s.starts("blip", "S1", "D1", "E1", 1)
	lasting := s.starts("lasting", "S1", "D2", "E2", 1)
	s.apply(blip, lasting)
	s.advance(30 * time.Second)
	if lines := s.slackLines(); len(lines) != 0 {
		t.Fatalf("people got messages within the hold:%s", dump(lines))
	}
	s.restart()
	s.apply(s.ends(blip))
	s.advance(100 * time.Second) // 2m10s after the starts
	lines := s.slackLines()
	if len(lines) != 1 || !mentions(lines, "post", "E2") {
		t.Fatalf("people got%s\nwant one post of the lasting alarm (E2) only", dump(lines))
	}
	if got := s.suppressed("people"); !slices.Equal(got, []string{"blip:start: hold", "blip:end: hold"}) {
		t.Errorf("suppressed for people: %v", got)
	}
	ids := s.waitBus(3)
	if !slices.Contains(ids, "blip:start") || !slices.Contains(ids, "blip:end") {
		t.Errorf("the bus misses the transient: %v", ids)
	}
	// The lasting alarm's end goes to its thread at once: ends are not held.
	s.apply(s.ends(lasting))
	s.advance(5 * time.Second)
	if lines := s.slackLines(); !mentions(lines[1:], "reply", "Resolved") {
		t.Errorf("the end of the lasting alarm did not reach its thread:%s", dump(lines))
	}
}

// Item 3: maintenance windows in the rules file, applied like silences, and
// a route muted outside its active_when interval.
func TestScenarioMaintenanceAndActiveWhen(t *testing.T) {
	s := newScenario(t, `
time_intervals:
  - name: service-window
    time_intervals:
      - weekdays: [monday]
        times: [{start_time: '08:00', end_time: '09:00'}]
        location: UTC
  - name: business-hours
    time_intervals:
      - weekdays: ['monday:friday']
        times: [{start_time: '09:00', end_time: '18:00'}]
        location: Asia/Shanghai
maintenance:
  - name: inverter-service
    when: [service-window]
    match: { station_ids: [S1] }
routes:`+busRoute+`
  - name: minor-in-office-hours
    match: { levels: [minor] }
    to: [people]
    active_when: [business-hours]
  - name: people
    to: [people]
`)
	// Monday 08:00 UTC: S1 is in maintenance; 16:00 in Shanghai is office time.
	serviced := s.starts("serviced", "S1", "D1", "E1", 1)
	other := s.starts("other", "S2", "D2", "E2", 1)
	minorEarly := s.starts("minor-early", "S2", "D3", "E3", 3)
	s.apply(serviced, other, minorEarly)
	s.advance(10 * time.Second)
	lines := s.slackLines()
	if len(lines) != 2 || !mentions(lines, "post", "E2") || !mentions(lines, "post", "E3") || mentions(lines, "E1") {
		t.Fatalf("people got%s\nwant the posts of E2 and E3, not E1 (maintenance)", dump(lines))
	}
	s.restart()
	s.advance(90 * time.Minute) // 09:30 UTC: the window is over; 17:30 in Shanghai
	s.apply(s.ends(serviced), s.starts("after", "S1", "D4", "E4", 1))
	s.advance(10 * time.Second)
	lines = s.slackLines()
	if !mentions(lines, "post", "E4") || mentions(lines, "E1") {
		t.Fatalf("after the window people got%s\nwant E4 posted and nothing of E1, whose start was withheld", dump(lines))
	}
	s.advance(time.Hour) // 10:30 UTC = 18:30 in Shanghai: minor alarms are muted
	s.apply(s.starts("minor-late", "S2", "D5", "E5", 3))
	s.advance(10 * time.Second)
	if lines := s.slackLines(); mentions(lines, "E5") {
		t.Errorf("a minor alarm reached people outside business hours:%s", dump(lines))
	}
	want := []string{"serviced:start: maintenance", "serviced:end: maintenance", "minor-late:start: muted"}
	if got := s.suppressed("people"); !slices.Equal(got, want) {
		t.Errorf("suppressed for people: %v, want %v", got, want)
	}
	s.waitBus(6)
}

// Item 4: while a data collector is offline, the communication alarms of
// its station are masked; one that began before it still gets its end; the
// masking survives a restart (rebuilt from the ongoing alarms).
func TestScenarioInhibition(t *testing.T) {
	s := newScenario(t, `
inhibit:
  - name: collector-masks-comms
    source: { event_codes: [DC_OFFLINE] }
    target: { event_codes: [COMM_LOST] }
    equal: station
routes:`+busRoute+`
  - name: people
    to: [people]
`)
	early := s.starts("comm-early", "S1", "INV-1", "COMM_LOST", 2)
	s.apply(early)
	s.advance(2 * time.Second)
	collector := s.starts("collector", "S1", "DC-1", "DC_OFFLINE", 1)
	s.apply(collector)
	masked := s.starts("comm-masked", "S1", "INV-2", "COMM_LOST", 2)
	elsewhere := s.starts("comm-elsewhere", "S2", "INV-9", "COMM_LOST", 2)
	s.apply(masked, elsewhere)
	s.advance(5 * time.Second)
	s.restart()
	masked2 := s.starts("comm-masked-2", "S1", "INV-3", "COMM_LOST", 2)
	s.apply(masked2)
	s.advance(5 * time.Second)
	s.apply(s.ends(early), s.ends(masked), s.ends(collector))
	s.advance(5 * time.Second)
	after := s.starts("comm-after", "S1", "INV-4", "COMM_LOST", 2)
	s.apply(after)
	s.advance(5 * time.Second)

	lines := s.slackLines()
	posts := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "post ") {
			posts++
		}
	}
	// Posts: comm-early, collector, comm-elsewhere, comm-after.
	if posts != 4 || !mentions(lines, "post", "INV-9") || !mentions(lines, "post", "INV-4") || mentions(lines, "INV-2") || mentions(lines, "INV-3") {
		t.Fatalf("people got%s\nwant posts of INV-1, DC-1, INV-9, INV-4 and nothing of INV-2, INV-3", dump(lines))
	}
	if !mentions(lines, "reply", "Resolved") {
		t.Errorf("the end of the alarm that began before the collector went offline is missing:%s", dump(lines))
	}
	want := []string{"comm-masked:start: inhibited", "comm-masked-2:start: inhibited", "comm-masked:end: inhibited"}
	if got := s.suppressed("people"); !slices.Equal(got, want) {
		t.Errorf("suppressed for people: %v, want %v", got, want)
	}
	s.waitBus(9)
}

// Item 7: the third start of one device and code within the window is
// announced once as chattering; later starts (and their ends) are withheld
// until the device has been quiet; a restart keeps the history.
func TestScenarioChattering(t *testing.T) {
	s := newScenario(t, `
routes:`+busRoute+`
  - name: people
    to: [people]
`)
	cycle := func(n int) {
		r := s.starts(fmt.Sprintf("trip-%d", n), "S1", "INV-7", "E_TRIP", 1)
		s.apply(r)
		s.advance(time.Minute)
		s.apply(s.ends(r))
		s.advance(time.Minute)
	}
	for n := 1; n <= 3; n++ {
		cycle(n)
	}
	s.restart()
	for n := 4; n <= 5; n++ {
		cycle(n)
	}
	s.advance(11 * time.Minute) // quiet
	cycle(6)

	lines := s.slackLines()
	var posts []string
	for _, l := range lines {
		if strings.HasPrefix(l, "post ") {
			posts = append(posts, l)
		}
	}
	if len(posts) != 4 {
		t.Fatalf("people got %d posts, want 4 (trips 1, 2, 3 announced as chattering, 6):%s", len(posts), dump(lines))
	}
	if !strings.Contains(posts[2], "Chattering, 3 starts in 4 min") || strings.Contains(posts[3], "Chattering") {
		t.Errorf("the third post should announce chattering and the last should not:%s", dump(posts))
	}
	want := []string{"trip-4:start: chattering", "trip-4:end: chattering", "trip-5:start: chattering", "trip-5:end: chattering"}
	if got := s.suppressed("people"); !slices.Equal(got, want) {
		t.Errorf("suppressed for people: %v, want %v", got, want)
	}
	s.waitBus(12)
}

// Item 5: more starts due than the threshold make one digest message with
// the list in its thread; starts while it is open join it, ends update it;
// after the window, per-alarm messages resume. A restart keeps the digest.
func TestScenarioDigest(t *testing.T) {
	s := newScenario(t, `
routes:`+busRoute+`
  - name: people
    to: [people]
`)
	var recs []record
	for i := range 12 {
		recs = append(recs, s.starts(fmt.Sprintf("a%02d", i), "S1", fmt.Sprintf("D%02d", i), "E1", i%4))
	}
	s.apply(recs...)
	s.advance(30 * time.Second)
	if n := s.topLevel(); n != 1 {
		t.Fatalf("%d top-level messages for a flood of 12, want 1 digest:%s", n, dump(s.slackLines()))
	}
	s.restart()
	late := s.starts("late", "S2", "D99", "E1", 0)
	s.apply(late)
	s.apply(s.ends(recs[0]), s.ends(recs[1]))
	s.advance(30 * time.Second)
	lines := s.slackLines()
	if n := s.topLevel(); n != 1 {
		t.Fatalf("%d top-level messages after a restart, want still 1:%s", n, dump(lines))
	}
	for _, r := range append(recs, late) {
		if !mentions(lines, "reply", r.device) {
			t.Errorf("alarm %s (%s) is not listed in the digest's thread", r.id, r.device)
		}
	}
	last := ""
	for _, l := range lines {
		if strings.HasPrefix(l, "update ") {
			last = l
		}
	}
	if !strings.Contains(last, "13 alarms") || !strings.Contains(last, "11 ongoing") {
		t.Errorf("the digest's last update does not count 13 alarms, 11 ongoing: %q", last)
	}
	if !mentions(lines, "reply", "D00", "resolved") || !mentions(lines, "reply", "D01", "resolved") {
		t.Errorf("the ends are not listed in the digest's thread:%s", dump(lines))
	}
	// The flood is over: one more start, after the window, is a message of its own.
	s.advance(11 * time.Minute)
	s.apply(s.starts("calm", "S3", "D50", "E5", 2))
	s.advance(10 * time.Second)
	if lines := s.slackLines(); s.topLevel() != 2 || !mentions(lines, "post", "D50") {
		t.Errorf("after the flood the start was not posted on its own:%s", dump(lines))
	}
	s.waitBus(16)
}

// Item 2: a silence withholds the starts it matches and their ends; a start
// delivered before it began still gets its end; it survives a restart; with
// notify_on_expire, the alarms it withheld that are still ongoing are
// announced when it ends.
func TestScenarioSilence(t *testing.T) {
	s := newScenario(t, `
routes:`+busRoute+`
  - name: people
    to: [people]
`)
	before := s.starts("before", "S1", "D1", "E1", 1)
	s.apply(before)
	s.advance(5 * time.Second)
	m, err := route.ParseMatch("--match", []byte(`{station_ids: [S1]}`))
	if err != nil {
		t.Fatal(err)
	}
	sil, err := s.silences.Add(silence.Silence{Match: m.Match, EndsAt: s.clk.Now().Add(time.Hour), Author: "ana",
		Comment: "replacing inverter 3", NotifyOnExpire: true})
	if err != nil {
		t.Fatal(err)
	}
	quiet := s.starts("quiet", "S1", "D2", "E2", 0)
	brief := s.starts("brief", "S1", "D3", "E3", 0)
	loud := s.starts("loud", "S2", "D4", "E4", 0)
	s.apply(quiet, brief, loud)
	s.advance(5 * time.Second)
	s.restart()
	s.apply(s.ends(before), s.ends(brief))
	s.advance(5 * time.Second)
	lines := s.slackLines()
	if !mentions(lines, "post", "E1") || !mentions(lines, "post", "E4") || !mentions(lines, "reply", "Resolved") ||
		mentions(lines, "E2") || mentions(lines, "E3") {
		t.Fatalf("during the silence people got%s\nwant E1 (and its end) and E4, nothing of E2 and E3", dump(lines))
	}
	// The silence ends: the alarm it withheld that is still ongoing is
	// announced; the one that ended meanwhile is not.
	s.advance(time.Hour)
	ended, err := s.silences.TakeExpired(s.clk.Now())
	if err != nil || len(ended) != 1 || ended[0].ID != sil.ID {
		t.Fatalf("TakeExpired = %v, %v", ended, err)
	}
	if n, err := s.mgr.Reannounce([]string{sil.ID}); err != nil || n != 1 {
		t.Fatalf("Reannounce = %d, %v; want the one alarm still ongoing", n, err)
	}
	s.advance(5 * time.Second)
	s.apply(s.ends(quiet))
	s.advance(5 * time.Second)
	lines = s.slackLines()
	if !mentions(lines, "post", "E2") || mentions(lines, "E3") {
		t.Fatalf("after the silence people got%s\nwant E2 announced, nothing of E3", dump(lines))
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "reply ") {
		t.Errorf("the end of the announced alarm should be a reply in its thread, got %q", last)
	}
	want := []string{"quiet:start: silence", "brief:start: silence", "brief:end: silence"}
	if got := s.suppressed("people"); !slices.Equal(got, want) {
		t.Errorf("suppressed for people: %v, want %v", got, want)
	}
	s.waitBus(7)
}

// remindersRules send every alarm to a Slack channel with hourly reminders
// and a daily summary at 09:00 UTC, and to the bus.
const remindersRules = `
sinks:
  - name: people
    type: slack
    channel: C1
    daily_summary: "09:00 UTC"
  - name: bus
    type: nats
    subject: "alarms.{{.Transition}}"
routes:` + busRoute + `
  - name: people
    to: [people]
    repeat: 1h
`

// Item 6: while an alarm stays ongoing, a reminder in its thread every
// repeat; stale alarms (ongoing over 24 h) in a daily summary at the sink's
// daily_summary time. Both survive a restart.
func TestScenarioRemindersAndDailySummary(t *testing.T) {
	s := newScenarioRules(t, remindersRules)
	long := s.starts("long", "S1", "D1", "E1", 0)
	short := s.starts("short", "S1", "D2", "E2", 1)
	s.apply(long, short)
	s.advance(5 * time.Second)
	s.tick() // the daily summary counts from now
	s.advance(30 * time.Minute)
	s.tick()
	s.restart()
	s.apply(s.ends(short))
	s.advance(31 * time.Minute)
	s.tick()
	lines := s.slackLines()
	if !mentions(lines, "reply", "Reminder, ongoing for 1h", "E1") || mentions(lines, "Reminder", "E2") {
		t.Fatalf("after an hour people got%s\nwant one reminder of E1 in its thread, none of the ended E2", dump(lines))
	}
	s.advance(30 * time.Minute)
	s.tick()
	if n := len(filter(s.slackLines(), "reply :alarm_clock:")); n != 1 {
		t.Fatalf("%d reminders after 1h30, want 1 (the next one is due at 2h)", n)
	}
	s.advance(30 * time.Minute)
	s.tick()
	if n := len(filter(s.slackLines(), "reply :alarm_clock:")); n != 2 {
		t.Fatalf("%d reminders after 2h, want 2", n)
	}
	// Tuesday 09:00: the alarm has been ongoing for 25 hours.
	for s.clk.Now().Before(t0.Add(25*time.Hour + time.Minute)) {
		s.advance(time.Hour)
		s.tick()
	}
	lines = s.slackLines()
	summaries := filter(lines, "post :rotating_light: Daily summary")
	if len(summaries) != 1 || !strings.Contains(summaries[0], "1 alarm ongoing for more than 24 h") || !mentions(lines, "reply", "D1", "since") {
		t.Fatalf("people got%s\nwant one daily summary naming the stale alarm", dump(lines))
	}
	s.restart()
	for s.clk.Now().Before(t0.Add(49*time.Hour + time.Minute)) {
		s.advance(4 * time.Hour)
		s.tick()
	}
	if n := len(filter(s.slackLines(), "post :rotating_light: Daily summary")); n != 2 {
		t.Errorf("%d daily summaries after two days, want 2", n)
	}
	if n := len(filter(s.slackLines(), "reply :alarm_clock:")); n < 20 {
		t.Errorf("%d reminders over two days at repeat 1h, want one an hour at least while ticks come (20 or more)", n)
	}
}

// Alarm management's own state is pruned: chatter histories without a start
// for a day, digests over for a day whose alarms all ended, reminder marks of
// alarms no longer ongoing; what is still in use stays.
func TestPruneStateKeepsWhatIsInUse(t *testing.T) {
	s := newScenario(t, `
routes:`+busRoute+`
  - name: people
    to: [people]
`)
	day := 24 * time.Hour
	old, recent := t0.Add(-2*day).Format(time.RFC3339), t0.Add(-time.Hour).Format(time.RFC3339)
	until := t0.Add(-2 * day).Format(time.RFC3339)
	s.apply(s.starts("ongoing", "S1", "D9", "E9", 1))
	s.advance(5 * time.Second) // its start is out: its chatter history is people/T1/D9/E9, recent
	put := func(ns, key, value string) {
		if err := s.store.Put(store.KV{NS: ns, Key: key, Value: []byte(value)}); err != nil {
			t.Fatal(err)
		}
	}
	put("chatter", "people\x00T1\x00D1\x00E1", `{"starts":[{"at":"`+old+`","origin":"a"}]}`)
	put("chatter", "people\x00T1\x00D2\x00E1", `{"starts":[{"at":"`+recent+`","origin":"b"}]}`)
	put("digest", "slack:C1\x00", `{"open":"x","seq":2}`)
	put("digest", "slack:C1\x00ended", `{"digest":{"id":"ended","until":"`+until+`","items":[{"origin_id":"a","level":1,"outcome":"end"}]}}`)
	put("digest", "slack:C1\x00open", `{"digest":{"id":"open","until":"`+until+`","items":[{"origin_id":"ongoing","level":1}]}}`)
	put("remind", "people\x00gone", old)
	put("remind", "people\x00ongoing", recent)
	if err := s.mgr.PruneState(); err != nil {
		t.Fatal(err)
	}
	left := map[string][]string{}
	for _, ns := range []string{"chatter", "digest", "remind"} {
		if err := s.store.Scan(ns, "", func(k string, _ []byte) error {
			left[ns] = append(left[ns], strings.ReplaceAll(k, "\x00", "/"))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][]string{
		"chatter": {"people/T1/D2/E1", "people/T1/D9/E9"},
		"digest":  {"slack:C1/", "slack:C1/open"},
		"remind":  {"people/ongoing"},
	}
	if fmt.Sprint(left) != fmt.Sprint(want) {
		t.Errorf("left after pruning: %v, want %v", left, want)
	}
}
