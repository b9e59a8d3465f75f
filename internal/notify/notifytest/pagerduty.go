package notifytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// PagerDuty Events API v2 facts the fake enforces, from PagerDuty's
// developer documentation ("Send an Alert Event", "Events API v2 Overview",
// "Events API Rate Limits").
const (
	pagerDutyPath          = "/v2/enqueue"
	pagerDutyKeyLen        = 32
	pagerDutyMaxDedupKey   = 255
	pagerDutyMaxSummary    = 1024
	pagerDutyPerMinute     = 120
	pagerDutyInvalidStatus = "invalid event"
	pagerDutyInvalidMsg    = "Event object is invalid"
)

// PagerDutyEvent is one request the fake Events API got, with its answer.
type PagerDutyEvent struct {
	Received
	Action   string
	DedupKey string
	Summary  string
	Severity string
	// Status is the HTTP status answered: 202, 400 or 429.
	Status int
	// Errors are the reasons of a 400.
	Errors []string
}

// Taken, Answer and Text make e a Message; its text is its action,
// dedup_key and summary.
func (e PagerDutyEvent) Taken() bool    { return e.Status == http.StatusAccepted }
func (e PagerDutyEvent) Answer() string { return fmt.Sprintf("HTTP %d %v", e.Status, e.Errors) }
func (e PagerDutyEvent) Text() string   { return e.Action + " " + e.DedupKey + " " + e.Summary }

// PagerDutyIncident is one alert the fake opened: by a trigger of a
// dedup_key with no open alert, until a resolve of that key.
type PagerDutyIncident struct {
	// ID is the incident's id in the REST API, such as Q000001.
	ID       string
	DedupKey string
	// Alerts are the alert keys (dedup_keys) of the incident's alerts: its
	// own, and those Merge moved into it.
	Alerts []string
	// Acks are its acknowledgements, in order: by a user (Acknowledge) or
	// by the service, for an acknowledge event.
	Acks     []PagerDutyAck
	Summary  string
	Severity string
	Opened   time.Time
	// Triggers counts the triggers it took, the one that opened it included.
	Triggers int
	Acked    bool
	Resolved bool
	Closed   time.Time
}

// PagerDuty is a fake of PagerDuty's Events API v2 (POST /v2/enqueue). It
// validates each event as PagerDuty documents it: routing_key of 32
// characters and one of the fake's integration keys; event_action trigger,
// acknowledge or resolve; dedup_key of at most 255 characters, required
// but for a trigger; for a trigger, payload.summary (at most 1024
// characters), payload.source and payload.severity (critical, error,
// warning, info) required. It answers 202 {"status":"success",...}, 400
// {"status":"invalid event","message":"Event object is invalid","errors":[...]}
// or, over 120 events in 60 s for one routing key, 429.
//
// Alerts are tracked by dedup_key as PagerDuty does: a trigger opens one or
// adds to the open one, a resolve closes it (and is dropped when none is
// open), and a trigger after the resolve opens a new one.
type PagerDuty struct {
	fake[PagerDutyEvent]
	keys      []string
	accepted  map[string][]time.Time // per routing key
	incidents []*PagerDutyIncident
	generated int
	rest      restState
}

// NewPagerDuty starts a fake Events API that knows the integration keys
// (routing keys), telling time with now (a fake clock in tests). It is
// closed when the test ends.
func NewPagerDuty(t testing.TB, now func() time.Time, keys ...string) *PagerDuty {
	t.Helper()
	p := &PagerDuty{keys: keys, accepted: map[string][]time.Time{}}
	p.start(t, now, p.serve)
	return p
}

// Base returns the fake's base URL, scheme://host:port.
func (p *PagerDuty) Base() string { return p.server.URL }

// URL returns the fake's enqueue endpoint.
func (p *PagerDuty) URL() string { return p.server.URL + pagerDutyPath }

// Incidents returns every alert opened so far, in order, as it stands.
func (p *PagerDuty) Incidents() []PagerDutyIncident {
	return copied(&p.mu, &p.incidents, func(in *PagerDutyIncident) {
		in.Alerts, in.Acks = slices.Clone(in.Alerts), slices.Clone(in.Acks)
	})
}

// pagerDutyEvent is the request as the fake reads it.
type pagerDutyEvent struct {
	RoutingKey  *string `json:"routing_key"`
	EventAction string  `json:"event_action"`
	DedupKey    string  `json:"dedup_key"`
	Payload     *struct {
		Summary   *string `json:"summary"`
		Source    *string `json:"source"`
		Severity  *string `json:"severity"`
		Timestamp *string `json:"timestamp"`
	} `json:"payload"`
}

