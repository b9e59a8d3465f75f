package manage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/plant"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

// nsAck holds, by originId, the acknowledgement state of an alarm (ackState
// as JSON), kept after the alarm ends for relay report until the store
// forgets the alarm.
const nsAck = "ack"

// nsShelf holds, by originId, the silence of a "shelve until cleared",
// expired when the alarm ends: a namespace of its own, as small as the
// alarms shelved so, which the escalation pass reads every few seconds.
const nsShelf = "shelf"

// An alarm's state keeps the latest maxApplied actions applied and, apart,
// the latest maxOthers refused, latest last: no number of refused clicks
// evicts an action applied, by which a click handed over again is
// recognised. (An action that changes nothing is not recorded.)
const (
	maxApplied = 100
	maxOthers  = 20
)

// Limits of an action's text.
const (
	maxComment = 1000
	maxActorID = 200
)

// ackState is what people did to one alarm.
type ackState struct {
	// Acked says the alarm is acknowledged now, by By at At.
	Acked   bool      `json:"acked"`
	By      string    `json:"by,omitempty"`
	Name    string    `json:"name,omitempty"`
	Via     string    `json:"via,omitempty"`
	At      time.Time `json:"at,omitzero"`
	Comment string    `json:"comment,omitempty"`
	// First is when it was first acknowledged: the time to acknowledge
	// counts to it.
	First time.Time `json:"first,omitzero"`
	// Events counts the ack and unack events made, which number their ids.
	Events int `json:"events,omitempty"`
	// History are the latest actions applied to the alarm: its audit
	// trail.
	History []actionRecord `json:"history,omitempty"`
	// Others are the latest actions refused (ack_by).
	Others []actionRecord `json:"others,omitempty"`
}

// actionRecord is one action as the state keeps it.
type actionRecord struct {
	Kind    notify.ActionKind `json:"kind"`
	Actor   notify.Actor      `json:"actor"`
	At      time.Time         `json:"at"`
	Comment string            `json:"comment,omitempty"`
	// Result is applied, unchanged or not allowed.
	Result string `json:"result"`
	// Ref identifies the click (notify.Action.Ref).
	Ref string `json:"ref,omitempty"`
}

func (st *ackState) record(a *notify.Action, at time.Time, result string, faults plant.Set) {
	r := actionRecord{Kind: a.Kind, Actor: a.Actor, At: at, Comment: a.Comment, Result: result, Ref: a.Ref}
	if result == resultApplied {
		st.History = keepLatest(append(st.History, r), maxApplied)
	} else {
		st.Others = keepLatest(append(st.Others, r), maxOthers)
	}
	// Planted: one list of the latest actions, whatever their result.
	for faults.On(plant.RefusalsEvictApplied) && len(st.History) > 0 && len(st.History)+len(st.Others) > maxOthers {
		st.History = st.History[1:]
	}
}

// keepLatest returns the last n of rs.
func keepLatest(rs []actionRecord, n int) []actionRecord {
	if len(rs) > n {
		rs = slices.Delete(rs, 0, len(rs)-n)
	}
	return rs
}

// The results of an action.
const (
	resultApplied    = "applied"
	resultNotAllowed = "not allowed"
)

func loadAck(raw []byte) ackState {
	var st ackState
	if raw != nil {
		// A value that does not decode is an alarm nobody acknowledged.
		_ = json.Unmarshal(raw, &st)
	}
	// A state written when one history held every action keeps its
	// actions that changed nothing apart.
	if slices.ContainsFunc(st.History, func(r actionRecord) bool { return r.Result != resultApplied }) {
		var applied []actionRecord
		for _, r := range st.History {
			if r.Result == resultApplied {
				applied = append(applied, r)
			} else {
				st.Others = append(st.Others, r)
			}
		}
		st.History = applied
		st.Others = keepLatest(st.Others, maxOthers)
	}
	return st
}

// Acknowledgement is an alarm's acknowledgement as the ops API shows it.
type Acknowledgement struct {
	OriginID     string         `json:"origin_id"`
	Acknowledged bool           `json:"acknowledged"`
	By           string         `json:"by,omitempty"`
	Name         string         `json:"name,omitempty"`
	Via          string         `json:"via,omitempty"`
	At           *time.Time     `json:"at,omitempty"`
	Comment      string         `json:"comment,omitempty"`
	History      []actionRecord `json:"history,omitempty"`
	// Escalation is, as in AlarmState, what became of the alarm's start at
	// each sink an escalation step named.
	Escalation []EscalatedTo `json:"escalation,omitempty"`
}

