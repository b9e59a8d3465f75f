package console

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
)

// nowPage is what the Now page shows.
type nowPage struct {
	frame
	Now    time.Time
	Alarms []manage.AlarmState
	Total  int
	// Station and Level are the filters in force ("" for all); Stations
	// and Levels are their choices.
	Station, Level string
	Stations       []string
	Levels         []string
}

// now serves the Now page: the ongoing alarms, unacknowledged first, then
// by level (urgent first) and age (oldest first), filtered by the query's
// station and level.
func (c *Console) now(w http.ResponseWriter, r *http.Request) {
	f, ok := c.page(w, r, "now")
	if !ok {
		return
	}
	alarms, err := c.m.Alarms()
	if err != nil {
		c.o.Logger.Error("console: reading the ongoing alarms failed", "err", err)
		http.Error(w, "console: reading the ongoing alarms: "+err.Error(), http.StatusInternalServerError)
		return
	}
	p := nowPage{frame: f, Now: c.o.Now(), Total: len(alarms), Station: r.URL.Query().Get("station"), Level: r.URL.Query().Get("level")}
	for _, a := range alarms {
		if !slices.Contains(p.Stations, a.StationID) {
			p.Stations = append(p.Stations, a.StationID)
		}
	}
	slices.Sort(p.Stations)
	for l := range 4 {
		p.Levels = append(p.Levels, event.LevelName(l))
	}
	p.Alarms = slices.DeleteFunc(alarms, func(a manage.AlarmState) bool {
		return (p.Station != "" && a.StationID != p.Station) || (p.Level != "" && a.LevelName != p.Level)
	})
	slices.SortStableFunc(p.Alarms, order)
	render(w, "now", p)
}

// order puts the unacknowledged alarms first, then the more severe (a
// lower level), then the older.
func order(a, b manage.AlarmState) int {
	if a.Acknowledged != b.Acknowledged {
		if !a.Acknowledged {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(a.Level, b.Level), a.OccurredAt.Compare(b.OccurredAt), strings.Compare(a.OriginID, b.OriginID))
}

// actions are the console's actions on an alarm, by the last element of
// their path.
var actions = map[string]notify.ActionKind{
	"ack": notify.Acknowledge, "unack": notify.Unacknowledge, "shelve": notify.Shelve,
}

// maxName bounds the name given at login.
const maxName = 100

// act applies an administrator's action on one alarm and goes back to the
// Now page, which says what became of it.
func (c *Console) act(w http.ResponseWriter, r *http.Request) {
	id, s, ok := c.admin(w, r)
	if !ok {
		return
	}
	kind, known := actions[r.PathValue("action")]
	if !known {
		http.Error(w, fmt.Sprintf("unknown action %q: want ack, unack or shelve", r.PathValue("action")), http.StatusNotFound)
		return
	}
	name := cmp.Or(s.name, "admin")
	origin := r.PathValue("id")
	// The core lets Via "api" act on every alarm, whatever a route's ack_by
	// says: an administrator with RELAY_ADMIN_TOKEN may, as with relay ack.
	// A Via "console" would be refused by every ack_by, which names chat
	// users only, so the console acts as the API and says so in the actor's
	// id ("console:<name>"), which the alarm's history keeps.
	a := notify.Action{Kind: kind, Alarms: []string{origin}, Actor: notify.Actor{Via: "api", ID: "console:" + name},
		Ref: "console"}
	if kind == notify.Shelve {
		a.ShelveFor = time.Hour
	}
	res, err := c.m.Act(r.Context(), a)
	msg := ""
	switch {
	case err != nil && res.Text != "":
		msg = res.Text
	case err != nil:
		c.o.Logger.Error("console: an action failed", "action", kind, "alarm", origin, "err", err)
		msg = fmt.Sprintf("%s of %s failed: %v", kind, origin, err)
	case slices.Contains(res.Applied, origin):
		msg = fmt.Sprintf("%s of %s: done", kind, origin)
		c.o.Logger.Info("console action", "action", kind, "alarm", origin, "by", a.Actor.ID)
	default:
		msg = fmt.Sprintf("%s of %s changed nothing: %s", kind, origin, cmp.Or(res.Unchanged[origin], res.Text))
	}
	c.o.Sessions.setFlash(id, msg)
	http.Redirect(w, r, base(r), http.StatusSeeOther)
}

// age writes how long ago t was, to the minute: 3d 4h, 2h 5m, 7m, <1m.
func age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "<1m"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd %dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}
