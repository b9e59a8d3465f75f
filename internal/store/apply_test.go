package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

func TestEachPairProducesItsEventOnce(t *testing.T) {
	ended := func(id string) event.Alarm { return rec(id, event.StatusEnded, t0.Add(time.Hour)) }
	invalid := func(id string) event.Alarm { return rec(id, event.StatusInvalid, t0.Add(time.Hour)) }
	tests := []struct {
		name    string
		batches [][]event.Alarm
		want    [][]string // event ids per batch
		status  int        // of a1 at the end
	}{
		{
			name:    "start then end",
			batches: [][]event.Alarm{{ongoing("a1")}, {ended("a1")}},
			want:    [][]string{{"a1:start"}, {"a1:end"}},
			status:  event.StatusEnded,
		},
		{
			name:    "start then invalid",
			batches: [][]event.Alarm{{ongoing("a1")}, {invalid("a1")}},
			want:    [][]string{{"a1:start"}, {"a1:invalid"}},
			status:  event.StatusInvalid,
		},
		{
			name:    "an end with no start produces the start first",
			batches: [][]event.Alarm{{ended("a1")}},
			want:    [][]string{{"a1:start", "a1:end"}},
			status:  event.StatusEnded,
		},
		{
			name:    "an invalid with no start produces the start first",
			batches: [][]event.Alarm{{invalid("a1")}},
			want:    [][]string{{"a1:start", "a1:invalid"}},
			status:  event.StatusInvalid,
		},
		{
			name:    "start and end in one batch",
			batches: [][]event.Alarm{{ongoing("a1"), ended("a1")}},
			want:    [][]string{{"a1:start", "a1:end"}},
			status:  event.StatusEnded,
		},
		{
			name:    "repeats produce nothing",
			batches: [][]event.Alarm{{ongoing("a1"), ongoing("a1")}, {ongoing("a1")}, {ended("a1"), ended("a1")}, {ended("a1")}},
			want:    [][]string{{"a1:start"}, {}, {"a1:end"}, {}},
			status:  event.StatusEnded,
		},
		{
			name:    "an invalid after the end produces nothing",
			batches: [][]event.Alarm{{ongoing("a1")}, {ended("a1")}, {invalid("a1")}},
			want:    [][]string{{"a1:start"}, {"a1:end"}, {}},
			status:  event.StatusEnded,
		},
		{
			name:    "an end after the invalid produces nothing",
			batches: [][]event.Alarm{{invalid("a1")}, {ended("a1")}},
			want:    [][]string{{"a1:start", "a1:invalid"}, {}},
			status:  event.StatusInvalid,
		},
		{
			name:    "a start seen after the end produces nothing",
			batches: [][]event.Alarm{{ended("a1")}, {ongoing("a1")}},
			want:    [][]string{{"a1:start", "a1:end"}, {}},
			status:  event.StatusEnded,
		},
		{
			name:    "alarms are independent",
			batches: [][]event.Alarm{{ongoing("a1"), ongoing("a2")}, {ended("a2"), ongoing("a1"), ongoing("a3")}},
			want:    [][]string{{"a1:start", "a2:start"}, {"a2:end", "a3:start"}},
			status:  event.StatusOngoing,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, _ := newStore(t, Options{})
			for i, b := range tt.batches {
				res := apply(t, s, Batch{Observed: b}, to("bus"))
				if got := eventIDs(res.Events); !slices.Equal(got, tt.want[i]) {
					t.Fatalf("batch %d produced %v, want %v", i, got, tt.want[i])
				}
				if res.Enqueued != len(tt.want[i]) {
					t.Fatalf("batch %d enqueued %d entries, want %d", i, res.Enqueued, len(tt.want[i]))
				}
			}
			got, ok, err := s.Alarm("a1")
			if err != nil || !ok {
				t.Fatalf("Alarm(a1) = %t, %v", ok, err)
			}
			if got.Status != tt.status {
				t.Fatalf("Alarm(a1).Status = %d, want %d", got.Status, tt.status)
			}
			if got, want := hasRecord(t, s, "a1"), tt.status == event.StatusOngoing; got != want {
				t.Fatalf("upstream record of a1 kept = %t, want %t (only ongoing alarms need theirs)", got, want)
			}
		})
	}
}

