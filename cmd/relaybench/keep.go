package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The files keepChurn writes.
const (
	keptState  = "relay-churn.db"
	keptRules  = "rules.yaml"
	keptAlarms = "churn-alarms.json"
)

// keptChurn is what the simulator of the churn phase's relay says it
// generated, written beside the relay's state file, so that relay report's
// figures can be checked against it.
type keptChurn struct {
	// RelayStarted is when the relay started: alarms that ended before it
	// are history, which relay never announces.
	RelayStarted time.Time `json:"relay_started"`
	// Until is the end of the measured window: every alarm that occurred
	// before it was detected before the relay stopped.
	Until  time.Time   `json:"until"`
	Alarms []keptAlarm `json:"alarms"`
}

// keptAlarm is one alarm as the simulator recorded it when the relay stopped.
type keptAlarm struct {
	OriginID    string    `json:"origin_id"`
	StationID   string    `json:"station_id"`
	DeviceSN    string    `json:"device_sn"`
	EventCode   string    `json:"event_code"`
	Level       int       `json:"level"`
	OccurredAt  time.Time `json:"occurred_at"`
	RecoveredAt time.Time `json:"recovered_at,omitzero"`
	// Status is 1 while ongoing, 0 ended, -1 invalid.
	Status int `json:"status"`
}

// keepChurn copies the churn phase's relay state file into b.keepState with
// the bench's rules file and churn-alarms.json, the alarms of the phase as
// the relay's simulator recorded them; until is the end of the measured
// window. The relay must have stopped.
func (b *bench) keepChurn(p *phase, sched *churnSchedule, until time.Time) error {
	if err := os.MkdirAll(b.keepState, 0o755); err != nil {
		return fmt.Errorf("--keep-state: %w", err)
	}
	if err := copyFile(filepath.Join(b.dir, "relay-churn.db"), filepath.Join(b.keepState, keptState)); err != nil {
		return fmt.Errorf("--keep-state: %w", err)
	}
	// The record log beside the state file holds the journal's strings.
	logs, err := filepath.Glob(filepath.Join(b.dir, "relay-churn.db.records.*"))
	if err != nil {
		return fmt.Errorf("--keep-state: %w", err)
	}
	for _, l := range logs {
		suffix := strings.TrimPrefix(filepath.Base(l), "relay-churn.db")
		if err := copyFile(l, filepath.Join(b.keepState, keptState+suffix)); err != nil {
			return fmt.Errorf("--keep-state: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(b.keepState, keptRules), fmt.Appendf(nil, benchRules, "churn"), 0o644); err != nil {
		return fmt.Errorf("--keep-state: %w", err)
	}
	s := p.sims[sysRelay]
	kept := keptChurn{RelayStarted: p.t0, Until: until}
	for _, id := range sched.ids[s] {
		a, ok := s.Alarm(id)
		if !ok {
			return fmt.Errorf("--keep-state: the simulator does not know alarm %s of the churn", id)
		}
		kept.Alarms = append(kept.Alarms, keptAlarm{
			OriginID: a.OriginID, StationID: a.StationID, DeviceSN: a.DeviceSN, EventCode: a.EventCode, Level: a.Level,
			OccurredAt: a.OccurredAt, RecoveredAt: a.RecoveredAt, Status: int(a.Status),
		})
	}
	body, err := json.MarshalIndent(kept, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.keepState, keptAlarms), body, 0o644); err != nil {
		return fmt.Errorf("--keep-state: %w", err)
	}
	b.progress("  kept the churn phase's state in %s: relay report --state %s --rules %s --until %s",
		b.keepState, filepath.Join(b.keepState, keptState), filepath.Join(b.keepState, keptRules), until.Format(time.RFC3339))
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
