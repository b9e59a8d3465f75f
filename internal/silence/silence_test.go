package silence

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

var t0 = time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)

// env is a store in a temporary directory, reopened on demand, and the fake
// clock the silences read.
type env struct {
	t     *testing.T
	path  string
	clk   *clock.Fake
	store *store.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, path: filepath.Join(t.TempDir(), "relay.db"), clk: clock.NewFake(t0)}
	e.open()
	t.Cleanup(func() { e.store.Close() })
	return e
}

func (e *env) open() *Silences {
	e.t.Helper()
	if e.store != nil {
		if err := e.store.Close(); err != nil {
			e.t.Fatal(err)
		}
	}
	st, err := store.Open(e.path, store.Options{Clock: e.clk})
	if err != nil {
		e.t.Fatal(err)
	}
	e.store = st
	s, err := Open(st, e.clk)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func ev(station string, level int, tr event.Transition) *event.Event {
	return &event.Event{Data: event.Data{Transition: tr, Level: level, StationID: station, StationName: "Solar " + station,
		DeviceSN: "SN-" + station, DeviceName: "INV-1", DeviceTemplateCode: "INVERTER", EventCode: "E1"}}
}

// valid is a silence of station S1 for two hours from now.
func valid(clk clock.Clock) Silence {
	return Silence{Match: route.Match{StationIDs: []string{"S1"}}, EndsAt: clk.Now().Add(2 * time.Hour),
		Author: "ana", Comment: "replacing inverter 1"}
}

func mustAdd(t *testing.T, s *Silences, sil Silence) Silence {
	t.Helper()
	got, err := s.Add(sil)
	if err != nil {
		t.Fatalf("Add: %v", err)
	}
	return got
}

func ids(ss []Silence) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.ID
	}
	return out
}

