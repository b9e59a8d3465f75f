package manage

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/isa"
	"github.com/relay-energy/relay/internal/store"
)

// AlarmState is an ongoing alarm as people see it: its level, where, since
// when, and whether someone acknowledged it, for the ops API and the
// console.
type AlarmState struct {
	OriginID   string    `json:"origin_id"`
	Level      int       `json:"level"`
	LevelName  string    `json:"level_name"`
	StationID  string    `json:"station_id"`
	DeviceSN   string    `json:"device_sn"`
	OccurredAt time.Time `json:"occurred_at"`
	FirstSeen  time.Time `json:"first_seen"`
	// Acknowledged is set once someone acknowledged it, and Ack says who.
	Acknowledged bool             `json:"acknowledged"`
	Ack          *Acknowledgement `json:"ack,omitempty"`
	// Escalated are the sinks escalation announced it to.
	Escalated []string `json:"escalated,omitempty"`
	// Escalation is, for each sink of an escalation step taken, what
	// became of the alarm's start there: where a step's page did not
	// arrive, the operator sees why.
	Escalation []EscalatedTo `json:"escalation,omitempty"`
}

// EscalatedTo is one sink an escalation step of an alarm named, and what
// became of the alarm's start there.
type EscalatedTo struct {
	Sink string `json:"sink"`
	// Step is the first step that named the sink: its route and after,
	// such as "urgent/600" (600 s), and when it was taken.
	Step string    `json:"step"`
	At   time.Time `json:"at"`
	// State is the start's at the sink: pending, delivered, digested,
	// withheld, dead or dropped; Reason says why for the last three.
	State  store.StartState `json:"state"`
	Reason string           `json:"reason,omitempty"`
	// blocked says the step found the start there dead or dropped: a
	// replay of it is the page the step owed (escalationNote).
	blocked bool
}

// Alarms returns the ongoing alarms with their acknowledgements, in
// store.Ongoing's order (the numbered ids by number, then the others in
// byte order), and what
// became of their starts at each sink an
// escalation step named.
func (m *Manager) Alarms() ([]AlarmState, error) {
	out := []AlarmState{}
	var escalated []string
	err := m.EachAlarm(func(a *AlarmState) error {
		out = append(out, *a)
		if len(a.Escalation) > 0 {
			escalated = append(escalated, a.OriginID)
		}
		return nil
	})
	if err != nil || len(escalated) == 0 {
		return out, err
	}
	starts, err := m.o.Store.Deliveries(escalated)
	for i := range out {
		a := &out[i]
		withStates(a.Escalation, starts[a.OriginID])
		a.Escalated = withReplayed(a.Escalated, a.Escalation, a.Acknowledged)
	}
	return out, err
}

// withReplayed adds to announced the sinks a step could not reach whose
// start was replayed since (pending or sent again): while the alarm is
// unacknowledged the replay goes out as the step's page.
func withReplayed(announced []string, sinks []EscalatedTo, acked bool) []string {
	if acked {
		return announced
	}
	for _, e := range sinks {
		if e.blocked && !slices.Contains(announced, e.Sink) &&
			(e.State == store.StartPending || e.State == store.StartDelivered || e.State == store.StartDigested) {
			announced = append(announced, e.Sink)
		}
	}
	slices.Sort(announced)
	return announced
}

// EachAlarm calls fn with each alarm Alarms returns, in its order (the
// numbered ids by number, then the others), without holding them all: the operator console keeps the first rows of
// 100,000 alarms and allocates for those alone. Its Escalation entries
// leave State empty: Alarms reads the states, for every alarm at once. fn may keep a copy of *a,
// not a, which the next call overwrites; it
// runs inside the store's read transaction and must not write to the store.
// The first error fn returns stops the walk and is returned.
func (m *Manager) EachAlarm(fn func(a *AlarmState) error) error {
	acks, err := m.ackStates()
	if err != nil {
		return err
	}
	tos, err := m.escalatedTos("")
	if err != nil {
		return err
	}
	var a AlarmState // one for the walk, which fn must not keep
	return m.o.Store.EachOngoing(func(t *store.Tracked) error {
		a = AlarmState{OriginID: t.OriginID, Level: t.Level, LevelName: event.LevelName(t.Level), StationID: t.StationID,
			DeviceSN: t.DeviceSN, OccurredAt: t.OccurredAt, FirstSeen: t.FirstSeen}
		if st, ok := acks[t.OriginID]; ok && (st.Acked || len(st.History) > 0 || len(st.Others) > 0) {
			ack := st.shown(t.OriginID)
			a.Acknowledged, a.Ack = ack.Acknowledged, &ack
		}
		if to, ok := tos[t.OriginID]; ok {
			a.Escalated, a.Escalation = to.announced, to.sinks
		}
		return fn(&a)
	})
}