// hasRecord reports whether the store keeps the upstream record of id: its
// state references a frame of the record log that holds it.
func hasRecord(t *testing.T, s *Store, id string) bool {
	t.Helper()
	var found bool
	if err := s.view(func(tx *txn) error {
		st, err := decodeState(first(findState(tx, id)))
		if err != nil || st.rec.n == 0 {
			return err
		}
		l, err := s.acquireLog(s.logGen)
		if err != nil {
			return err
		}
		defer s.releaseLog(l)
		if _, err := readRecord(l, []byte(id), st.rec); err != nil {
			return err
		}
		found = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return found
}

func TestEventsCarryTheRecord(t *testing.T) {
	s, fake, _ := newStore(t, Options{})
	detected := t0.Add(30 * time.Second)
	fake.Set(detected)
	end := rec("a1", event.StatusEnded, t0.Add(time.Hour))
	res := apply(t, s, Batch{Observed: []event.Alarm{end}, DetectedAt: detected}, to("bus"))
	if len(res.Events) != 2 {
		t.Fatalf("got %v, want start and end", eventIDs(res.Events))
	}
	start, stop := res.Events[0], res.Events[1]
	checks := []struct{ what, got, want string }{
		{"start time", start.Time, event.FormatTime(end.OccurredAt)},
		{"end time", stop.Time, event.FormatTime(end.RecoveredAt)},
		{"start detectedAt", start.Data.DetectedAt, event.FormatTime(detected)},
		{"end recoveredAt", stop.Data.RecoveredAt, event.FormatTime(end.RecoveredAt)},
		{"end alarm", string(stop.Data.Alarm), string(end.Raw)},
		{"end station", stop.Data.StationName, "Alpha"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	pending, err := s.Pending("bus", 10)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range pending {
		want, err := res.Events[i].Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if string(e.Body) != string(want) {
			t.Fatalf("entry %d body = %s, want the event's JSON %s", i, e.Body, want)
		}
		if e.EventID != res.Events[i].ID || e.OriginID != "a1" || e.Level != 2 || !e.EnqueuedAt.Equal(detected) {
			t.Fatalf("entry %d = %+v, want event %s of a1, level 2, enqueued at %s", i, e, res.Events[i].ID, detected)
		}
	}
	a1, _, _ := s.Alarm("a1")
	want := Tracked{
		OriginID: "a1", DeviceSN: "SN-a1", StationID: "s1", Level: 2, Status: event.StatusEnded,
		OccurredAt: end.OccurredAt, RecoveredAt: end.RecoveredAt, FirstSeen: detected, LastSeen: detected,
	}
	if a1 != want {
		t.Fatalf("Alarm(a1) = %+v, want %+v", a1, want)
	}
}

func TestInferredEnd(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	vanished := t0.Add(10 * time.Minute)
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1"), ongoing("a2")}}, to("bus"))

	res := apply(t, s, Batch{Inferred: []Inferred{{OriginID: "a1", At: vanished}}}, to("bus"))
	if got := eventIDs(res.Events); !slices.Equal(got, []string{"a1:end"}) {
		t.Fatalf("inferred end produced %v, want [a1:end]", got)
	}
	ev := res.Events[0]
	if !ev.Data.Inferred || ev.Data.RecoveredAt != event.FormatTime(vanished) || ev.Time != event.FormatTime(vanished) {
		t.Fatalf("inferred end = inferred %t, recoveredAt %s, time %s; want inferred at %s",
			ev.Data.Inferred, ev.Data.RecoveredAt, ev.Time, event.FormatTime(vanished))
	}
	if ev.Data.StationName != "Alpha" || ev.Data.DeviceSN != "SN-a1" || string(ev.Data.Alarm) != string(ongoing("a1").Raw) {
		t.Fatalf("inferred end was not built from the stored record: %+v", ev.Data)
	}

	steps := []struct {
		name  string
		batch Batch
	}{
		{"the same inferred end again", Batch{Inferred: []Inferred{{OriginID: "a1", At: vanished.Add(time.Minute)}}}},
		{"the real end record", Batch{Observed: []event.Alarm{rec("a1", event.StatusEnded, t0.Add(5*time.Minute))}}},
		{"an invalid record", Batch{Observed: []event.Alarm{rec("a1", event.StatusInvalid, t0.Add(6*time.Minute))}}},
		{"the start again", Batch{Observed: []event.Alarm{ongoing("a1")}}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			if res := apply(t, s, step.batch, to("bus")); len(res.Events) != 0 {
				t.Fatalf("produced %v after the inferred end", eventIDs(res.Events))
			}
		})
	}
	a1, _, _ := s.Alarm("a1")
	if a1.Status != event.StatusEnded || !a1.RecoveredAt.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("Alarm(a1) = status %d recovered %s, want ended with the real recovery time %s",
			a1.Status, a1.RecoveredAt, t0.Add(5*time.Minute))
	}
	ongoingNow, err := s.Ongoing()
	if err != nil {
		t.Fatal(err)
	}
	if len(ongoingNow) != 1 || ongoingNow[0].OriginID != "a2" {
		t.Fatalf("Ongoing = %+v, want only a2", ongoingNow)
	}
}

func TestUnusableInputIsIgnoredAndReported(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{rec("a1", event.StatusEnded, t0.Add(time.Hour))}}, nil)
	before := txID(t, s)
	res := apply(t, s, Batch{
		Observed: []event.Alarm{rec("a2", 2, time.Time{}), rec("", event.StatusOngoing, time.Time{})},
		Inferred: []Inferred{{OriginID: "nobody", At: t0}, {OriginID: "a1", At: t0}},
	}, to("bus"))
	if len(res.Events) != 0 {
		t.Fatalf("produced %v", eventIDs(res.Events))
	}
	want := []string{
		`originId "a2": unknown status 2`,
		`a record of device "SN-" with status 1 has no originId`,
		`inferred end of "nobody": the store does not know this alarm`,
	}
	if !slices.Equal(res.Ignored, want) {
		t.Fatalf("Ignored = %q, want %q", res.Ignored, want)
	}
	if after := txID(t, s); after != before {
		t.Fatal("ignored input committed a transaction")
	}
}