func (p *PagerDuty) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/incidents") {
		p.serveREST(w, r)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != pagerDutyPath {
		http.NotFound(w, r)
		return
	}
	raw := readBody(r)
	at := p.now()
	rec := PagerDutyEvent{Received: Received{At: at, Size: len(raw)}}
	_ = json.Unmarshal(raw, &rec.Body)
	var ev pagerDutyEvent
	var errs []string
	if err := json.Unmarshal(raw, &ev); err != nil || rec.Body == nil {
		errs = append(errs, "Event object is not valid JSON")
	} else {
		errs = p.validate(&ev)
	}
	rec.Action, rec.DedupKey = ev.EventAction, ev.DedupKey
	if ev.Payload != nil {
		rec.Summary, rec.Severity = deref(ev.Payload.Summary), deref(ev.Payload.Severity)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case len(errs) > 0:
		rec.Status, rec.Errors = http.StatusBadRequest, errs
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": pagerDutyInvalidStatus, "message": pagerDutyInvalidMsg, "errors": errs})
	case countWithin(p.accepted[*ev.RoutingKey], at, time.Minute) >= pagerDutyPerMinute:
		// PagerDuty documents the status only ("429 - Request Limit
		// Exceeded"); the body is what its API is seen to answer.
		rec.Status = http.StatusTooManyRequests
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "throttle event", "message": "Requests for this service are arriving too quickly.  Please retry later."})
	default:
		if rec.DedupKey == "" {
			p.generated++
			rec.DedupKey = fmt.Sprintf("%032x", p.generated)
		}
		p.accepted[*ev.RoutingKey] = append(p.accepted[*ev.RoutingKey], at)
		p.apply(rec)
		rec.Status = http.StatusAccepted
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "message": "Event processed", "dedup_key": rec.DedupKey})
	}
	p.messages = append(p.messages, rec)
}

// validate returns the reasons PagerDuty refuses ev for, none when it takes
// it. The wording is the fake's own where PagerDuty's is not documented.
func (p *PagerDuty) validate(ev *pagerDutyEvent) []string {
	var errs []string
	switch {
	case ev.RoutingKey == nil || *ev.RoutingKey == "":
		errs = append(errs, "'routing_key' is missing or blank")
	case len(*ev.RoutingKey) != pagerDutyKeyLen:
		errs = append(errs, fmt.Sprintf("Length of 'routing_key' is incorrect (should be %d characters)", pagerDutyKeyLen))
	case !slices.Contains(p.keys, *ev.RoutingKey):
		errs = append(errs, "Invalid routing key")
	}
	switch ev.EventAction {
	case "trigger", "acknowledge", "resolve":
	case "":
		errs = append(errs, "'event_action' is missing or blank")
	default:
		errs = append(errs, "'event_action' is invalid (must be one of the following: 'trigger', 'acknowledge' or 'resolve')")
	}
	if utf8.RuneCountInString(ev.DedupKey) > pagerDutyMaxDedupKey {
		errs = append(errs, fmt.Sprintf("'dedup_key' is too long (maximum is %d characters)", pagerDutyMaxDedupKey))
	}
	if ev.EventAction != "trigger" {
		if (ev.EventAction == "acknowledge" || ev.EventAction == "resolve") && ev.DedupKey == "" {
			errs = append(errs, "'dedup_key' is missing or blank")
		}
		return errs
	}
	if ev.Payload == nil {
		return append(errs, "'payload' is missing or blank")
	}
	pl := ev.Payload
	switch s := deref(pl.Summary); {
	case s == "":
		errs = append(errs, "'payload.summary' is missing or blank")
	case utf8.RuneCountInString(s) > pagerDutyMaxSummary:
		errs = append(errs, fmt.Sprintf("'payload.summary' is too long (maximum is %d characters)", pagerDutyMaxSummary))
	}
	if deref(pl.Source) == "" {
		errs = append(errs, "'payload.source' is missing or blank")
	}
	if s := deref(pl.Severity); !slices.Contains([]string{"critical", "error", "warning", "info"}, s) {
		errs = append(errs, "'payload.severity' is invalid (must be one of the following: 'critical', 'warning', 'error' or 'info')")
	}
	if ts := deref(pl.Timestamp); ts != "" {
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			errs = append(errs, "'payload.timestamp' is not a valid ISO 8601 timestamp")
		}
	}
	return errs
}

// apply applies an accepted event to the alerts.
func (p *PagerDuty) apply(rec PagerDutyEvent) {
	var open *PagerDutyIncident
	for _, in := range p.incidents {
		if slices.Contains(in.Alerts, rec.DedupKey) && !in.Resolved {
			open = in
		}
	}
	switch rec.Action {
	case "trigger":
		if open == nil {
			p.incidents = append(p.incidents, &PagerDutyIncident{ID: fmt.Sprintf("Q%06d", len(p.incidents)+1), DedupKey: rec.DedupKey,
				Alerts: []string{rec.DedupKey}, Summary: rec.Summary, Severity: rec.Severity, Opened: rec.At, Triggers: 1})
			return
		}
		open.Triggers++
	case "acknowledge":
		if open != nil {
			open.Acked = true
			open.Acks = append(open.Acks, PagerDutyAck{At: rec.At, ID: PagerDutyServiceID, Type: "service_reference", Summary: "relay (Events API v2)"})
		}
	case "resolve":
		if open != nil {
			open.Resolved, open.Closed = true, rec.At
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
