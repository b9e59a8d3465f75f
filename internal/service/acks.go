package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
)

// AckRequest is the body of POST /alarms/{id}/ack, /unack and /shelve: who
// acts, why, and for shelving how long.
type AckRequest struct {
	// By names who acts; required (relay ack --by, the console's user).
	By      string `json:"by"`
	Comment string `json:"comment,omitempty"`
	// Duration is how long /shelve mutes the alarm's point (90m, 2h, 3d);
	// empty shelves it until it clears.
	Duration string `json:"duration,omitempty"`
}

// AckAnswer is the answer of the /alarms endpoints.
type AckAnswer struct {
	// Action is list, show, ack, unack or shelve.
	Action string `json:"action"`
	// Result, for an action, is what became of it.
	Result *notify.ActionResult `json:"result,omitempty"`
	Alarms []manage.AlarmState  `json:"alarms,omitempty"`
	// Alarm is the alarm shown, with its history of actions.
	Alarm *manage.Acknowledgement `json:"alarm,omitempty"`
}

// maxAckBody bounds the body of an action.
const maxAckBody = 16 << 10

// ackAPI serves acknowledgement on the ops listener, guarded by
// RELAY_ADMIN_TOKEN like the silences:
//
//	GET  /alarms               the ongoing alarms, with who acknowledged each
//	GET  /alarms/{id}          one alarm's acknowledgement and its history
//	POST /alarms/{id}/ack      acknowledge it (AckRequest)
//	POST /alarms/{id}/unack    take the acknowledgement back
//	POST /alarms/{id}/shelve   silence its point for a while, or until it clears
type ackAPI struct {
	manager *manage.Manager
	token   string
	log     *slog.Logger
}

func (a *ackAPI) register(mux handlers) {
	mux.Handle("GET /alarms", a.guard(a.list))
	mux.Handle("GET /alarms/{id}", a.guard(a.show))
	for _, kind := range []notify.ActionKind{notify.Acknowledge, notify.Unacknowledge, notify.Shelve} {
		mux.Handle("POST /alarms/{id}/"+string(kind), a.guard(func(w http.ResponseWriter, r *http.Request) error { return a.act(w, r, kind) }))
	}
}

func (a *ackAPI) guard(h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return adminGuard(a.token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		var fe *fieldError
		if errors.As(err, &fe) {
			writeJSON(w, http.StatusBadRequest, ErrorAnswer{Error: err.Error()})
			return
		}
		a.log.Error("alarm action request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeJSON(w, http.StatusInternalServerError, ErrorAnswer{Error: err.Error()})
	}))
}

func (a *ackAPI) list(w http.ResponseWriter, _ *http.Request) error {
	alarms, err := a.manager.Alarms()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, AckAnswer{Action: "list", Alarms: alarms})
	return nil
}

func (a *ackAPI) show(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if known, err := a.manager.Knows(id); err != nil {
		return err
	} else if !known {
		writeJSON(w, http.StatusNotFound, ErrorAnswer{Error: fmt.Sprintf("alarm %q: relay does not know it (relay ack --list shows the ongoing alarms)", id)})
		return nil
	}
	ack, err := a.manager.Acknowledgement(id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, AckAnswer{Action: "show", Alarm: &ack})
	return nil
}

func (a *ackAPI) act(w http.ResponseWriter, r *http.Request, kind notify.ActionKind) error {
	var req AckRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAckBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return &fieldError{Field: "body", Message: "want JSON such as {\"by\": \"li.wei\", \"comment\": \"on it\"}: " + err.Error()}
	}
	req.By = strings.TrimSpace(req.By)
	if req.By == "" {
		return &fieldError{Field: "by", Message: "missing: say who acts (relay ack --by NAME)"}
	}
	act := notify.Action{Kind: kind, Alarms: []string{r.PathValue("id")}, Actor: notify.Actor{Via: "api", ID: req.By},
		Comment: req.Comment, Ref: "api"}
	if kind == notify.Shelve && req.Duration != "" {
		d, err := parseDays(req.Duration)
		if err != nil || d <= 0 || d > manage.ShelveUntilClearedMax {
			return &fieldError{Field: "duration", Message: fmt.Sprintf("%q: want a duration such as 90m, 2h or 3d, at most 90d; leave it out to shelve until the alarm clears", req.Duration)}
		}
		act.ShelveFor = d
	}
	res, err := a.manager.Act(r.Context(), act)
	if err != nil {
		if res.Text != "" {
			return &fieldError{Field: "body", Message: res.Text}
		}
		return err
	}
	status := http.StatusOK
	if len(res.Applied) == 0 {
		status = http.StatusConflict
		if why := res.Unchanged[act.Alarms[0]]; strings.HasPrefix(why, "unknown") {
			status = http.StatusNotFound
		}
	}
	writeJSON(w, status, AckAnswer{Action: string(kind), Result: &res})
	return nil
}