// escalationView is what the escalation steps of one alarm did, as shown.
type escalationView struct {
	// announced are the sinks a step announced the alarm to, or released
	// its start at.
	announced []string
	// sinks are the sinks the steps named, in name order, State unread.
	sinks []EscalatedTo
}

// escalatedTos reads, for the alarm origin or every alarm ("" for all),
// what their escalation steps did at each sink they named, in one pass
// over the sinks' records and one over the steps taken.
func (m *Manager) escalatedTos(origin string) (map[string]*escalationView, error) {
	out := map[string]*escalationView{}
	err := m.o.Store.Scan(nsEscalated, "", func(key string, v []byte) error {
		sink, o, _ := strings.Cut(key, "\x00")
		if origin != "" && o != origin {
			return nil
		}
		var at escalatedTo
		_ = json.Unmarshal(v, &at) // unreadable: shown without its step
		view := out[o]
		if view == nil {
			view = &escalationView{}
			out[o] = view
		}
		view.sinks = append(view.sinks, EscalatedTo{Sink: sink, Step: at.Step, blocked: at.Blocked && at.Note != ""})
		if at.Note != "" && !at.Blocked {
			view.announced = append(view.announced, sink)
		}
		return nil
	})
	if err != nil || len(out) == 0 {
		return out, err
	}
	err = m.o.Store.Scan(nsEscalate, "", func(key string, v []byte) error {
		view := out[key]
		if view == nil {
			return nil
		}
		var es escalation
		_ = json.Unmarshal(v, &es) // unreadable: shown without times
		for i := range view.sinks {
			view.sinks[i].At = es.Done[view.sinks[i].Step]
		}
		return nil
	})
	for _, view := range out {
		slices.SortFunc(view.sinks, func(a, b EscalatedTo) int { return strings.Compare(a.Sink, b.Sink) })
		slices.Sort(view.announced)
	}
	return out, err
}

// withStates fills the State and Reason of each of sinks from starts
// (Store.Deliveries of the alarm). A sink outside the alarm's ledger set
// has no start there yet: it is shown pending, as a step that announced it
// is until its entry is written.
func withStates(sinks []EscalatedTo, starts []store.StartDelivery) {
	for i := range sinks {
		sinks[i].State, sinks[i].Reason = store.StartPending, ""
		if j := slices.IndexFunc(starts, func(d store.StartDelivery) bool { return d.Sink == sinks[i].Sink }); j >= 0 {
			sinks[i].State, sinks[i].Reason = starts[j].State, starts[j].Reason
		}
	}
}

// ackStates reads every alarm's acknowledgement state in one pass.
func (m *Manager) ackStates() (map[string]ackState, error) {
	out := map[string]ackState{}
	err := m.o.Store.Scan(nsAck, "", func(key string, v []byte) error {
		out[key] = loadAck(v)
		return nil
	})
	return out, err
}

// escalations reads what escalation did to every alarm in one pass.
func (m *Manager) escalations() (map[string]escalation, error) {
	out := map[string]escalation{}
	err := m.o.Store.Scan(nsEscalate, "", func(key string, v []byte) error {
		var es escalation
		_ = json.Unmarshal(v, &es) // unreadable: nothing done
		out[key] = es
		return nil
	})
	return out, err
}

// Unacked is the ongoing alarms of one level nobody acknowledged.
type Unacked struct {
	// N counts them.
	N int
	// OldestSeen is when the one seen first was first seen; zero when N
	// is 0.
	OldestSeen time.Time
}

// Unacknowledged returns the ongoing alarms nobody acknowledged, by level:
// how many, and since when the oldest waits. A level with ongoing alarms,
// all acknowledged, is there with N 0.
func (m *Manager) Unacknowledged() (map[int]Unacked, error) {
	ongoing, err := m.o.Store.Ongoing()
	if err != nil {
		return nil, err
	}
	acks, err := m.ackStates()
	if err != nil {
		return nil, err
	}
	out := map[int]Unacked{}
	for _, t := range ongoing {
		u := out[t.Level]
		if !acks[t.OriginID].Acked {
			u.N++
			if u.OldestSeen.IsZero() || t.FirstSeen.Before(u.OldestSeen) {
				u.OldestSeen = t.FirstSeen
			}
		}
		out[t.Level] = u
	}
	return out, nil
}

// FirstAcks returns when each alarm st knows was first acknowledged, for
// relay report's figures.
func FirstAcks(st *store.Store) (isa.Acks, error) {
	out := isa.Acks{}
	err := st.Scan(nsAck, "", func(key string, v []byte) error {
		if a := loadAck(v); !a.First.IsZero() {
			out[key] = a.First
		}
		return nil
	})
	return out, err
}
