// Package event defines the alarm record relay reads upstream and the Event it
// relays: a CloudEvents 1.0 structured-mode JSON object whose bytes are the
// same on NATS, on webhooks and in logs (docs/design.md §6).
package event

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Transition is what happened to an alarm.
type Transition string

// The three transitions of an alarm.
const (
	Start   Transition = "start"
	End     Transition = "end"
	Invalid Transition = "invalid"
)

// What people do to an alarm, relayed like its transitions to the sinks
// that carry them (the bus): someone acknowledged it, or took that back.
// Rules do not route them; they go where the alarm's start went.
const (
	Ack   Transition = "ack"
	Unack Transition = "unack"
)

// Transitions lists every transition in the order they happen.
var Transitions = []Transition{Start, End, Invalid}

// Valid reports whether t is one of the three transitions.
func (t Transition) Valid() bool { return t == Start || t == End || t == Invalid }

// Upstream alarm statuses.
const (
	StatusOngoing = 1
	StatusEnded   = 0
	StatusInvalid = -1
)

// StatusName names an upstream status as the dead letters' lists show an
// alarm's: ongoing, ended, invalid, or unknown for anything else.
func StatusName(status int) string {
	switch status {
	case StatusOngoing:
		return "ongoing"
	case StatusEnded:
		return "ended"
	case StatusInvalid:
		return "invalid"
	}
	return "unknown"
}

// ForStatus returns the transition an upstream status produces: 1 start, 0
// end, -1 invalid.
func ForStatus(status int) (Transition, bool) {
	switch status {
	case StatusOngoing:
		return Start, true
	case StatusEnded:
		return End, true
	case StatusInvalid:
		return Invalid, true
	}
	return "", false
}

// Status returns the upstream status that produces t.
func (t Transition) Status() int {
	switch t {
	case End:
		return StatusEnded
	case Invalid:
		return StatusInvalid
	}
	return StatusOngoing
}

// Type returns the CloudEvents type of t, such as "energy.alarm.start".
func (t Transition) Type() string { return "energy.alarm." + string(t) }

var levelNames = [Levels]string{"urgent", "severe", "major", "minor"}

// Levels is how many event levels the upstream names: 0 to Levels-1.
const Levels = 4

// LevelName returns the name of an upstream event level: 0 urgent, 1 severe,
// 2 major, 3 minor, and "level-N" for anything else.
func LevelName(level int) string {
	if level >= 0 && level < len(levelNames) {
		return levelNames[level]
	}
	return fmt.Sprintf("level-%d", level)
}

// Alarm is one upstream alarm record, decoded tolerantly: ids are kept as
// strings whatever the wire type, times are parsed, and Raw keeps the record
// exactly as received, unknown fields included.
type Alarm struct {
	OriginID           string    `json:"originId"`
	Status             int       `json:"status"`
	Level              int       `json:"level"`
	EventCode          string    `json:"eventCode"`
	EventDesc          string    `json:"eventDesc"`
	EventType          string    `json:"eventType"`
	TenantID           string    `json:"tenantId"`
	TenantName         string    `json:"tenantName"`
	StationID          string    `json:"stationId"`
	StationName        string    `json:"stationName"`
	SystemID           string    `json:"systemId"`
	DeviceID           string    `json:"deviceId"`
	DeviceSN           string    `json:"deviceSn"`
	DeviceName         string    `json:"deviceName"`
	DeviceTemplateCode string    `json:"deviceTemplateCode"`
	OccurredAt         time.Time `json:"occurredAt"`
	// RecoveredAt is zero while the alarm is ongoing.
	RecoveredAt time.Time `json:"recoveredAt,omitzero"`
	// Raw is the upstream JSON object of this record, every field as received.
	Raw json.RawMessage `json:"raw"`
}

// Event is one alarm transition in CloudEvents 1.0 structured mode.
type Event struct {
	SpecVersion     string `json:"specversion"`
	ID              string `json:"id"`
	Source          string `json:"source"`
	Type            string `json:"type"`
	Subject         string `json:"subject"`
	Time            string `json:"time"`
	DataContentType string `json:"datacontenttype"`
	// TraceParent and TraceState are CloudEvents' distributed tracing
	// extension: the W3C trace context of the transition's trace, with which
	// every delivery of the event, after a restart or on another replica,
	// continues it. Absent when tracing is off, so that the bytes stay those
	// of an event without it.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
	Data        Data   `json:"data"`
}

