package relaysim

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/plant"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/store"
)

// The invariants of acknowledgement and escalation (docs/rules.md,
// "Acknowledgement and escalation") and of send_resolved, what must happen
// as well as what must not.
const (
	invEscalationUnreached = "escalation step taken, but its sink neither got the start nor shows why (dead, dropped, silenced)"
	invAckWithoutStart     = "acknowledgement delivered where the start was not delivered before it"
	invEndNotWanted        = "end delivered to a sink that says send_resolved: false, or not recorded as not wanted"
	invEndUnwanted         = "end recorded as not wanted at a sink that wants ends"
	invSilenceUnfounded    = "start withheld by a silence that does not cover it (a shelving beyond its author's ack_by)"
	invClickAgain          = "a click handed over again after refused clicks was applied again"
	invEscalatedEarly      = "escalation step taken before its after had passed since the alarm was first seen"
	invEscalatedShelved    = "escalation step taken while a silence or maintenance window shelved the alarm"
	invEscalationMissed    = "alarm unacknowledged and not shelved past its step's after, but no step taken"
	invReminderAcked       = "reminder sent while the alarm was acknowledged"
)

// checkSeams checks at dest what acknowledgement, escalation and
// send_resolved promise, once the run has settled: seen and firstAt are
// what dest's receiver got, fate what became of each event routed there.
func (w *world) checkSeams(dest string, bad func(inv, id, format string, args ...any), l ledger, seen map[string]int,
	firstAt map[string]time.Time, routed map[string]enqueued, reports map[string][]report, fate func(string) string) error {
	digestedAt := func(id string) (time.Time, bool) {
		for _, r := range reports[id] {
			if r.fate == deliver.Digested {
				return r.at, true
			}
		}
		return time.Time{}, false
	}
	// An acknowledgement reaches only a sink holding the start: its start
	// was delivered (or listed in a digest) there before it.
	for id, rs := range reports {
		origin, tr, _ := strings.Cut(id, ":")
		if !strings.HasPrefix(tr, string(event.Ack)) && !strings.HasPrefix(tr, string(event.Unack)) {
			continue
		}
		start := event.ID(origin, event.Start)
		for _, r := range rs {
			if r.fate != deliver.Delivered {
				continue
			}
			at, ok := firstAt[start]
			if dat, dok := digestedAt(start); dok && (!ok || dat.Before(at)) {
				at, ok = dat, true
			}
			if !ok || at.After(r.at) {
				bad(invAckWithoutStart, id, "%s delivered at %s, its start %s", id, r.at.Format(time.TimeOnly), fate(start))
			}
		}
	}
	// send_resolved: false keeps ends from a sink, recorded as not wanted,
	// and from no other sink.
	for id, enq := range routed {
		if strings.HasSuffix(id, ":start") {
			continue
		}
		notWanted := strings.HasPrefix(l.suppressed[id], store.DroppedPrefix+" ("+store.DropEndNotWanted+")")
		switch {
		case enq.notWanted && seen[id] > 0:
			bad(invEndNotWanted, id, "%s delivered", id)
		case enq.notWanted && !notWanted && fate(id) != "parked" && !strings.HasPrefix(l.suppressed[id], store.DroppedPrefix):
			bad(invEndNotWanted, id, "%s %s, not recorded as not wanted", id, fate(id))
		case !enq.notWanted && notWanted:
			bad(invEndUnwanted, id, "%s: %s", id, l.suppressed[id])
		}
	}
	// A start withheld by a silence was withheld by one that covers it
	// when it was withheld, at the level its bytes carry: the silences
	// added and the shelvings, each of the levels its author may act on.
	for id, d := range l.withheld {
		if d.Reason != manage.ReasonSilence || d.Transition != event.Start {
			continue
		}
		a := w.alarmByID(originOf(id))
		if a == nil {
			continue
		}
		covered := slices.ContainsFunc(w.silences, func(s silenceRec) bool {
			return s.matchesAt(a, d.Level) && !s.start.After(d.At) && !s.end.Before(d.At)
		})
		if !covered {
			bad(invSilenceUnfounded, id, "%s at level %d, enqueued at %s, withheld at %s by a silence", id, d.Level,
				d.EnqueuedAt.Format(time.TimeOnly), d.At.Format(time.TimeOnly))
		}
	}
	switch dest {
	case destHook:
		if err := w.checkEscalationTiming(bad); err != nil {
			return err
		}
		return w.checkEscalationReached(bad, l, seen, fate, reports)
	case destPager:
		// Reminders stop at an acknowledgement (repeat_until defaults to
		// acknowledged); one decided before it may wait a tick.
		for _, r := range w.reminders {
			a := w.alarmByID(r.origin)
			if a == nil {
				continue
			}
			for _, sp := range a.acked {
				if r.at.After(sp.from.Add(manage.TickEvery)) && (sp.to.IsZero() || r.at.Before(sp.to)) {
					bad(invReminderAcked, r.id, "reminder of %s at %s, acknowledged from %s", a.id, r.at.Format(time.TimeOnly),
						sp.from.Format(time.TimeOnly))
				}
			}
		}
	}
	return nil
}