func TestApplyIsOneTransaction(t *testing.T) {
	batch := Batch{
		Observed:        []event.Alarm{ongoing("a1"), rec("a2", event.StatusEnded, t0), ongoing("a3")},
		CompleteCurrent: true,
		Marks:           map[string]time.Time{"current": t0},
	}
	broken := rec("a2", event.StatusEnded, t0)
	broken.Raw = []byte(`{"originId":"a2",`)
	tests := []struct {
		name  string
		apply func(s *Store) error
	}{
		{
			name: "route panics at the third event",
			apply: func(s *Store) (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				n := 0
				_, err = s.Apply(context.Background(), batch, func(*event.Event) []string {
					if n++; n == 3 {
						panic("route broke")
					}
					return []string{"bus"}
				})
				return err
			},
		},
		{
			name: "a record that is not JSON",
			apply: func(s *Store) error {
				b := batch
				b.Observed = []event.Alarm{ongoing("a1"), broken, ongoing("a3")}
				_, err := s.Apply(context.Background(), b, to("bus"))
				return err
			},
		},
		{
			name: "route names an empty sink",
			apply: func(s *Store) error {
				_, err := s.Apply(context.Background(), batch, to("bus", ""))
				return err
			},
		},
		{
			name: "cancelled context",
			apply: func(s *Store) error {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				_, err := s.Apply(ctx, batch, to("bus"))
				if !errors.Is(err, context.Canceled) {
					return fmt.Errorf("want context.Canceled, got %v", err)
				}
				return err
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, fake, path := newStore(t, Options{Bootstrap: BootstrapNotify})
			if err := tt.apply(s); err == nil {
				t.Fatal("the failing Apply returned no error")
			}
			assertEmpty(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = reopen(t, path, Options{Clock: fake})
			assertEmpty(t, s)
			res := apply(t, s, batch, to("bus"))
			want := []string{"a1:start", "a2:start", "a2:end", "a3:start"}
			if got := eventIDs(res.Events); !slices.Equal(got, want) {
				t.Fatalf("applying again after the failure produced %v, want %v", got, want)
			}
			if res := apply(t, s, batch, to("bus")); len(res.Events) != 0 {
				t.Fatalf("applying a third time produced %v", eventIDs(res.Events))
			}
			pending, err := s.Pending("bus", 100)
			if err != nil {
				t.Fatal(err)
			}
			if got := entryIDs(pending); !slices.Equal(got, want) {
				t.Fatalf("outbox = %v, want %v", got, want)
			}
		})
	}
}

// assertEmpty fails unless s holds nothing of the batch in
// TestApplyIsOneTransaction.
func assertEmpty(t *testing.T, s *Store) {
	t.Helper()
	for _, id := range []string{"a1", "a2", "a3"} {
		if _, ok, err := s.Alarm(id); ok || err != nil {
			t.Fatalf("Alarm(%s) = %t, %v after a failed Apply; want nothing", id, ok, err)
		}
	}
	if p, err := s.Pending("bus", 10); len(p) != 0 || err != nil {
		t.Fatalf("Pending(bus) = %v, %v after a failed Apply; want nothing", entryIDs(p), err)
	}
	if d, _ := s.Depth(); d["bus"] != 0 {
		t.Fatalf("Depth = %v after a failed Apply; want nothing", d)
	}
	if _, ok, _ := s.Mark("current"); ok {
		t.Fatal("the watermark of a failed Apply was stored")
	}
	if s.Bootstrapped() {
		t.Fatal("a failed Apply completed the bootstrap")
	}
	select {
	case <-s.Wake("bus"):
		t.Fatal("a failed Apply woke the sink")
	default:
	}
}

func TestBootstrap(t *testing.T) {
	tests := []struct {
		mode Bootstrap
		want [][]string // per batch below
	}{
		{BootstrapNotify, [][]string{{"a1:start"}, {"a2:start"}, {"a3:start", "a1:end"}}},
		{"", [][]string{{"a1:start"}, {"a2:start"}, {"a3:start", "a1:end"}}},
		{BootstrapRecord, [][]string{{}, {}, {"a3:start", "a1:end"}}},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			s, _, _ := newStore(t, Options{Bootstrap: tt.mode})
			batches := []Batch{
				{Observed: []event.Alarm{ongoing("a1")}, FirstListing: true},
				{Observed: []event.Alarm{ongoing("a1"), ongoing("a2")}, CompleteCurrent: true, FirstListing: true},
				{Observed: []event.Alarm{ongoing("a2"), ongoing("a3"), rec("a1", event.StatusEnded, t0.Add(time.Minute))}, CompleteCurrent: true},
			}
			for i, b := range batches {
				if got, want := s.Bootstrapped(), i > 1; got != want {
					t.Fatalf("Bootstrapped before batch %d = %t, want %t", i, got, want)
				}
				res := apply(t, s, b, to("bus"))
				if got := eventIDs(res.Events); !slices.Equal(got, tt.want[i]) {
					t.Fatalf("batch %d produced %v, want %v", i, got, tt.want[i])
				}
			}
			ongoingNow, err := s.Ongoing()
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, a := range ongoingNow {
				ids = append(ids, a.OriginID)
			}
			if !slices.Equal(ids, []string{"a2", "a3"}) {
				t.Fatalf("Ongoing = %v, want [a2 a3]", ids)
			}
		})
	}
}

