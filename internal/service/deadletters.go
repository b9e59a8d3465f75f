package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/store"
)

// DeadLetterJSON is one dead letter as the ops listener shows it. Event, the
// exact body every sink sends, is set by show only.
type DeadLetterJSON struct {
	Sink       string    `json:"sink"`
	Seq        uint64    `json:"seq"`
	EventID    string    `json:"event_id"`
	OriginID   string    `json:"origin_id"`
	Transition string    `json:"transition"`
	Level      int       `json:"level"`
	Reason     string    `json:"reason"`
	At         time.Time `json:"at"`
	EnqueuedAt time.Time `json:"enqueued_at"`
	// Alarm is the alarm's status now: ongoing, ended, invalid, or unknown
	// (pruned); a dead start of an alarm that is over is replayed with its
	// parked end or not at all.
	Alarm string `json:"alarm"`
	// Parked says the entry is an end or invalid parked beside its alarm's
	// start, a dead letter too: they are replayed and dropped together.
	Parked bool            `json:"parked,omitempty"`
	Event  json.RawMessage `json:"event,omitempty"`
}

// RefusedJSON is a dead letter a replay left where it is, and why.
type RefusedJSON struct {
	DeadLetterJSON
	Why string `json:"why"`
}

// DeadLettersAnswer is the answer of every /deadletters endpoint.
type DeadLettersAnswer struct {
	// Action is list, show, replay or drop.
	Action      string           `json:"action"`
	Count       int              `json:"count"`
	DeadLetters []DeadLetterJSON `json:"dead_letters"`
	// Refused are the dead letters a replay left where they are.
	Refused []RefusedJSON `json:"refused,omitempty"`
}

// deadLetterAPI serves the dead letters of the running relay on the ops
// listener, since the state file has one writer:
//
//	GET  /deadletters?sink=&since=&event=        list
//	GET  /deadletters/withheld?sink=&since=&event= the suppressed logs: withheld or dropped
//	GET  /deadletters/{sink}/{seq}               show one, with its event
//	POST /deadletters/replay?sink=&since=&event= back into the outbox
//	POST /deadletters/drop?sink=&since=&event=   delete
//
// since is an RFC 3339 time or a duration back from now (2h). replay and
// drop need a filter, or all=true. Every request needs the header
// "Authorization: Bearer <RELAY_ADMIN_TOKEN>"; without a token configured,
// the endpoints answer 403.
type deadLetterAPI struct {
	store *store.Store
	token string
	clock clock.Clock
	log   *slog.Logger
}

func (a *deadLetterAPI) register(o handlers) {
	o.Handle("GET /deadletters", a.guard(a.list))
	o.Handle("GET /deadletters/withheld", a.guard(a.withheld))
	o.Handle("GET /deadletters/{sink}/{seq}", a.guard(a.show))
	o.Handle("POST /deadletters/replay", a.guard(a.replay))
	o.Handle("POST /deadletters/drop", a.guard(a.drop))
}

func (a *deadLetterAPI) guard(h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return adminHandler(a.token, a.log, "dead-letter request failed", h)
}

func (a *deadLetterAPI) filter(r *http.Request, needOne bool) (store.DeadLetterFilter, error) {
	q := r.URL.Query()
	f := store.DeadLetterFilter{Sink: q.Get("sink"), EventID: q.Get("event")}
	if s := q.Get("since"); s != "" {
		if d, err := time.ParseDuration(s); err == nil && d > 0 {
			f.Since = a.clock.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, s); err == nil {
			f.Since = t
		} else {
			return f, badRequest{fmt.Errorf("since=%q: want an RFC 3339 time (2026-11-23T08:00:00Z) or a duration back from now (2h)", s)}
		}
	}
	if needOne && f == (store.DeadLetterFilter{}) && q.Get("all") != "true" {
		return f, badRequest{errors.New("name the dead letters (sink, since or event), or ask for all of them with all=true")}
	}
	return f, nil
}

func (a *deadLetterAPI) list(w http.ResponseWriter, r *http.Request) error {
	f, err := a.filter(r, false)
	if err != nil {
		return err
	}
	ds, err := a.store.ListDeadLetters(f)
	if err != nil {
		return err
	}
	return a.answer(w, "list", ds, nil, false)
}

// withheld lists the entries of the suppressed logs: withheld by alarm
// management, or recorded as dropped.
func (a *deadLetterAPI) withheld(w http.ResponseWriter, r *http.Request) error {
	f, err := a.filter(r, false)
	if err != nil {
		return err
	}
	ds, err := a.store.ListWithheld(f)
	if err != nil {
		return err
	}
	return a.answer(w, "list", ds, nil, false)
}