// escalationState reads what escalation did to alarm id, nil when nothing.
func (w *world) escalationState(id string) (*escalationState, error) {
	raw, err := w.run.store.Get("escalate", id)
	if err != nil || raw == nil {
		return nil, err
	}
	var es escalationState
	if err := json.Unmarshal(raw, &es); err != nil {
		return nil, fmt.Errorf("escalation state of %s: %w", id, err)
	}
	return &es, nil
}

// escalationState is manage's escalation state of an alarm, as stored.
type escalationState struct {
	Done map[string]time.Time `json:"done"`
}

// checkEscalationTiming checks when escalation steps were taken: never
// before their after, never while the alarm was shelved, and always for an
// alarm left unacknowledged and unshelved past its after under rules that
// escalate it (an unacknowledged alarm is escalated: what must happen).
func (w *world) checkEscalationTiming(bad func(inv, id, format string, args ...any)) error {
	// Shelved at t, and at the level a second before: a level that changed
	// at the step's very instant may have changed after it.
	shelvedAt := func(a *alarm, t time.Time) string {
		for _, s := range w.silences {
			if s.matchesAt(a, a.levelAt(t)) && s.matchesAt(a, a.levelAt(t.Add(-time.Second))) &&
				s.start.Before(t.Add(-time.Second)) && t.Before(s.end.Add(-time.Second)) {
				return "silence " + s.id
			}
		}
		for _, m := range w.windows {
			if m.station == a.station && m.start.Before(t.Add(-time.Second)) && t.Before(m.end.Add(-time.Second)) {
				return "maintenance on " + m.station
			}
		}
		return ""
	}
	for _, a := range w.alarms {
		es, err := w.escalationState(a.id)
		if err != nil {
			return err
		}
		start := event.ID(a.id, event.Start)
		if es != nil {
			for step, at := range es.Done {
				if !a.firstSeen.IsZero() && at.Sub(a.firstSeen) < escalateAfter {
					bad(invEscalatedEarly, start, "step %s at %s, first seen at %s", step, at.Format(time.TimeOnly), a.firstSeen.Format(time.TimeOnly))
				}
				if why := shelvedAt(a, at); why != "" {
					bad(invEscalatedShelved, start, "step %s at %s, %s", step, at.Format(time.TimeOnly), why)
				}
			}
		}
		if (es != nil && len(es.Done) > 0) || !a.escalating {
			continue
		}
		// Due for sure: ongoing, at its level, under the same rules, not
		// acknowledged and not shelved from its first sight to well past
		// the step's after (the escalation pass runs every 30 s).
		due := a.firstSeen.Add(escalateAfter + 2*time.Minute)
		quiet := w.clk.Now().After(due) && (a.recovered.IsZero() || !a.recovered.Before(due))
		for _, l := range a.relevels {
			quiet = quiet && l.at.After(due)
		}
		for _, at := range w.reloads {
			quiet = quiet && (at.Before(a.firstSeen) || at.After(due))
		}
		for _, sp := range a.acked {
			quiet = quiet && sp.from.After(due)
		}
		for _, s := range w.silences {
			quiet = quiet && !(s.matchesAt(a, a.startLevel) && s.start.Before(due) && s.end.After(a.firstSeen))
		}
		for _, m := range w.windows {
			quiet = quiet && !(m.station == a.station && m.start.Before(due) && m.end.After(a.firstSeen))
		}
		if quiet {
			bad(invEscalationMissed, start, "%s first seen at %s, unacknowledged and unshelved until %s; no step taken",
				a.id, a.firstSeen.Format(time.TimeOnly), due.Format(time.TimeOnly))
		}
	}
	return nil
}

