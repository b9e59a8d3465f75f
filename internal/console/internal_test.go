package console

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/manage"
)

func TestConsoleSessionEndsAfterTwelveHours(t *testing.T) {
	now := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	s := NewSessions(func() time.Time { return now })
	id, exp := s.open(Admin, "ana")
	if !exp.Equal(now.Add(12 * time.Hour)) {
		t.Fatalf("expires %s, want 12h on", exp)
	}
	now = now.Add(12*time.Hour - time.Second)
	if got, ok := s.get(id); !ok || got.role != Admin || got.name != "ana" || got.csrf == "" {
		t.Fatalf("a second before the end: %+v %v, want ana's admin session with a CSRF token", got, ok)
	}
	now = now.Add(time.Second)
	if _, ok := s.get(id); ok {
		t.Fatal("the session is still open after 12h")
	}
	other, _ := s.open(Viewer, "")
	if other == id || len(other) < 40 {
		t.Fatalf("session ids %q and %q: want distinct random ids", id, other)
	}
}

func TestConsoleOrdersUnacknowledgedThenLevelThenAge(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	alarms := []manage.AlarmState{
		{OriginID: "acked-urgent", Level: 0, OccurredAt: t0, Acknowledged: true},
		{OriginID: "minor-old", Level: 3, OccurredAt: t0},
		{OriginID: "urgent-new", Level: 0, OccurredAt: t0.Add(time.Hour)},
		{OriginID: "urgent-old", Level: 0, OccurredAt: t0},
		{OriginID: "severe", Level: 1, OccurredAt: t0.Add(2 * time.Hour)},
	}
	slices.SortStableFunc(alarms, order)
	var got []string
	for _, a := range alarms {
		got = append(got, a.OriginID)
	}
	want := []string{"urgent-old", "urgent-new", "severe", "minor-old", "acked-urgent"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

func TestConsoleAgeReadsAtAGlance(t *testing.T) {
	now := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		30 * time.Second: "<1m", 7 * time.Minute: "7m", 2*time.Hour + 5*time.Minute: "2h 5m", 76 * time.Hour: "3d 4h",
	} {
		if got := age(now, now.Add(-d)); got != want {
			t.Errorf("age of %s: %q, want %q", d, got, want)
		}
	}
}

func TestConsoleFirstRowsAreTheFirstBySortingAll(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	var all []manage.AlarmState
	for i := range 500 {
		all = append(all, manage.AlarmState{OriginID: fmt.Sprintf("A%03d", (i*37)%500), Level: i % 4,
			Acknowledged: i%7 == 0, OccurredAt: t0.Add(time.Duration(i%50) * time.Minute)})
	}
	for _, n := range []int{0, 1, 30, 500, 600} {
		h := &firstRows{n: n}
		for i := range all {
			h.offer(&all[i])
		}
		want := slices.Clone(all)
		slices.SortFunc(want, order)
		want = want[:min(n, len(want))]
		if got := h.sorted(); !slices.EqualFunc(got, want, func(a, b manage.AlarmState) bool { return a.OriginID == b.OriginID }) {
			t.Errorf("the first %d: got %d rows, not the first %d by order", n, len(got), len(want))
		}
	}
}