func (a *deadLetterAPI) show(w http.ResponseWriter, r *http.Request) error {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil {
		return badRequest{fmt.Errorf("seq %q: want the number list shows", r.PathValue("seq"))}
	}
	// One dead letter read, by its number: not every one of its sink.
	d, found, err := a.store.DeadLetterOf(r.PathValue("sink"), seq)
	if err != nil {
		return err
	}
	if !found {
		http.Error(w, fmt.Sprintf("no dead letter %d of sink %q", seq, r.PathValue("sink")), http.StatusNotFound)
		return nil
	}
	return a.answer(w, "show", []store.DeadLetter{d}, nil, true)
}

func (a *deadLetterAPI) replay(w http.ResponseWriter, r *http.Request) error {
	f, err := a.filter(r, true)
	if err != nil {
		return err
	}
	ds, refused, err := a.store.ReplayDeadLetters(f)
	if err != nil {
		return err
	}
	a.log.Info("dead letters replayed", "count", len(ds), "refused", len(refused), "sink", f.Sink, "event", f.EventID, "since", f.Since)
	return a.answer(w, "replay", ds, refused, false)
}

func (a *deadLetterAPI) drop(w http.ResponseWriter, r *http.Request) error {
	f, err := a.filter(r, true)
	if err != nil {
		return err
	}
	ds, err := a.store.DropDeadLetters(f)
	if err != nil {
		return err
	}
	a.log.Info("dead letters dropped", "count", len(ds), "sink", f.Sink, "event", f.EventID, "since", f.Since)
	return a.answer(w, "drop", ds, nil, false)
}

// answer writes ds and refused as the endpoint's JSON, each dead letter
// with whether its alarm is still ongoing.
func (a *deadLetterAPI) answer(w http.ResponseWriter, action string, ds []store.DeadLetter, refused []store.Refusal, withEvent bool) error {
	out := DeadLettersAnswer{Action: action, Count: len(ds), DeadLetters: make([]DeadLetterJSON, len(ds))}
	status := map[string]string{}
	alarm := func(origin string) string {
		if st, ok := status[origin]; ok {
			return st
		}
		st := "unknown"
		if t, found, err := a.store.Alarm(origin); err == nil && found {
			st = event.StatusName(t.Status)
		}
		status[origin] = st
		return st
	}
	show := func(d *store.DeadLetter) DeadLetterJSON {
		j := DeadLetterJSON{Sink: d.Sink, Seq: d.Seq, EventID: d.EventID, OriginID: d.OriginID,
			Transition: string(d.Transition), Level: d.Level, Reason: d.Reason, At: d.At.UTC(), EnqueuedAt: d.EnqueuedAt.UTC(),
			Alarm: alarm(d.OriginID), Parked: strings.HasPrefix(d.Reason, store.ParkedPrefix)}
		if withEvent && json.Valid(d.Body) {
			j.Event = d.Body
		}
		return j
	}
	for i := range ds {
		out.DeadLetters[i] = show(&ds[i])
	}
	for i := range refused {
		r := show(&refused[i].DeadLetter)
		out.Refused = append(out.Refused, RefusedJSON{DeadLetterJSON: r, Why: refused[i].Why})
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(out)
}

// deadLetterGauge is relay_dead_letters{sink}: the dead letters each sink
// holds now, read from the store at each scrape.
type deadLetterGauge struct {
	store *store.Store
	desc  *prometheus.Desc
}

func newDeadLetterGauge(st *store.Store) *deadLetterGauge {
	return &deadLetterGauge{store: st, desc: prometheus.NewDesc("relay_dead_letters",
		"Dead letters held now, by sink: list them with relay deadletters list, replay or drop them.", []string{"sink"}, nil)}
}

func (g *deadLetterGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *deadLetterGauge) Collect(ch chan<- prometheus.Metric) {
	counts, err := g.store.DeadLetterCounts()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(g.desc, err)
		return
	}
	for sink, n := range counts {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(n), sink)
	}
}

// droppedCounter is relay_dropped_total{sink,reason}: the outbox entries
// recorded as dropped instead of sent since the process started, read from
// the store at each scrape. reason is sink-removed (the rules no longer name
// the sink), start-dropped (the alarm's start was dropped: an end follows
// its start) or dead-letter-limit (dead letters discarded because the sink
// held more than the limit). They are kept in the sink's suppressed log.
type droppedCounter struct {
	store *store.Store
	desc  *prometheus.Desc
}

func newDroppedCounter(st *store.Store) *droppedCounter {
	return &droppedCounter{store: st, desc: prometheus.NewDesc("relay_dropped_total",
		"Outbox entries recorded as dropped instead of sent, by sink and reason: sink-removed (the rules no longer name the sink), "+
			"start-dropped (the alarm's start was dropped, so its end is too), end-not-wanted (the sink says send_resolved: false) or dead-letter-limit (dead letters discarded, "+
			"the oldest alarm's first, because the sink held more than RELAY_DEAD_LETTER_LIMIT).", []string{"sink", "reason"}, nil)}
}

func (c *droppedCounter) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *droppedCounter) Collect(ch chan<- prometheus.Metric) {
	for k, n := range c.store.DroppedCounts() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), k[0], k[1])
	}
}
