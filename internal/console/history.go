package console

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/store"
)

// registerHistory adds the History page's routes: the transitions of the
// last days, and one alarm's events.
func (c *Console) registerHistory() {
	c.mux.HandleFunc("GET /console/history", c.history)
	c.mux.HandleFunc("GET /console/history/{id}", c.historyAlarm)
}

// historyRows bounds the rows of one History page: a storm day still
// renders fast, and a next-page link goes on.
const historyRows = 500

// maxHistorySearch bounds the search text of the History page, in
// characters (a Chinese station name counts its characters, not its
// bytes), as the search box's maxlength does: each row of the period is
// compared with it, and it travels in every next link. The longest station
// or device name is far shorter.
const maxHistorySearch = 200

// historyDays are the periods the History page offers, in days; those
// longer than the store keeps ended alarms are left out.
var historyDays = []int{1, 3, 7, 30, 90}

// historyRow is one transition of an alarm: its start, or its end or
// invalidation.
type historyRow struct {
	At         time.Time
	Transition event.Transition
	// Silent marks a start recorded without an event (RELAY_BOOTSTRAP=record).
	Silent bool
	Entry  *store.JournalEntry
}

// LevelName is the name of the row's level.
func (r historyRow) LevelName() string { return event.LevelName(r.Entry.Level) }

// rank orders the transitions of one alarm at one time: the end after the
// start.
func (r historyRow) rank() int {
	if r.Transition == event.Start {
		return 0
	}
	return 1
}

// newer orders rows newest first: by time, then originId and transition,
// descending, so that a page ends at a row the next page starts after.
func newer(a, b historyRow) int {
	return cmp.Or(b.At.Compare(a.At), strings.Compare(b.Entry.OriginID, a.Entry.OriginID), cmp.Compare(b.rank(), a.rank()))
}

// historyPage is what the History page shows.
type historyPage struct {
	frame
	// The search: Days, Q (text), Transition and Level ("" for all).
	Days                 int
	Q, Transition, Level string
	// MaxQ is the longest search text, in characters.
	MaxQ                int
	DayChoices          []int
	Transitions, Levels []string
	// Rows are the transitions shown, newest first; Matched how many match
	// the search in the period, Before how many of them the pages before
	// this one showed.
	Rows            []historyRow
	Matched, Before int
	// Next is the address of the next page, "" on the last.
	Next string
	// Retention is how long the store keeps ended alarms.
	Retention string
}

// historyQuery is a History search read from a request.
type historyQuery struct {
	days                 int
	q, transition, level string
	// after is the last row of the page before, zero on the first, and
	// before how many rows the pages before showed.
	after  historyRow
	before int
}

// matches reports whether row r meets the query's text, transition and
// level.
func (q *historyQuery) matches(r *historyRow) bool {
	e := r.Entry
	if q.transition != "" && string(r.Transition) != q.transition {
		return false
	}
	if q.level != "" && event.LevelName(e.Level) != q.level {
		return false
	}
	if q.q == "" {
		return true
	}
	for _, s := range []string{e.OriginID, e.StationID, e.StationName, e.DeviceSN, e.DeviceName, e.EventCode, e.EventDesc} {
		if strings.Contains(strings.ToLower(s), q.q) {
			return true
		}
	}
	return false
}