func TestAddAssignsAnIDAndListsGetsAndExpiresIt(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	a := mustAdd(t, s, valid(e.clk))
	if len(a.ID) != 16 || strings.Trim(a.ID, "abcdefghijklmnopqrstuvwxyz234567") != "" {
		t.Fatalf("ID %q: want 16 characters of lower-case base32", a.ID)
	}
	if !a.CreatedAt.Equal(t0) || !a.StartsAt.Equal(t0) {
		t.Fatalf("created %s, starts %s: want both now (%s)", a.CreatedAt, a.StartsAt, t0)
	}
	b := mustAdd(t, s, valid(e.clk))
	if a.ID == b.ID {
		t.Fatal("two silences got one ID")
	}
	if got, ok := s.Get(a.ID); !ok || got.Comment != "replacing inverter 1" {
		t.Fatalf("Get(%s) = %+v, %v", a.ID, got, ok)
	}
	if _, ok := s.Get("nosuchsilence000"); ok {
		t.Fatal("Get found a silence never added")
	}
	if got := ids(s.List(false)); len(got) != 2 {
		t.Fatalf("List = %v, want both", got)
	}

	e.clk.Advance(10 * time.Minute)
	x, err := s.Expire(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !x.ExpiredAt.Equal(e.clk.Now()) || !x.End().Equal(e.clk.Now()) || x.Active(e.clk.Now()) {
		t.Fatalf("expired silence: ExpiredAt %s, End %s, Active %v; want it ended now", x.ExpiredAt, x.End(), x.Active(e.clk.Now()))
	}
	if got := ids(s.List(false)); len(got) != 1 || got[0] != b.ID {
		t.Fatalf("List(false) after expiring %s = %v, want only %s", a.ID, got, b.ID)
	}
	if got := ids(s.List(true)); len(got) != 2 {
		t.Fatalf("List(true) = %v, want the ended one too", got)
	}
	if _, err := s.Expire(a.ID); !errors.Is(err, ErrEnded) {
		t.Fatalf("expiring twice: %v, want ErrEnded", err)
	}
	if _, err := s.Expire("nosuchsilence000"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "nosuchsilence000") {
		t.Fatalf("expiring an unknown ID: %v, want ErrNotFound naming it", err)
	}
	e.clk.Advance(2 * time.Hour)
	if _, err := s.Expire(b.ID); !errors.Is(err, ErrEnded) {
		t.Fatalf("expiring a silence past its end: %v, want ErrEnded", err)
	}
	if got := s.List(false); len(got) != 0 {
		t.Fatalf("List(false) once both ended = %v", ids(got))
	}
}

func TestSilencesSurviveARestart(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	sil := valid(e.clk)
	sil.Match = route.Match{StationNames: []string{"Solar S*"}, Levels: []int{0, 1}}
	sil.NotifyOnExpire = true
	a := mustAdd(t, s, sil)
	x := mustAdd(t, s, valid(e.clk))
	if _, err := s.Expire(x.ID); err != nil {
		t.Fatal(err)
	}

	s = e.open()
	got, ok := s.Get(a.ID)
	if !ok {
		t.Fatalf("silence %s lost across a restart", a.ID)
	}
	if got.Match.String() != a.Match.String() || !got.EndsAt.Equal(a.EndsAt) || got.Author != a.Author || !got.NotifyOnExpire {
		t.Fatalf("after a restart: %+v, want %+v", got, a)
	}
	if !got.Matches(ev("S7", 1, event.Start)) || got.Matches(ev("S7", 2, event.Start)) {
		t.Fatal("the reloaded silence's match does not select what it did")
	}
	if gx, _ := s.Get(x.ID); gx.ExpiredAt.IsZero() || len(s.List(false)) != 1 {
		t.Fatalf("the expired silence came back active: %+v", gx)
	}
}

func TestActiveFromStartUntilEnd(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	start := t0.Add(time.Hour)
	sil := valid(e.clk)
	sil.StartsAt, sil.EndsAt = start, start.Add(30*time.Minute)
	p := mustAdd(t, s, sil)
	cases := []struct {
		at    time.Time
		state string
	}{
		{t0, Pending},
		{start.Add(-time.Nanosecond), Pending},
		{start, Active},
		{start.Add(29 * time.Minute), Active},
		{start.Add(30 * time.Minute), Ended},
	}
	for _, c := range cases {
		if got := p.State(c.at); got != c.state {
			t.Errorf("State(%s) = %s, want %s", c.at.Format(time.TimeOnly), got, c.state)
		}
		if got := p.Active(c.at); got != (c.state == Active) {
			t.Errorf("Active(%s) = %v", c.at.Format(time.TimeOnly), got)
		}
	}
	if got := ids(s.List(false)); len(got) != 1 {
		t.Fatal("a pending silence is not listed")
	}

	// A start in the past is taken as now: a silence never acts on what
	// already went out.
	sil.StartsAt, sil.EndsAt = t0.Add(-time.Hour), t0.Add(time.Hour)
	if got := mustAdd(t, s, sil); !got.StartsAt.Equal(t0) {
		t.Fatalf("a start an hour ago became %s, want now", got.StartsAt)
	}

	// Expiring a pending silence ends it before it ever acts.
	x, err := s.Expire(p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if x.Active(start.Add(time.Minute)) || x.State(start) != Ended {
		t.Fatal("a silence expired while pending still acts at its start")
	}
}

func TestMatchingFindsTheFirstActiveSilenceThatMatches(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	later := valid(e.clk)
	later.StartsAt, later.EndsAt = t0.Add(time.Hour), t0.Add(3*time.Hour)
	l := mustAdd(t, s, later)
	urgent := valid(e.clk)
	urgent.Match = route.Match{StationIDs: []string{"S1"}, Levels: []int{0}}
	u := mustAdd(t, s, urgent)
	everything := Silence{All: true, EndsAt: t0.Add(3 * time.Hour), Author: "ana", Comment: "storm", StartsAt: t0.Add(2 * time.Hour)}
	a := mustAdd(t, s, everything)

	cases := []struct {
		name string
		ev   *event.Event
		at   time.Time
		want string
	}{
		{"urgent start of S1, now", ev("S1", 0, event.Start), t0, u.ID},
		{"minor start of S1, now: only the pending silence would match", ev("S1", 3, event.Start), t0, ""},
		{"minor start of S1 once the later one acts", ev("S1", 3, event.Start), t0.Add(time.Hour), l.ID},
		{"urgent end of S1 when both act: the earlier start wins", ev("S1", 0, event.End), t0.Add(time.Hour), u.ID},
		{"another station, before the silence of everything", ev("S2", 0, event.Start), t0.Add(time.Hour), ""},
		{"another station, during the silence of everything", ev("S2", 2, event.Start), t0.Add(150 * time.Minute), a.ID},
		{"after every end", ev("S1", 0, event.Start), t0.Add(3 * time.Hour), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := s.Matching(c.ev, c.at)
			if ok != (c.want != "") || got.ID != c.want {
				t.Fatalf("Matching = %q, %v; want %q", got.ID, ok, c.want)
			}
		})
	}
}

func TestASilenceBuiltElsewhereMatchesByItsMatch(t *testing.T) {
	// A Silence decoded from an API answer has no compiled matcher.
	sil := Silence{Match: route.Match{Levels: []int{0}}}
	if !sil.Matches(ev("S1", 0, event.Start)) || sil.Matches(ev("S1", 1, event.Start)) {
		t.Fatal("an uncompiled silence does not match by its match")
	}
	bad := Silence{Match: route.Match{Levels: []int{9}}}
	if bad.Matches(ev("S1", 0, event.Start)) {
		t.Fatal("a silence whose match does not compile matched")
	}
}

func TestTakeExpiredReturnsEachSilenceOnceAcrossARestart(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	notify := valid(e.clk)
	notify.NotifyOnExpire = true
	n := mustAdd(t, s, notify)
	mustAdd(t, s, valid(e.clk)) // no notify_on_expire
	long := notify
	long.EndsAt = t0.Add(5 * time.Hour)
	l := mustAdd(t, s, long)
	pending := notify
	pending.StartsAt, pending.EndsAt = t0.Add(time.Hour), t0.Add(2*time.Hour)
	p := mustAdd(t, s, pending)
	if _, err := s.Expire(p.ID); err != nil { // ended before it started: it silenced nothing
		t.Fatal(err)
	}

	got, err := s.TakeExpired(t0.Add(time.Hour))
	if err != nil || len(got) != 0 {
		t.Fatalf("TakeExpired before any end: %v, %v; want none", ids(got), err)
	}
	got, err = s.TakeExpired(t0.Add(2 * time.Hour)) // exactly n's end
	if err != nil || len(got) != 1 || got[0].ID != n.ID {
		t.Fatalf("TakeExpired at the end of %s: %v, %v", n.ID, ids(got), err)
	}
	if got, _ := s.TakeExpired(t0.Add(2 * time.Hour)); len(got) != 0 {
		t.Fatalf("TakeExpired again: %v, want nothing twice", ids(got))
	}

	s = e.open()
	got, err = s.TakeExpired(t0.Add(6 * time.Hour))
	if err != nil || len(got) != 1 || got[0].ID != l.ID {
		t.Fatalf("TakeExpired after a restart: %v, %v; want only %s", ids(got), err, l.ID)
	}
	s = e.open()
	if got, _ := s.TakeExpired(t0.Add(7 * time.Hour)); len(got) != 0 {
		t.Fatalf("TakeExpired after a second restart: %v, want nothing", ids(got))
	}
}

func TestPruneDropsSilencesEndedLongerThanTheRetention(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	old := mustAdd(t, s, valid(e.clk)) // ends at t0+2h
	e.clk.Advance(time.Hour)
	x := mustAdd(t, s, valid(e.clk)) // expired at t0+1h
	if _, err := s.Expire(x.ID); err != nil {
		t.Fatal(err)
	}
	keep := valid(e.clk)
	keep.EndsAt = t0.Add(48 * time.Hour)
	k := mustAdd(t, s, keep)

	if n, err := s.Prune(t0.Add(1000*time.Hour), 0); err != nil || n != 0 {
		t.Fatalf("Prune with no retention: %d, %v; want none dropped", n, err)
	}
	if n, err := s.Prune(t0.Add(24*time.Hour), 24*time.Hour); err != nil || n != 0 {
		t.Fatalf("Prune with nothing old enough: %d, %v", n, err)
	}
	n, err := s.Prune(t0.Add(25*time.Hour+time.Second), 24*time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want the expired one only", n, err)
	}
	if _, ok := s.Get(x.ID); ok {
		t.Fatal("the pruned silence is still there")
	}
	s = e.open()
	if got := ids(s.List(true)); len(got) != 2 || got[0] != old.ID || got[1] != k.ID {
		t.Fatalf("after Prune and a restart: %v, want %s and %s", got, old.ID, k.ID)
	}
}

func TestAddRefusesEachBadSilenceNamingTheField(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	long := strings.Repeat("x", MaxText+1)
	cases := []struct {
		name   string
		change func(*Silence)
		field  string
		says   string
	}{
		{"no condition", func(s *Silence) { s.Match = route.Match{} }, "match", `"all": true`},
		{"only empty lists", func(s *Silence) { s.Match = route.Match{Levels: []int{}} }, "match", "no condition"},
		{"all with a match", func(s *Silence) { s.All = true }, "all", "leave out one or the other"},
		{"a bad level", func(s *Silence) { s.Match = route.Match{Levels: []int{7}} }, "match", "levels: 7 is not a level"},
		{"an unknown device type", func(s *Silence) { s.Match = route.Match{DeviceTypes: []string{"toaster"}} }, "match", "not a device type"},
		{"no end", func(s *Silence) { s.EndsAt = time.Time{} }, "ends_at", "--for"},
		{"an end in the past", func(s *Silence) { s.EndsAt = t0.Add(-time.Minute) }, "ends_at", "not in the future"},
		{"an end now", func(s *Silence) { s.EndsAt = t0 }, "ends_at", "not in the future"},
		{"an end before the start", func(s *Silence) { s.StartsAt, s.EndsAt = t0.Add(2*time.Hour), t0.Add(time.Hour) }, "ends_at", "not after starts_at"},
		{"longer than 90 days", func(s *Silence) { s.EndsAt = t0.Add(MaxDuration + time.Minute) }, "ends_at", "90 days"},
		{"no author", func(s *Silence) { s.Author = "  " }, "author", "--author"},
		{"a long author", func(s *Silence) { s.Author = long }, "author", "1001 bytes"},
		{"an author in Latin-1", func(s *Silence) { s.Author = "Jos\xe9" }, "author", "UTF-8"},
		{"no comment", func(s *Silence) { s.Comment = "" }, "comment", "--comment"},
		{"a long comment", func(s *Silence) { s.Comment = long }, "comment", "longer than the 1000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sil := valid(e.clk)
			c.change(&sil)
			_, err := s.Add(sil)
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("Add = %v, want an *InvalidError", err)
			}
			if len(inv.Problems) != 1 || inv.Problems[0].Field != c.field || !strings.Contains(inv.Problems[0].Message, c.says) {
				t.Fatalf("problems %+v; want one of field %s saying %q", inv.Problems, c.field, c.says)
			}
		})
	}
	if got := s.List(true); len(got) != 0 {
		t.Fatalf("a refused silence was kept: %v", ids(got))
	}
	// Every problem at once.
	_, err := s.Add(Silence{})
	var inv *InvalidError
	if !errors.As(err, &inv) || len(inv.Problems) != 4 {
		t.Fatalf("an empty silence: %v; want four problems (match, ends_at, author, comment)", err)
	}
	// 90 days exactly is allowed.
	sil := valid(e.clk)
	sil.EndsAt = t0.Add(MaxDuration)
	mustAdd(t, s, sil)
}