// parseDays reads a duration that may count days (3d).
func parseDays(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(d, "%d", &n); err != nil || fmt.Sprint(n) != d {
			return 0, fmt.Errorf("%q is not a number of days", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// unackedGauge is relay_unacknowledged_alarms{level}, the ongoing alarms
// nobody acknowledged, and relay_unacknowledged_oldest_seconds{level}, how
// long the oldest of them has been waiting since first seen (0 with none),
// read from the store at each scrape.
type unackedGauge struct {
	manager *manage.Manager
	now     func() time.Time
	desc    *prometheus.Desc
	oldest  *prometheus.Desc
}

func newUnackedGauge(m *manage.Manager, now func() time.Time) *unackedGauge {
	return &unackedGauge{manager: m, now: now,
		desc: prometheus.NewDesc("relay_unacknowledged_alarms",
			"Ongoing alarms nobody has acknowledged, by level name (urgent, severe, major, minor).", []string{"level"}, nil),
		oldest: prometheus.NewDesc("relay_unacknowledged_oldest_seconds",
			"How long the oldest ongoing alarm nobody has acknowledged has been waiting since first seen, by level name; 0 with none.", []string{"level"}, nil)}
}

func (g *unackedGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc; ch <- g.oldest }

func (g *unackedGauge) Collect(ch chan<- prometheus.Metric) {
	counts, err := g.manager.Unacknowledged()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(g.desc, err)
		ch <- prometheus.NewInvalidMetric(g.oldest, err)
		return
	}
	now := g.now()
	levels := []int{0, 1, 2, 3} // every level, 0 when it has none: an alert sees the series
	for level := range counts {
		if level < 0 || level > 3 {
			levels = append(levels, level)
		}
	}
	for _, level := range levels {
		u := counts[level]
		age := 0.0
		if u.N > 0 {
			age = max(0, now.Sub(u.OldestSeen).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(u.N), event.LevelName(level))
		ch <- prometheus.MustNewConstMetric(g.oldest, prometheus.GaugeValue, age, event.LevelName(level))
	}
}

// listeners runs one Listen per connection the sinks read clicks on
// (notify.Listener): a Slack app's Socket Mode, a Telegram bot's
// getUpdates. They run while the tenant is served, so with replicas only
// the lease holder reads them; a new set of sinks (a reload) replaces them.
type listeners struct {
	base context.Context
	acts notify.Actions
	log  *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// use stops the running listeners and starts one per key of sinks.
func (l *listeners) use(sinks []notify.Sink) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopLocked()
	ctx, cancel := context.WithCancel(l.base)
	l.cancel = cancel
	var keys []string
	groups := map[string][]notify.Listener{}
	for _, s := range sinks {
		ln, ok := s.(notify.Listener)
		if !ok {
			continue
		}
		key := ln.ListenKey()
		if key == "" {
			continue
		}
		if groups[key] == nil {
			keys = append(keys, key)
		}
		groups[key] = append(groups[key], ln)
	}
	for _, key := range keys {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.run(ctx, groups[key], key)
		}()
	}
}

// run holds one listener, the first of the sinks of its key, until ctx
// ends; a notify.GroupListener listens for all of them. Listen reconnects by
// itself; an error it returns (a refused token) is logged and tried again
// after a minute or so, since the operator may fix the token without a
// restart.
func (l *listeners) run(ctx context.Context, group []notify.Listener, key string) {
	ln := group[0]
	listen := func() error { return ln.Listen(ctx, l.acts) }
	if gl, ok := ln.(notify.GroupListener); ok {
		listen = func() error { return gl.ListenFor(ctx, l.acts, group) }
	}
	chat, _, _ := strings.Cut(key, ":")
	l.log.Info("listening for acknowledgements", "sink", ln.Name(), "chat", chat)
	for {
		err := listen()
		if ctx.Err() != nil {
			return
		}
		l.log.Error("the connection that reads acknowledgements failed; trying again in a minute", "sink", ln.Name(), "chat", chat, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Minute + rand.N(10*time.Second)):
		}
	}
}

func (l *listeners) stopLocked() {
	if l.cancel != nil {
		l.cancel()
		l.wg.Wait()
		l.cancel = nil
	}
}

// stop stops every listener.
func (l *listeners) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopLocked()
}
