package relaysim

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/silence"
	"github.com/relay-energy/relay/internal/store"
)

// op is one operation of a simulation run. Its parameters come from the
// seed only; picks of an alarm or a silence are indexes taken modulo what
// exists when the operation runs, so that a shrunk list still means
// something.
type op interface {
	apply(w *world) error
	String() string
}

// The devices of the simulated fleet, two per station, and the event
// codes they raise.
var (
	devices  = []string{"INV-01", "INV-02", "BMS-01", "BMS-02"}
	stations = map[string]string{"INV-01": "S1", "INV-02": "S1", "BMS-01": "S2", "BMS-02": "S2"}
	codes    = []string{"E10", "E20"}
)

// opStart starts n alarms at once (a storm when n is large) on device,
// code, at level.
type opStart struct {
	n, level, device, code int
}

func (o opStart) String() string {
	if o.n > 1 {
		return fmt.Sprintf("storm of %d starts, level %d, on %s %s", o.n, o.level, devices[o.device], codes[o.code])
	}
	return fmt.Sprintf("start, level %d, on %s %s", o.level, devices[o.device], codes[o.code])
}

func (o opStart) apply(w *world) error {
	var recs []*alarm
	for i := range o.n {
		dev := devices[(o.device+i)%len(devices)]
		w.nextID++
		a := &alarm{
			id: fmt.Sprintf("A%03d", w.nextID), device: dev, station: stations[dev], code: codes[o.code],
			level: o.level, startLevel: o.level, occurred: w.clk.Now(), status: event.StatusOngoing,
		}
		w.alarms = append(w.alarms, a)
		w.ongoing = append(w.ongoing, a)
		recs = append(recs, a)
	}
	return w.apply(recs...)
}

// opLate is an alarm the upstream lists only once it is over: its start and
// end come in one poll result.
type opLate struct {
	level, device, code int
	lasted              time.Duration
}

func (o opLate) String() string {
	return fmt.Sprintf("late upload of an alarm over, level %d, on %s %s, lasted %s", o.level, devices[o.device], codes[o.code], o.lasted)
}

func (o opLate) apply(w *world) error {
	dev := devices[o.device]
	w.nextID++
	now := w.clk.Now()
	a := &alarm{
		id: fmt.Sprintf("A%03d", w.nextID), device: dev, station: stations[dev], code: codes[o.code],
		level: o.level, startLevel: o.level, occurred: now.Add(-o.lasted - time.Minute), recovered: now.Add(-time.Minute), status: event.StatusEnded,
	}
	w.alarms = append(w.alarms, a)
	return w.apply(a)
}

// opEnd ends (or, with invalid, invalidates) an ongoing alarm.
type opEnd struct {
	pick    int
	invalid bool
}

func (o opEnd) String() string {
	if o.invalid {
		return fmt.Sprintf("invalidate ongoing alarm #%d", o.pick)
	}
	return fmt.Sprintf("end ongoing alarm #%d", o.pick)
}

func (o opEnd) apply(w *world) error {
	if len(w.ongoing) == 0 {
		return errSkip
	}
	i := o.pick % len(w.ongoing)
	a := w.ongoing[i]
	w.ongoing = slices.Delete(w.ongoing, i, i+1)
	a.status, a.recovered = event.StatusEnded, w.clk.Now()
	if o.invalid {
		a.status = event.StatusInvalid
	}
	return w.apply(a)
}

// opRelevel changes the level of an ongoing alarm.
type opRelevel struct {
	pick, level int
}

func (o opRelevel) String() string {
	return fmt.Sprintf("ongoing alarm #%d changes to level %d", o.pick, o.level)
}

func (o opRelevel) apply(w *world) error {
	if len(w.ongoing) == 0 {
		return errSkip
	}
	a := w.ongoing[o.pick%len(w.ongoing)]
	if a.level == o.level {
		return errSkip
	}
	a.level = o.level
	a.relevels = append(a.relevels, levelAt{at: w.clk.Now(), level: o.level})
	return w.apply(a)
}

// opAdvance lets time pass.
type opAdvance struct{ d time.Duration }

func (o opAdvance) String() string       { return fmt.Sprintf("advance %s", o.d) }
func (o opAdvance) apply(w *world) error { return w.advance(o.d) }

// The faults a receiver can show.
const (
	faultOutage    = "outage (503)"
	faultRateLimit = "rate limited (429, Retry-After)"
	faultReject    = "refuses the next request (400)"
	faultGone      = "refuses the next message (channel_not_found)"
	faultHeal      = "recovers"
)

