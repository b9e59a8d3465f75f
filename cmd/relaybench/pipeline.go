package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/tracing"
)

// pipelineBatch is how many records one Apply gets: one page of the alarm
// list.
const pipelineBatch = 500

// pipelineResult is what one pipeline run measured (P5).
type pipelineResult struct {
	Events int `json:"events"`
	// Elapsed runs from the first Apply to the last PubAck (for the
	// webhook, to the receiver's answer to the last event).
	Elapsed      time.Duration `json:"-"`
	ElapsedSec   float64       `json:"elapsed_s"`
	EventsPerSec float64       `json:"events_per_s"`
	// ApplyPerSec is the rate at which the store produced the events,
	// while the delivery loop ran beside it.
	ApplyPerSec float64 `json:"apply_events_per_s"`
}

// pipeline is a relay's store, router and JetStream delivery loop without
// its poller: batches of synthetic upstream records are applied to the store
// as poll answers would be, and the Deliverer publishes the events to an
// embedded nats-server's stream, one PubAck each.
type pipeline struct {
	store *store.Store
	rules *route.Rules
	deliv *deliver.Deliverer
	// delivered counts the distinct events the sink's far end has, and
	// says why it refused one, if it did.
	delivered func() (int, error)
	// route is the service's router: the rules, with alarm management
	// observing.
	route store.Router
	// starts and ends are the batches to apply.
	starts, ends [][]event.Alarm
	events       int
}

// newPipeline prepares a pipeline of events events (starts of
// ceil(events/2) alarms, ends of the first floor(events/2)) with a fresh
// store in dir. Its stream subjects are bench.<name>.
func newPipeline(dir, name string, env *natsEnv, events int, tracer *tracing.Tracer, log *slog.Logger) (*pipeline, error) {
	rules, err := parseBenchRules(name)
	if err != nil {
		return nil, err
	}
	rec := newRecorder()
	sink, err := newBusSink(rules, env, clock.Real(), rec, log)
	if err != nil {
		return nil, err
	}
	return newPipelineTo(dir, name, rules, deliver.Target{Sink: sink}, func() (int, error) { return rec.deliveredCount(), nil }, (events+1)/2, events/2, tracer, log)
}

// newPipelineTo prepares a pipeline delivering to target, the one sink of
// rules, whose far end delivered counts: the starts of alarms synthetic
// alarms, then the ends of the first ends of them, with a fresh store in dir
// named after name, traced by tracer when it is on.
func newPipelineTo(dir, name string, rules *route.Rules, target deliver.Target, delivered func() (int, error), alarms, ends int,
	tracer *tracing.Tracer, log *slog.Logger) (*pipeline, error) {
	if ends > alarms {
		return nil, fmt.Errorf("pipeline: %d ends of %d alarms", ends, alarms)
	}
	st, err := store.Open(filepath.Join(dir, name+".db"), store.Options{Tracer: tracer})
	if err != nil {
		return nil, err
	}
	// Alarm management, as the service wires it: the router tells it every
	// transition, the loops ask it whether the sink is managed.
	mgr, err := manage.New(manage.Options{Store: st, Rules: func() *route.Rules { return rules }, Logger: log})
	if err != nil {
		st.Close()
		return nil, err
	}
	deliv, err := deliver.NewDeliverer(st, []deliver.Target{target}, deliver.Options{Logger: log, Gate: mgr, Tracer: tracer})
	if err != nil {
		st.Close()
		return nil, err
	}
	mgr.SetSinks([]notify.Sink{target.Sink})
	p := &pipeline{store: st, rules: rules, delivered: delivered, deliv: deliv, events: alarms + ends, route: func(ev *event.Event) []string {
		mgr.Observe(ev)
		return rules.SinksFor(ev)
	}}
	all, err := syntheticAlarms(alarms, time.Now().Add(-time.Hour))
	if err != nil {
		st.Close()
		return nil, err
	}
	for i := 0; i < len(all); i += pipelineBatch {
		p.starts = append(p.starts, all[i:min(i+pipelineBatch, len(all))])
	}
	ended := make([]event.Alarm, ends)
	for i := range ended {
		ended[i] = all[i]
		ended[i].Status = event.StatusEnded
		ended[i].RecoveredAt = ended[i].OccurredAt.Add(10 * time.Minute)
		if ended[i].Raw, err = wireRecord(&ended[i]); err != nil {
			st.Close()
			return nil, err
		}
	}
	for i := 0; i < len(ended); i += pipelineBatch {
		p.ends = append(p.ends, ended[i:min(i+pipelineBatch, len(ended))])
	}
	return p, nil
}

