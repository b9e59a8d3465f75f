package console

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/silence"
)

// registerSilences adds the Silences page's routes: the list with the
// maintenance windows, the form to add one, and the add and expire actions.
func (c *Console) registerSilences() {
	c.mux.HandleFunc("GET /console/silences", c.silences)
	c.mux.HandleFunc("GET /console/silences/new", c.silenceForm)
	c.mux.HandleFunc("POST /console/silences", c.addSilence)
	c.mux.HandleFunc("POST /console/silences/{id}/expire", c.expireSilence)
}

// endedShown bounds the ended silences the page lists, newest first: those
// that ended within endedWithin.
const (
	endedShown  = 50
	endedWithin = 7 * 24 * time.Hour
)

// shownOccurrences is how many next occurrences of each maintenance window
// the page shows.
const shownOccurrences = 3

// silencesPage is what the Silences page shows.
type silencesPage struct {
	frame
	// Kept is false when this relay keeps no silences.
	Kept bool
	// Open are the active and pending silences, by start; Ended those that
	// ended lately, the latest first.
	Open, Ended []silenceRow
	Maintenance []maintenanceRow
	// RulesLoaded is false when no rules are in force.
	RulesLoaded bool
}

// silenceTable is a table of silences with what its Expire buttons need.
type silenceTable struct {
	Rows       []silenceRow
	Admin      bool
	Base, CSRF string
}

// Table returns the table of rows.
func (p silencesPage) Table(rows []silenceRow) silenceTable {
	return silenceTable{Rows: rows, Admin: p.Admin, Base: p.Base, CSRF: p.CSRF}
}

// silenceRow is one silence as the page lists it.
type silenceRow struct {
	silence.Silence
	State, Match string
}

// maintenanceRow is one maintenance window of the rules in force with its
// next occurrences in its zone.
type maintenanceRow struct {
	Name, Match, Zone string
	When              []string
	Next              []string
}

func (c *Console) silences(w http.ResponseWriter, r *http.Request) {
	f, ok := c.page(w, r, "silences")
	if !ok {
		return
	}
	now := c.o.Now()
	p := silencesPage{frame: f, Kept: c.o.Silences != nil}
	if p.Kept {
		for _, s := range c.o.Silences.List(true) {
			row := silenceRow{Silence: s, State: s.State(now), Match: s.Match.String()}
			if s.All {
				row.Match = "every alarm"
			}
			switch {
			case row.State != silence.Ended:
				p.Open = append(p.Open, row)
			case now.Sub(s.End()) <= endedWithin:
				p.Ended = append(p.Ended, row)
			}
		}
		slices.SortStableFunc(p.Ended, func(a, b silenceRow) int { return b.End().Compare(a.End()) })
		p.Ended = p.Ended[:min(len(p.Ended), endedShown)]
	}
	if c.o.Rules != nil {
		if rules := c.o.Rules(); rules != nil {
			p.RulesLoaded = true
			p.Maintenance = maintenanceRows(rules, now)
		}
	}
	render(w, "silences", p)
}

// maintenanceRows lists the maintenance windows of rules, each with its
// next occurrences after now in its zone.
func maintenanceRows(rules *route.Rules, now time.Time) []maintenanceRow {
	var out []maintenanceRow
	for i := range rules.Maintenance {
		m := &rules.Maintenance[i]
		row := maintenanceRow{Name: m.Name, Match: m.Match.String(), When: m.When, Zone: rules.MaintenanceZone(m).String()}
		for _, s := range rules.MaintenanceNext(m, now, shownOccurrences) {
			row.Next = append(row.Next, spanText(s, now))
		}
		out = append(out, row)
	}
	return out
}

// spanText writes a span in its zone with the UTC offset of each end, which
// a change of daylight saving time makes differ: "Sun 2026-03-29 01:00
// UTC+01:00 – Sun 2026-03-29 04:00 UTC+02:00".
func spanText(s route.Span, now time.Time) string {
	at := func(t time.Time) string { return t.Format("Mon 2006-01-02 15:04") + " UTC" + t.Format("-07:00") }
	start := at(s.Start)
	if !s.Start.After(now) {
		start = "now (" + start + ")"
	}
	return start + " – " + at(s.End)
}

// silenceForm is the form that adds a silence: its fields as given, and
// the problems found in them by field (a key of a route's match, all,
// starts_at, ends_at, duration, comment); Other holds the rest.
type silenceForm struct {
	frame
	Kept bool
	// Alarm is the originId the form was filled in from.
	Alarm string
	// Lists holds the text of each list field of the match, by key.
	Lists          map[string]string
	Levels         []string
	LevelChoices   []string
	All            bool
	StartsAt       string
	EndsAt         string
	Duration       string
	Comment        string
	NotifyOnExpire bool
	Problems       map[string]string
	Other          []string
}