// TestHistoryIsWhatTheFirstContactListed: an alarm is history because the
// upstream listed it over at relay's first contact, not because of its
// stamps: a device clock 8 hours ahead or behind changes nothing.
func TestHistoryIsWhatTheFirstContactListed(t *testing.T) {
	before := t0.Add(-time.Minute)
	ahead := t0.Add(8 * time.Hour)   // ended before the first run, stamped 8 h ahead
	behind := t0.Add(-8 * time.Hour) // ended after it, stamped 8 h behind
	type batch struct {
		contact bool
		recs    []event.Alarm
	}
	tests := []struct {
		name    string
		batches []batch
		want    [][]string
	}{
		{
			name: "listed over at the first contact, then every status again",
			batches: []batch{
				{true, []event.Alarm{rec("h1", event.StatusEnded, before)}},
				{false, []event.Alarm{rec("h1", event.StatusEnded, before), ongoing("h1"), rec("h1", event.StatusInvalid, before)}},
			},
			want: [][]string{{}, {}},
		},
		{
			name:    "listed invalid at the first contact",
			batches: []batch{{true, []event.Alarm{rec("h1", event.StatusInvalid, before)}}},
			want:    [][]string{{}},
		},
		{
			name:    "listed at the first contact with stamps 8 h ahead",
			batches: []batch{{true, []event.Alarm{rec("h1", event.StatusEnded, ahead)}}},
			want:    [][]string{{}},
		},
		{
			name:    "listed at the first contact with no recovery time",
			batches: []batch{{true, []event.Alarm{rec("h1", event.StatusEnded, time.Time{})}}},
			want:    [][]string{{}},
		},
		{
			name: "listed after the first contact with stamps 8 h behind",
			batches: []batch{
				{true, []event.Alarm{rec("h1", event.StatusEnded, before)}},
				{false, []event.Alarm{rec("h2", event.StatusEnded, behind)}},
			},
			want: [][]string{{}, {"h2:start", "h2:end"}},
		},
		{
			name:    "ended with no recovery time, after the first contact",
			batches: []batch{{false, []event.Alarm{rec("h1", event.StatusEnded, time.Time{})}}},
			want:    [][]string{{"h1:start", "h1:end"}},
		},
		{
			name:    "ended longer than the retention ago",
			batches: []batch{{false, []event.Alarm{rec("h1", event.StatusEnded, t0.Add(-91*24*time.Hour))}}},
			want:    [][]string{{}},
		},
		{
			name: "a known alarm is never history",
			batches: []batch{
				{false, []event.Alarm{ongoing("h1")}},
				{true, []event.Alarm{rec("h1", event.StatusEnded, before)}},
			},
			want: [][]string{{"h1:start"}, {"h1:end"}},
		},
		{
			name:    "an ongoing record in the first contact is new",
			batches: []batch{{true, []event.Alarm{ongoing("h1")}}},
			want:    [][]string{{"h1:start"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, _ := newStore(t, Options{})
			for i, b := range tt.batches {
				res := apply(t, s, Batch{Observed: b.recs, FirstContact: b.contact}, to("bus"))
				if got := eventIDs(res.Events); !slices.Equal(got, tt.want[i]) {
					t.Fatalf("batch %d produced %v, want %v", i, got, tt.want[i])
				}
			}
		})
	}
}

func TestUnchangedPollWritesNothing(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	var snapshot []event.Alarm
	for i := range 500 {
		snapshot = append(snapshot, ongoing(fmt.Sprintf("a%03d", i)))
	}
	detected := t0
	apply(t, s, Batch{Observed: snapshot, CompleteCurrent: true, DetectedAt: detected}, to("bus"))

	before := txID(t, s)
	for range 3 {
		detected = detected.Add(time.Minute)
		if res := apply(t, s, Batch{Observed: snapshot, CompleteCurrent: true, DetectedAt: detected}, to("bus")); len(res.Events) != 0 {
			t.Fatalf("an unchanged snapshot produced %d events", len(res.Events))
		}
	}
	if after := txID(t, s); after != before {
		t.Fatalf("unchanged snapshots committed %d transactions", after-before)
	}

	detected = t0.Add(LastSeenResolution)
	apply(t, s, Batch{Observed: snapshot, DetectedAt: detected}, to("bus"))
	if after := txID(t, s); after != before+1 {
		t.Fatalf("a snapshot after LastSeenResolution committed %d transactions, want 1", after-before)
	}
	a, _, _ := s.Alarm("a000")
	if !a.LastSeen.Equal(detected) || !a.FirstSeen.Equal(t0) {
		t.Fatalf("Alarm(a000) first/last seen = %s/%s, want %s/%s", a.FirstSeen, a.LastSeen, t0, detected)
	}

	escalated := ongoing("a007")
	escalated.Level = 0
	if res := apply(t, s, Batch{Observed: []event.Alarm{escalated}, DetectedAt: detected.Add(time.Second)}, to("bus")); len(res.Events) != 0 {
		t.Fatalf("a level change produced %v", eventIDs(res.Events))
	}
	if a, _, _ := s.Alarm("a007"); a.Level != 0 {
		t.Fatalf("Alarm(a007).Level = %d after a level change, want 0", a.Level)
	}
	res := apply(t, s, Batch{Inferred: []Inferred{{OriginID: "a007", At: detected}}}, to("bus"))
	if len(res.Events) != 1 || res.Events[0].Data.Level != 0 {
		t.Fatalf("inferred end after a level change = %+v, want one event of level 0", res.Events)
	}
}

func TestPrune(t *testing.T) {
	s, fake, _ := newStore(t, Options{Retention: 48 * time.Hour})
	apply(t, s, Batch{Observed: []event.Alarm{
		ongoing("live"),
		rec("old", event.StatusEnded, t0),
	}}, to("slack"))
	pending, _ := s.Pending("slack", 10)
	for _, e := range pending {
		if e.OriginID == "old" {
			if err := s.Delivered(e, map[string]string{"ts": "1"}); err != nil {
				t.Fatal(err)
			}
		} else if err := s.DeadLetter(e, "channel_not_found"); err != nil {
			t.Fatal(err)
		}
	}
	fake.Advance(30 * time.Hour)
	apply(t, s, Batch{Observed: []event.Alarm{rec("newer", event.StatusInvalid, t0.Add(29*time.Hour))}}, to("slack"))

	steps := []struct {
		advance time.Duration
		dropped int
		gone    []string
		kept    []string
		dead    int
	}{
		{advance: 17 * time.Hour, dropped: 0, kept: []string{"live", "old", "newer"}, dead: 1},
		{advance: 2 * time.Hour, dropped: 1, gone: []string{"old"}, kept: []string{"live", "newer"}, dead: 0},
		{advance: 0, dropped: 0, gone: []string{"old"}, kept: []string{"live", "newer"}},
		{advance: 30 * time.Hour, dropped: 1, gone: []string{"old", "newer"}, kept: []string{"live"}},
		{advance: 1000 * time.Hour, dropped: 0, gone: []string{"old", "newer"}, kept: []string{"live"}},
	}
	for i, step := range steps {
		fake.Advance(step.advance)
		n, err := s.Prune(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n != step.dropped {
			t.Fatalf("step %d: Prune dropped %d, want %d", i, n, step.dropped)
		}
		for _, id := range step.gone {
			if _, ok, _ := s.Alarm(id); ok {
				t.Fatalf("step %d: %s was kept", i, id)
			}
			if m, _ := s.Memory("slack", id); m != nil {
				t.Fatalf("step %d: sink memory of %s was kept: %v", i, id, m)
			}
		}
		for _, id := range step.kept {
			if _, ok, _ := s.Alarm(id); !ok {
				t.Fatalf("step %d: %s was dropped", i, id)
			}
		}
		dead, _ := s.DeadLetters("slack")
		if len(dead) != step.dead {
			t.Fatalf("step %d: %d dead letters, want %d", i, len(dead), step.dead)
		}
	}
	if m, _ := s.Memory("slack", "live"); m != nil {
		t.Fatalf("live alarm has memory %v, want none", m)
	}
}

// TestPrunedAlarmLeavesNoTrace checks the indexes: a pruned alarm is neither
// ongoing nor counted again by the next Prune.
func TestPrunedAlarmLeavesNoTrace(t *testing.T) {
	s, fake, _ := newStore(t, Options{Retention: time.Hour})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("a1")}}, nil)
	apply(t, s, Batch{Inferred: []Inferred{{OriginID: "a1", At: t0}}}, nil)
	fake.Advance(2 * time.Hour)
	if n, err := s.Prune(context.Background()); n != 1 || err != nil {
		t.Fatalf("Prune = %d, %v; want 1", n, err)
	}
	if n, err := s.Prune(context.Background()); n != 0 || err != nil {
		t.Fatalf("second Prune = %d, %v; want 0", n, err)
	}
	if o, _ := s.Ongoing(); len(o) != 0 {
		t.Fatalf("Ongoing after prune = %+v", o)
	}
	err := s.view(func(tx *txn) error {
		for _, name := range [][]byte{bucketAlarms, bucketOngoing, bucketEnded} {
			if k, _ := tx.Bucket(name).Cursor().First(); k != nil {
				return fmt.Errorf("bucket %s still holds %q", name, k)
			}
		}
		if live, err := metaUint(tx.Bucket(bucketMeta), metaRecordsLive); live != 0 || err != nil {
			return fmt.Errorf("the record log has %d live bytes (%v), want 0", live, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOngoingListsOnlyOngoingAlarms(t *testing.T) {
	s, _, _ := newStore(t, Options{})
	apply(t, s, Batch{Observed: []event.Alarm{ongoing("b"), ongoing("a"), ongoing("c"), rec("d", event.StatusEnded, t0)}}, nil)
	apply(t, s, Batch{Observed: []event.Alarm{rec("c", event.StatusInvalid, t0)}}, nil)
	got, err := s.Ongoing()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range got {
		if a.Status != event.StatusOngoing || !a.RecoveredAt.IsZero() || a.DeviceSN != "SN-"+a.OriginID {
			t.Fatalf("Ongoing has %+v", a)
		}
		ids = append(ids, a.OriginID)
	}
	if !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("Ongoing = %v, want [a b]", ids)
	}
}

// TestRecordModeSilencesWhatIsListedBeforeTheBootstrap checks that, before
// the first complete snapshot, record mode silences every alarm the first
// listing holds, whatever its stamp says (a device clock ahead stamps an
// alarm ongoing at the first run after it); an alarm listed later is sent,
// whether or not a snapshot was complete.
func TestRecordModeSilencesWhatIsListedBeforeTheBootstrap(t *testing.T) {
	older := ongoing("old")
	ahead := ongoing("ahead")
	ahead.OccurredAt = t0.Add(8 * time.Hour)
	unknown := ongoing("unknown")
	unknown.OccurredAt = time.Time{}
	tests := []struct {
		mode Bootstrap
		want []string
	}{
		{BootstrapRecord, nil},
		{BootstrapNotify, []string{"old:start", "ahead:start", "unknown:start"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			s, fake, _ := newStore(t, Options{Bootstrap: tt.mode})
			fake.Advance(2 * time.Minute)
			res := apply(t, s, Batch{Observed: []event.Alarm{older, ahead, unknown}, FirstListing: true}, to("bus"))
			if got := eventIDs(res.Events); !slices.Equal(got, tt.want) {
				t.Fatalf("produced %v, want %v", got, tt.want)
			}
			if s.Bootstrapped() {
				t.Fatalf("bootstrapped without a complete snapshot")
			}
			res = apply(t, s, Batch{Observed: []event.Alarm{older, ahead, unknown, ongoing("next")}}, to("bus"))
			if got := eventIDs(res.Events); !slices.Equal(got, []string{"next:start"}) {
				t.Fatalf("after the first listing: produced %v, want [next:start]", got)
			}
		})
	}
}

// TestHistoryBeyondTheRetentionIsSilent checks that an ended alarm the store
// does not know is history when it recovered longer than the retention ago,
// even after the first run: the store may have known and pruned it.
func TestHistoryBeyondTheRetentionIsSilent(t *testing.T) {
	const retention = time.Hour
	tests := []struct {
		name      string
		status    int
		recovered time.Duration // after t0
		want      []string
	}{
		{"after the first run, beyond the retention", event.StatusEnded, 30 * time.Minute, []string{}},
		{"invalid beyond the retention", event.StatusInvalid, 90 * time.Minute, []string{}},
		{"within the retention", event.StatusEnded, 150 * time.Minute, []string{"h1:start", "h1:end"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, fake, _ := newStore(t, Options{Retention: retention})
			fake.Advance(3 * time.Hour)
			res := apply(t, s, Batch{Observed: []event.Alarm{rec("h1", tt.status, t0.Add(tt.recovered))}}, to("bus"))
			if got := eventIDs(res.Events); !slices.Equal(got, tt.want) {
				t.Fatalf("produced %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("pruned, then its records again", func(t *testing.T) {
		s, fake, _ := newStore(t, Options{Retention: retention})
		a := ongoing("p1")
		a.OccurredAt = t0.Add(time.Minute)
		fake.Advance(2 * time.Minute)
		apply(t, s, Batch{Observed: []event.Alarm{a}}, to("bus"))
		fake.Advance(time.Minute)
		ended := rec("p1", event.StatusEnded, fake.Now())
		ended.OccurredAt = a.OccurredAt
		if got := eventIDs(apply(t, s, Batch{Observed: []event.Alarm{ended}}, to("bus")).Events); !slices.Equal(got, []string{"p1:end"}) {
			t.Fatalf("end produced %v, want [p1:end]", got)
		}
		fake.Advance(retention + time.Minute)
		if n, err := s.Prune(context.Background()); err != nil || n != 1 {
			t.Fatalf("Prune = %d, %v; want 1, nil", n, err)
		}
		res := apply(t, s, Batch{Observed: []event.Alarm{ended}}, to("bus"))
		if got := eventIDs(res.Events); len(got) != 0 {
			t.Fatalf("a pruned alarm's end, read again, produced %v; want nothing", got)
		}
	})
}