var faults = []string{faultOutage, faultRateLimit, faultReject, faultGone, faultHeal, faultHeal}

// opSink makes a destination fail, or recover.
type opSink struct {
	dest  string
	fault string
	n     int
}

func (o opSink) String() string {
	if o.fault == faultReject || o.fault == faultRateLimit {
		return fmt.Sprintf("%s %s ×%d", o.dest, o.fault, o.n)
	}
	return fmt.Sprintf("%s %s", o.dest, o.fault)
}

func (o opSink) apply(w *world) error {
	g := w.gateOf(o.dest)
	switch o.fault {
	case faultOutage:
		g.setDown(&answer{status: http.StatusServiceUnavailable})
	case faultRateLimit:
		g.queue(answer{status: http.StatusTooManyRequests, retryAfter: 30 * time.Second}, o.n)
	case faultReject:
		g.queue(answer{status: http.StatusBadRequest}, o.n)
	case faultGone:
		if o.dest != destPager {
			g.queue(answer{status: http.StatusNotFound}, 1)
			break
		}
		w.slack.Fail(notifytest.MethodPostMessage, notifytest.SlackFailure{Error: "channel_not_found"})
	case faultHeal:
		g.heal()
	}
	return nil
}

// The edits a reload makes to the rules.
const (
	editRenamePager = "rename the Slack sink"
	editRemove      = "remove a sink"
	editRestore     = "bring back a removed sink"
	editUrgent      = "route other levels to the Slack sink"
	editRest        = "route other levels to the hook"
	editHold        = "change the urgent route's hold"
	editDigest      = "toggle the Slack sink's digest"
	editMaint       = "open a maintenance window"
	editNone        = "reload unchanged rules"
	editEscalate    = "toggle the urgent route's escalation"
	// Drawn as editNone with another arg, so that the seeds drawn before
	// they existed keep their operations.
	editHookUrgent = "route the urgent levels to the hook directly (none, held, muted)"
	editResolved   = "toggle the audit sink's send_resolved"
)

var edits = []string{editRenamePager, editRemove, editRestore, editUrgent, editRest, editHold, editDigest, editMaint, editNone, editEscalate}

// opReload edits the rules file and reloads it, as a SIGHUP does.
type opReload struct {
	edit string
	// arg picks a name, a level set, a hold or a window.
	arg int
}

func (o opReload) String() string {
	return fmt.Sprintf("reload: %s (%d)", o.edit, o.arg)
}

func (o opReload) apply(w *world) error {
	r := w.rules.clone()
	switch o.edit {
	case editRenamePager:
		if r.names[destPager] == "" {
			return errSkip
		}
		names := slices.DeleteFunc(slices.Clone(pagerNames), func(n string) bool { return n == r.names[destPager] })
		r.names[destPager] = names[o.arg%len(names)]
	case editRemove:
		d := []string{destPager, destHook}[o.arg%2]
		if r.names[d] == "" {
			return errSkip
		}
		r.names[d] = ""
	case editRestore:
		d := []string{destPager, destHook}[o.arg%2]
		if r.names[d] != "" {
			return errSkip
		}
		r.names[d] = namesOf(d)[o.arg%len(namesOf(d))]
	case editUrgent, editRest:
		set := levelSet(o.arg)
		if o.edit == editUrgent {
			r.urgent = set
		} else {
			r.rest = set
		}
	case editHold:
		r.hold = []time.Duration{0, 0, time.Minute, 3 * time.Minute}[o.arg%4]
	case editDigest:
		r.digest = !r.digest
	case editEscalate:
		r.escalate = !r.escalate
	case editMaint:
		start := w.clk.Now().Truncate(time.Minute).Add(time.Minute)
		end := start.Add(time.Duration(10+o.arg%50) * time.Minute)
		if end.Day() != start.Day() {
			return errSkip
		}
		r.maint = &window{station: []string{"S1", "S2"}[o.arg%2], start: start, end: end}
	case editHookUrgent:
		r.hookUrgent = []string{"", hookHeld, hookMuted}[o.arg%3]
	case editResolved:
		r.auditNoResolved = !r.auditNoResolved
	case editNone:
	}
	prev := w.rules
	w.rules = r
	if err := w.writeRules(); err != nil {
		return err
	}
	if _, err := w.run.rules.Reload(); err != nil {
		w.rules = prev
		if werr := w.writeRules(); werr != nil {
			return werr
		}
		return fmt.Errorf("the reload was refused: %w", err)
	}
	w.reloads = append(w.reloads, w.clk.Now())
	switch o.edit {
	case editRenamePager:
		w.renames++
	case editUrgent, editRest:
		w.routeEdits++
	}
	if o.edit == editMaint {
		if n := len(w.windows); n > 0 && w.windows[n-1].end.After(w.clk.Now()) {
			w.windows[n-1].end = w.clk.Now()
		}
		w.windows = append(w.windows, *r.maint)
	}
	return nil
}

