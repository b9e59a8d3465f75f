package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/dedupe"
)

// DeadLetterJSON is one dead letter as the ops listener shows it. Event, the
// exact body every sink sends, is set by show only.
type DeadLetterJSON struct {
	Sink       string          `json:"sink"`
	Seq        uint64          `json:"seq"`
	EventID    string          `json:"event_id"`
	OriginID   string          `json:"origin_id"`
	Transition string          `json:"transition"`
	Level      int             `json:"level"`
	Reason     string          `json:"reason"`
	At         time.Time       `json:"at"`
	EnqueuedAt time.Time       `json:"enqueued_at"`
	Event      json.RawMessage `json:"event,omitempty"`
}

// DeadLettersAnswer is the answer of every /deadletters endpoint.
type DeadLettersAnswer struct {
	// Action is list, show, replay or drop.
	Action      string           `json:"action"`
	Count       int              `json:"count"`
	DeadLetters []DeadLetterJSON `json:"dead_letters"`
}

// deadLetterAPI serves the dead letters of the running relay on the ops
// listener, since the state file has one writer:
//
//	GET  /deadletters?sink=&since=&event=        list
//	GET  /deadletters/{sink}/{seq}               show one, with its event
//	POST /deadletters/replay?sink=&since=&event= back into the outbox
//	POST /deadletters/drop?sink=&since=&event=   delete
//
// since is an RFC 3339 time or a duration back from now (2h). replay and
// drop need a filter, or all=true. Every request needs the header
// "Authorization: Bearer <RELAY_ADMIN_TOKEN>"; without a token configured,
// the endpoints answer 403.
type deadLetterAPI struct {
	store *dedupe.Store
	token string
	clock clock.Clock
	log   *slog.Logger
}

func (a *deadLetterAPI) register(o handlers) {
	o.Handle("GET /deadletters", a.guard(a.list))
	o.Handle("GET /deadletters/{sink}/{seq}", a.guard(a.show))
	o.Handle("POST /deadletters/replay", a.guard(a.replay))
	o.Handle("POST /deadletters/drop", a.guard(a.drop))
}

func (a *deadLetterAPI) guard(h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return adminHandler(a.token, a.log, "dead-letter request failed", h)
}

func (a *deadLetterAPI) filter(r *http.Request, needOne bool) (dedupe.DeadLetterFilter, error) {
	q := r.URL.Query()
	f := dedupe.DeadLetterFilter{Sink: q.Get("sink"), EventID: q.Get("event")}
	if s := q.Get("since"); s != "" {
		if d, err := time.ParseDuration(s); err == nil && d > 0 {
			f.Since = a.clock.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, s); err == nil {
			f.Since = t
		} else {
			return f, badRequest{fmt.Errorf("since=%q: want an RFC 3339 time (2026-11-23T08:00:00Z) or a duration back from now (2h)", s)}
		}
	}
	if needOne && f == (dedupe.DeadLetterFilter{}) && q.Get("all") != "true" {
		return f, badRequest{errors.New("name the dead letters (sink, since or event), or ask for all of them with all=true")}
	}
	return f, nil
}

func (a *deadLetterAPI) list(w http.ResponseWriter, r *http.Request) error {
	f, err := a.filter(r, false)
	if err != nil {
		return err
	}
	ds, err := a.store.FindDeadLetters(f)
	if err != nil {
		return err
	}
	return answer(w, "list", ds, false)
}

func (a *deadLetterAPI) show(w http.ResponseWriter, r *http.Request) error {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil {
		return badRequest{fmt.Errorf("seq %q: want the number list shows", r.PathValue("seq"))}
	}
	ds, err := a.store.FindDeadLetters(dedupe.DeadLetterFilter{Sink: r.PathValue("sink")})
	if err != nil {
		return err
	}
	for _, d := range ds {
		if d.Seq == seq {
			return answer(w, "show", []dedupe.DeadLetter{d}, true)
		}
	}
	http.Error(w, fmt.Sprintf("no dead letter %d of sink %q", seq, r.PathValue("sink")), http.StatusNotFound)
	return nil
}

func (a *deadLetterAPI) replay(w http.ResponseWriter, r *http.Request) error {
	f, err := a.filter(r, true)
	if err != nil {
		return err
	}
	ds, err := a.store.ReplayDeadLetters(f)
	if err != nil {
		return err
	}
	a.log.Info("dead letters replayed", "count", len(ds), "sink", f.Sink, "event", f.EventID, "since", f.Since)
	return answer(w, "replay", ds, false)
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
	return answer(w, "drop", ds, false)
}

func answer(w http.ResponseWriter, action string, ds []dedupe.DeadLetter, withEvent bool) error {
	out := DeadLettersAnswer{Action: action, Count: len(ds), DeadLetters: make([]DeadLetterJSON, len(ds))}
	for i, d := range ds {
		out.DeadLetters[i] = DeadLetterJSON{Sink: d.Sink, Seq: d.Seq, EventID: d.EventID, OriginID: d.OriginID,
			Transition: string(d.Transition), Level: d.Level, Reason: d.Reason, At: d.At.UTC(), EnqueuedAt: d.EnqueuedAt.UTC()}
		if withEvent && json.Valid(d.Body) {
			out.DeadLetters[i].Event = d.Body
		}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(out)
}

// deadLetterGauge is relay_dead_letters{sink}: the dead letters each sink
// holds now, read from the store at each scrape.
type deadLetterGauge struct {
	store *dedupe.Store
	desc  *prometheus.Desc
}

func newDeadLetterGauge(store *dedupe.Store) *deadLetterGauge {
	return &deadLetterGauge{store: store, desc: prometheus.NewDesc("relay_dead_letters",
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
