package manage_test

// Scenarios of the defects an adversarial review of alarm management found
// (each test's comment says what was wrong); each now holds.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/store"
)

// applyAlarms is apply with alarms built by hand (an event type, say).
func (s *scenario) applyAlarms(alarms ...event.Alarm) {
	s.t.Helper()
	_, err := s.store.Apply(context.Background(), store.Batch{Observed: alarms, DetectedAt: s.clk.Now()},
		func(ev *event.Event) []string {
			s.mgr.Observe(ev)
			return s.rules.SinksFor(ev)
		})
	if err != nil {
		s.t.Fatal(err)
	}
}

// Review 1: entries held down by a route's hold count as "waiting in the
// outbox" for the storm digest's threshold, so that ten minor alarms held
// for 30 minutes make the next urgent alarm, on a route without hold, open a
// storm digest of one alarm instead of its own message.
func TestReviewHeldEntriesOpenADigest(t *testing.T) {
	s := newScenario(t, `
routes:`+busRoute+`
  - name: minor-held
    match: { levels: [minor] }
    to: [people]
    hold: 30m
  - name: people
    to: [people]
`)
	var recs []record
	for i := range 10 {
		recs = append(recs, s.starts(fmt.Sprintf("minor-%d", i), "S1", fmt.Sprintf("D%d", i), "E_MINOR", 3))
	}
	s.apply(recs...)
	s.advance(5 * time.Second)
	if lines := s.slackLines(); len(lines) != 0 {
		t.Fatalf("held alarms reached people:%s", dump(lines))
	}
	s.apply(s.starts("urgent", "S2", "D99", "E_FIRE", 0))
	s.advance(5 * time.Second)
	lines := s.slackLines()
	if !mentions(lines, "post", "E_FIRE") || mentions(lines, "Alarm storm") {
		t.Fatalf("one urgent alarm, while ten minor ones are held, got%s\nwant it posted on its own, no storm digest", dump(lines))
	}
}

// Review 2: a verdict cached while a digest was gathered is used after the
// digest went out. When it was "wait for the hold until T" and T has passed
// meanwhile, the entry is sent as it is: the hold's check (did the alarm end
// within it?), silences, windows, inhibition, chattering and the digest are
// all skipped.
func TestReviewStaleCachedHoldVerdict(t *testing.T) {
	s := newScenarioRules(t, `
sinks:
  - name: people
    type: slack
    channel: C1
    digest: { threshold: 2, window: 10m }
  - name: bus
    type: nats
    subject: "alarms.{{.Transition}}"
routes:`+busRoute+`
  - name: people
    to: [people]
    hold: 2m
`)
	a1 := s.starts("a1", "S1", "D1", "E1", 1)
	a2 := s.starts("a2", "S1", "D2", "E2", 1)
	a3 := s.starts("a3", "S1", "D3", "E3", 1)
	s.apply(a1, a2, a3)
	s.advance(500 * time.Millisecond)
	blip := s.starts("blip", "S1", "D4", "E_BLIP", 1)
	s.apply(blip)
	s.advance(10 * time.Second)
	s.apply(s.ends(blip)) // over 10 s after it began: within the hold
	s.advance(3 * time.Minute)
	lines := s.slackLines()
	if mentions(lines, "E_BLIP") || mentions(lines, "D4") {
		t.Fatalf("people got%s\nwant nothing of the blip, which ended within its hold", dump(lines))
	}
	if got := s.suppressed("people"); !slices.Equal(got, []string{"blip:start: hold", "blip:end: hold"}) {
		t.Errorf("suppressed for people: %v", got)
	}
}

// Review 3: an alarm that matches both the source and the target of an
// inhibit rule. Two data collectors of one station go offline together (a
// collector's offline alarm is a communication alarm): each masks the other,
// and people hear of neither.
func TestReviewMutualInhibition(t *testing.T) {
	s := newScenario(t, `
inhibit:
  - name: collector-offline-masks-device-comms
    source: { event_codes: [DC_OFFLINE] }
    target: { event_types: [communication] }
    equal: station
routes:`+busRoute+`
  - name: people
    to: [people]
`)
	dc1 := s.starts("dc1", "S1", "DC-1", "DC_OFFLINE", 1).alarm()
	dc2 := s.starts("dc2", "S1", "DC-2", "DC_OFFLINE", 1).alarm()
	dc1.EventType, dc2.EventType = "communication", "communication"
	s.applyAlarms(dc1, dc2)
	s.advance(5 * time.Second)
	lines := s.slackLines()
	if !mentions(lines, "post", "DC-1") && !mentions(lines, "post", "DC-2") {
		t.Fatalf("two collectors of S1 went offline and people got%s\nsuppressed: %v\nwant at least one of them posted",
			dump(lines), s.suppressed("people"))
	}
}