// Data is the payload of an Event.
type Data struct {
	Transition         Transition      `json:"transition"`
	Status             int             `json:"status"`
	Level              int             `json:"level"`
	LevelName          string          `json:"levelName"`
	OriginID           string          `json:"originId"`
	EventCode          string          `json:"eventCode"`
	EventDesc          string          `json:"eventDesc"`
	EventType          string          `json:"eventType,omitempty"`
	TenantID           string          `json:"tenantId"`
	StationID          string          `json:"stationId"`
	StationName        string          `json:"stationName"`
	SystemID           string          `json:"systemId"`
	DeviceSN           string          `json:"deviceSn"`
	DeviceName         string          `json:"deviceName"`
	DeviceTemplateCode string          `json:"deviceTemplateCode"`
	OccurredAt         string          `json:"occurredAt"`
	RecoveredAt        string          `json:"recoveredAt,omitempty"`
	DurationMs         int64           `json:"durationMs"`
	DetectedAt         string          `json:"detectedAt"`
	Inferred           bool            `json:"inferred"`
	Alarm              json.RawMessage `json:"alarm"`
	// Ack is who acknowledged the alarm, on an ack event, or who took the
	// acknowledgement back, on an unack event; absent on the others.
	Ack *AckInfo `json:"ack,omitempty"`
	// Escalation is set on the start an escalation step announced to a
	// sink that had not got it: which route's step, and how long the
	// alarm had waited unacknowledged.
	Escalation *Escalation `json:"escalation,omitempty"`
	// Note is what alarm management adds to a message for people (a
	// chattering count, a reminder). It is not part of the event's JSON:
	// the bytes on the bus and webhooks are those stored.
	Note string `json:"-"`
	// AckCommand, set by alarm management on a start that people can
	// acknowledge, is the command that does it; sinks without buttons show
	// it. It is not part of the event's JSON either.
	AckCommand string `json:"-"`
}

// AckInfo is who acknowledged an alarm (or took it back), when, from where
// and why.
type AckInfo struct {
	// By is the chat's id of the person (a Slack user id, a Telegram user
	// id, a Feishu open_id), or the name given to relay ack.
	By string `json:"by"`
	// Name is the person's name, when the chat gives it.
	Name string `json:"name,omitempty"`
	// Via is where it came from: slack, telegram, feishu or api.
	Via string `json:"via"`
	// At is when, RFC 3339 in UTC with milliseconds.
	At      string `json:"at"`
	Comment string `json:"comment,omitempty"`
}

// Escalation says which escalation step announced a start, and after how
// long.
type Escalation struct {
	// Route is the route whose step it was; AfterMs the step's after.
	Route   string `json:"route"`
	AfterMs int64  `json:"afterMs"`
	// WaitedMs is how long the alarm had been ongoing, unacknowledged,
	// since relay first saw it.
	WaitedMs int64 `json:"waitedMs"`
}

// NewAck builds the ack or unack event (t) of alarm a: its n-th such event
// (ids "<originId>:ack", then "<originId>:ack.2", …, so that each is
// delivered once and none is taken for a duplicate of an earlier one).
func NewAck(a Alarm, t Transition, n int, info AckInfo, detectedAt time.Time) Event {
	ev := New(a, Start, detectedAt, false)
	ev.Data.Transition = t
	ev.Type = t.Type()
	ev.ID = ID(a.OriginID, t)
	if n > 1 {
		ev.ID += "." + strconv.Itoa(n)
	}
	ev.Time = info.At
	ev.Data.Ack = &info
	return ev
}

// TimeLayout is how every time in an Event is written: RFC 3339 in UTC with
// milliseconds, such as 2026-11-21T08:00:00.000Z.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// FormatTime writes t in TimeLayout, in UTC.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// ID returns the event id of a transition of an alarm, "<originId>:<transition>",
// which is the idempotency key on every sink.
func ID(originID string, t Transition) string { return originID + ":" + string(t) }