// checkEscalationReached checks that each escalation step taken reached
// the hook, its sink: the alarm's start was delivered or digested there,
// or the hook shows why not: a dead letter, dropped, or withheld by what
// holds an escalated start too (a silence, a maintenance window,
// inhibition), never by the direct route's hold or muting, or chattering.
func (w *world) checkEscalationReached(bad func(inv, id, format string, args ...any), l ledger, seen map[string]int,
	fate func(string) string, reports map[string][]report) error {
	for _, a := range w.alarms {
		es, err := w.escalationState(a.id)
		if err != nil {
			return err
		}
		if es == nil {
			continue
		}
		// What the steps did at the hook, kept under the name the hook had
		// then (and moved with it).
		step := ""
		for _, name := range namesOf(destHook) {
			raw, err := w.run.store.Get("escalated", name+"\x00"+a.id)
			if err != nil {
				return err
			}
			var at struct {
				Step string `json:"step"`
			}
			if raw != nil && json.Unmarshal(raw, &at) == nil {
				step = at.Step
			}
		}
		if step == "" {
			continue // the hook was not a sink of the rules when the step was taken
		}
		start := event.ID(a.id, event.Start)
		switch why := l.suppressed[start]; {
		case seen[start] > 0, fate(start) == "digested", fate(start) == "parked", fate(start) == "dropped",
			w.deadLettered(destHook, start), strings.HasPrefix(why, store.DroppedPrefix):
		case why == manage.ReasonSilence, why == manage.ReasonMaintenance, why == manage.ReasonInhibited:
		default:
			bad(invEscalationUnreached, start, "step %s taken at %s; the hook's start %s%s", step,
				es.Done[step].Format(time.TimeOnly), fate(start), strings.TrimSuffix(" ("+why+")", " ()"))
		}
	}
	return nil
}

func (w *world) alarmByID(id string) *alarm {
	for _, a := range w.alarms {
		if a.id == id {
			return a
		}
	}
	return nil
}

// mayAct reports whether the person id may act from the Slack channel on
// an alarm at level, by the rules in force: the urgent route's ack_by
// names only ackBy, and no other route says ack_by.
func (w *world) mayAct(id string, level int) bool {
	limited := w.rules.names[destPager] != "" && slices.Contains(w.rules.urgent, level)
	return !limited || id == ackBy
}

// opShelve shelves an ongoing alarm for an hour from the Slack channel, as
// a person the urgent route's ack_by names (allowed), or one it does not.
type opShelve struct {
	pick    int
	allowed bool
}

func (o opShelve) String() string {
	who := "an allowed person"
	if !o.allowed {
		who = "a person ack_by does not name"
	}
	return fmt.Sprintf("shelve ongoing alarm #%d for 1h by %s", o.pick, who)
}