// matchKeys are the keys of a route's match the form offers as text, each
// a comma-separated list, in the order shown.
var matchKeys = []struct{ Key, Label, Hint string }{
	{"station_ids", "Station ids", "S1, S2"},
	{"device_sns", "Device serial numbers", "INV-0001"},
	{"event_codes", "Event codes", "E1"},
	{"device_types", "Device types", "inverter"},
	{"event_types", "Event types", "fault"},
	{"station_names", "Station names (globs: * and ?)", "Plant *"},
	{"device_names", "Device names (globs: * and ?)", "PCS-*"},
}

// MatchKeys are the list fields of the form, for the template.
func (silenceForm) MatchKeys() []struct{ Key, Label, Hint string } { return matchKeys }

// Problem returns the problem of field, or "".
func (f silenceForm) Problem(field string) string { return f.Problems[field] }

// HasLevel reports whether the form's levels include l.
func (f silenceForm) HasLevel(l string) bool { return slices.Contains(f.Levels, l) }

// newForm returns an empty form with its defaults: for 2 hours.
func newForm(fr frame, kept bool) silenceForm {
	f := silenceForm{frame: fr, Kept: kept, Lists: map[string]string{}, Duration: "2h", Problems: map[string]string{}}
	for l := range 4 {
		f.LevelChoices = append(f.LevelChoices, event.LevelName(l))
	}
	return f
}

// silenceForm serves the form that adds a silence; ?alarm=<originId> fills
// the match in with that alarm's point (station, device, event code).
func (c *Console) silenceForm(w http.ResponseWriter, r *http.Request) {
	fr, ok := c.page(w, r, "silences")
	if !ok {
		return
	}
	f := newForm(fr, c.o.Silences != nil)
	status := http.StatusOK
	if origin := r.URL.Query().Get("alarm"); origin != "" && c.o.Store != nil {
		f.Alarm = origin
		e, found, err := c.o.Store.JournalOf(origin)
		switch {
		case err != nil:
			c.o.Logger.Error("console: reading an alarm's journal entry failed", "alarm", origin, "err", err)
			f.Other = append(f.Other, fmt.Sprintf("reading alarm %s failed: %v", origin, err))
			status = http.StatusInternalServerError
		case !found:
			f.Other = append(f.Other, fmt.Sprintf("relay knows no alarm %s: fill in the match yourself", origin))
			status = http.StatusNotFound
		default:
			m := manage.PointMatch(e.Event())
			f.Lists["station_ids"] = formatList(m.StationIDs)
			f.Lists["device_sns"] = formatList(m.DeviceSNs)
			f.Lists["event_codes"] = formatList(m.EventCodes)
			// Cut to what a silence's comment may hold: an alarm whose
			// ids are long would otherwise fill in a form refused as sent.
			f.Comment = cut(fmt.Sprintf("alarm %s (%s) on %s at station %s, silenced from the console", origin,
				cmp.Or(e.EventDesc, e.EventCode), cmp.Or(e.DeviceSN, "no device"), e.StationID), silence.MaxText)
		}
	}
	renderStatus(w, status, "silence-form", f)
}

// addSilence adds the silence of the form, by the session's name, read and
// checked as the ops listener's POST /silences reads and checks its body;
// bad input shows the form again with each problem by its field.
func (c *Console) addSilence(w http.ResponseWriter, r *http.Request) {
	id, s, ok := c.admin(w, r)
	if !ok {
		return
	}
	fr := frame{Base: base(r), CSRF: s.csrf, Name: s.name, Page: "silences", Admin: true}
	f := newForm(fr, c.o.Silences != nil)
	if !f.Kept {
		http.Error(w, "this relay keeps no silences", http.StatusNotFound)
		return
	}
	f.Alarm = r.PostFormValue("alarm")
	match := map[string][]string{}
	for _, k := range matchKeys {
		v := r.PostFormValue(k.Key)
		f.Lists[k.Key] = v
		for _, item := range parseList(v) {
			match[k.Key] = append(match[k.Key], item)
		}
	}
	f.Levels = r.PostForm["levels"]
	if len(f.Levels) > 0 {
		match["levels"] = f.Levels
	}
	f.All = r.PostFormValue("all") != ""
	f.StartsAt = strings.TrimSpace(r.PostFormValue("starts_at"))
	f.EndsAt = strings.TrimSpace(r.PostFormValue("ends_at"))
	f.Duration = strings.TrimSpace(r.PostFormValue("duration"))
	f.Comment = strings.TrimSpace(r.PostFormValue("comment"))
	f.NotifyOnExpire = r.PostFormValue("notify_on_expire") != ""
	req := silence.Request{All: f.All, StartsAt: f.StartsAt, EndsAt: f.EndsAt, Duration: f.Duration,
		Author: cmp.Or(s.name, "console admin"), Comment: f.Comment, NotifyOnExpire: f.NotifyOnExpire}
	if len(match) > 0 {
		req.Match, _ = json.Marshal(match) // a map of string lists always marshals
	}
	sil, err := req.Silence(c.o.Now())
	if err == nil {
		sil, err = c.o.Silences.Add(sil)
	}
	var inv *silence.InvalidError
	switch {
	case errors.As(err, &inv):
		for _, p := range inv.Problems {
			field := strings.TrimPrefix(p.Field, "match.")
			if field == "author" {
				f.Other = append(f.Other, "author: "+p.Message+" (the author is the name given at login)")
				continue
			}
			f.Problems[field] = strings.TrimSpace(f.Problems[field] + " " + p.Message)
		}
		renderStatus(w, http.StatusBadRequest, "silence-form", f)
		return
	case errors.Is(err, silence.ErrTooMany):
		f.Other = append(f.Other, err.Error())
		renderStatus(w, http.StatusConflict, "silence-form", f)
		return
	case err != nil:
		c.o.Logger.Error("console: adding a silence failed", "err", err)
		http.Error(w, "console: adding the silence: "+err.Error(), http.StatusInternalServerError)
		return
	}
	c.o.Logger.Info("silence added", "id", sil.ID, "match", sil.Match.String(), "all", sil.All, "starts_at", sil.StartsAt,
		"ends_at", sil.EndsAt, "author", sil.Author, "comment", sil.Comment, "via", "console")
	c.o.Sessions.setFlash(id, fmt.Sprintf("silence %s added: %s until %s", sil.ID, sil.Match.String(), sil.EndsAt.UTC().Format("2006-01-02 15:04 UTC")))
	http.Redirect(w, r, base(r)+"silences", http.StatusSeeOther)
}

