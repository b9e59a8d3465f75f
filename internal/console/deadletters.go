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

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/urlpath"
)

// deadLettersPerPage is how many dead letters of one sink a page shows: a
// storm against a sink that refuses everything can leave thousands, which
// the section's Replay all and Drop all handle at once, and a page reads
// no more of them than it shows (docs/design.md §5, "Dead letters").
const deadLettersPerPage = 100

// deadLettersPage is what the Dead letters page shows.
type deadLettersPage struct {
	frame
	// Sink is the sink chosen ("" for all); Counts lists every sink with
	// dead letters.
	Sink   string
	Counts []sinkCount
	Sinks  []sinkLetters
	// Limit is how many dead letters a sink holds at most.
	Limit int
}

// sinkCount is how many dead letters one sink holds.
type sinkCount struct {
	Sink string
	N    int
}

// sinkLetters is one sink's section: a page of its dead letters, oldest
// first, of Total.
type sinkLetters struct {
	Sink    string
	Total   int
	Letters []deadLetterRow
	// Next is the address of the page of the newer dead letters, ""
	// on the last; First that of the oldest, "" on the first page.
	Next, First string
	// Discarded counts the dead letters discarded since relay started
	// because the sink held more than the limit.
	Discarded int
}

// deadLetterRow is one dead letter as a row shows it.
type deadLetterRow struct {
	store.DeadLetter
	// ID is the row's HTML id: dl-<sink>-<seq>, see rowID.
	ID string
	// LevelName names the event's level.
	LevelName string
	// Station, Device and Code come from the event's data.
	Station, Device, Code string
	// Alarm is the alarm's status now: ongoing, ended, invalid, or unknown
	// (pruned), as the ops API's list says.
	Alarm string
	// Parked says the entry is an end parked beside its dead start.
	Parked bool
	// Event is the event's JSON, indented (on the Show page only).
	Event string
}

// eventText is what a row shows of the event's data.
type eventText struct{ station, device, code string }

// textOf reads the station, device and code of the event body b.
func textOf(b []byte) eventText {
	var ev struct {
		Data struct {
			StationID, StationName, DeviceSN, DeviceName, EventCode string
		}
	}
	if json.Unmarshal(b, &ev) != nil {
		return eventText{}
	}
	return eventText{station: cmp.Or(ev.Data.StationName, ev.Data.StationID),
		device: cmp.Or(ev.Data.DeviceName, ev.Data.DeviceSN), code: ev.Data.EventCode}
}

// setText sets the row's station, device and code.
func (row *deadLetterRow) setText(t eventText) {
	row.Station, row.Device, row.Code = t.station, t.device, t.code
}

// registerDeadLetters adds the Dead letters page, its Show page and the
// replay and drop actions.
func (c *Console) registerDeadLetters() {
	c.mux.HandleFunc("GET /console/deadletters", c.deadLetters)
	c.mux.HandleFunc("GET /console/deadletters/{sink}/{seq}", c.deadLetter)
	c.mux.HandleFunc("POST /console/deadletters/{sink}/{seq}/{action}", c.deadLetterAct)
	c.mux.HandleFunc("POST /console/deadletters/{sink}/{action}", c.deadLettersAct)
}