func (o opShelve) apply(w *world) error {
	if len(w.ongoing) == 0 {
		return errSkip
	}
	a := w.ongoing[o.pick%len(w.ongoing)]
	id := "U9"
	if o.allowed {
		id = ackBy
	}
	before := w.run.silences.List(false)
	res, err := w.run.manager.Act(w.ctx, notify.Action{Kind: notify.Shelve, ShelveFor: time.Hour, Sink: w.rules.names[destPager],
		Alarms: []string{notify.AlarmRef(a.id)}, Actor: notify.Actor{Via: "slack", ID: id}, Ref: fmt.Sprintf("op-%d", w.order)})
	if err != nil {
		return err
	}
	if res.NotAllowed != !w.mayAct(id, a.level) {
		w.ackViolations = append(w.ackViolations, violation{inv: invAckRefused, dest: destPager, origin: a.id,
			detail: fmt.Sprintf("shelving by %s at level %d: not allowed %v", id, a.level, res.NotAllowed)})
	}
	if len(res.Applied) == 0 {
		return nil
	}
	// The model's shelving: the alarm's point, at the levels its author
	// may act on.
	ev := &event.Event{Data: event.Data{StationID: a.station, DeviceSN: a.device, EventCode: a.code}}
	m := manage.PointMatch(ev)
	var levels []int
	for l := range event.Levels {
		if w.mayAct(id, l) {
			levels = append(levels, l)
		}
	}
	if len(levels) < event.Levels {
		m.Levels = levels
	}
	now := w.clk.Now()
	sid := "?"
	for _, s := range w.run.silences.List(false) {
		if !slices.ContainsFunc(before, func(b silence.Silence) bool { return b.ID == s.ID }) {
			sid = s.ID
		}
	}
	w.order++
	w.silences = append(w.silences, silenceRec{id: sid, match: m, start: now, end: now.Add(time.Hour), order: w.order})
	return nil
}

// opClickAgain is a chat handing over again a click it delivered before
// (PagerDuty reading its acknowledgements back after a restart, a retried
// envelope), after the alarm changed since and after many refused clicks:
// a person ack_by names acknowledges an urgent alarm from the channel, the
// acknowledgement is withdrawn from the console, a person ack_by does not
// name clicks Acknowledge 25 times, the relay restarts (restart set), then
// the first click comes again. It must change nothing.
type opClickAgain struct {
	pick    int
	restart bool
}

func (o opClickAgain) String() string {
	s := fmt.Sprintf("urgent ongoing alarm #%d: acknowledged from the channel, withdrawn from the console, 25 refused clicks", o.pick)
	if o.restart {
		s += ", a restart"
	}
	return s + ", then the first click handed over again"
}

func (o opClickAgain) apply(w *world) error {
	i := slices.IndexFunc(w.ongoing, func(a *alarm) bool { return !w.mayAct("U9", a.level) })
	if i < 0 {
		return errSkip
	}
	var urgent []int
	for i, a := range w.ongoing {
		if !w.mayAct("U9", a.level) {
			urgent = append(urgent, i)
		}
	}
	pick := urgent[o.pick%len(urgent)]
	a := w.ongoing[pick]
	if len(a.acked) > 0 && a.acked[len(a.acked)-1].to.IsZero() {
		if err := (opAck{pick: pick, kind: notify.Unacknowledge, allowed: true, console: true}).apply(w); err != nil {
			return err
		}
	}
	n := len(w.clicks[a.id])
	if err := (opAck{pick: pick, kind: notify.Acknowledge, allowed: true}).apply(w); err != nil {
		return err
	}
	if len(w.clicks[a.id]) == n {
		return nil // not applied: nothing to hand over again
	}
	click := w.clicks[a.id][n]
	w.order++ // the withdrawal is a click of its own
	if err := (opAck{pick: pick, kind: notify.Unacknowledge, allowed: true, console: true}).apply(w); err != nil {
		return err
	}
	for i := range 25 {
		res, err := w.run.manager.Act(w.ctx, notify.Action{Kind: notify.Acknowledge, Sink: w.rules.names[destPager],
			Alarms: []string{notify.AlarmRef(a.id)}, Actor: notify.Actor{Via: "slack", ID: "U9"}, Ref: fmt.Sprintf("spam-%d-%d", w.order, i)})
		if err != nil {
			return err
		}
		if len(res.Applied) > 0 {
			w.ackViolations = append(w.ackViolations, violation{inv: invAckRefused, dest: destPager, origin: a.id,
				detail: "a click by U9, whom ack_by does not name, applied"})
		}
	}
	if o.restart {
		if err := (opStop{}).apply(w); err != nil {
			return err
		}
	}
	res, err := w.run.manager.Act(w.ctx, click)
	if err != nil {
		return err
	}
	if len(res.Applied) > 0 {
		w.ackViolations = append(w.ackViolations, violation{inv: invClickAgain, dest: destPager, origin: a.id,
			detail: fmt.Sprintf("%s (%s) of %s applied again", click.Kind, click.Ref, a.id)})
		a.acked = append(a.acked, ackSpan{from: w.clk.Now()})
	}
	return nil
}