// run applies every batch while the delivery loop runs, and returns when the
// sink's far end has the last event (for JetStream, its PubAck arrived).
func (p *pipeline) run(ctx context.Context) (pipelineResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	began := time.Now()
	wg.Go(func() { _ = p.deliv.Run(ctx) })
	produced := 0
	for _, batches := range [][][]event.Alarm{p.starts, p.ends} {
		for _, b := range batches {
			res, err := p.store.Apply(ctx, store.Batch{Observed: b, DetectedAt: time.Now()}, p.route)
			if err != nil {
				return pipelineResult{}, err
			}
			produced += len(res.Events)
		}
	}
	applied := time.Since(began)
	if produced != p.events {
		return pipelineResult{}, fmt.Errorf("pipeline: the store produced %d events, want %d", produced, p.events)
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	limit := time.After(5 * time.Minute)
	for {
		n, err := p.delivered()
		if err != nil {
			return pipelineResult{}, fmt.Errorf("pipeline: %d of %d events delivered, and: %w", n, p.events, err)
		}
		if n >= p.events {
			break
		}
		select {
		case <-ctx.Done():
			return pipelineResult{}, ctx.Err()
		case <-limit:
			return pipelineResult{}, fmt.Errorf("pipeline: %d of %d events delivered after 5 minutes", n, p.events)
		case <-tick.C:
		}
	}
	elapsed := time.Since(began)
	return pipelineResult{
		Events:       p.events,
		Elapsed:      elapsed,
		ElapsedSec:   elapsed.Seconds(),
		EventsPerSec: float64(p.events) / elapsed.Seconds(),
		ApplyPerSec:  float64(p.events) / applied.Seconds(),
	}, nil
}

// close closes the store.
func (p *pipeline) close() error { return p.store.Close() }

// pipelinePhase measures P5 with the events of the configuration.
func (b *bench) pipelinePhase(ctx context.Context, figs *runFigures) error {
	p, err := newPipeline(b.dir, "pipeline", b.nats, b.cfg.PipelineEvents, b.tracer, b.log)
	if err != nil {
		return err
	}
	res, err := p.run(ctx)
	figs.Pipeline = res
	return errors.Join(err, p.close())
}

// syntheticAlarms returns n ongoing alarm records shaped and sized as the
// upstream writes them, spread over 600 devices of 20 stations.
func syntheticAlarms(n int, occurred time.Time) ([]event.Alarm, error) {
	occurred = occurred.UTC().Truncate(time.Millisecond)
	alarms := make([]event.Alarm, n)
	for i := range alarms {
		dev := i % 600
		a := &alarms[i]
		*a = event.Alarm{
			OriginID:           strconv.Itoa(1_700_000_000_000_000_000 + i),
			Status:             event.StatusOngoing,
			Level:              i % 4,
			EventCode:          "INV_" + strconv.Itoa(100+i%37),
			EventDesc:          "Grid overvoltage protection",
			EventType:          "fault",
			TenantID:           "1001",
			TenantName:         "Example Solar",
			StationID:          strconv.Itoa(2000 + dev/30),
			StationName:        "North Field " + strconv.Itoa(dev/30),
			SystemID:           strconv.Itoa(3000 + dev/10),
			DeviceID:           strconv.Itoa(4000 + dev),
			DeviceSN:           "SN" + strconv.Itoa(500000+dev),
			DeviceName:         "Inverter " + strconv.Itoa(dev),
			DeviceTemplateCode: "inverter",
			OccurredAt:         occurred.Add(time.Duration(i) * time.Millisecond),
		}
		raw, err := wireRecord(a)
		if err != nil {
			return nil, err
		}
		a.Raw = raw
	}
	return alarms, nil
}

// wireRecord returns the upstream JSON of a, with every field of the spec's
// alarm record.
func wireRecord(a *event.Alarm) (json.RawMessage, error) {
	rec := map[string]any{
		"originId": a.OriginID, "kafkaUuid": "3f2b8c1e-5a4d-4c7e-9b1a-" + fmt.Sprintf("%012s", a.OriginID[len(a.OriginID)-12:]),
		"tenantId": a.TenantID, "tenantName": a.TenantName,
		"deviceId": a.DeviceID, "deviceSn": a.DeviceSN, "deviceName": a.DeviceName,
		"deviceTemplateType": "Inverter", "deviceTemplateCode": a.DeviceTemplateCode,
		"systemId": a.SystemID, "systemCode": "SYS-" + a.SystemID, "systemName": "System " + a.SystemID,
		"stationId": a.StationID, "stationCode": "ST-" + a.StationID, "stationName": a.StationName,
		"occurrenceTime": a.OccurredAt.UnixMilli(), "occurrenceTimeStr": a.OccurredAt.Format(time.DateTime),
		"recoveryTime": nil, "recoveryTimeStr": nil, "durationTp": nil,
		"status": a.Status, "eventCode": a.EventCode, "eventDesc": a.EventDesc, "eventType": a.EventType,
		"eventLevel": a.Level, "eventCategoryCode": "GRID", "eventCategoryDescription": "Grid side",
		"eventCategoryInfluence": "generation stopped", "eventTagNameStr": "grid,voltage",
		"eventTagCodeStr": "T01,T07", "payload": `{"point":"uGrid","value":254.31,"threshold":253}`, "note": "",
	}
	if !a.RecoveredAt.IsZero() {
		rec["recoveryTime"] = a.RecoveredAt.UnixMilli()
		rec["recoveryTimeStr"] = a.RecoveredAt.Format(time.DateTime)
		rec["durationTp"] = a.RecoveredAt.Sub(a.OccurredAt).Milliseconds()
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("synthetic alarm %s: %w", a.OriginID, err)
	}
	return b, nil
}