// New builds the Event for transition t of alarm a, detected at detectedAt.
// For end and invalid, a.RecoveredAt is the recovery time; inferred marks an
// end whose recovery record was never found, with a.RecoveredAt set to when
// the alarm was seen to vanish.
func New(a Alarm, t Transition, detectedAt time.Time, inferred bool) Event {
	d := Data{
		Transition:         t,
		Status:             t.Status(),
		Level:              a.Level,
		LevelName:          LevelName(a.Level),
		OriginID:           a.OriginID,
		EventCode:          a.EventCode,
		EventDesc:          a.EventDesc,
		EventType:          a.EventType,
		TenantID:           a.TenantID,
		StationID:          a.StationID,
		StationName:        a.StationName,
		SystemID:           a.SystemID,
		DeviceSN:           a.DeviceSN,
		DeviceName:         a.DeviceName,
		DeviceTemplateCode: a.DeviceTemplateCode,
		OccurredAt:         FormatTime(a.OccurredAt),
		DetectedAt:         FormatTime(detectedAt),
		Inferred:           inferred && t != Start,
		Alarm:              a.Raw,
	}
	if len(d.Alarm) == 0 {
		d.Alarm = json.RawMessage("{}")
	}
	at := a.OccurredAt
	if t != Start && !a.RecoveredAt.IsZero() {
		at = a.RecoveredAt
		d.RecoveredAt = FormatTime(a.RecoveredAt)
		if dur := a.RecoveredAt.Sub(a.OccurredAt); dur > 0 {
			d.DurationMs = dur.Milliseconds()
		}
	}
	return Event{
		SpecVersion:     "1.0",
		ID:              ID(a.OriginID, t),
		Source:          "opendata/" + a.TenantID + "/stations/" + a.StationID,
		Type:            t.Type(),
		Subject:         a.DeviceSN,
		Time:            FormatTime(at),
		DataContentType: "application/json",
		Data:            d,
	}
}

// Unmarshal decodes event JSON written by Marshal.
func Unmarshal(b []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(b, &e); err != nil {
		return Event{}, fmt.Errorf("event: %w", err)
	}
	return e, nil
}

// View is what templates (NATS subjects, message texts) and rules see of an
// event: a few flat fields, and the whole event as .Event.
type View struct {
	TenantID   string
	StationID  string
	SystemID   string
	DeviceSN   string
	OriginID   string
	EventCode  string
	Level      int
	LevelName  string
	Transition Transition
	Event      *Event
}

// View returns the template view of e.
func (e *Event) View() View {
	return View{
		TenantID:   e.Data.TenantID,
		StationID:  e.Data.StationID,
		SystemID:   e.Data.SystemID,
		DeviceSN:   e.Data.DeviceSN,
		OriginID:   e.Data.OriginID,
		EventCode:  e.Data.EventCode,
		Level:      e.Data.Level,
		LevelName:  e.Data.LevelName,
		Transition: e.Data.Transition,
		Event:      e,
	}
}

// MappedView returns the view of e with f applied to every string it holds:
// the flat fields and, when withEvent, a copy of the event with every string
// field mapped (the raw upstream record is left as received). Templates that
// write a NATS subject, Markdown or HTML render through it, so that a device
// name cannot break out of what the template writes.
func (e *Event) MappedView(f func(string) string, withEvent bool) View {
	v := e.View()
	v.TenantID, v.StationID, v.SystemID = f(v.TenantID), f(v.StationID), f(v.SystemID)
	v.DeviceSN, v.OriginID, v.EventCode, v.LevelName = f(v.DeviceSN), f(v.OriginID), f(v.EventCode), f(v.LevelName)
	v.Transition = Transition(f(string(v.Transition)))
	v.Event = nil
	if withEvent {
		c := *e
		for _, s := range []*string{&c.SpecVersion, &c.ID, &c.Source, &c.Type, &c.Subject, &c.Time, &c.DataContentType,
			&c.Data.LevelName, &c.Data.OriginID, &c.Data.EventCode, &c.Data.EventDesc, &c.Data.EventType,
			&c.Data.TenantID, &c.Data.StationID, &c.Data.StationName, &c.Data.SystemID, &c.Data.DeviceSN,
			&c.Data.DeviceName, &c.Data.DeviceTemplateCode, &c.Data.OccurredAt, &c.Data.RecoveredAt, &c.Data.DetectedAt} {
			*s = f(*s)
		}
		c.Data.Transition = Transition(f(string(c.Data.Transition)))
		v.Event = &c
	}
	return v
}