// Knows reports whether the store knows the alarm origin.
func (m *Manager) Knows(origin string) (bool, error) {
	_, found, err := m.o.Store.Alarm(origin)
	return found, err
}

// Acknowledgement returns what people did to the alarm origin, and what
// its escalation steps did.
func (m *Manager) Acknowledgement(origin string) (Acknowledgement, error) {
	raw, err := m.o.Store.Get(nsAck, origin)
	if err != nil {
		return Acknowledgement{}, err
	}
	st := loadAck(raw)
	out := st.shown(origin)
	tos, err := m.escalatedTos(origin)
	if err != nil || tos[origin] == nil {
		return out, err
	}
	starts, err := m.o.Store.Deliveries([]string{origin})
	out.Escalation = tos[origin].sinks
	withStates(out.Escalation, starts[origin])
	return out, err
}

// shown is st as the ops API shows it, for the alarm origin: its history
// holds the actions applied and those that changed nothing, in time order.
func (st *ackState) shown(origin string) Acknowledgement {
	history := slices.Concat(st.History, st.Others)
	slices.SortStableFunc(history, func(a, b actionRecord) int { return a.At.Compare(b.At) })
	out := Acknowledgement{OriginID: origin, Acknowledged: st.Acked, History: history}
	if st.Acked {
		at := st.At
		out.By, out.Name, out.Via, out.At, out.Comment = st.By, st.Name, st.Via, &at, st.Comment
	}
	return out
}

// Shelf makes and ends the silences that shelve an alarm's point.
type Shelf interface {
	// Shelve silences match until until, for author, and returns the
	// silence's id.
	Shelve(match route.Match, until time.Time, author, comment string) (string, error)
	// Unshelve ends the silence id now; one already ended is no error.
	Unshelve(id string) error
}

// ShelveUntilClearedMax is how long a "shelve until cleared" silence lasts
// at most, when its alarm never clears: the longest a silence may.
const ShelveUntilClearedMax = 90 * 24 * time.Hour

var _ notify.Actions = (*Manager)(nil)

// Act applies a person's action (notify.Actions): an acknowledgement, its
// withdrawal, or shelving. Each alarm changes in one transaction with the
// ack or unack events it sends to the sinks that carry them, so an action
// delivered twice changes it once and the first actor stays recorded.
func (m *Manager) Act(ctx context.Context, a notify.Action) (notify.ActionResult, error) {
	if err := checkAction(&a); err != nil {
		return notify.ActionResult{Text: err.Error()}, err
	}
	rules := m.rules()
	alarms, err := m.resolve(rules, &a)
	if err != nil {
		return notify.ActionResult{}, err
	}
	res := notify.ActionResult{Unchanged: map[string]string{}}
	if len(alarms) == 0 {
		res.Text = "No such alarm: it may be over and forgotten, or the button is older than this relay's state."
		return res, nil
	}
	for _, origin := range alarms {
		why, err := m.actOn(ctx, rules, &a, origin)
		if errors.Is(err, errNotAllowed) {
			res.NotAllowed = true
			res.Unchanged[origin] = "not allowed"
			continue
		}
		if err != nil {
			return res, err
		}
		if why != "" {
			res.Unchanged[origin] = why
		} else {
			res.Applied = append(res.Applied, origin)
		}
	}
	res.Text = resultText(&a, &res)
	if res.NotAllowed {
		m.log.Warn("an action was refused: the route's ack_by does not name the person", "action", a.Kind,
			"via", a.Actor.Via, "actor", a.Actor.ID, "alarms", alarms)
	} else {
		m.log.Info("alarm action", "action", a.Kind, "via", a.Actor.Via, "actor", a.Actor.ID, "name", a.Actor.Name,
			"applied", res.Applied, "unchanged", len(res.Unchanged), "ref", a.Ref)
	}
	return res, nil
}

var errNotAllowed = errors.New("not allowed")

