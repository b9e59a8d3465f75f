package jsbackend

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/store"
)

// What the tests write to a store and read back from it, through the
// store's exported API.

// t0 is the first run of every test store.
var t0 = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

// rec returns an upstream record of alarm id with status, level 2, occurred
// at t0 - 1h and recovered at recovered, whose raw JSON carries the fields.
func rec(id string, status int, recovered time.Time) event.Alarm {
	a := event.Alarm{
		OriginID:    id,
		Status:      status,
		Level:       2,
		EventCode:   "E" + id,
		EventDesc:   "overheating",
		TenantID:    "t1",
		StationID:   "s1",
		StationName: "Alpha",
		DeviceSN:    "SN-" + id,
		OccurredAt:  t0.Add(-time.Hour),
		RecoveredAt: recovered,
	}
	rt := ""
	if !recovered.IsZero() {
		rt = fmt.Sprintf(`,"recoveryTime":%d`, recovered.UnixMilli())
	}
	a.Raw = []byte(fmt.Sprintf(`{"originId":%q,"status":%d,"eventLevel":2,"stationName":"Alpha","occurrenceTime":%d%s}`,
		id, status, a.OccurredAt.UnixMilli(), rt))
	return a
}

func ongoing(id string) event.Alarm { return rec(id, event.StatusOngoing, time.Time{}) }

// to routes every event to sinks.
func to(sinks ...string) store.Router { return func(*event.Event) []string { return sinks } }

// apply applies b to s (detected now, on s's clock, when b does not say).
func apply(t *testing.T, s *store.Store, b store.Batch, route store.Router) store.Result {
	t.Helper()
	res, err := s.Apply(context.Background(), b, route)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return res
}