// opShelveRise shelves an ongoing alarm of a level the urgent route does
// not take for an hour from the channel, by a person the urgent route's
// ack_by names (allowed) or one it does not, then, after a restart when
// restart is set, its level rises to the urgent route's.
type opShelveRise struct {
	pick             int
	allowed, restart bool
}

func (o opShelveRise) String() string {
	s := opShelve{pick: o.pick, allowed: o.allowed}.String() + " at a level the urgent route does not take"
	if o.restart {
		s += ", a restart"
	}
	return s + ", then its level rises to urgent"
}

func (o opShelveRise) apply(w *world) error {
	var calm []int
	for i, a := range w.ongoing {
		if w.mayAct("U9", a.level) {
			calm = append(calm, i)
		}
	}
	if len(calm) == 0 || len(w.rules.urgent) == 0 || w.rules.names[destPager] == "" {
		return errSkip
	}
	pick := calm[o.pick%len(calm)]
	if err := (opShelve{pick: pick, allowed: o.allowed}).apply(w); err != nil {
		return err
	}
	if err := w.settle(); err != nil {
		return err
	}
	if o.restart {
		if err := (opStop{}).apply(w); err != nil {
			return err
		}
	}
	return opRelevel{pick: pick, level: w.rules.urgent[o.pick%len(w.rules.urgent)]}.apply(w)
}

// opAckRetried acknowledges a new urgent alarm while the Slack channel is
// down and its start is being retried; after a restart when restart is
// set, the outage outlasts the sink's max_age, and the start becomes a dead
// letter. The acknowledgement must not reach the channel before its start.
type opAckRetried struct{ restart bool }

func (o opAckRetried) String() string {
	s := "the Slack channel down, an urgent alarm starts and is acknowledged"
	if o.restart {
		s += ", a restart"
	}
	return s + ", the outage outlasts max_age"
}

func (o opAckRetried) apply(w *world) error {
	if len(w.rules.urgent) == 0 || w.rules.names[destPager] == "" {
		return errSkip
	}
	g := w.gateOf(destPager)
	g.setDown(&answer{status: 503})
	if err := (opStart{n: 1, level: w.rules.urgent[0]}).apply(w); err != nil {
		return err
	}
	if err := w.advance(5 * time.Second); err != nil {
		return err
	}
	pick := slices.Index(w.ongoing, w.alarms[len(w.alarms)-1])
	if err := (opAck{pick: pick, kind: notify.Acknowledge, allowed: true}).apply(w); err != nil {
		return err
	}
	if o.restart {
		if err := (opStop{}).apply(w); err != nil {
			return err
		}
	}
	if err := w.advance(maxAge + 2*time.Minute); err != nil {
		return err
	}
	g.heal()
	return nil
}

