package silence

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/rulefile"
)

// Request is a silence as a person asks for it: the body of the ops
// listener's POST /silences (JSON, every time RFC 3339) and what the
// console's form says. Silence reads it, so that both accept the same
// silences and name the same problems.
type Request struct {
	// Match has the keys of a route's match, level names included (levels:
	// [urgent]); All, set instead, silences every alarm.
	Match json.RawMessage `json:"match,omitempty"`
	All   bool            `json:"all,omitempty"`
	// StartsAt is when the silence begins; empty or past means now.
	StartsAt string `json:"starts_at,omitempty"`
	// EndsAt is when it ends; Duration (2h, 3d), given instead, counts from
	// the start.
	EndsAt   string `json:"ends_at,omitempty"`
	Duration string `json:"duration,omitempty"`
	Author   string `json:"author"`
	Comment  string `json:"comment"`
	// NotifyOnExpire re-announces the alarms still ongoing when it ends.
	NotifyOnExpire bool `json:"notify_on_expire,omitempty"`
}

// Silence reads r, at now, into a Silence for Silences.Add, which checks
// the rest. Every problem of r (a match that does not parse, a time that is
// not RFC 3339, both an end and a duration) is reported in one
// *InvalidError, each naming its field: match or one of its keys
// (match.levels), starts_at, ends_at, duration.
func (r Request) Silence(now time.Time) (Silence, error) {
	sil := Silence{All: r.All, Author: r.Author, Comment: r.Comment, NotifyOnExpire: r.NotifyOnExpire}
	var problems []Problem
	bad := func(field, format string, args ...any) {
		problems = append(problems, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if m := strings.TrimSpace(string(r.Match)); m != "" && m != "null" {
		matcher, err := route.ParseMatch("match", r.Match)
		problems = append(problems, matchProblems(err)...)
		sil.Match = matcher.Match
	}
	now = now.UTC()
	start := now
	if r.StartsAt != "" {
		t, err := time.Parse(time.RFC3339, r.StartsAt)
		if err != nil {
			bad("starts_at", "%q is not an RFC 3339 time such as 2026-11-23T22:00:00Z", r.StartsAt)
		} else if t.After(now) {
			start = t
		}
		sil.StartsAt = t
	}
	switch {
	case r.EndsAt != "" && r.Duration != "":
		bad("duration", "both ends_at and duration are given: give one (--until or --for)")
	case r.EndsAt != "":
		t, err := time.Parse(time.RFC3339, r.EndsAt)
		if err != nil {
			bad("ends_at", "%q is not an RFC 3339 time such as 2026-11-24T08:00:00Z", r.EndsAt)
		}
		sil.EndsAt = t
	case r.Duration != "":
		d, err := ParseDuration(r.Duration)
		if err != nil {
			bad("duration", "%v", err)
		}
		sil.EndsAt = start.Add(d)
	}
	if len(problems) > 0 {
		return Silence{}, &InvalidError{Problems: problems}
	}
	return sil, nil
}

// matchProblems returns the problems of the error of route.ParseMatch, each
// with the field it names (match.levels).
func matchProblems(err error) []Problem {
	if err == nil {
		return nil
	}
	errs := unjoin(err)
	out := make([]Problem, len(errs))
	for i, e := range errs {
		out[i] = Problem{Field: "match", Message: e.Error()}
		var re *rulefile.Error
		if errors.As(e, &re) && re.Field != "" {
			out[i] = Problem{Field: re.Field, Message: re.Msg}
		}
	}
	return out
}
