package notifytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PagerDuty REST API v2 facts the fake enforces, from PagerDuty's OpenAPI
// document (github.com/PagerDuty/api-schema, reference/REST/openapiv3.json):
// the server https://api.pagerduty.com; the api_key security scheme, an
// Authorization header "Token token=<API_KEY>"; the Accept header that
// versions the API; GET /incidents with statuses[], date_range, limit
// ("Maximum of 100"), offset, answering incidents with offset, limit and
// more; GET /incidents/{id}/alerts answering alerts with their alert_key;
// errors as {"error":{"message","code"}}. The rate-limit answer is a 429
// with ratelimit-limit, ratelimit-remaining and ratelimit-reset (seconds to
// wait), as PagerDuty's "REST API Rate Limits" page describes them.
const (
	pagerDutyAccept    = "application/vnd.pagerduty+json;version=2"
	pagerDutyMaxLimit  = 100
	pagerDutyDefLimit  = 25
	pagerDutyTokenAuth = "Token token="
	// PagerDutyServiceID is the id of the service the fake's incidents
	// belong to, which acknowledges an incident for an acknowledge event.
	PagerDutyServiceID = "PSRVC01"
)

// PagerDutyAck is one acknowledgement of an incident: by a user
// (Type user_reference) or by the service, for an Events API acknowledge
// (service_reference).
type PagerDutyAck struct {
	At      time.Time
	ID      string
	Type    string
	Summary string
}

// PagerDutyRequest is one request the fake REST API got.
type PagerDutyRequest struct {
	Path   string
	Query  string
	Status int
	// Auth is the Authorization header as sent.
	Auth string
}

// restState is the REST side of the fake.
type restState struct {
	tokens    []string
	hideKeys  bool
	throttle  int
	resetSecs int
	requests  []PagerDutyRequest
}

// SetAPITokens sets the REST API tokens the fake takes.
func (p *PagerDuty) SetAPITokens(tokens ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rest.tokens = tokens
}

// Acknowledge acknowledges, as the user userID called name would in
// PagerDuty's app, the open incident that holds the alert dedupKey; false
// when there is none.
func (p *PagerDuty) Acknowledge(dedupKey, userID, name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := p.openIncident(dedupKey)
	if in == nil {
		return false
	}
	in.Acked = true
	in.Acks = append(in.Acks, PagerDutyAck{At: p.now(), ID: userID, Type: "user_reference", Summary: name})
	return true
}

// Merge moves the alerts of the open incident holding alert from into the
// open incident holding alert into, as alert grouping or a person merging
// incidents does; the emptied incident is resolved.
func (p *PagerDuty) Merge(into, from string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	dst, src := p.openIncident(into), p.openIncident(from)
	if dst == nil || src == nil || dst == src {
		return false
	}
	dst.Alerts = append(dst.Alerts, src.Alerts...)
	src.Alerts, src.Resolved, src.Closed = nil, true, p.now()
	return true
}

// HideIncidentKeys makes the fake answer incidents without incident_key,
// as PagerDuty's list of incidents documents it for incidents with child
// alerts ("Incidents with child alerts do not have an incident key"): only
// their alerts name the dedup_keys.
func (p *PagerDuty) HideIncidentKeys() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rest.hideKeys = true
}

// Throttle answers the next n REST requests with a 429 whose
// ratelimit-reset asks to wait resetSecs seconds.
func (p *PagerDuty) Throttle(n, resetSecs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rest.throttle, p.rest.resetSecs = n, resetSecs
}

// RESTRequests returns every REST request the fake got, in order.
func (p *PagerDuty) RESTRequests() []PagerDutyRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.rest.requests)
}

// openIncident returns the open incident holding alert key, or nil.
func (p *PagerDuty) openIncident(key string) *PagerDutyIncident {
	for _, in := range p.incidents {
		if slices.Contains(in.Alerts, key) && !in.Resolved {
			return in
		}
	}
	return nil
}