// deadLetters serves the dead letters, a section per sink (or of the sink
// the query names), each a page of deadLettersPerPage, oldest first, from
// the one numbered after the query's after (the sink's oldest without).
func (c *Console) deadLetters(w http.ResponseWriter, r *http.Request) {
	f, ok := c.page(w, r, "deadletters")
	if !ok {
		return
	}
	q := r.URL.Query()
	p := deadLettersPage{frame: f, Sink: q.Get("sink"), Limit: c.o.Store.DeadLetterLimit()}
	var after uint64
	if s := q.Get("after"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || p.Sink == "" {
			http.Error(w, fmt.Sprintf("after=%q: want the number of a dead letter, with sink= naming its sink (the page's next link has both)", s),
				http.StatusBadRequest)
			return
		}
		after = n
	}
	counts, err := c.o.Store.DeadLetterCounts()
	if err != nil {
		c.deadLettersFailed(w, "reading the dead letters", err)
		return
	}
	for sink, n := range counts {
		if n > 0 {
			p.Counts = append(p.Counts, sinkCount{sink, n})
		}
	}
	slices.SortFunc(p.Counts, func(a, b sinkCount) int { return strings.Compare(a.Sink, b.Sink) })
	discarded := c.o.Store.DroppedCounts()
	status := map[string]string{}
	for _, sc := range p.Counts {
		if p.Sink != "" && sc.Sink != p.Sink {
			continue
		}
		texts := map[uint64]eventText{}
		ds, more, err := c.o.Store.DeadLetterPage(sc.Sink, after, deadLettersPerPage, func(d *store.DeadLetter, body []byte) {
			texts[d.Seq] = textOf(body)
		})
		if err != nil {
			c.deadLettersFailed(w, "reading the dead letters", err)
			return
		}
		sl := sinkLetters{Sink: sc.Sink, Total: sc.N, Discarded: discarded[[2]string{sc.Sink, store.DropDeadLetterLimit}]}
		for _, d := range ds {
			row := c.row(d, status, false)
			row.setText(texts[d.Seq])
			sl.Letters = append(sl.Letters, row)
		}
		page := func(after uint64) string {
			v := url.Values{"sink": {sc.Sink}}
			if after > 0 {
				v.Set("after", strconv.FormatUint(after, 10))
			}
			return p.Base + "deadletters?" + v.Encode()
		}
		if more {
			sl.Next = page(ds[len(ds)-1].Seq)
		}
		if after > 0 {
			sl.First = page(0)
		}
		p.Sinks = append(p.Sinks, sl)
	}
	render(w, "deadletters", p)
}

// deadLetter serves the Show page of one dead letter: its fields and its
// event's JSON.
func (c *Console) deadLetter(w http.ResponseWriter, r *http.Request) {
	f, ok := c.page(w, r, "deadletters")
	if !ok {
		return
	}
	d, found, err := c.findDeadLetter(r)
	if err != nil {
		c.deadLettersFailed(w, "reading the dead letters", err)
		return
	}
	if !found {
		http.Error(w, fmt.Sprintf("no dead letter %s of sink %q: it was replayed or dropped, or the number is wrong; see %sdeadletters",
			r.PathValue("seq"), pathText(r, "sink"), base(r)), http.StatusNotFound)
		return
	}
	row := c.row(d, map[string]string{}, true)
	row.setText(textOf(d.Body))
	render(w, "deadletter", struct {
		frame
		Letter deadLetterRow
	}{f, row})
}

// findDeadLetter returns the dead letter the path names by sink and seq,
// with its body, reading no other.
func (c *Console) findDeadLetter(r *http.Request) (store.DeadLetter, bool, error) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil {
		return store.DeadLetter{}, false, nil
	}
	return c.o.Store.DeadLetterOf(pathText(r, "sink"), seq)
}

// row describes d for the page; status caches the alarms' statuses, and
// withEvent adds the event's JSON. The caller adds the event's text.
func (c *Console) row(d store.DeadLetter, status map[string]string, withEvent bool) deadLetterRow {
	row := deadLetterRow{DeadLetter: d, ID: rowID(d.Sink, d.Seq), LevelName: event.LevelName(d.Level),
		Parked: strings.HasPrefix(d.Reason, store.ParkedPrefix)}
	row.Reason = HideURLPaths(d.Reason)
	st, ok := status[d.OriginID]
	if !ok {
		st = "unknown"
		if t, found, err := c.o.Store.Alarm(d.OriginID); err == nil && found {
			st = event.StatusName(t.Status)
		}
		status[d.OriginID] = st
	}
	row.Alarm = st
	if withEvent {
		var b bytes.Buffer
		if json.Indent(&b, d.Body, "", "  ") == nil {
			row.Event = b.String()
		} else {
			row.Event = string(d.Body)
		}
	}
	return row
}

// rowID is the HTML id of a dead letter's row: dl-<sink>-<seq>, the
// sink's name escaped as a path segment like every identifier in the
// console's ids (no space, no markup, and one id per sink and number: the
// number after the last dash is the sequence).
func rowID(sink string, seq uint64) string {
	return "dl-" + urlpath.Link(sink) + "-" + strconv.FormatUint(seq, 10)
}

