package console

import (
	"cmp"
	"container/heap"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/store"
)

// The rows the Now page shows: DefaultRows unless ?limit= asks for more, up
// to MaxRows. The page's size and time follow the rows shown, not the
// alarms tracked: with 100,000 ongoing alarms the default page stays well
// under a megabyte (BenchmarkNowPage100k).
const (
	DefaultRows = 200
	MaxRows     = 1000
)

// maxStations bounds the stations offered to the station filter: those
// with the most ongoing alarms. Any other is typed in.
const maxStations = 300

// nowPage is what the Now page shows.
type nowPage struct {
	frame
	Now  time.Time
	Rows []nowRow
	// Total counts the ongoing alarms, Matching those the filters keep.
	Total, Matching int
	// Station, Level and Type are the filters in force ("" for all);
	// Stations, Levels and Types their choices.
	Station, Level, Type string
	Stations             []string
	Levels               []string
	Types                []string
	// Limit is how many rows the page shows at most; More, when set, is
	// the address of the same page with more rows, and MoreRows how many.
	Limit    int
	More     string
	MoreRows int
	// Back is the filters as a query, which the action forms send back so
	// that the page after an action keeps them.
	Back string
	// RowsURL is the address of the table's rows for the same filters,
	// which the live update fetches.
	RowsURL string
	// Ledger says whether the console knows the store, where the
	// deliveries of each alarm are kept.
	Ledger bool
}

// nowRow is one alarm of the Now page: its state, its device type and what
// became of its start at each sink.
type nowRow struct {
	manage.AlarmState
	// AlarmText is what its upstream record says of it: the alarm's code
	// and description, the station's and device's names, the device type.
	store.AlarmText
	// Deliveries are the sinks its start went to, in the ledger's order;
	// Known says whether the store has them (an alarm started before the
	// ledger has not).
	Deliveries []store.StartDelivery
	Known      bool
}

// nowFilters are the filters of a Now request.
type nowFilters struct {
	station, level, typ string
	limit               int
}

func parseFilters(q url.Values) nowFilters {
	f := nowFilters{station: q.Get("station"), level: q.Get("level"), typ: q.Get("type"), limit: DefaultRows}
	if t, ok := event.DeviceType(f.typ); ok {
		f.typ = t
	}
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n > 0 {
		f.limit = min(n, MaxRows)
	}
	return f
}

// query writes f as a URL query, limit n ("" when f is the default).
func (f nowFilters) query(n int) string {
	q := url.Values{}
	for k, v := range map[string]string{"station": f.station, "level": f.level, "type": f.typ} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if n != DefaultRows {
		q.Set("limit", strconv.Itoa(n))
	}
	return q.Encode()
}

// registerNow adds the Now page, its rows for the live update, the live
// update's event stream and the actions on an alarm.
func (c *Console) registerNow() {
	c.mux.HandleFunc("GET /console/{$}", c.now)
	c.mux.HandleFunc("GET /console/rows", c.rows)
	c.mux.HandleFunc("GET /console/events", c.events)
	c.mux.HandleFunc("POST /console/alarms/{id}/{action}", c.act)
}

// now serves the Now page: the ongoing alarms, unacknowledged first, then
// by level (urgent first) and age (oldest first), filtered by the query's
// station, level and device type, the first Limit of them with what became
// of each one's start.
func (c *Console) now(w http.ResponseWriter, r *http.Request) {
	f, ok := c.page(w, r, "now")
	if !ok {
		return
	}
	c.renderNow(w, r, f, "now")
}

// rows serves the table body and the count of the Now page for its filters:
// what live.js swaps in when the alarms changed. Without a session it
// answers 403, and live.js reloads the page, which goes to the login form.
func (c *Console) rows(w http.ResponseWriter, r *http.Request) {
	_, s, ok := c.session(r)
	if !ok {
		http.Error(w, "not logged in: log in at "+base(r)+"login", http.StatusForbidden)
		return
	}
	f := frame{Base: base(r), CSRF: s.csrf, Name: s.name, Page: "now", Admin: s.role == Admin}
	c.renderNow(w, r, f, "rows")
}

func (c *Console) renderNow(w http.ResponseWriter, r *http.Request, f frame, tmpl string) {
	p, err := c.nowData(f, parseFilters(r.URL.Query()))
	if err != nil {
		c.o.Logger.Error("console: reading the ongoing alarms failed", "err", err)
		http.Error(w, "console: reading the ongoing alarms: "+err.Error(), http.StatusInternalServerError)
		return
	}
	render(w, tmpl, p)
}

