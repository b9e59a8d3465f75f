// Package silence keeps the silences of alarm management: a person's
// decision that, for a while, alarms matching some conditions do not reach
// people (the shelving of ISA-18.2; docs/design.md §8). A silence has the
// matchers of a route, a start and an end, an author and a comment. The
// silences live in the state file, so they survive restarts, and in memory,
// so that checking a delivery against them reads no file.
//
// This package only keeps them; the delivery loop decides what a silence
// does to a start and its end.
package silence

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

// Namespace is the store namespace of the silences; each is kept under its
// ID as JSON.
const Namespace = "silences"

// Limits of a silence, checked by Add.
const (
	// MaxDuration is the longest a silence may last, from its start to its
	// end. A longer mute belongs in the rules file, where it is reviewed.
	MaxDuration = 90 * 24 * time.Hour
	// MaxText is the longest author and comment, in bytes.
	MaxText = 1000
	// MaxOpen is how many silences may be active or pending at once.
	MaxOpen = 1000
)

// States of a silence at a time, as State reports them.
const (
	Pending = "pending"
	Active  = "active"
	Ended   = "ended"
)

var (
	// ErrNotFound is the error of Expire for an ID no silence has.
	ErrNotFound = errors.New("no such silence")
	// ErrEnded is the error of Expire for a silence that has already ended.
	ErrEnded = errors.New("the silence has already ended")
	// ErrTooMany is the error of Add when MaxOpen silences are active or
	// pending.
	ErrTooMany = errors.New("too many silences")
)

// Silence mutes the alarms its match selects, from StartsAt until its end.
type Silence struct {
	// ID is random, 16 characters of lower-case base32, assigned by Add.
	ID string `json:"id"`
	// Match selects the events the silence mutes, with the keys of a
	// route's match. It has at least one condition unless All is set.
	Match route.Match `json:"match"`
	// All says the silence mutes every alarm; Match is then empty. A silence
	// of everything must say so, so that an empty match written by mistake
	// mutes nothing.
	All bool `json:"all,omitempty"`
	// StartsAt is when the silence begins to act; Add takes a time in the
	// past, or none, as the time it is added.
	StartsAt time.Time `json:"starts_at"`
	// EndsAt is when the silence stops acting, as it was set.
	EndsAt time.Time `json:"ends_at"`
	// Author is who set it; Comment is why.
	Author  string `json:"author"`
	Comment string `json:"comment"`
	// NotifyOnExpire asks that alarms still ongoing when the silence ends
	// be announced again (see Silences.TakeExpired).
	NotifyOnExpire bool `json:"notify_on_expire"`
	// CreatedAt is when Add stored it.
	CreatedAt time.Time `json:"created_at"`
	// ExpiredAt is when a person ended it early with Expire; zero otherwise.
	ExpiredAt time.Time `json:"expired_at,omitzero"`

	// matcher is Match compiled; nil in a Silence that Silences did not
	// return, which Matches then compiles at each call.
	matcher *route.Matcher
	// broken is set on a stored silence whose match no longer compiles (a
	// device type or key that this version does not know): it mutes
	// nothing, so that alarms still reach people, and can still be listed,
	// expired and pruned.
	broken bool
}

// Matches reports whether the silence's match selects ev, whatever the
// time. A silence of everything (All) selects every event; a silence whose
// stored match no longer compiles selects none.
func (s *Silence) Matches(ev *event.Event) bool {
	if s.broken {
		return false
	}
	if s.matcher != nil {
		return s.matcher.Matches(ev)
	}
	m, err := route.NewMatcher(s.Match)
	if err != nil {
		return false
	}
	return m.Matches(ev)
}

// Active reports whether the silence acts at t: StartsAt <= t < End().
func (s *Silence) Active(t time.Time) bool {
	return !t.Before(s.StartsAt) && t.Before(s.End())
}

// End returns when the silence stops acting: EndsAt, or ExpiredAt when a
// person ended it earlier.
func (s *Silence) End() time.Time {
	if !s.ExpiredAt.IsZero() && s.ExpiredAt.Before(s.EndsAt) {
		return s.ExpiredAt
	}
	return s.EndsAt
}

// State returns Pending, Active or Ended: what the silence is at t.
func (s *Silence) State(t time.Time) string {
	switch {
	case !t.Before(s.End()):
		return Ended
	case t.Before(s.StartsAt):
		return Pending
	}
	return Active
}