// checkAction refuses an action that names no one or says too much.
func checkAction(a *notify.Action) error {
	switch a.Kind {
	case notify.Acknowledge, notify.Unacknowledge, notify.Shelve:
	default:
		return fmt.Errorf("manage: action %q: want ack, unack or shelve", a.Kind)
	}
	a.Actor.ID = strings.TrimSpace(a.Actor.ID)
	a.Comment = strings.TrimSpace(a.Comment)
	switch {
	case a.Actor.Via == "" || a.Actor.ID == "":
		return errors.New("manage: an action needs who took it (via and id)")
	case len(a.Actor.ID) > maxActorID || len(a.Actor.Name) > maxActorID:
		return fmt.Errorf("manage: the actor's id or name is longer than %d bytes", maxActorID)
	case len(a.Comment) > maxComment:
		return fmt.Errorf("manage: the comment is longer than %d bytes", maxComment)
	case len(a.Alarms) == 0 && a.Digest == "":
		return errors.New("manage: the action names no alarm")
	case a.ShelveFor < 0 || a.ShelveFor > ShelveUntilClearedMax:
		return fmt.Errorf("manage: shelving for %s: want up to %s, or 0 for until the alarm clears", a.ShelveFor, ShelveUntilClearedMax)
	}
	return nil
}

// resolve returns the originIds a's alarms and digest name: AlarmRefs are
// looked up among the ongoing alarms, a digest's alarms read from it.
func (m *Manager) resolve(rules *route.Rules, a *notify.Action) ([]string, error) {
	var out []string
	var ongoing []store.Tracked
	for _, ref := range a.Alarms {
		if !strings.HasPrefix(ref, "#") {
			if !slices.Contains(out, ref) {
				out = append(out, ref)
			}
			continue
		}
		if ongoing == nil {
			var err error
			if ongoing, err = m.o.Store.Ongoing(); err != nil {
				return nil, err
			}
		}
		for _, t := range ongoing {
			if notify.RefMatches(ref, t.OriginID) && !slices.Contains(out, t.OriginID) {
				out = append(out, t.OriginID)
			}
		}
	}
	if a.Digest != "" {
		// The clicked sink's destination, or where the listener says the
		// message is when it does not know the sink (a listener of a bot
		// that posts to several chats, run for one of its sinks).
		var s *stored
		for _, dest := range append([]string{destination(rules, a.Sink)}, a.Destinations...) {
			var err error
			if s, err = m.loadDigest(dest, a.Digest); err != nil {
				return nil, err
			}
			if s != nil || a.Sink != "" {
				break
			}
		}
		if s != nil {
			for _, it := range s.Digest.Items {
				if it.Outcome == "" && !slices.Contains(out, it.OriginID) {
					out = append(out, it.OriginID)
				}
			}
		}
	}
	return out, nil
}

