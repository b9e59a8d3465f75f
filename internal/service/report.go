package service

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/isa"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

// DefaultReportSince is the period a report covers when none is asked for.
const DefaultReportSince = 7 * 24 * time.Hour

// reportAPI serves the ISA-18.2 figures of the running relay on the ops
// listener, since the state file has one writer:
//
//	GET /report?since=7d&until=2026-11-23T08:00:00Z
//
// since is the period's length (7d, 36h; default DefaultReportSince), until
// its end (RFC 3339; default now). The answer is an isa.Report as JSON, whose
// operator positions are the routes of the rules in force. Requests need
// RELAY_ADMIN_TOKEN (adminGuard).
type reportAPI struct {
	store *store.Store
	rules func() *route.Rules
	token string
	clock clock.Clock
	log   *slog.Logger
}

func (a *reportAPI) register(o handlers) { o.Handle("GET /report", a.handler()) }

func (a *reportAPI) handler() http.Handler {
	return adminHandler(a.token, a.log, "report request failed", a.report)
}

func (a *reportAPI) report(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	since := DefaultReportSince
	if s := q.Get("since"); s != "" {
		d, err := isa.ParseSince(s)
		if err != nil {
			return badRequest{err}
		}
		since = d
	}
	until := a.clock.Now()
	if s := q.Get("until"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return badRequest{fmt.Errorf("until=%q: want an RFC 3339 time such as 2026-11-23T08:00:00Z", s)}
		}
		until = t
	}
	acks, err := manage.FirstAcks(a.store)
	if err != nil {
		return err
	}
	rep, err := isa.FromStore(a.store, a.rules(), until, since, acks)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(rep)
}