// Problem is one thing wrong with a silence given to Add.
type Problem struct {
	// Field is the JSON name of the field at fault: match (or one of its
	// keys, such as match.levels), all, starts_at, ends_at, author, comment;
	// Request.Silence adds duration, and the ops listener body for a request
	// that is not a silence at all.
	Field string `json:"field"`
	// Message says what is wrong and how to put it right.
	Message string `json:"message"`
}

// InvalidError is Add's error for a silence that fails validation: every
// problem found, each naming its field.
type InvalidError struct {
	Problems []Problem
}

func (e *InvalidError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Field + ": " + p.Message
	}
	return "silence: " + strings.Join(parts, "; ")
}

// record is a silence as the store keeps it.
type record struct {
	Silence
	// Taken says TakeExpired has returned the silence once.
	Taken bool `json:"expiry_taken,omitempty"`
}

// set is one immutable state of the silences, sorted by StartsAt, then
// CreatedAt and ID.
type set struct {
	recs []record
	byID map[string]int
}

func newSet(recs []record) *set {
	slices.SortFunc(recs, func(a, b record) int {
		if c := a.StartsAt.Compare(b.StartsAt); c != 0 {
			return c
		}
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	s := &set{recs: recs, byID: make(map[string]int, len(recs))}
	for i, r := range recs {
		s.byID[r.ID] = i
	}
	return s
}

// Silences is the set of silences of one store, cached in memory. It is safe
// for concurrent use: readers never wait for a write to the store.
type Silences struct {
	store *store.Store
	clock clock.Clock
	// wmu serialises the changes: each reads cur, writes the store, then
	// publishes a new set.
	wmu sync.Mutex
	cur atomic.Pointer[set]
}

// Open loads the silences kept in store. A stored match that no longer
// compiles is kept but mutes nothing; a value that is not a silence at all
// is an error, since the state file is then damaged.
func Open(st *store.Store, clk clock.Clock) (*Silences, error) {
	if clk == nil {
		clk = clock.Real()
	}
	var recs []record
	err := st.Scan(Namespace, "", func(key string, value []byte) error {
		var r record
		if err := json.Unmarshal(value, &r); err != nil || r.ID != key {
			if err == nil {
				err = fmt.Errorf("it holds id %q", r.ID)
			}
			return fmt.Errorf("silence: the state file's silence %q is damaged: %w", key, err)
		}
		if m, err := route.NewMatcher(r.Match); err != nil {
			r.broken = true
		} else {
			r.matcher = &m
		}
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s := &Silences{store: st, clock: clk}
	s.cur.Store(newSet(recs))
	return s, nil
}

// Add checks sil, gives it an ID and its creation time, and stores it. A
// StartsAt in the past or zero becomes now: a silence acts from when it is
// added, never on what went out before. Every problem of sil is reported in
// one *InvalidError; with MaxOpen silences active or pending the error wraps
// ErrTooMany. ExpiredAt is ignored.
func (s *Silences) Add(sil Silence) (Silence, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	now := s.clock.Now().UTC()
	cur := s.cur.Load()
	sil.ID, sil.CreatedAt, sil.ExpiredAt = "", now, time.Time{}
	sil.StartsAt, sil.EndsAt = sil.StartsAt.UTC(), sil.EndsAt.UTC()
	if sil.StartsAt.Before(now) {
		sil.StartsAt = now
	}
	sil.Author, sil.Comment = strings.TrimSpace(sil.Author), strings.TrimSpace(sil.Comment)
	m, problems := check(&sil, now)
	if len(problems) > 0 {
		return Silence{}, &InvalidError{Problems: problems}
	}
	open := 0
	for i := range cur.recs {
		if cur.recs[i].End().After(now) {
			open++
		}
	}
	if open >= MaxOpen {
		return Silence{}, fmt.Errorf("silence: %d silences are active or pending, the most there may be: expire some first (relay silence list, relay silence expire ID): %w",
			open, ErrTooMany)
	}
	for taken := true; taken; _, taken = cur.byID[sil.ID] {
		id, err := newID()
		if err != nil {
			return Silence{}, err
		}
		sil.ID = id
	}
	sil.matcher, sil.broken = &m, false
	recs := append(slices.Clone(cur.recs), record{Silence: sil})
	if err := s.put(recs[len(recs)-1:]); err != nil {
		return Silence{}, err
	}
	s.cur.Store(newSet(recs))
	return sil, nil
}

// check validates sil, whose times are normalised, at now, and compiles its
// match.
func check(sil *Silence, now time.Time) (route.Matcher, []Problem) {
	var ps []Problem
	bad := func(field, format string, args ...any) {
		ps = append(ps, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	m, err := route.NewMatcher(sil.Match)
	switch {
	case err != nil:
		for _, e := range unjoin(err) {
			bad("match", "%v", e)
		}
	case conditions(sil.Match) == 0 && !sil.All:
		bad("match", "no condition: name the alarms to silence with at least one key of a route's match "+
			"(station_ids, device_sns, levels, ...), or silence every alarm with \"all\": true (relay silence add --all)")
	case conditions(sil.Match) > 0 && sil.All:
		bad("all", "\"all\": true silences every alarm, yet a match is given too: leave out one or the other")
	}
	const layout = time.RFC3339
	switch {
	case sil.EndsAt.IsZero():
		bad("ends_at", "missing: give the end (ends_at, --until) or how long the silence lasts (duration, --for)")
	case !sil.EndsAt.After(now):
		bad("ends_at", "%s is not in the future (it is %s now): give a later end", sil.EndsAt.Format(layout), now.Format(layout))
	case !sil.EndsAt.After(sil.StartsAt):
		bad("ends_at", "%s is not after starts_at %s: give a later end or an earlier start",
			sil.EndsAt.Format(layout), sil.StartsAt.Format(layout))
	case sil.EndsAt.Sub(sil.StartsAt) > MaxDuration:
		bad("ends_at", "the silence would last %s, longer than the 90 days (2160h) allowed: end it sooner, "+
			"and add another when it ends, or put a lasting exception in the rules file", FormatDuration(sil.EndsAt.Sub(sil.StartsAt)))
	}
	text := func(field, v, missing string) {
		switch {
		case v == "":
			bad(field, "%s", missing)
		case len(v) > MaxText:
			bad(field, "%d bytes, longer than the %d allowed: shorten it", len(v), MaxText)
		case !utf8.ValidString(v):
			bad(field, "not valid UTF-8: write it in UTF-8")
		}
	}
	text("author", sil.Author, "missing: say who sets the silence (author, --author; the command line takes $USER by default)")
	text("comment", sil.Comment, "missing: say why the alarms are silenced (comment, --comment), so that others can tell when it may be expired")
	return m, ps
}

// unjoin returns the errors joined in err, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// conditions counts the values of every list of m: a Match is a struct of
// lists, and a new key of a route's match is counted without a change here.
func conditions(m route.Match) int {
	v := reflect.ValueOf(m)
	n := 0
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Slice {
			n += f.Len()
		}
	}
	return n
}

// idEncoding writes IDs in lower-case base32, without padding.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID returns 16 random characters (80 bits).
func newID() (string, error) {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("silence: drawing an ID: %w", err)
	}
	return idEncoding.EncodeToString(b[:]), nil
}

// List returns the silences that are active or pending, or with
// includeEnded every silence kept, ordered by StartsAt.
func (s *Silences) List(includeEnded bool) []Silence {
	now := s.clock.Now()
	cur := s.cur.Load()
	out := make([]Silence, 0, len(cur.recs))
	for i := range cur.recs {
		if includeEnded || cur.recs[i].End().After(now) {
			out = append(out, cur.recs[i].Silence)
		}
	}
	return out
}

// Get returns the silence with the given ID, ended or not.
func (s *Silences) Get(id string) (Silence, bool) {
	cur := s.cur.Load()
	i, ok := cur.byID[id]
	if !ok {
		return Silence{}, false
	}
	return cur.recs[i].Silence, true
}

// Expire ends the silence now, before it started or while it acts. An
// unknown ID is an error wrapping ErrNotFound, a silence that has already
// ended one wrapping ErrEnded.
func (s *Silences) Expire(id string) (Silence, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	now := s.clock.Now().UTC()
	cur := s.cur.Load()
	i, ok := cur.byID[id]
	if !ok {
		return Silence{}, fmt.Errorf("silence %q: %w: relay silence list --all shows them", id, ErrNotFound)
	}
	r := cur.recs[i]
	if end := r.End(); !end.After(now) {
		return Silence{}, fmt.Errorf("silence %q ended at %s: %w", id, end.Format(time.RFC3339), ErrEnded)
	}
	r.ExpiredAt = now
	if err := s.put([]record{r}); err != nil {
		return Silence{}, err
	}
	recs := slices.Clone(cur.recs)
	recs[i] = r
	s.cur.Store(newSet(recs))
	return r.Silence, nil
}

// Matching returns the first silence, in order of StartsAt, that is active
// at t and matches ev.
func (s *Silences) Matching(ev *event.Event, t time.Time) (Silence, bool) {
	cur := s.cur.Load()
	for i := range cur.recs {
		r := &cur.recs[i]
		if r.Active(t) && r.Matches(ev) {
			return r.Silence, true
		}
	}
	return Silence{}, false
}

// TakeExpired returns the silences with NotifyOnExpire that have ended at or
// before t and were not yet taken, and records in the store that they were
// taken (so a restart does not re-announce twice). A silence expired before
// it started silenced nothing: it is marked taken and not returned.
func (s *Silences) TakeExpired(t time.Time) ([]Silence, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	cur := s.cur.Load()
	var taken []record
	var out []Silence
	for _, r := range cur.recs {
		if !r.NotifyOnExpire || r.Taken || r.End().After(t) {
			continue
		}
		r.Taken = true
		taken = append(taken, r)
		if r.End().After(r.StartsAt) {
			out = append(out, r.Silence)
		}
	}
	if len(taken) == 0 {
		return nil, nil
	}
	if err := s.put(taken); err != nil {
		return nil, err
	}
	recs := slices.Clone(cur.recs)
	for _, r := range taken {
		recs[cur.byID[r.ID]] = r
	}
	s.cur.Store(newSet(recs))
	return out, nil
}

// Prune drops the silences that ended more than retention before t, and
// returns how many it dropped. A retention of zero or less drops none.
func (s *Silences) Prune(t time.Time, retention time.Duration) (int, error) {
	if retention <= 0 {
		return 0, nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	cur := s.cur.Load()
	cutoff := t.Add(-retention)
	var keep []record
	var drop []store.KV
	for _, r := range cur.recs {
		if r.End().Before(cutoff) {
			drop = append(drop, store.KV{NS: Namespace, Key: r.ID})
		} else {
			keep = append(keep, r)
		}
	}
	if len(drop) == 0 {
		return 0, nil
	}
	if err := s.store.Put(drop...); err != nil {
		return 0, fmt.Errorf("silence: pruning: %w", err)
	}
	s.cur.Store(newSet(keep))
	return len(drop), nil
}

// put writes recs to the store in one transaction.
func (s *Silences) put(recs []record) error {
	kvs := make([]store.KV, len(recs))
	for i, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("silence %q: %w", r.ID, err)
		}
		kvs[i] = store.KV{NS: Namespace, Key: r.ID, Value: b}
	}
	if err := s.store.Put(kvs...); err != nil {
		return fmt.Errorf("silence: %w", err)
	}
	return nil
}

// ParseDuration reads how long a silence lasts: a Go duration (90m, 2h30m)
// or a whole number of days (3d).
func ParseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if days, ok := strings.CutSuffix(s, "d"); err != nil && ok {
		n, nerr := strconv.Atoi(days)
		if nerr == nil && n > 0 && n <= 366 {
			d, err = time.Duration(n)*24*time.Hour, nil
		}
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a duration: want a positive Go duration (90m, 2h30m) or a number of days (3d)", s)
	}
	return d, nil
}

// FormatDuration writes d for people, to the second: whole days as 3d,
// otherwise as Go writes durations, without trailing zero units (2h, 1h30m).
func FormatDuration(d time.Duration) string {
	d = d.Round(time.Second)
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Silencing returns the id of the first silence active at t that matches ev:
// what alarm management asks before a start goes to people.
func (s *Silences) Silencing(ev *event.Event, t time.Time) (string, bool) {
	sil, ok := s.Matching(ev, t)
	return sil.ID, ok
}

// Shelve adds a silence of match from now until until, by author: the
// shelving of one alarm's point from a chat button (alarm management's
// Shelf). It returns the silence's ID.
func (s *Silences) Shelve(match route.Match, until time.Time, author, comment string) (string, error) {
	sil, err := s.Add(Silence{Match: match, EndsAt: until, Author: author, Comment: comment})
	if err != nil {
		return "", err
	}
	return sil.ID, nil
}

// Unshelve expires the silence id now; one already ended, or forgotten, is
// no error.
func (s *Silences) Unshelve(id string) error {
	_, err := s.Expire(id)
	if errors.Is(err, ErrEnded) || errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