// levelSet is one of the non-empty subsets of the levels 0 to 3.
func levelSet(arg int) []int {
	bits := 1 + arg%15
	var set []int
	for l := range 4 {
		if bits&(1<<l) != 0 {
			set = append(set, l)
		}
	}
	return set
}

// opSilence adds a silence of one level or one station, as relay silence
// add does, or of one ongoing alarm's point (its station, device and event
// code), as the console's Silence link on the alarm's row does.
type opSilence struct {
	byStation, byPoint bool
	arg                int
	d                  time.Duration
}

func (o opSilence) String() string {
	if o.byPoint {
		return fmt.Sprintf("silence the point of ongoing alarm #%d for %s (the console)", o.arg, o.d)
	}
	if o.byStation {
		return fmt.Sprintf("silence station S%d for %s", 1+o.arg%2, o.d)
	}
	return fmt.Sprintf("silence level %d for %s", o.arg%4, o.d)
}

func (o opSilence) apply(w *world) error {
	var m route.Match
	switch {
	case o.byPoint:
		if len(w.ongoing) == 0 {
			return errSkip
		}
		a := w.ongoing[o.arg%len(w.ongoing)]
		ev := &event.Event{Data: event.Data{StationID: a.station, DeviceSN: a.device, EventCode: a.code}}
		m = manage.PointMatch(ev)
	case o.byStation:
		m.StationIDs = []string{fmt.Sprintf("S%d", 1+o.arg%2)}
	default:
		m.Levels = []int{o.arg % 4}
	}
	now := w.clk.Now()
	s, err := w.run.silences.Add(silence.Silence{Match: m, EndsAt: now.Add(o.d), Author: "sim", Comment: "simulation"})
	if err != nil {
		return err
	}
	w.order++
	w.silences = append(w.silences, silenceRec{id: s.ID, match: m, start: s.StartsAt, end: s.EndsAt, order: w.order})
	return nil
}

// opExpire ends a silence early, as relay silence expire does.
type opExpire struct{ pick int }

func (o opExpire) String() string { return fmt.Sprintf("expire silence #%d", o.pick) }