// nowData reads what the Now page shows for the filters fl. It walks the
// ongoing alarms once, keeping the first fl.limit by order in a heap: the
// alarms beyond the rows shown cost their reading, not their keeping.
func (c *Console) nowData(f frame, fl nowFilters) (nowPage, error) {
	p := nowPage{frame: f, Now: c.o.Now(), Station: fl.station, Level: fl.level, Type: fl.typ,
		Limit: fl.limit, RowsURL: withQuery(f.Base+"rows", fl.query(fl.limit)), Types: event.DeviceTypes,
		Ledger: c.o.Store != nil, Back: fl.query(fl.limit)}
	for l := range 4 {
		p.Levels = append(p.Levels, event.LevelName(l))
	}
	stations := map[string]int{}
	byType := fl.typ != "" && c.o.Store != nil
	h := &firstRows{n: fl.limit}
	var candidates []manage.AlarmState
	err := c.m.EachAlarm(func(a *manage.AlarmState) error {
		p.Total++
		stations[a.StationID]++
		if (fl.station != "" && a.StationID != fl.station) || (fl.level != "" && a.LevelName != fl.level) {
			return nil
		}
		if byType {
			candidates = append(candidates, *a)
			return nil
		}
		p.Matching++
		h.offer(a)
		return nil
	})
	if err != nil {
		return nowPage{}, err
	}
	p.Stations = busiest(stations, maxStations)
	var types map[string]store.AlarmText
	if byType {
		// The type is in the alarm's upstream record alone: read for the
		// alarms the other filters keep (docs/design.md §11).
		if types, err = c.o.Store.Texts(origins(candidates)); err != nil {
			return nowPage{}, err
		}
		for i := range candidates {
			if types[candidates[i].OriginID].DeviceType == fl.typ {
				p.Matching++
				h.offer(&candidates[i])
			}
		}
	}
	shown := h.sorted()
	if p.Matching > len(shown) && fl.limit < MaxRows {
		p.MoreRows = min(MaxRows, fl.limit*5)
		p.More = withQuery(f.Base, fl.query(p.MoreRows))
	}
	p.Rows = make([]nowRow, len(shown))
	for i, a := range shown {
		p.Rows[i].AlarmState = a
	}
	if c.o.Store == nil {
		return p, nil
	}
	ids := origins(shown)
	if types == nil {
		if types, err = c.o.Store.Texts(ids); err != nil {
			return nowPage{}, err
		}
	}
	ledger, err := c.o.Store.Deliveries(ids)
	if err != nil {
		return nowPage{}, err
	}
	for i := range p.Rows {
		r := &p.Rows[i]
		r.AlarmText = types[r.OriginID]
		r.Deliveries, r.Known = ledger[r.OriginID]
		for i := range r.Deliveries {
			r.Deliveries[i].Reason = HideURLPaths(r.Deliveries[i].Reason)
		}
	}
	return p, nil
}

// withQuery returns path with the query q, if any.
func withQuery(path, q string) string {
	if q == "" {
		return path
	}
	return path + "?" + q
}

func origins(alarms []manage.AlarmState) []string {
	out := make([]string, len(alarms))
	for i, a := range alarms {
		out[i] = a.OriginID
	}
	return out
}

// busiest returns up to n stations of count (alarms by station), those
// with the most alarms, in id order.
func busiest(count map[string]int, n int) []string {
	out := make([]string, 0, len(count))
	for s := range count {
		out = append(out, s)
	}
	if len(out) > n {
		slices.SortFunc(out, func(a, b string) int { return cmp.Or(cmp.Compare(count[b], count[a]), strings.Compare(a, b)) })
		out = out[:n]
	}
	slices.Sort(out)
	return out
}

// firstRows keeps the first n alarms offered, by order, without sorting
// the others: a heap whose root is the last kept, compared by a key packed
// in one integer and, on a tie, the originId.
type firstRows struct {
	n    int
	s    []manage.AlarmState
	keys []uint64
}

// offer keeps a copy of *a if it is among the first n offered so far.
func (h *firstRows) offer(a *manage.AlarmState) {
	k := rank(a)
	if len(h.s) < h.n {
		h.s, h.keys = append(h.s, *a), append(h.keys, k)
		if len(h.s) == h.n {
			heap.Init(h)
		}
		return
	}
	if h.n == 0 || !before(k, a.OriginID, h.keys[0], h.s[0].OriginID) {
		return
	}
	h.s[0], h.keys[0] = *a, k
	heap.Fix(h, 0)
}

// sorted returns the alarms kept, by order.
func (h *firstRows) sorted() []manage.AlarmState {
	slices.SortFunc(h.s, order)
	return h.s
}

// before reports whether the alarm of rank k and originId id comes before
// that of rank kj and originId idj.
func before(k uint64, id string, kj uint64, idj string) bool {
	if k != kj {
		return k < kj
	}
	return id < idj
}

// rank packs the order's first keys in one integer, smaller first:
// acknowledged, level, occurrence time (ms from 1970, which fits 59 bits).
func rank(a *manage.AlarmState) uint64 {
	var k uint64
	if a.Acknowledged {
		k = 1 << 63
	}
	k |= uint64(min(max(a.Level, 0), 15)) << 59
	return k | uint64(min(max(a.OccurredAt.UnixMilli(), 0), 1<<59-1))
}

func (h *firstRows) Len() int { return len(h.s) }
func (h *firstRows) Less(i, j int) bool {
	return before(h.keys[j], h.s[j].OriginID, h.keys[i], h.s[i].OriginID)
}
func (h *firstRows) Swap(i, j int) {
	h.s[i], h.s[j] = h.s[j], h.s[i]
	h.keys[i], h.keys[j] = h.keys[j], h.keys[i]
}
func (h *firstRows) Push(any) { panic("firstRows grows by offer") }
func (h *firstRows) Pop() any { panic("firstRows never shrinks") }

// order puts the unacknowledged alarms first, then the more severe (a
// lower level), then the older, then by originId: a total order, so that
// the rows shown are the same whatever order the alarms were read in.
func order(a, b manage.AlarmState) int {
	if a.Acknowledged != b.Acknowledged {
		if !a.Acknowledged {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(a.Level, b.Level); c != 0 {
		return c
	}
	if c := a.OccurredAt.Compare(b.OccurredAt); c != 0 {
		return c
	}
	return strings.Compare(a.OriginID, b.OriginID)
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
	origin := pathText(r, "id")
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
	// Back to the page with the filters it had: only the filters are read
	// from the form's back, and written again, so it cannot send the
	// browser anywhere else.
	back, _ := url.ParseQuery(r.PostFormValue("back"))
	fl := parseFilters(back)
	http.Redirect(w, r, withQuery(base(r), fl.query(fl.limit)), http.StatusSeeOther)
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

// LimitSet reports whether the page shows other than DefaultRows rows at
// most, which the filters' form then keeps.
func (p nowPage) LimitSet() bool { return p.Limit != DefaultRows }