// deadLetterAct replays or drops one dead letter, with the rest of its
// alarm's dead letters at the sink, as relay deadletters replay --sink
// --event does: the store pairs them and refuses what would break a pair.
func (c *Console) deadLetterAct(w http.ResponseWriter, r *http.Request) {
	id, s, ok := c.admin(w, r)
	if !ok {
		return
	}
	action := r.PathValue("action")
	if action != "replay" && action != "drop" {
		http.Error(w, fmt.Sprintf("unknown action %q: want replay or drop", action), http.StatusNotFound)
		return
	}
	d, found, err := c.findDeadLetter(r)
	switch {
	case err != nil:
		c.deadLettersFailed(w, "reading the dead letters", err)
		return
	case !found:
		c.o.Sessions.setFlash(id, fmt.Sprintf("%s: no dead letter %s of sink %s any more (replayed or dropped meanwhile)",
			action, r.PathValue("seq"), pathText(r, "sink")))
	default:
		c.o.Sessions.setFlash(id, c.replayOrDrop(action, store.DeadLetterFilter{Sink: d.Sink, EventID: d.EventID, OnlyEvent: true}, s))
	}
	http.Redirect(w, r, base(r)+"deadletters", http.StatusSeeOther)
}

// deadLettersAct replays or drops every dead letter of a sink, once the
// form's "I mean it" box is ticked.
func (c *Console) deadLettersAct(w http.ResponseWriter, r *http.Request) {
	id, s, ok := c.admin(w, r)
	if !ok {
		return
	}
	action, all := strings.CutSuffix(r.PathValue("action"), "-all")
	if !all || (action != "replay" && action != "drop") {
		http.Error(w, fmt.Sprintf("unknown action %q: want replay-all or drop-all", r.PathValue("action")), http.StatusNotFound)
		return
	}
	sink := pathText(r, "sink")
	back := base(r) + "deadletters?sink=" + url.QueryEscape(sink)
	if r.PostFormValue("confirm") != "yes" {
		c.o.Sessions.setFlash(id, fmt.Sprintf("nothing done: tick \"I mean it\" to %s every dead letter of sink %s", action, sink))
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	c.o.Sessions.setFlash(id, c.replayOrDrop(action, store.DeadLetterFilter{Sink: sink}, s))
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// replayOrDrop applies action to the dead letters f selects, as the ops
// API's POST /deadletters/replay and /deadletters/drop do, and says what
// became of them, each refusal with the store's reason.
func (c *Console) replayOrDrop(action string, f store.DeadLetterFilter, s session) string {
	by := "console:" + cmp.Or(s.name, "admin")
	var (
		done    []store.DeadLetter
		refused []store.Refusal
		err     error
	)
	if action == "replay" {
		done, refused, err = c.o.Store.ReplayDeadLetters(f)
	} else {
		done, err = c.o.Store.DropDeadLetters(f)
	}
	if err != nil {
		c.o.Logger.Error("console: dead letters "+action+" failed", "sink", f.Sink, "event", f.EventID, "err", err)
		return fmt.Sprintf("%s failed: %v", action, err)
	}
	c.o.Logger.Info("console: dead letters "+action, "count", len(done), "refused", len(refused), "sink", f.Sink,
		"event", f.EventID, "by", by)
	var b strings.Builder
	what := map[string]string{"replay": "replayed", "drop": "dropped"}[action]
	fmt.Fprintf(&b, "%s %d dead letter(s)", what, len(done))
	if len(done) > 0 {
		b.WriteString(" (")
		for i, d := range done {
			if i > 0 {
				b.WriteString(", ")
			}
			if i == 10 {
				fmt.Fprintf(&b, "and %d more", len(done)-i)
				break
			}
			b.WriteString(d.EventID)
		}
		b.WriteString(")")
	}
	seen := map[string]bool{}
	for _, r := range refused {
		if key := r.Sink + "\x00" + r.OriginID; !seen[key] {
			seen[key] = true
			fmt.Fprintf(&b, "; refused %s at %s: %s", r.OriginID, r.Sink, r.Why)
		}
	}
	return b.String()
}

// deadLettersFailed answers a page whose dead letters could not be read.
func (c *Console) deadLettersFailed(w http.ResponseWriter, doing string, err error) {
	c.o.Logger.Error("console: "+doing+" failed", "err", err)
	http.Error(w, "console: "+doing+": "+err.Error(), http.StatusInternalServerError)
}