// Review 4: the verdicts of the entries a digest gathers are all decided on
// the state before any of them is settled, so the chatter history of one
// device and code counts one start per gather: five starts of one device and
// code that arrive together are never chattering with a digest, and are
// (the fourth and fifth withheld) without.
func TestReviewChatterInADigestGather(t *testing.T) {
	for _, tc := range []struct {
		name, digest string
	}{
		{"without digest", "false"},
		{"with digest", "{ threshold: 2, window: 10m }"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenarioRules(t, `
sinks:
  - name: people
    type: slack
    channel: C1
    digest: `+tc.digest+`
  - name: bus
    type: nats
    subject: "alarms.{{.Transition}}"
routes:`+busRoute+`
  - name: people
    to: [people]
`)
			var recs []record
			for i := range 5 {
				recs = append(recs, s.starts(fmt.Sprintf("trip-%d", i), "S1", "INV-7", "E_TRIP", 1))
				s.clk.Set(s.clk.Now().Add(time.Second))
			}
			s.apply(recs...)
			s.advance(30 * time.Second)
			want := []string{"trip-3:start: chattering", "trip-4:start: chattering"}
			if got := s.suppressed("people"); !slices.Equal(got, want) {
				t.Errorf("suppressed for people: %v, want %v\n%s", got, want, strings.Join(s.slackLines(), "\n"))
			}
		})
	}
}

// Review 5: the inhibition view is rebuilt from the store's committed
// alarms on first use (after a start or a reload), and Observe drops what it
// is told until then. A delivery loop deciding while the poller's Apply is
// in flight rebuilds the view without that Apply's transitions: here the
// collector's end, so the view keeps the collector ongoing and masks the
// station's communication alarms until the next restart or reload.
func TestReviewInhibitionViewRebuiltDuringApply(t *testing.T) {
	// The decision made inside Apply must not write the store (Apply holds
	// its one writer): no digest, and an alarm without a device (no chatter
	// history).
	s := newScenarioRules(t, `
sinks:
  - name: people
    type: slack
    channel: C1
    digest: false
  - name: bus
    type: nats
    subject: "alarms.{{.Transition}}"
inhibit:
  - name: collector-masks-comms
    source: { event_codes: [DC_OFFLINE] }
    target: { event_codes: [COMM_LOST] }
    equal: station
routes:`+busRoute+`
  - name: people
    to: [people]
`)
	collector := s.starts("collector", "S1", "DC-1", "DC_OFFLINE", 1)
	s.apply(collector)
	s.advance(5 * time.Second)
	s.restart()
	// The first poll after the restart brings the collector's end while a
	// delivery loop decides on an entry of another station.
	other := s.starts("other", "S2", "", "COMM_LOST", 2).alarm()
	otherEv := event.New(other, event.Start, s.clk.Now(), false)
	end := s.ends(collector).alarm()
	_, err := s.store.Apply(context.Background(), store.Batch{Observed: []event.Alarm{end}, DetectedAt: s.clk.Now()},
		func(ev *event.Event) []string {
			s.mgr.Observe(ev)
			done := make(chan error)
			go func() {
				_, err := s.mgr.Decide(context.Background(), "people", &notify.Delivery{
					OriginID: other.OriginID, EventID: otherEv.ID, EnqueuedAt: s.clk.Now(), Event: &otherEv, Attempt: 1})
				done <- err
			}()
			if err := <-done; err != nil {
				t.Error(err)
			}
			return s.rules.SinksFor(ev)
		})
	if err != nil {
		t.Fatal(err)
	}
	s.advance(5 * time.Second)
	s.apply(s.starts("comm-later", "S1", "INV-4", "COMM_LOST", 2))
	s.advance(5 * time.Second)
	if lines := s.slackLines(); !mentions(lines, "post", "INV-4") {
		t.Fatalf("the collector ended, yet a later communication alarm of its station was withheld: people got%s\nsuppressed: %v",
			dump(lines), s.suppressed("people"))
	}
}

// adopt records the sinks of the rules in force as the service does at start
// and at reload (store.Store.AdoptSinks), moving a renamed sink's memory and
// outbox.
func (s *scenario) adopt() []store.Renamed {
	s.t.Helper()
	dests := map[string]string{}
	for _, rs := range s.rules.Sinks {
		dests[rs.Name] = rs.Destination()
	}
	r, _, err := s.store.AdoptSinks(dests, manage.SinkNamespaces...)
	if err != nil {
		s.t.Fatal(err)
	}
	return r
}

