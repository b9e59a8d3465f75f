package store

import (
	"context"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
)

// benchAlarm returns ongoing alarm i with a raw record of the size the
// upstream sends (about 900 bytes). Ids are spread like the upstream's, not
// sequential, so inserts land all over the B+tree.
func benchAlarm(i int) event.Alarm {
	h := fnv.New64a()
	fmt.Fprint(h, i)
	id := fmt.Sprintf("%016x", h.Sum64())
	occurred := t0.Add(-time.Duration(i) * time.Second)
	a := event.Alarm{
		OriginID:           id,
		Status:             event.StatusOngoing,
		Level:              i % 4,
		EventCode:          fmt.Sprintf("PCS_%03d", i%300),
		EventDesc:          "DC insulation resistance abnormal",
		EventType:          "fault",
		TenantID:           "1830000000000000001",
		TenantName:         "Example Energy",
		StationID:          fmt.Sprint(1700000000000000000 + i%200),
		StationName:        fmt.Sprintf("Station %d", i%200),
		SystemID:           fmt.Sprint(1800000000000000000 + i%400),
		DeviceID:           fmt.Sprint(1900000000000000000 + i%3000),
		DeviceSN:           fmt.Sprintf("SN%010d", i%3000),
		DeviceName:         fmt.Sprintf("PCS-%d", i%3000),
		DeviceTemplateCode: "PCS",
		OccurredAt:         occurred,
	}
	a.Raw = []byte(fmt.Sprintf(`{"originId":%q,"kafkaUuid":"%s-%s","tenantId":%q,"tenantName":%q,`+
		`"deviceId":%s,"deviceSn":%q,"deviceName":%q,"deviceTemplateType":"ESS","deviceTemplateCode":"PCS",`+
		`"systemId":%q,"systemCode":"SYS-%d","systemName":"System %d","stationId":%q,"stationCode":"ST-%d",`+
		`"stationName":%q,"occurrenceTime":"%d","occurrenceTimeStr":%q,"recoveryTime":null,"recoveryTimeStr":null,`+
		`"durationTp":"%d","status":1,"eventCode":%q,"eventDesc":%q,"eventType":"fault","eventLevel":%d,`+
		`"eventCategoryCode":"ESS_PCS","eventCategoryDescription":"Power conversion system events",`+
		`"eventCategoryInfluence":"Output limited","eventTagNameStr":"insulation","eventTagCodeStr":"INS",`+
		`"payload":"{\"value\":\"12.5\",\"threshold\":\"50\"}"}`,
		id, id, id, a.TenantID, a.TenantName, a.DeviceID, a.DeviceSN, a.DeviceName, a.SystemID, i%400, i%400,
		a.StationID, i%200, a.StationName, occurred.UnixMilli(), occurred.Format(time.DateTime),
		i*1000, a.EventCode, a.EventDesc, a.Level))
	return a
}

func benchStore(b *testing.B) *Store {
	b.Helper()
	s, err := Open(filepath.Join(b.TempDir(), "relay.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkApplySnapshot applies a complete snapshot of 10,000 ongoing
// alarms per poll in which 100 alarms ended (their recovered records are in
// the batch) and 100 started, every event routed to two sinks. Polls are 6 s
// apart, so every alarm's LastSeen is rewritten once per 100 polls.
func BenchmarkApplySnapshot(b *testing.B) {
	const size, churn = 10_000, 100
	ctx := context.Background()
	s := benchStore(b)
	route := to("bus", "ops")
	alarms := make([]event.Alarm, size+churn*(b.N+1))
	for i := range alarms {
		alarms[i] = benchAlarm(i)
	}
	if _, err := s.Apply(ctx, Batch{Observed: alarms[:size], CompleteCurrent: true, DetectedAt: t0}, route); err != nil {
		b.Fatal(err)
	}
	obs := make([]event.Alarm, 0, size+churn)
	events := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		detected := t0.Add(time.Duration(i+1) * 6 * time.Second)
		first := churn * (i + 1)
		obs = append(obs[:0], alarms[first:first+size]...)
		for j := first - churn; j < first; j++ {
			end := alarms[j]
			end.Status = event.StatusEnded
			end.RecoveredAt = detected.Add(-time.Second)
			obs = append(obs, end)
		}
		res, err := s.Apply(ctx, Batch{Observed: obs, CompleteCurrent: true, DetectedAt: detected}, route)
		if err != nil {
			b.Fatal(err)
		}
		events += len(res.Events)
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}

// BenchmarkApplyNoChange applies the same 500-alarm snapshot again: the
// steady state of a quiet tenant, one poll per slot.
func BenchmarkApplyNoChange(b *testing.B) {
	ctx := context.Background()
	s := benchStore(b)
	snapshot := make([]event.Alarm, 500)
	for i := range snapshot {
		snapshot[i] = benchAlarm(i)
	}
	batch := Batch{Observed: snapshot, CompleteCurrent: true, DetectedAt: t0}
	if _, err := s.Apply(ctx, batch, to("bus", "ops")); err != nil {
		b.Fatal(err)
	}
	batch.DetectedAt = t0.Add(6 * time.Second)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res, err := s.Apply(ctx, batch, to("bus", "ops"))
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Events) != 0 {
			b.Fatalf("an unchanged snapshot produced %d events", len(res.Events))
		}
	}
}

// BenchmarkApplyStorm applies 5,000 new starts in one batch (target P4),
// routed to two sinks: the store's share of the pipeline throughput (P5).
func BenchmarkApplyStorm(b *testing.B) {
	const storm = 5_000
	ctx := context.Background()
	s := benchStore(b)
	events := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		batch := make([]event.Alarm, storm)
		for j := range batch {
			batch[j] = benchAlarm(i*storm + j)
		}
		b.StartTimer()
		res, err := s.Apply(ctx, Batch{Observed: batch, DetectedAt: t0}, to("bus", "ops"))
		if err != nil {
			b.Fatal(err)
		}
		events += len(res.Events)
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}