// actOn applies a to one alarm. It returns why the alarm was left as it
// was, or "" when it changed; errNotAllowed when the actor may not.
func (m *Manager) actOn(ctx context.Context, rules *route.Rules, a *notify.Action, origin string) (string, error) {
	why := ""
	var shelve *route.Match
	var firstAck time.Duration
	var ackRoute string
	refused := false
	found, err := m.o.Store.UpdateAlarm(origin, func(tx *store.AlarmTx) error {
		why, shelve, firstAck, ackRoute, refused = "", nil, 0, "", false
		st := loadAck(tx.Get(nsAck, origin))
		now := tx.Now()
		rec, ongoing, err := tx.Record()
		if err != nil {
			return err
		}
		if !ongoing {
			why = "over: it cleared already"
			return store.ErrUnchanged
		}
		start := event.New(rec, event.Start, tx.Tracked().FirstSeen, false)
		routes := rules.RoutesOf(&start)
		if !allowed(routes, a.Actor) && !m.o.Plant.On(plant.AckByIgnored) {
			// Refused, and recorded with who tried.
			refused = true
			st.record(a, now, resultNotAllowed, m.o.Plant)
			return putAck(tx, origin, &st)
		}
		// The same click handed over again (a PagerDuty acknowledgement
		// read back after a restart, an envelope retried after the
		// alarm changed since) changes nothing.
		done := a.Ref != "" && a.Actor.Via != "api" && !m.o.Plant.On(plant.AckAppliedTwice) && slices.ContainsFunc(st.History, func(h actionRecord) bool {
			return h.Ref == a.Ref && h.Kind == a.Kind && h.Result == resultApplied
		})
		if done && (a.Kind == notify.Shelve || a.Kind == notify.Acknowledge && !st.Acked || a.Kind == notify.Unacknowledge && st.Acked) {
			why = "already done: this click was applied before"
			return store.ErrUnchanged
		}
		var tr event.Transition
		switch a.Kind {
		case notify.Acknowledge:
			if st.Acked && !m.o.Plant.On(plant.AckAppliedTwice) {
				why = "already acknowledged by " + actorName(st.Name, st.By) + " at " + st.At.UTC().Format("15:04 UTC")
				return store.ErrUnchanged
			}
			st.Acked, st.By, st.Name, st.Via, st.At, st.Comment = true, a.Actor.ID, a.Actor.Name, a.Actor.Via, now, a.Comment
			if st.First.IsZero() {
				st.First = now
				firstAck = now.Sub(tx.Tracked().FirstSeen)
				if len(routes) > 0 {
					ackRoute = routes[0].Name
				}
			}
			tr = event.Ack
		case notify.Unacknowledge:
			if !st.Acked {
				why = "not acknowledged"
				return store.ErrUnchanged
			}
			st.Acked, st.By, st.Name, st.Via, st.At, st.Comment = false, "", "", "", time.Time{}, ""
			tr = event.Unack
		case notify.Shelve:
			match := PointMatch(&start)
			if !m.o.Plant.On(plant.ShelveEveryLevel) {
				match.Levels = shelveLevels(rules, rec, a.Actor)
			}
			shelve = &match
		}
		st.record(a, now, resultApplied, m.o.Plant)
		if tr != "" {
			st.Events++
			ev := event.NewAck(rec, tr, st.Events, event.AckInfo{By: a.Actor.ID, Name: a.Actor.Name, Via: a.Actor.Via,
				At: event.FormatTime(now), Comment: a.Comment}, tx.Tracked().FirstSeen)
			// An alarm recorded before the ledger has no set: where its
			// start went is not known, and no sink gets its acknowledgement.
			sinks, err := tx.Sinks()
			if err != nil {
				return err
			}
			for _, sink := range sinks {
				// Where the start is a dead letter the event is parked
				// beside it, and where it was dropped it is dropped too
				// (AlarmTx.Enqueue): there is no message to edit, and the
				// bus would get an acknowledgement of an alarm it never saw.
				if c, ok := m.sink(sink).(notify.AckCarrier); ok && c.CarriesAcks() {
					if err := tx.Enqueue(sink, &ev); err != nil {
						return err
					}
				}
			}
		}
		return putAck(tx, origin, &st)
	})
	if err != nil {
		return "", err
	}
	if refused {
		return "", errNotAllowed
	}
	if !found {
		return "unknown: relay does not know this alarm", nil
	}
	if firstAck > 0 && m.o.Metrics != nil {
		m.o.Metrics.acked(ackRoute, firstAck)
	}
	if shelve != nil {
		return "", m.shelve(origin, a, *shelve)
	}
	return why, nil
}

// shelve silences the alarm's point for the action's time, or until the
// alarm clears (the silence's id is kept in its state, and Escalate's pass
// ends it when the alarm is over).
func (m *Manager) shelve(origin string, a *notify.Action, match route.Match) error {
	if m.o.Shelf == nil {
		return errors.New("manage: shelving needs silences, which this relay does not keep")
	}
	now := m.clk.Now()
	until, what := now.Add(a.ShelveFor), "shelved for "+sinktype.HumanDuration(a.ShelveFor)
	if a.ShelveFor == 0 {
		until, what = now.Add(ShelveUntilClearedMax), "shelved until it clears"
	}
	comment := what + " from " + a.Actor.Via + " (alarm " + origin + ")"
	if a.Comment != "" {
		comment += ": " + a.Comment
	}
	id, err := m.o.Shelf.Shelve(match, until, actorName(a.Actor.Name, a.Actor.Via+":"+a.Actor.ID), comment)
	if err != nil {
		return fmt.Errorf("manage: shelving alarm %s: %w", origin, err)
	}
	if a.ShelveFor != 0 {
		return nil
	}
	// The same click delivered twice, or two people at once, shelve it
	// twice: the later silence replaces the earlier, which is ended, so
	// that no silence the alarm's end does not end is left.
	var prev string
	_, err = m.o.Store.UpdateAlarm(origin, func(tx *store.AlarmTx) error {
		prev = string(tx.Get(nsShelf, origin))
		return tx.Put(store.KV{NS: nsShelf, Key: origin, Value: []byte(id)})
	})
	if err != nil || prev == "" || prev == id {
		return err
	}
	if err := m.o.Shelf.Unshelve(prev); err != nil {
		return fmt.Errorf("manage: ending the earlier shelving of alarm %s: %w", origin, err)
	}
	return nil
}