// Review 6: a renamed sink (same channel, new name) keeps its alarms'
// memory, but not alarm management's state, which is keyed by the sink's
// name: its digests (the end of an alarm of a digest then updates nothing,
// silently) and its suppressed log (a notify_on_expire silence that ends
// after the rename announces nothing).
func TestReviewRenamedSinkLosesDigestsAndSilences(t *testing.T) {
	body := `
routes:` + busRoute + `
  - name: people
    to: [people]
`
	s := newScenario(t, body)
	s.adopt()
	m, err := route.ParseMatch("--match", []byte(`{station_ids: [S9]}`))
	if err != nil {
		t.Fatal(err)
	}
	sil, err := s.silences.Add(silence.Silence{Match: m.Match, EndsAt: s.clk.Now().Add(time.Hour), Author: "ana",
		Comment: "works at S9", NotifyOnExpire: true})
	if err != nil {
		t.Fatal(err)
	}
	var recs []record
	for i := range 12 {
		recs = append(recs, s.starts(fmt.Sprintf("a%02d", i), "S1", fmt.Sprintf("D%02d", i), "E1", 1))
	}
	shelved := s.starts("shelved", "S9", "D90", "E9", 1)
	s.apply(append(recs, shelved)...)
	s.advance(30 * time.Second)
	if n := s.topLevel(); n != 1 {
		t.Fatalf("%d top-level messages, want one digest:%s", n, dump(s.slackLines()))
	}
	calls := len(s.slackLines())

	// The sink is renamed; its channel stays.
	s.halt()
	renamed, err := route.Parse("rules.yaml", []byte(strings.ReplaceAll(rulesHead+body, "people", "oncall")), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.rules = renamed
	s.start()
	if r := s.adopt(); len(r) != 1 || r[0].To != "oncall" {
		t.Fatalf("AdoptSinks = %+v, want people renamed oncall", r)
	}
	s.apply(s.ends(recs[0]))
	s.advance(30 * time.Second)
	if lines := s.slackLines()[calls:]; !mentions(lines, "D00", "resolved") && !mentions(lines, "update", "11 ongoing") {
		t.Errorf("after the rename, the end of a digested alarm reached oncall as%s\nwant the digest updated", dump(lines))
	}
	s.advance(time.Hour)
	if _, err := s.silences.TakeExpired(s.clk.Now()); err != nil {
		t.Fatal(err)
	}
	if n, err := s.mgr.Reannounce([]string{sil.ID}); err != nil || n != 1 {
		t.Errorf("Reannounce after the rename = %d, %v; want the shelved alarm announced (1)", n, err)
	}
}

// Review 7: a digest whose list fails for longer than its window is posted a
// second time: the retry finds the window over and opens a new digest for the
// same alarms, while the first message stays, never updated again, counting
// them ongoing for ever.
func TestReviewDigestRetriedPastItsWindow(t *testing.T) {
	s := newScenarioRules(t, `
sinks:
  - name: people
    type: slack
    channel: C1
    digest: { threshold: 2, window: 1m }
  - name: bus
    type: nats
    subject: "alarms.{{.Transition}}"
routes:`+busRoute+`
  - name: people
    to: [people]
`)
	var recs []record
	for i := range 3 {
		recs = append(recs, s.starts(fmt.Sprintf("a%d", i), "S1", fmt.Sprintf("D%d", i), "E1", 1))
	}
	s.apply(recs...)
	s.settle()
	if n := s.topLevel(); n != 1 {
		t.Fatalf("%d top-level messages, want the digest posted:%s", n, dump(s.slackLines()))
	}
	// Slack fails for about two minutes: the list in the thread waits.
	for range 7 {
		s.slack.Fail(notifytest.MethodPostMessage, notifytest.SlackFailure{Status: 503})
	}
	s.advance(5 * time.Minute)
	s.apply(s.ends(recs[0]), s.ends(recs[1]), s.ends(recs[2]))
	s.advance(time.Minute)
	lines := s.slackLines()
	if n := s.topLevel(); n != 1 {
		t.Errorf("%d top-level messages for one flood of 3 alarms, want 1 digest:%s", n, dump(lines))
	}
	posts := filter(lines, "post ")
	ts := ""
	for _, c := range s.slack.Calls() {
		if c.Method == notifytest.MethodPostMessage && c.ThreadTS == "" && c.Status < 300 && c.Error == "" {
			ts = c.TS
			break
		}
	}
	if msg, ok := s.slack.Message("C1", ts); ok && len(msg.Attachments) > 0 && !strings.Contains(msg.Attachments[0].Title, "0 ongoing") {
		t.Errorf("the first digest message still reads %q after its 3 alarms ended (posts: %v)", msg.Attachments[0].Title, posts)
	}
}

// Review 8: the flood threshold is counted per sink, not per destination:
// two sinks posting to one Slack channel (urgent alarms to one, the rest to
// the other) let twice the threshold of top-level messages into the channel
// in one window, and a flood then opens two digests there.
func TestReviewTwoSinksOneChannel(t *testing.T) {
	s := newScenarioRules(t, `
sinks:
  - name: people
    type: slack
    channel: C1
  - name: bus
    type: nats
    subject: "alarms.{{.Transition}}"
  - name: people-urgent
    type: slack
    channel: C1
routes:`+busRoute+`
  - name: urgent
    match: { levels: [urgent] }
    to: [people-urgent]
  - name: people
    to: [people]
`)
	for i := range 18 {
		level := 0
		if i%2 == 1 {
			level = 2
		}
		s.apply(s.starts(fmt.Sprintf("a%02d", i), "S1", fmt.Sprintf("D%02d", i), "E1", level))
		s.advance(20 * time.Second)
	}
	if n := s.topLevel(); n > 10 {
		t.Errorf("%d top-level messages in channel C1 within 6 minutes, want at most the threshold, 10:%s", n, dump(filter(s.slackLines(), "post ")))
	}
}

// Review 9: a flood window that does not decode (a value written by another
// version, a bit flip) makes Decide fail for every start of the sink, and the
// loop retries the first one for ever: the sink's outbox is stuck, while an
// undecodable chatter history is only logged and started again.
func TestReviewUndecodableWindowStallsTheSink(t *testing.T) {
	s := newScenario(t, `
routes:`+busRoute+`
  - name: people
    to: [people]
`)
	if err := s.store.Put(store.KV{NS: "digest", Key: "slack:C1\x00", Value: []byte(`{"posts":"yesterday"}`)}); err != nil {
		t.Fatal(err)
	}
	s.apply(s.starts("a", "S1", "D1", "E1", 1))
	s.advance(10 * time.Minute)
	if lines := s.slackLines(); !mentions(lines, "post", "E1") {
		t.Fatalf("after 10 minutes people got%s\nwant the start posted", dump(lines))
	}
}

// Review 10: Reannounce reads that the alarm is ongoing, then enqueues its
// start in another transaction. When the poller commits the alarm's end in
// between, the end goes first (withheld: the memory still says silenced) and
// the start after it, announced: people get a start whose end never comes.
func TestReviewReannounceRacesTheEnd(t *testing.T) {
	s := newScenario(t, `
routes:`+busRoute+`
  - name: people
    to: [people]
`)
	m, err := route.ParseMatch("--match", []byte(`{station_ids: [S1]}`))
	if err != nil {
		t.Fatal(err)
	}
	sil, err := s.silences.Add(silence.Silence{Match: m.Match, EndsAt: s.clk.Now().Add(time.Hour), Author: "ana",
		Comment: "works", NotifyOnExpire: true})
	if err != nil {
		t.Fatal(err)
	}
	quiet := s.starts("quiet", "S1", "D2", "E2", 0)
	s.apply(quiet)
	s.advance(time.Hour + time.Minute)
	if _, err := s.silences.TakeExpired(s.clk.Now()); err != nil {
		t.Fatal(err)
	}
	end := s.ends(quiet).alarm()
	reannounced := make(chan error, 1)
	_, err = s.store.Apply(context.Background(), store.Batch{Observed: []event.Alarm{end}, DetectedAt: s.clk.Now()},
		func(ev *event.Event) []string {
			s.mgr.Observe(ev)
			// The service's reannounce loop runs now, beside the poller.
			go func() { _, err := s.mgr.Reannounce([]string{sil.ID}); reannounced <- err }()
			time.Sleep(200 * time.Millisecond)
			return s.rules.SinksFor(ev)
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-reannounced; err != nil {
		t.Fatal(err)
	}
	s.advance(time.Minute)
	lines := s.slackLines()
	if mentions(lines, "post", "E2") && !mentions(lines, "reply", "Resolved") {
		t.Fatalf("people got%s\na start of an alarm that had ended, and no end", dump(lines))
	}
}