// history serves the History page: the transitions of the alarms in the
// last days, newest first, that match the search, historyRows at a time.
func (c *Console) history(w http.ResponseWriter, r *http.Request) {
	f, ok := c.page(w, r, "history")
	if !ok {
		return
	}
	if c.o.Store == nil {
		http.Error(w, "console: this relay has no store to read the history from", http.StatusNotFound)
		return
	}
	v := r.URL.Query()
	if n := utf8.RuneCountInString(v.Get("q")); n > maxHistorySearch {
		http.Error(w, fmt.Sprintf("console: the search text is %d characters long: search with at most %d (a station, a device, a code, a word of a description or an alarm id)",
			n, maxHistorySearch), http.StatusBadRequest)
		return
	}
	retention := c.o.Store.Retention()
	p := historyPage{frame: f, MaxQ: maxHistorySearch, Days: 1, Q: strings.TrimSpace(v.Get("q")), Transition: v.Get("transition"), Level: v.Get("level"),
		Transitions: []string{string(event.Start), string(event.End), string(event.Invalid)},
		Retention:   fmt.Sprintf("%d days", int(retention/(24*time.Hour)))}
	for _, d := range historyDays {
		if time.Duration(d)*24*time.Hour <= max(retention, 24*time.Hour) {
			p.DayChoices = append(p.DayChoices, d)
		}
	}
	if d, err := strconv.Atoi(v.Get("days")); err == nil && slices.Contains(p.DayChoices, d) {
		p.Days = d
	}
	for l := range 4 {
		p.Levels = append(p.Levels, event.LevelName(l))
	}
	q := historyQuery{days: p.Days, q: strings.ToLower(p.Q), transition: p.Transition, level: p.Level}
	if ms, err := strconv.ParseInt(v.Get("after_ms"), 10, 64); err == nil {
		q.after = historyRow{At: time.UnixMilli(ms).UTC(), Transition: event.Transition(v.Get("after_tr")),
			Entry: &store.JournalEntry{OriginID: v.Get("after_id")}}
		q.before, _ = strconv.Atoi(v.Get("before"))
		q.before = max(q.before, 0)
	}
	if err := c.readHistory(&p, &q); err != nil {
		c.o.Logger.Error("console: reading the journal failed", "err", err)
		http.Error(w, "console: reading the journal: "+err.Error(), http.StatusInternalServerError)
		return
	}
	render(w, "history", p)
}