// expireSilence ends a silence now and goes back to the list, which says
// what became of it.
func (c *Console) expireSilence(w http.ResponseWriter, r *http.Request) {
	id, s, ok := c.admin(w, r)
	if !ok {
		return
	}
	if c.o.Silences == nil {
		http.Error(w, "this relay keeps no silences", http.StatusNotFound)
		return
	}
	sid := pathText(r, "id")
	sil, err := c.o.Silences.Expire(sid)
	msg := fmt.Sprintf("silence %s expired", sid)
	switch {
	case errors.Is(err, silence.ErrNotFound), errors.Is(err, silence.ErrEnded):
		msg = err.Error()
	case err != nil:
		c.o.Logger.Error("console: expiring a silence failed", "id", sid, "err", err)
		msg = fmt.Sprintf("expiring silence %s failed: %v", sid, err)
	default:
		c.o.Logger.Info("silence expired", "id", sil.ID, "match", sil.Match.String(), "by", cmp.Or(s.name, "console admin"), "via", "console")
	}
	c.o.Sessions.setFlash(id, msg)
	http.Redirect(w, r, base(r)+"silences", http.StatusSeeOther)
}

// formatList writes values as a field of the silence form: separated by
// commas, each value that holds a comma or a double quote, or begins or
// ends with a space, in double quotes (a quote in it doubled), so that
// parseList reads back the very values: a device whose id holds a comma
// is silenced alone, not as two devices.
func formatList(values []string) string {
	out := make([]string, len(values))
	for i, v := range values {
		if v == "" || strings.ContainsAny(v, ",\"") || strings.TrimSpace(v) != v {
			v = `"` + strings.ReplaceAll(v, `"`, `""`) + `"`
		}
		out[i] = v
	}
	return strings.Join(out, ", ")
}

// parseList reads a field of the silence form: values separated by
// commas, each trimmed of spaces, or, in double quotes, taken as it is
// (with "" for a quote), as formatList writes them. Empty values are left
// out.
func parseList(s string) []string {
	var out []string
	for s != "" {
		s = strings.TrimLeft(s, " \t")
		var v string
		if rest, quoted := strings.CutPrefix(s, `"`); quoted {
			var b strings.Builder
			for {
				i := strings.IndexByte(rest, '"')
				if i < 0 { // no closing quote: the rest is the value
					b.WriteString(rest)
					rest = ""
					break
				}
				b.WriteString(rest[:i])
				if rest = rest[i+1:]; !strings.HasPrefix(rest, `"`) {
					break
				}
				b.WriteByte('"')
				rest = rest[1:]
			}
			v = b.String()
			// Text between the closing quote and the next comma is added
			// to the value, trimmed.
			if i := strings.IndexByte(rest, ','); i >= 0 {
				v += strings.TrimSpace(rest[:i])
				s = rest[i+1:]
			} else {
				v += strings.TrimSpace(rest)
				s = ""
			}
			if v != "" {
				out = append(out, v)
			}
			continue
		}
		if i := strings.IndexByte(s, ','); i >= 0 {
			v, s = s[:i], s[i+1:]
		} else {
			v, s = s, ""
		}
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// cut returns s, or its first bytes up to n in all and an ellipsis when it
// is longer, cut between characters.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	i := n - len(ellipsis)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + ellipsis
}