func (p *PagerDuty) serveREST(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := PagerDutyRequest{Path: r.URL.Path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization")}
	status, body := p.answerREST(w, r)
	rec.Status = status
	p.rest.requests = append(p.rest.requests, rec)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func restError(code int, message string) map[string]any {
	return map[string]any{"error": map[string]any{"code": code, "message": message}}
}

// answerREST returns the status and body of a REST request, with p.mu
// held.
func (p *PagerDuty) answerREST(w http.ResponseWriter, r *http.Request) (int, any) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), pagerDutyTokenAuth)
	if !ok || !slices.Contains(p.rest.tokens, token) {
		return http.StatusUnauthorized, restError(2006, "Unauthorized")
	}
	if r.Method != http.MethodGet {
		return http.StatusMethodNotAllowed, restError(2000, "the fake serves GET only")
	}
	if got := r.Header.Get("Accept"); got != pagerDutyAccept {
		return http.StatusBadRequest, restError(2001, "Accept is "+got+", want "+pagerDutyAccept)
	}
	if p.rest.throttle > 0 {
		p.rest.throttle--
		w.Header().Set("ratelimit-limit", "960")
		w.Header().Set("ratelimit-remaining", "0")
		w.Header().Set("ratelimit-reset", strconv.Itoa(p.rest.resetSecs))
		return http.StatusTooManyRequests, restError(2020, "Rate Limit Exceeded")
	}
	q := r.URL.Query()
	limit, offset := pagerDutyDefLimit, 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > pagerDutyMaxLimit {
			return http.StatusBadRequest, restError(2001, "Invalid Input Provided: limit")
		}
		limit = n
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return http.StatusBadRequest, restError(2001, "Invalid Input Provided: offset")
		}
		offset = n
	}
	page := func(n int) (int, int, bool) {
		lo, hi := min(offset, n), min(offset+limit, n)
		return lo, hi, hi < n
	}
	if r.URL.Path == "/incidents" {
		var list []map[string]any
		for _, in := range p.incidents {
			if st := in.status(); len(q["statuses[]"]) == 0 || slices.Contains(q["statuses[]"], st) {
				list = append(list, p.restIncident(in))
			}
		}
		lo, hi, more := page(len(list))
		return http.StatusOK, map[string]any{"incidents": nonNil(list[lo:hi]), "limit": limit, "offset": offset, "more": more, "total": nil}
	}
	id, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/incidents/"), "/alerts")
	if !ok {
		return http.StatusNotFound, restError(2100, "Not Found")
	}
	for _, in := range p.incidents {
		if in.ID != id {
			continue
		}
		var alerts []map[string]any
		for i, key := range in.Alerts {
			alerts = append(alerts, map[string]any{"id": fmt.Sprintf("%s-A%d", in.ID, i+1), "type": "alert", "alert_key": key,
				"status":   map[bool]string{true: "resolved", false: "triggered"}[in.Resolved],
				"incident": map[string]any{"id": in.ID, "type": "incident_reference"}})
		}
		lo, hi, more := page(len(alerts))
		return http.StatusOK, map[string]any{"alerts": nonNil(alerts[lo:hi]), "limit": limit, "offset": offset, "more": more, "total": nil}
	}
	return http.StatusNotFound, restError(2100, "Not Found")
}

func nonNil(s []map[string]any) []map[string]any {
	if s == nil {
		return []map[string]any{}
	}
	return s
}

// status is the incident's status as the REST API names it.
func (in *PagerDutyIncident) status() string {
	switch {
	case in.Resolved:
		return "resolved"
	case in.Acked:
		return "acknowledged"
	}
	return "triggered"
}

// restIncident is in as GET /incidents answers it, the fields relay reads
// and a few around them.
func (p *PagerDuty) restIncident(in *PagerDutyIncident) map[string]any {
	var key any = in.DedupKey
	if p.rest.hideKeys {
		key = nil
	}
	acks := []map[string]any{}
	if in.status() == "acknowledged" {
		for _, a := range in.Acks {
			acks = append(acks, map[string]any{"at": a.At.UTC().Format(time.RFC3339),
				"acknowledger": map[string]any{"id": a.ID, "type": a.Type, "summary": a.Summary}})
		}
	}
	return map[string]any{
		"id": in.ID, "type": "incident", "summary": in.Summary, "title": in.Summary, "status": in.status(),
		"incident_key": key, "created_at": in.Opened.UTC().Format(time.RFC3339),
		"service":          map[string]any{"id": PagerDutyServiceID, "type": "service_reference"},
		"alert_counts":     map[string]any{"all": len(in.Alerts), "triggered": len(in.Alerts), "resolved": 0},
		"acknowledgements": acks,
	}
}
