package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/silence"
)

// SilenceRequest is the body of POST /silences: what to silence, when and
// why (silence.Request, which the console's form reads too).
type SilenceRequest = silence.Request

// SilenceJSON is one silence as the ops listener shows it, with its state
// (pending, active or ended) on the relay's clock.
type SilenceJSON struct {
	silence.Silence
	State string `json:"state"`
}

// SilencesAnswer is the answer of every /silences request that succeeds.
type SilencesAnswer struct {
	// Action is list, add, show or expire.
	Action   string        `json:"action"`
	Count    int           `json:"count"`
	Silences []SilenceJSON `json:"silences"`
}

// ErrorAnswer is the answer of a /silences request that fails: why, and for
// bad input each field at fault with how to put it right.
type ErrorAnswer struct {
	Error    string            `json:"error"`
	Problems []silence.Problem `json:"problems,omitempty"`
}

// maxSilenceBody bounds the body of POST /silences.
const maxSilenceBody = 64 << 10

// silenceAPI serves the silences of the running relay on the ops listener,
// since the state file has one writer:
//
//	GET    /silences[?all=true]  list: active and pending, with all=true ended too
//	POST   /silences             add: a SilenceRequest
//	GET    /silences/{id}        show one
//	DELETE /silences/{id}        expire it now
//
// Every request needs the header "Authorization: Bearer <RELAY_ADMIN_TOKEN>";
// without a token configured, the endpoints answer 403. Failures answer an
// ErrorAnswer: 400 for bad input, 404 for an unknown ID, 409 for a silence
// already ended or too many silences.
type silenceAPI struct {
	silences *silence.Silences
	token    string
	clock    clock.Clock
	log      *slog.Logger
}

// handlers is where an API registers its endpoints: the OpsServer, or a
// ServeMux in tests.
type handlers interface {
	Handle(pattern string, h http.Handler)
}

func (a *silenceAPI) register(mux handlers) {
	mux.Handle("GET /silences", a.guard(a.list))
	mux.Handle("POST /silences", a.guard(a.add))
	mux.Handle("GET /silences/{id}", a.guard(a.show))
	mux.Handle("DELETE /silences/{id}", a.guard(a.expire))
}

// fieldError is bad input in one field of a request.
type fieldError silence.Problem

func (e *fieldError) Error() string { return e.Field + ": " + e.Message }

func (a *silenceAPI) guard(h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return adminGuard(a.token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		var inv *silence.InvalidError
		var fe *fieldError
		switch {
		case errors.As(err, &inv):
			writeJSON(w, http.StatusBadRequest, ErrorAnswer{Error: err.Error(), Problems: inv.Problems})
		case errors.As(err, &fe):
			writeJSON(w, http.StatusBadRequest, ErrorAnswer{Error: err.Error(), Problems: []silence.Problem{silence.Problem(*fe)}})
		case errors.Is(err, silence.ErrNotFound):
			writeJSON(w, http.StatusNotFound, ErrorAnswer{Error: err.Error()})
		case errors.Is(err, silence.ErrEnded), errors.Is(err, silence.ErrTooMany):
			writeJSON(w, http.StatusConflict, ErrorAnswer{Error: err.Error()})
		default:
			a.log.Error("silence request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			writeJSON(w, http.StatusInternalServerError, ErrorAnswer{Error: err.Error()})
		}
	}))
}

func (a *silenceAPI) list(w http.ResponseWriter, r *http.Request) error {
	all := false
	switch v := r.URL.Query().Get("all"); v {
	case "", "false":
	case "true":
		all = true
	default:
		return &fieldError{Field: "all", Message: fmt.Sprintf("%q: want true (ended silences too) or false", v)}
	}
	return a.answer(w, http.StatusOK, "list", a.silences.List(all)...)
}

func (a *silenceAPI) show(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	s, ok := a.silences.Get(id)
	if !ok {
		return fmt.Errorf("silence %q: %w: relay silence list --all shows them", id, silence.ErrNotFound)
	}
	return a.answer(w, http.StatusOK, "show", s)
}

func (a *silenceAPI) expire(w http.ResponseWriter, r *http.Request) error {
	s, err := a.silences.Expire(r.PathValue("id"))
	if err != nil {
		return err
	}
	a.log.Info("silence expired", "id", s.ID, "match", s.Match.String(), "all", s.All, "author", s.Author)
	return a.answer(w, http.StatusOK, "expire", s)
}

func (a *silenceAPI) add(w http.ResponseWriter, r *http.Request) error {
	sil, err := a.decode(w, r)
	if err != nil {
		return err
	}
	s, err := a.silences.Add(sil)
	if err != nil {
		return err
	}
	a.log.Info("silence added", "id", s.ID, "match", s.Match.String(), "all", s.All,
		"starts_at", s.StartsAt, "ends_at", s.EndsAt, "author", s.Author, "comment", s.Comment, "notify_on_expire", s.NotifyOnExpire)
	return a.answer(w, http.StatusCreated, "add", s)
}

// decode reads the SilenceRequest of r into a Silence for Add.
func (a *silenceAPI) decode(w http.ResponseWriter, r *http.Request) (silence.Silence, error) {
	var req SilenceRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxSilenceBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		msg := err.Error()
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			msg = fmt.Sprintf("larger than the %d bytes allowed", maxSilenceBody)
		}
		return silence.Silence{}, &fieldError{Field: "body", Message: strings.TrimPrefix(msg, "json: ") +
			": send a JSON object with match (or all), ends_at or duration, author, comment, and optionally starts_at and notify_on_expire"}
	}
	if dec.More() {
		return silence.Silence{}, &fieldError{Field: "body", Message: "more than one JSON value: send one object"}
	}
	return req.Silence(a.clock.Now())
}

func (a *silenceAPI) answer(w http.ResponseWriter, status int, action string, ss ...silence.Silence) error {
	now := a.clock.Now()
	out := SilencesAnswer{Action: action, Count: len(ss), Silences: make([]SilenceJSON, len(ss))}
	for i := range ss {
		out.Silences[i] = SilenceJSON{Silence: ss[i], State: ss[i].State(now)}
	}
	writeJSON(w, status, out)
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