func (o opExpire) apply(w *world) error {
	now := w.clk.Now()
	var live []int
	for i, s := range w.silences {
		if s.active(now) {
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		return errSkip
	}
	i := live[o.pick%len(live)]
	s, err := w.run.silences.Expire(w.silences[i].id)
	if err != nil {
		return err
	}
	w.silences[i].end = s.End()
	return nil
}

// The scopes of a dead-letter replay or drop.
const (
	scopeAll   = "all"
	scopeSink  = "sink"
	scopeAlarm = "alarm"
	// scopeRow is one alarm's dead letters at one sink: a row of the
	// console's Dead letters page.
	scopeRow = "row"
)

// opDeadLetters replays or drops dead letters, as relay deadletters does:
// every one, those of a sink (by its name now), or those of one alarm.
type opDeadLetters struct {
	drop  bool
	scope string
	arg   int
}

func (o opDeadLetters) String() string {
	verb := "replay"
	if o.drop {
		verb = "drop"
	}
	switch o.scope {
	case scopeSink:
		return fmt.Sprintf("%s the dead letters of %s", verb, dests[o.arg%len(dests)])
	case scopeAlarm:
		return fmt.Sprintf("%s the dead letters of alarm #%d", verb, o.arg)
	case scopeRow:
		return fmt.Sprintf("%s the dead letters of alarm #%d at %s (a row of the console)", verb, o.arg, dests[o.arg%len(dests)])
	}
	return verb + " every dead letter"
}

func (o opDeadLetters) apply(w *world) error {
	var f store.DeadLetterFilter
	switch o.scope {
	case scopeSink:
		name := w.rules.names[dests[o.arg%len(dests)]]
		if name == "" {
			return errSkip
		}
		f.Sink = name
	case scopeAlarm:
		if len(w.alarms) == 0 {
			return errSkip
		}
		f.EventID = w.alarms[o.arg%len(w.alarms)].id
	case scopeRow:
		name := w.rules.names[dests[o.arg%len(dests)]]
		if name == "" || len(w.alarms) == 0 {
			return errSkip
		}
		f.Sink, f.EventID = name, w.alarms[o.arg%len(w.alarms)].id
	}
	st := w.run.store
	if o.drop {
		ds, err := st.DropDeadLetters(f)
		if err != nil {
			return err
		}
		w.mu.Lock()
		for _, d := range ds {
			dest := destOf(d.Sink)
			if w.dropped[dest] == nil {
				w.dropped[dest] = map[string]bool{}
			}
			w.dropped[dest][d.EventID] = true
		}
		w.mu.Unlock()
	} else if ds, _, err := st.ReplayDeadLetters(f); err != nil {
		return err
	} else if len(ds) > 0 {
		w.replays++
	}
	return nil
}

// opAck acknowledges an ongoing alarm from the Slack channel, or takes the
// acknowledgement back, as a person whom the urgent route's ack_by names
// (allowed) or one it does not; or, console set, as an administrator from
// the console, whom ack_by does not limit (as relay ack).
type opAck struct {
	pick    int
	kind    notify.ActionKind
	allowed bool
	console bool
}

func (o opAck) String() string {
	who := "an allowed person"
	switch {
	case o.console:
		who = "an administrator in the console"
	case !o.allowed:
		who = "a person ack_by does not name"
	}
	return fmt.Sprintf("%s of ongoing alarm #%d by %s", o.kind, o.pick, who)
}

func (o opAck) apply(w *world) error {
	if len(w.ongoing) == 0 {
		return errSkip
	}
	a := w.ongoing[o.pick%len(w.ongoing)]
	actor := notify.Actor{Via: "slack", ID: ackBy}
	sink := w.rules.names[destPager]
	switch {
	case o.console:
		// As the console's Acknowledge button acts (console.act).
		actor, sink = notify.Actor{Via: "api", ID: "console:sim"}, ""
	case !o.allowed:
		actor.ID = "U9"
	}
	// A click is delivered twice now and then (a retried envelope): the
	// second changes nothing.
	var res notify.ActionResult
	for range 1 + o.pick%2 {
		r, err := w.run.manager.Act(w.ctx, notify.Action{Kind: o.kind, Sink: sink, Alarms: []string{notify.AlarmRef(a.id)},
			Actor: actor, Ref: fmt.Sprintf("op-%d", w.order)})
		if err != nil {
			return err
		}
		if len(res.Applied) == 0 {
			res = r
		} else if len(r.Applied) > 0 {
			w.ackViolations = append(w.ackViolations, violation{inv: invAckTwice, dest: destPager, origin: a.id,
				detail: fmt.Sprintf("%s of %s delivered twice applied twice", o.kind, a.id)})
		}
	}
	now := w.clk.Now()
	// The urgent route names one person; other alarms anyone may take.
	limited := !o.console && !w.mayAct("U9", a.level)
	switch {
	case res.NotAllowed:
		if o.allowed || !limited {
			w.ackViolations = append(w.ackViolations, violation{inv: invAckRefused, dest: destPager, origin: a.id,
				detail: fmt.Sprintf("%s by %s refused: %s", o.kind, actor.ID, res.Text)})
		}
	case len(res.Applied) > 0:
		if !o.allowed && limited {
			w.ackViolations = append(w.ackViolations, violation{inv: invAckRefused, dest: destPager, origin: a.id,
				detail: fmt.Sprintf("%s by %s, whom ack_by does not name, applied", o.kind, actor.ID)})
		}
		if o.kind == notify.Acknowledge {
			a.acked = append(a.acked, ackSpan{from: now})
		} else if n := len(a.acked); n > 0 && a.acked[n-1].to.IsZero() {
			a.acked[n-1].to = now
		}
		if actor.Via == "slack" {
			w.clicks[a.id] = append(w.clicks[a.id], notify.Action{Kind: o.kind, Sink: sink, Alarms: []string{notify.AlarmRef(a.id)},
				Actor: actor, Ref: fmt.Sprintf("op-%d", w.order)})
		}
	}
	return nil
}

// opStop stops the relay and starts it again on the same state: cleanly
// (drained for the shutdown grace), or by a crash at once, with whatever is
// in flight cut.
type opStop struct{ crash bool }

func (o opStop) String() string {
	if o.crash {
		return "crash and start again"
	}
	return "restart"
}

func (o opStop) apply(w *world) error {
	if err := w.stop(o.crash); err != nil {
		return err
	}
	return w.start()
}

// opCrashNow crashes the relay without letting the previous operation's
// work settle: the cut falls inside deliveries in flight.
type opCrashNow struct{}

func (opCrashNow) String() string { return "crash at once, mid-delivery, and start again" }

func (opCrashNow) apply(w *world) error {
	if err := w.stop(true); err != nil {
		return err
	}
	return w.start()
}

// opLeaseLost is a replica's lease lost (a pause past its TTL, a cut from
// NATS): its fence refuses every send while time passes, then the tenant
// stops without a drain and the next holder starts on the same state.
// Nothing may reach a receiver in between.
type opLeaseLost struct{}

func (opLeaseLost) String() string { return "lease lost for 30s, then taken over" }

func (opLeaseLost) apply(w *world) error {
	w.fenced.Store(true)
	// Its delivery loops stop at the fence: none is counted on to sleep.
	w.run.draining = true
	if err := w.advance(30 * time.Second); err != nil {
		return err
	}
	err := w.stop(true)
	w.fenced.Store(false)
	if err != nil {
		return err
	}
	return w.start()
}

// generate returns the operations of seed, after the state file it starts
// from if it is an upgrade seed.
func generate(seed uint64) []op {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	n := 20 + rng.IntN(40)
	ops := make([]op, 0, n)
	for i := range n {
		op := randomOp(rng)
		if _, crash := op.(opCrashNow); crash && i%2 == 1 {
			// Every other crash at once is a lease lost instead: the
			// seeds' other operations stay as they were.
			op = opLeaseLost{}
		}
		ops = append(ops, op)
	}
	return withUpgrade(seed, ops)
}

func randomOp(rng *rand.Rand) op {
	level := func() int { return rng.IntN(4) }
	switch k := rng.IntN(100); {
	case k < 18:
		return opStart{n: 1, level: level(), device: rng.IntN(len(devices)), code: rng.IntN(len(codes))}
	case k < 21:
		return opStart{n: 4 + rng.IntN(12), level: level(), device: rng.IntN(len(devices)), code: rng.IntN(len(codes))}
	case k < 24:
		return opLate{level: level(), device: rng.IntN(len(devices)), code: rng.IntN(len(codes)), lasted: time.Duration(1+rng.IntN(30)) * time.Minute}
	case k < 38:
		return opEnd{pick: rng.IntN(64), invalid: rng.IntN(6) == 0}
	case k < 44:
		return opRelevel{pick: rng.IntN(64), level: level()}
	case k < 54:
		return opAdvance{d: []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute}[rng.IntN(6)]}
	case k < 58:
		// The sequences of issue 36: shelving then a rise, a click handed
		// over again after refused ones, an acknowledgement of a start
		// that becomes a dead letter; a restart in the middle of some.
		pick, restart := rng.IntN(64), rng.IntN(2) == 0
		switch rng.IntN(4) {
		case 0:
			return opShelveRise{pick: pick, allowed: false, restart: restart}
		case 1:
			return opShelveRise{pick: pick, allowed: true, restart: restart}
		case 2:
			return opClickAgain{pick: pick, restart: restart}
		}
		return opAckRetried{restart: restart}
	case k < 68:
		return opSink{dest: dests[rng.IntN(len(dests))], fault: faults[rng.IntN(len(faults))], n: 1 + rng.IntN(4)}
	case k < 78:
		o := opReload{edit: edits[rng.IntN(len(edits))], arg: rng.IntN(60)}
		if o.edit == editNone {
			o.edit = []string{editNone, editHookUrgent, editResolved, editHookUrgent}[o.arg%4]
		}
		return o
	case k < 83:
		// The console's variants are drawn from the numbers drawn already,
		// so that a seed draws the same stream as before they were added.
		o := opSilence{byStation: rng.IntN(2) == 0, arg: rng.IntN(8), d: time.Duration(5+rng.IntN(60)) * time.Minute}
		o.byPoint = !o.byStation && o.arg >= 6
		return o
	case k < 85:
		return opExpire{pick: rng.IntN(8)}
	case k < 92:
		o := opDeadLetters{drop: rng.IntN(3) == 0, scope: []string{scopeAll, scopeSink, scopeAlarm}[rng.IntN(3)], arg: rng.IntN(64)}
		if o.scope == scopeAlarm && o.arg%4 == 3 {
			o.scope = scopeRow
		}
		return o
	case k < 95:
		if rng.IntN(2) == 0 {
			o := opAck{pick: rng.IntN(64), kind: []notify.ActionKind{notify.Acknowledge, notify.Acknowledge, notify.Unacknowledge}[rng.IntN(3)],
				allowed: rng.IntN(4) != 0}
			o.console = o.allowed && o.pick%4 == 3
			return o
		}
		return opStop{crash: rng.IntN(2) == 0}
	default:
		return opCrashNow{}
	}
}
