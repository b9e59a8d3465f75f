// Package storetest holds what the tests of the store and of its backends
// feed a store: upstream records of alarms, from a first run they share.
package storetest

import (
	"fmt"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// T0 is the first run of every test store.
var T0 = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

// Record returns an upstream record of alarm id with status, level 2,
// occurred at T0 - 1h and recovered at recovered, whose raw JSON carries
// the fields.
func Record(id string, status int, recovered time.Time) event.Alarm {
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
		OccurredAt:  T0.Add(-time.Hour),
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

// Ongoing returns the record of alarm id, ongoing.
func Ongoing(id string) event.Alarm { return Record(id, event.StatusOngoing, time.Time{}) }
