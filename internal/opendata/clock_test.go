package opendata

import (
	"net/http"
	"testing"
	"time"
)

func TestUpstreamClockIsTheMedianOfDateHeaders(t *testing.T) {
	t.Parallel()
	local := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	date := func(d time.Duration) http.Header {
		return http.Header{"Date": {local.Add(d).Format(http.TimeFormat)}}
	}
	var u upstreamClock
	if _, ok := u.offset(); ok {
		t.Fatal("an offset before any answer")
	}
	if at := u.observe(http.Header{}, local, local); !at.IsZero() {
		t.Fatalf("no Date header gave upstream time %s", at)
	}
	if _, ok := u.offset(); ok {
		t.Fatal("an answer without a Date header gave an offset")
	}
	// The upstream runs 2 minutes behind; one answer comes from a cache
	// an hour old, and one says nothing is off: the median holds.
	for _, d := range []time.Duration{-2 * time.Minute, -time.Hour, -2 * time.Minute, 0, -2 * time.Minute} {
		u.observe(date(d), local, local)
	}
	if got, ok := u.offset(); !ok || got != -2*time.Minute+500*time.Millisecond {
		t.Fatalf("offset %s, %v; want -1m59.5s (the header's second plus half of it)", got, ok)
	}
	// Ten answers later only the latest nine count, and half a second of
	// the header's resolution is no offset.
	for range 10 {
		u.observe(date(0), local, local)
	}
	if got, _ := u.offset(); got != 0 {
		t.Fatalf("offset %s after the clocks agreed; want 0", got)
	}
}