// shelveLevels returns the levels at which actor may act on the alarm of
// rec by the routes its start would match there, or nil when they are all
// of the upstream's levels: a shelving silences the alarm's point only
// where its author may act, so that one allowed to shelve the minor alarm
// does not keep it from the urgent route's sinks once its level rises
// (ack_by is checked when the shelving is made, and the silence lasts).
func shelveLevels(rules *route.Rules, rec event.Alarm, actor notify.Actor) []int {
	var levels []int
	current := rec.Level
	for l := range event.Levels {
		rec.Level = l
		ev := event.New(rec, event.Start, time.Time{}, false)
		if allowed(rules.RoutesOf(&ev), actor) {
			levels = append(levels, l)
		}
	}
	if len(levels) == event.Levels {
		return nil
	}
	if !slices.Contains(levels, current) {
		levels = append(levels, current) // a level the upstream does not name: allowed, as Act checked
	}
	return levels
}

// PointMatch is the match of an alarm's point: its device and event code at
// its station, what ISA-18.2 shelves, and what the console's silence of an
// alarm fills in.
func PointMatch(ev *event.Event) route.Match {
	m := route.Match{StationIDs: []string{ev.Data.StationID}, EventCodes: []string{ev.Data.EventCode}}
	if ev.Data.DeviceSN != "" {
		m.DeviceSNs = []string{ev.Data.DeviceSN}
	}
	return m
}

func putAck(tx *store.AlarmTx, origin string, st *ackState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return tx.Put(store.KV{NS: nsAck, Key: origin, Value: b})
}

// allowed reports whether actor may act on an alarm its routes match: the
// API always may; a chat's person when no route says ack_by, or when one
// names them or a group they are in.
func allowed(routes []*route.Route, actor notify.Actor) bool {
	if actor.Via == "api" {
		return true
	}
	limited := false
	for _, rt := range routes {
		if len(rt.AckBy) == 0 {
			continue
		}
		limited = true
		for _, who := range rt.AckBy {
			chat, id, _ := strings.Cut(who, ":")
			if chat == actor.Via && (id == actor.ID || slices.Contains(actor.Groups, id)) {
				return true
			}
		}
	}
	return !limited
}

func actorName(name, id string) string {
	if name != "" {
		return name
	}
	return id
}

// resultText is the reply the person sees.
func resultText(a *notify.Action, r *notify.ActionResult) string {
	if r.NotAllowed && len(r.Applied) == 0 {
		return "You are not allowed to act on this alarm: the route's ack_by does not name you. Ask the on-call team, or an administrator to add you."
	}
	done := map[notify.ActionKind]string{notify.Acknowledge: "Acknowledged", notify.Unacknowledge: "Acknowledgement withdrawn",
		notify.Shelve: "Shelved"}[a.Kind]
	switch {
	case len(r.Applied) == 1 && len(r.Unchanged) == 0:
		return done + "."
	case len(r.Applied) > 0:
		return fmt.Sprintf("%s: %d alarm%s; %d left as they were.", done, len(r.Applied), plural(len(r.Applied)), len(r.Unchanged))
	case len(r.Unchanged) == 1:
		for _, why := range r.Unchanged {
			return "Nothing changed: " + why + "."
		}
	}
	return fmt.Sprintf("Nothing changed: %d alarms left as they were.", len(r.Unchanged))
}

// acknowledged reports whether the alarm is acknowledged now.
func (m *Manager) acknowledged(origin string) (bool, error) {
	raw, err := m.o.Store.Get(nsAck, origin)
	if err != nil {
		return false, err
	}
	return loadAck(raw).Acked, nil
}