// plantedCatches are, for each fault planted in relay's code, the
// invariants that exist to catch it, and the first seed found to catch it:
// the proof runs that seed first, and searches the seeds only when it no
// longer catches the fault (the code or the operations changed).
var plantedCatches = map[plant.Fault]struct {
	invs []string
	seed uint64
}{
	plant.EscalationTrustsTheSet:       {[]string{invEscalationUnreached}, 19},
	plant.LedgerNotUpgraded:            {[]string{invStartWithoutEnd, invEndWithoutStart}, 5},
	plant.ShelveEveryLevel:             {[]string{invSilenceUnfounded}, 5},
	plant.AckIgnoresADeadStart:         {[]string{invAckWithoutStart}, 4},
	plant.RefusalsEvictApplied:         {[]string{invClickAgain}, 2},
	plant.ResolvedIgnored:              {[]string{invEndNotWanted}, 3},
	plant.ResolvedOffEverywhere:        {[]string{invEndUnwanted}, 3},
	plant.DeadStartKeepsNothing:        {[]string{invEndWithoutStart}, 1},
	plant.EndsByTheRulesOfTheMoment:    {[]string{invStartWithoutEnd, invEndWithoutStart}, 3},
	plant.EscalationIgnoresTheSet:      {[]string{invDuplicate}, 137},
	plant.EndIgnoresAWithheldStart:     {[]string{invWithheldStartEnd}, 1},
	plant.WithheldUnrecorded:           {[]string{invVanished}, 1},
	plant.RenameLeavesTheOutbox:        {[]string{invStranded}, 18},
	plant.HoldNeverEnds:                {[]string{invPending}, 42},
	plant.SilencesIgnored:              {[]string{invSilenced}, 2},
	plant.MaintenanceIgnored:           {[]string{invMaintenance}, 3},
	plant.RemindersIgnoreShelving:      {[]string{invReminder}, 2},
	plant.ChatterUnannounced:           {[]string{invChatter}, 7},
	plant.AckAppliedTwice:              {[]string{invAckTwice}, 1},
	plant.AckByIgnored:                 {[]string{invAckRefused}, 2},
	plant.EscalationIgnoresAck:         {[]string{invEscalatedAcked}, 4},
	plant.FenceBypassed:                {[]string{invFenced}, 22},
	plant.EscalationEarly:              {[]string{invEscalatedEarly}, 5},
	plant.EscalationIgnoresShelving:    {[]string{invEscalatedShelved}, 4},
	plant.EscalationStalls:             {[]string{invEscalationMissed}, 5},
	plant.RemindersIgnoreAck:           {[]string{invReminderAcked}, 2},
	plant.DeadLetterLimitSplitsAnAlarm: {[]string{invParkedAlone}, 12},
	plant.PageRefusesALargeEntry:       {[]string{invPending}, 5},
}

// TestSimulationCatchesEveryPlantedFault proves the invariants have teeth:
// with each fault of internal/plant switched on in turn, the simulation
// finds it, and the test names the invariant that caught it and the seed.
// Every invariant of check has a fault it catches.
func TestSimulationCatchesEveryPlantedFault(t *testing.T) {
	if testing.Short() {
		t.Skip("runs hundreds of simulated relays")
	}
	covered := map[string]bool{}
	for _, f := range plant.All {
		c, ok := plantedCatches[f]
		if !ok {
			t.Errorf("fault %q: no invariant says it catches it", f)
			continue
		}
		for _, inv := range c.invs {
			covered[inv] = true
		}
		t.Run(string(f), func(t *testing.T) {
			opt := harnessOptions{plant: plant.Set{f: true}}
			caught := func(seed uint64) bool {
				for _, v := range runSeed(t, seed, opt) {
					if slices.Contains(c.invs, v.inv) {
						t.Logf("caught by %q (seed %d): %s", v.inv, seed, v)
						return true
					}
				}
				return false
			}
			if caught(c.seed) {
				return
			}
			first, n := *flagFirst, uint64(*flagPlantSeeds)
			for seed := first; seed < first+n; seed++ {
				if seed != c.seed && caught(seed) {
					t.Logf("seed %d no longer catches it: record seed %d", c.seed, seed)
					return
				}
			}
			t.Errorf("seeds %d to %d did not catch it: want a violation of %q", first, first+n-1, c.invs)
		})
	}
	for _, inv := range invariants {
		if !covered[inv] {
			t.Errorf("invariant %q: no planted fault shows that it catches anything", inv)
		}
	}
}