func TestAddRefusesMoreThanMaxOpenSilences(t *testing.T) {
	e := newEnv(t)
	// MaxOpen-1 silences written in one transaction, as Add writes them.
	kvs := make([]store.KV, MaxOpen-1)
	for i := range kvs {
		r := record{Silence: valid(e.clk)}
		r.ID, r.StartsAt, r.CreatedAt = fmt.Sprintf("loaded%010d", i), t0, t0
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		kvs[i] = store.KV{NS: Namespace, Key: r.ID, Value: b}
	}
	if err := e.store.Put(kvs...); err != nil {
		t.Fatal(err)
	}
	s := e.open()
	if n := len(s.List(false)); n != MaxOpen-1 {
		t.Fatalf("%d silences loaded, want %d", n, MaxOpen-1)
	}
	short := valid(e.clk)
	short.EndsAt = t0.Add(time.Minute)
	last := mustAdd(t, s, short)
	if _, err := s.Add(valid(e.clk)); !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), "relay silence expire") {
		t.Fatalf("silence number %d: %v, want ErrTooMany saying how to make room", MaxOpen+1, err)
	}
	if _, err := s.Expire(last.ID); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, s, valid(e.clk)) // room again
	if _, err := s.Add(valid(e.clk)); !errors.Is(err, ErrTooMany) {
		t.Fatalf("silence number %d: %v, want ErrTooMany", MaxOpen+1, err)
	}
	// Ended silences do not count.
	e.clk.Advance(3 * time.Hour)
	mustAdd(t, s, valid(e.clk))
}