// readHistory fills p's rows with the transitions of the period that match
// q and follow q.after, keeping at most twice a page in memory however
// many match. It reads the journal of the period (at most the store's
// retention) up to the page's cursor: a next page reads only what is older
// than the page before, and takes the count of the newer ones from the
// link (q.before). The ends in the period of alarms that occurred before it
// are found by a walk of the entries' headers, decoding those alone.
func (c *Console) readHistory(p *historyPage, q *historyQuery) error {
	now := c.o.Now()
	from := now.Add(-time.Duration(q.days) * 24 * time.Hour)
	// to bounds the journal read: past the cursor's millisecond, or now's.
	to := now.Add(time.Millisecond)
	if q.after.Entry != nil {
		if q.after.At.Before(now) {
			to = q.after.At.Add(time.Millisecond)
		}
		p.Matched, p.Before = q.before, q.before
	}
	var rows []historyRow
	add := func(row historyRow) {
		if row.At.Before(from) || row.At.After(now) || !q.matches(&row) {
			return
		}
		if q.after.Entry != nil && newer(row, q.after) <= 0 {
			return // on a page before this one
		}
		p.Matched++
		rows = append(rows, row)
		if len(rows) >= 2*historyRows {
			// One more than a page tells whether there is a next.
			slices.SortFunc(rows, newer)
			rows = rows[:historyRows+1]
		}
	}
	end := func(e *store.JournalEntry) {
		if e.Status != event.StatusOngoing && !e.RecoveredAt.IsZero() {
			tr := event.End
			if e.Status == event.StatusInvalid {
				tr = event.Invalid
			}
			add(historyRow{At: e.RecoveredAt, Transition: tr, Entry: e})
		}
	}
	// The ends in the period of alarms that occurred before it.
	err := c.o.Store.JournalActive(from, from, func(e *store.JournalEntry) error {
		end(e)
		return nil
	})
	if err != nil {
		return err
	}
	// Every transition up to the cursor is of an alarm that occurred
	// before it: the journal from the period's start to the cursor.
	err = c.o.Store.Journal(from, to, func(e *store.JournalEntry) error {
		add(historyRow{At: e.OccurredAt, Transition: event.Start, Silent: e.Silent, Entry: e})
		end(e)
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(rows, newer)
	if len(rows) > historyRows {
		rows = rows[:historyRows]
		last := rows[len(rows)-1]
		next := url.Values{"days": {strconv.Itoa(q.days)}, "after_ms": {strconv.FormatInt(last.At.UnixMilli(), 10)},
			"after_tr": {string(last.Transition)}, "after_id": {last.Entry.OriginID},
			"before": {strconv.Itoa(p.Before + len(rows))}}
		for k, v := range map[string]string{"q": p.Q, "transition": p.Transition, "level": p.Level} {
			if v != "" {
				next.Set(k, v)
			}
		}
		p.Next = p.Base + "history?" + next.Encode()
	}
	p.Rows = rows
	return nil
}

// alarmEvents is the page of one alarm's events.
type alarmEvents struct {
	frame
	OriginID string
	Entry    *store.JournalEntry
	// Held are the events the store still holds as they were sent (dead
	// letters, withheld entries), with where they are.
	Held []heldEvent
	// Rebuilt are the alarm's events rebuilt from its journal entry.
	Rebuilt []heldEvent
}

// heldEvent is one event's JSON, pretty-printed, and what it is.
type heldEvent struct {
	Title, JSON string
	// End marks a rebuilt end, whose detection time the journal lacks.
	End bool
}

// historyAlarm serves one alarm's events: the exact bytes of those the
// store still holds (dead letters, entries withheld from a sink), and each
// of its transitions rebuilt from the journal.
func (c *Console) historyAlarm(w http.ResponseWriter, r *http.Request) {
	f, ok := c.page(w, r, "history")
	if !ok {
		return
	}
	if c.o.Store == nil {
		http.Error(w, "console: this relay has no store to read the history from", http.StatusNotFound)
		return
	}
	origin := pathText(r, "id")
	p := alarmEvents{frame: f, OriginID: origin}
	e, found, err := c.o.Store.JournalOf(origin)
	if err == nil && found {
		p.Entry = &e
		p.Rebuilt, err = rebuilt(&e)
	}
	if err == nil {
		p.Held, err = c.held(origin)
	}
	if err != nil {
		c.o.Logger.Error("console: reading an alarm's events failed", "alarm", origin, "err", err)
		http.Error(w, "console: reading the events of "+origin+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	status := http.StatusOK
	if p.Entry == nil && len(p.Held) == 0 {
		status = http.StatusNotFound
	}
	renderStatus(w, status, "history-alarm", p)
}

// held returns the events of alarm origin that the store holds as sent:
// its dead letters and the entries withheld from a sink.
func (c *Console) held(origin string) ([]heldEvent, error) {
	f := store.DeadLetterFilter{OriginID: origin}
	dead, err := c.o.Store.FindDeadLetters(f)
	if err != nil {
		return nil, err
	}
	withheld, err := c.o.Store.FindWithheld(f)
	if err != nil {
		return nil, err
	}
	var out []heldEvent
	for what, ds := range map[string][]store.DeadLetter{"dead letter": dead, "withheld": withheld} {
		for _, d := range ds {
			out = append(out, heldEvent{Title: fmt.Sprintf("%s, %s of sink %s since %s: %s", d.EventID, what, d.Sink,
				d.At.UTC().Format("2006-01-02 15:04:05 UTC"), HideURLPaths(d.Reason)), JSON: pretty(d.Body)})
		}
	}
	slices.SortFunc(out, func(a, b heldEvent) int { return strings.Compare(a.Title, b.Title) })
	return out, nil
}

// rebuilt returns the events of e's transitions as relay builds them,
// from what the journal keeps.
func rebuilt(e *store.JournalEntry) ([]heldEvent, error) {
	evs := []event.Event{*e.Event()}
	if e.Status != event.StatusOngoing && !e.RecoveredAt.IsZero() {
		a := event.Alarm{OriginID: e.OriginID, Status: e.Status, Level: e.Level, EventCode: e.EventCode, EventDesc: e.EventDesc,
			EventType: e.EventType, TenantID: e.TenantID, StationID: e.StationID, StationName: e.StationName, SystemID: e.SystemID,
			DeviceSN: e.DeviceSN, DeviceName: e.DeviceName, DeviceTemplateCode: e.DeviceTemplateCode,
			OccurredAt: e.OccurredAt, RecoveredAt: e.RecoveredAt}
		tr, _ := event.ForStatus(e.Status)
		evs = append(evs, event.New(a, tr, e.RecoveredAt, false))
	}
	out := make([]heldEvent, len(evs))
	for i := range evs {
		b, err := evs[i].Marshal()
		if err != nil {
			return nil, fmt.Errorf("event %s: %w", evs[i].ID, err)
		}
		out[i] = heldEvent{Title: evs[i].ID, JSON: pretty(b), End: i > 0}
	}
	return out, nil
}

// pretty indents JSON b, or returns it as it is when it is not JSON.
func pretty(b []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return string(b)
	}
	return out.String()
}