func TestAStoredMatchThatNoLongerCompilesMutesNothing(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	a := mustAdd(t, s, valid(e.clk))
	// A silence written by a version that knew a device type this one does
	// not.
	raw := `{"id":"brokenbrokenbrok","match":{"device_types":["FLUXCAPACITOR"]},"starts_at":"2026-11-23T08:00:00Z",` +
		`"ends_at":"2026-11-23T10:00:00Z","author":"ana","comment":"x","notify_on_expire":false,"created_at":"2026-11-23T08:00:00Z"}`
	if err := e.store.Put(store.KV{NS: Namespace, Key: "brokenbrokenbrok", Value: []byte(raw)}); err != nil {
		t.Fatal(err)
	}
	s = e.open()
	b, ok := s.Get("brokenbrokenbrok")
	if !ok || len(s.List(false)) != 2 {
		t.Fatal("the silence whose match no longer compiles is not listed")
	}
	flux := ev("S9", 0, event.Start)
	flux.Data.DeviceTemplateCode = "FLUXCAPACITOR"
	if b.Matches(flux) {
		t.Fatal("a silence whose match no longer compiles matched an event")
	}
	if got, ok := s.Matching(flux, t0); ok {
		t.Fatalf("Matching found %s", got.ID)
	}
	if _, err := s.Expire(b.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Matching(ev("S1", 0, event.Start), t0); !ok {
		t.Fatalf("silence %s lost its match", a.ID)
	}

	if err := e.store.Put(store.KV{NS: Namespace, Key: "damaged", Value: []byte("{not json")}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(e.path, store.Options{Clock: e.clk})
	if err != nil {
		t.Fatal(err)
	}
	e.store = st
	if _, err := Open(st, e.clk); err == nil || !strings.Contains(err.Error(), `"damaged"`) {
		t.Fatalf("Open on a damaged value: %v, want an error naming it", err)
	}
}

func TestMatchingWhileSilencesChange(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				s.Matching(ev("S1", 0, event.Start), e.clk.Now())
				s.List(true)
			}
		})
	}
	for range 20 {
		a := mustAdd(t, s, valid(e.clk))
		if _, err := s.Expire(a.ID); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
	if _, ok := s.Matching(ev("S1", 0, event.Start), e.clk.Now()); ok {
		t.Fatal("a silence still acts after every one was expired")
	}
}

func TestParseAndFormatDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"2h": 2 * time.Hour, "90m": 90 * time.Minute, "3d": 72 * time.Hour, "1h30m": 90 * time.Minute} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0s", "-2h", "3days", "1.5d", "0d", "soon"} {
		if _, err := ParseDuration(in); err == nil || !strings.Contains(err.Error(), "3d") {
			t.Errorf("ParseDuration(%q) = %v, want an error giving the forms", in, err)
		}
	}
	for d, want := range map[time.Duration]string{2 * time.Hour: "2h", 90 * time.Minute: "1h30m", 72 * time.Hour: "3d",
		25 * time.Hour: "25h", 90 * time.Second: "1m30s", 5 * time.Minute: "5m", 2*time.Hour - 5*time.Microsecond: "2h"} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// BenchmarkMatching is the check each delivery makes: an event against a
// thousand active silences, none of which matches it (the whole list is
// read).
func BenchmarkMatching(b *testing.B) {
	clk := clock.NewFake(t0)
	st, err := store.Open(filepath.Join(b.TempDir(), "relay.db"), store.Options{Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	s, err := Open(st, clk)
	if err != nil {
		b.Fatal(err)
	}
	for i := range MaxOpen {
		sil := valid(clk)
		sil.Match = route.Match{StationIDs: []string{fmt.Sprintf("S%d", i+2)}, Levels: []int{0, 1}}
		if _, err := s.Add(sil); err != nil {
			b.Fatal(err)
		}
	}
	e := ev("S1", 0, event.Start)
	b.ResetTimer()
	for b.Loop() {
		if _, ok := s.Matching(e, t0); ok {
			b.Fatal("matched")
		}
	}
}

// A request is read the same wherever it comes from (the ops listener, the
// console's form): each problem names its field, and a good one becomes the
// silence it says.
func TestRequestNamesEachFieldAtFault(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	_, err := Request{
		Match: json.RawMessage(`{levels: [7], station_ids: [S1]}`), StartsAt: "tomorrow", EndsAt: "later", Duration: "2h",
	}.Silence(now)
	var inv *InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("error %v, want an *InvalidError", err)
	}
	var fields []string
	for _, p := range inv.Problems {
		fields = append(fields, p.Field)
	}
	if want := []string{"match.levels", "starts_at", "duration"}; !slices.Equal(fields, want) {
		t.Fatalf("problems %+v, want fields %v", inv.Problems, want)
	}
	sil, err := Request{Match: json.RawMessage(`{"station_ids": ["S1"], "levels": ["urgent"]}`), StartsAt: "2026-11-24T00:00:00Z",
		Duration: "3d", Author: "ana", Comment: "inverter swap"}.Silence(now)
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	if !sil.EndsAt.Equal(want) || !slices.Equal(sil.Match.StationIDs, []string{"S1"}) || !slices.Equal(sil.Match.Levels, []int{0}) || sil.Author != "ana" {
		t.Fatalf("silence %+v, want S1 urgent until %s by ana", sil, want)
	}
}
