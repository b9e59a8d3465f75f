package relaysim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/store"
)

// The invariants the simulation checks, each a label of a violation.
const (
	invEndWithoutStart  = "end without its start delivered before it"
	invStartWithoutEnd  = "delivered start of an ended alarm without its end delivered, withheld or parked"
	invDuplicate        = "delivered more often than the at-least-once window allows"
	invWithheldStartEnd = "withheld start but its end delivered"
	invVanished         = "routed event with no fate (not delivered, digested, withheld, parked nor dropped)"
	invStranded         = "event left in the outbox of a sink the rules no longer define"
	invPending          = "event still pending once the run settled"
	invSilenced         = "start delivered under a silence active since before it was enqueued"
	invFenced           = "request reached a receiver while the tenant's lease was lost"
	invMaintenance      = "start delivered in a maintenance window open since before it was enqueued"
	invReminder         = "reminder sent under a silence or maintenance window"
	invChatter          = "chattering start withheld, but no start of its device and code announced as chattering"
	invAckTwice         = "an acknowledgement delivered twice changed the alarm twice"
	invAckRefused       = "ack_by not obeyed: an allowed person refused, or another let in"
	invEscalatedAcked   = "escalation step taken while the alarm was acknowledged"
	invParkedAlone      = "end parked beside a start that is no dead letter there"
)

// invariants lists every invariant check checks, those of checkSeams too.
var invariants = []string{invEndWithoutStart, invStartWithoutEnd, invDuplicate, invWithheldStartEnd, invVanished, invStranded,
	invPending, invSilenced, invFenced, invMaintenance, invReminder, invChatter, invAckTwice, invAckRefused, invEscalatedAcked,
	invEscalationUnreached, invAckWithoutStart, invEndNotWanted, invEndUnwanted, invSilenceUnfounded, invClickAgain,
	invEscalatedEarly, invEscalatedShelved, invEscalationMissed, invReminderAcked, invParkedAlone}

// violation is one invariant broken at one destination.
type violation struct {
	inv, dest, origin, detail string
	// seq is the numbered sequence of issue 23 that the violation is an
	// instance of, as far as classify can tell; 0 when none.
	seq int
}

func (v violation) String() string {
	s := fmt.Sprintf("%s: %s: %s", v.dest, v.inv, v.detail)
	if v.seq != 0 {
		s += fmt.Sprintf(" [sequence %d: %s]", v.seq, sequences[v.seq])
	}
	return s
}

// sequences are the faults of issue 23 that the simulation must find by
// itself when ends are routed by the rules.
var sequences = map[int]string{
	1: "dead-lettered start, end delivered alone, the start replayed after it",
	2: "dead letters left under a renamed sink's old name",
	3: "replay during the end's retries: end, start, end",
	4: "end routed by the level or routes of the moment, not where its start went",
	5: "a reload's drain of the old sinks without alarm management",
	6: "a reminder under a silence or maintenance window",
	7: "a chattering announcement lost after a cut",
}

func originOf(id string) string {
	if i := strings.LastIndexByte(id, ':'); i >= 0 {
		return id[:i]
	}
	return id
}

// classify names the sequence of issue 23 that v is an instance of, from
// what became of its alarm at its destination and what the run did.
func (w *world) classify(v violation, l ledger, ds []delivery, a *alarm) int {
	if a == nil {
		return 0
	}
	start := event.ID(a.id, event.Start)
	var trs []event.Transition
	for _, d := range ds {
		if d.origin == a.id {
			trs = append(trs, d.tr)
		}
	}
	relevelled := a.level != a.startLevel || w.routeEdits > 0
	switch v.inv {
	case invEndWithoutStart:
		if i := slices.Index(trs, event.Start); i > 0 && slices.Contains(trs[i+1:], trs[0]) {
			return 3
		}
		if _, parked := l.dead[start]; parked || slices.Contains(trs, event.Start) || w.deadLettered(v.dest, start) {
			return 1
		}
		if relevelled {
			return 4
		}
	case invStartWithoutEnd:
		if relevelled {
			return 4
		}
	case invStranded:
		if v.dest == destPager && w.renames > 0 {
			return 2
		}
	case invWithheldStartEnd:
		if w.deadLettered(v.dest, start) {
			return 1
		}
		if w.sinkReloads > 0 {
			return 5
		}
	case invSilenced, invMaintenance:
		if w.sinkReloads > 0 {
			return 5
		}
	case invReminder:
		return 6
	case invChatter:
		return 7
	}
	return 0
}

// delivery is one event a receiver accepted.
type delivery struct {
	id, origin string
	tr         event.Transition
	at         time.Time
	// ongoing is, for a reminder, how long its alarm had been ongoing
	// when the reminder was decided, as its text says (-1 when it says
	// nothing): a request cut by a crash may reach the fake, and be
	// stamped, long after.
	ongoing time.Duration
	// level is the level the event's bytes carry, at a webhook (-1 at
	// the Slack channel, whose text does not say).
	level int
}

var reminderText = regexp.MustCompile(`Reminder, ongoing for ((?:\d+[dhms] ?)+)`)

// reminderAge reads how long the alarm had been ongoing from a reminder's
// text, to the minute; -1 when the text does not say.
func reminderAge(text string) time.Duration {
	m := reminderText.FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	var d time.Duration
	for _, part := range strings.Fields(m[1]) {
		n, err := strconv.Atoi(part[:len(part)-1])
		if err != nil {
			return -1
		}
		unit := map[byte]time.Duration{'d': 24 * time.Hour, 'h': time.Hour, 'm': time.Minute, 's': time.Second}[part[len(part)-1]]
		d += time.Duration(n) * unit
	}
	return d
}

// slackText reads the rules' text of a message: the transition and the
// originId, the simulation's (A001 and up) or a state file's (A901 and up,
// or a number the upstream sends, in testdata/upgrade/v4).
var slackText = regexp.MustCompile(`(?:^|\s)(start|end|invalid) (A?\d+)$`)

// delivered returns what dest's receiver accepted, in order.
func (w *world) delivered(dest string) []delivery {
	out, threads := w.deliveredBefore(dest)
	if dest == destPager {
		w.reminders, w.announced = nil, map[string]bool{}
		// A start is a top-level message with the rules' text; an end (an
		// invalid) is a reply in its start's thread, or, without one, a
		// top-level message with the rules' text.
		origins := threads // ts -> originId of the start posted
		for _, c := range w.slack.Calls() {
			if c.Method != notifytest.MethodPostMessage || c.Error != "" || (c.Status != 0 && c.Status != http.StatusOK) {
				continue
			}
			if c.ThreadTS != "" {
				origin, ok := origins[c.ThreadTS]
				if !ok {
					continue
				}
				tr := event.End
				switch {
				case strings.HasPrefix(c.Text, ":alarm_clock: "):
					w.reminders = append(w.reminders, delivery{id: origin + ":remind", origin: origin, at: c.At, ongoing: reminderAge(c.Text)})
					continue
				case strings.HasPrefix(c.Text, ":heavy_multiplication_x: Cancelled"):
					tr = event.Invalid
				case !strings.HasPrefix(c.Text, ":white_check_mark: Resolved"):
					continue
				}
				out = append(out, delivery{id: event.ID(origin, tr), origin: origin, tr: tr, at: c.At, level: -1})
				continue
			}
			// A start ends with the command that acknowledges it (the
			// sink has no buttons): the rules' text comes before.
			text, _, _ := strings.Cut(c.Text, "\n\nTo acknowledge: ")
			m := slackText.FindStringSubmatch(strings.TrimSpace(text))
			if m == nil {
				continue
			}
			tr := event.Transition(m[1])
			if tr == event.Start {
				origins[c.TS] = m[2]
				for _, a := range c.Attachments {
					if strings.HasPrefix(a.Title, "Chattering") {
						w.announced[m[2]] = true
					}
				}
			}
			out = append(out, delivery{id: event.ID(m[2], tr), origin: m[2], tr: tr, at: c.At, level: -1})
		}
		return out
	}
	rcv := w.hook
	if dest == destAudit {
		rcv = w.audit
	}
	for _, q := range rcv.Requests() {
		if q.Status < 200 || q.Status > 299 {
			continue
		}
		var ev event.Event
		if err := json.Unmarshal(q.Body, &ev); err != nil {
			continue
		}
		secs, _ := strconv.ParseInt(q.Header.Get("Webhook-Timestamp"), 10, 64)
		out = append(out, delivery{id: ev.ID, origin: ev.Data.OriginID, tr: ev.Data.Transition, at: time.Unix(secs, 0), level: ev.Data.Level})
	}
	return out
}

// ledger is what the store says became of dest's events, under every name
// its sink had.
type ledger struct {
	suppressed map[string]string // event id -> reason
	// withheld are the suppressed log's records of starts, by event id:
	// the level the start's bytes carried, and when it was withheld.
	withheld map[string]store.DeadLetter
	dead     map[string]string
	pending  map[string]string // event id -> sink name
}

func (w *world) ledger(dest string) (ledger, error) {
	l := ledger{suppressed: map[string]string{}, withheld: map[string]store.DeadLetter{}, dead: map[string]string{}, pending: map[string]string{}}
	st := w.run.store
	for _, name := range namesOf(dest) {
		sup, err := st.Suppressed(name)
		if err != nil {
			return l, err
		}
		for _, d := range sup {
			l.suppressed[d.EventID] = d.Reason
			l.withheld[d.EventID] = d
		}
		dead, err := st.DeadLetters(name)
		if err != nil {
			return l, err
		}
		for _, d := range dead {
			l.dead[d.EventID] = d.Reason
		}
		pend, err := st.Pending(name, 1<<20)
		if err != nil {
			return l, err
		}
		for _, e := range pend {
			l.pending[e.EventID] = name
		}
	}
	return l, nil
}

// check checks every invariant at every destination, once the run has
// settled.
func (w *world) check() ([]violation, error) {
	out := slices.Clone(w.ackViolations)
	esc, err := w.escalationViolations()
	if err != nil {
		return nil, err
	}
	out = append(out, esc...)
	if n := w.fencedSends(); n > 0 {
		out = append(out, violation{inv: invFenced, dest: "any", detail: fmt.Sprintf("%d requests", n)})
	}
	byID := map[string]*alarm{}
	for _, a := range w.alarms {
		byID[a.id] = a
	}
	for _, dest := range dests {
		l, err := w.ledger(dest)
		if err != nil {
			return nil, err
		}
		ds := w.delivered(dest)
		w.mu.Lock()
		routed, reports, dropped := w.routed[dest], w.reports[dest], w.dropped[dest]
		w.mu.Unlock()
		digested := func(id string) bool {
			return slices.ContainsFunc(reports[id], func(r report) bool { return r.fate == deliver.Digested })
		}
		var found []violation
		bad := func(inv, id, format string, args ...any) {
			found = append(found, violation{inv: inv, dest: dest, origin: originOf(id), detail: fmt.Sprintf(format, args...)})
		}
		// A parked end waits beside its start, a dead letter at the same
		// sink: they are replayed and dropped together, and the bound on a
		// sink's dead letters discards them together.
		for id, why := range l.dead {
			if start := event.ID(originOf(id), event.Start); strings.HasPrefix(why, store.ParkedPrefix) && l.dead[start] == "" {
				bad(invParkedAlone, id, "%s parked (%s), its start %s no dead letter", id, why, start)
			}
		}
		seen := map[string]int{}
		firstAt := map[string]time.Time{}
		firstLevel := map[string]int{}
		for _, d := range ds {
			seen[d.id]++
			if seen[d.id] == 1 {
				firstAt[d.id] = d.at
				firstLevel[d.id] = d.level
			}
			if d.tr == event.Start {
				continue
			}
			start := event.ID(d.origin, event.Start)
			if _, ok := l.suppressed[start]; ok && seen[start] == 0 {
				bad(invWithheldStartEnd, d.id, "%s delivered, its start withheld (%s)", d.id, l.suppressed[start])
			} else if seen[start] == 0 {
				bad(invEndWithoutStart, d.id, "%s delivered at %s, its start not before it", d.id, d.at.Format(time.TimeOnly))
			}
		}
		for id, n := range seen {
			if n > 1+w.cuts {
				bad(invDuplicate, id, "%s delivered %d times with %d cuts", id, n, w.cuts)
			}
		}
		fate := func(id string) string {
			switch {
			case seen[id] > 0:
				return "delivered"
			case digested(id):
				return "digested"
			case l.suppressed[id] != "":
				return "withheld"
			case l.dead[id] != "":
				return "parked"
			case dropped[id]:
				return "dropped"
			}
			return ""
		}
		for _, a := range w.alarms {
			start := event.ID(a.id, event.Start)
			if a.status == event.StatusOngoing || (seen[start] == 0 && !digested(start)) {
				continue
			}
			end := event.ID(a.id, event.End)
			if a.status == event.StatusInvalid {
				end = event.ID(a.id, event.Invalid)
			}
			if fate(end) == "" {
				if _, pending := l.pending[end]; !pending {
					bad(invStartWithoutEnd, start, "%s delivered, %s neither", start, end)
				}
			}
		}
		ids := make([]string, 0, len(routed))
		for id := range routed {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			if fate(id) != "" {
				continue
			}
			if name, ok := l.pending[id]; ok {
				if _, live := w.run.rules.Current().Sink(name); !live {
					bad(invStranded, id, "%s waits in the outbox of %q", id, name)
				} else {
					bad(invPending, id, "%s waits in the outbox of %q", id, name)
				}
				continue
			}
			bad(invVanished, id, "%s routed here at %s", id, routed[id].at.Format(time.TimeOnly))
		}
		for id, at := range firstAt {
			a := byID[strings.TrimSuffix(id, ":start")]
			if a == nil || !strings.HasSuffix(id, ":start") {
				continue
			}
			enq, ok := routed[id]
			escalated := false
			// Or the hook's start was withheld, and what it got is the
			// start escalation enqueued there later, at its level then.
			if t, esc := w.escalatedAt[a.id]; dest == destHook && esc && (!ok || !t.After(enq.at) || l.suppressed[id] != "" && !at.Before(t)) {
				// Escalation reached the hook no later than the rules
				// routed the start there: what was delivered is what it
				// enqueued (the router's later start found the hook in
				// the alarm's set, and enqueued nothing).
				// At the level its bytes carry: a level change at the same
				// instant may have come after the step.
				enq, ok, escalated = enqueued{at: t, level: firstLevel[id]}, true, true
			}
			if !ok {
				continue
			}
			for _, s := range w.silences {
				before := enq.order > s.order
				if escalated {
					before = s.start.Before(enq.at)
				}
				if s.matchesAt(a, enq.level) && before && at.Add(time.Second).Before(s.end) {
					bad(invSilenced, id, "%s enqueued at %s, delivered at %s, silence %s from %s to %s", id,
						enq.at.Format(time.TimeOnly), at.Format(time.TimeOnly), s.id, s.start.Format(time.TimeOnly), s.end.Format(time.TimeOnly))
				}
			}
			for _, m := range w.windows {
				if m.station == a.station && !enq.at.Before(m.start) && at.Add(time.Second).Before(m.end) {
					bad(invMaintenance, id, "%s enqueued at %s, delivered at %s, window on %s from %s to %s", id,
						enq.at.Format(time.TimeOnly), at.Format(time.TimeOnly), m.station, m.start.Format(time.TimeOnly), m.end.Format(time.TimeOnly))
				}
			}
		}
		if dest == destPager {
			w.checkReminders(bad, byID)
			w.checkChatter(bad, l, byID, digested)
		}
		if err := w.checkSeams(dest, bad, l, seen, firstAt, routed, reports, fate); err != nil {
			return nil, err
		}
		for _, v := range found {
			v.seq = w.classify(v, l, ds, byID[v.origin])
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b violation) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}

// matches reports whether the silence selects a's start.
func (s silenceRec) matches(a *alarm) bool { return s.matchesAt(a, a.startLevel) }

// matchesAt reports whether the silence selects a start of a at level.
func (s silenceRec) matchesAt(a *alarm, level int) bool {
	m := s.match
	return (len(m.StationIDs) == 0 || slices.Contains(m.StationIDs, a.station)) &&
		(len(m.DeviceSNs) == 0 || slices.Contains(m.DeviceSNs, a.device)) &&
		(len(m.EventCodes) == 0 || slices.Contains(m.EventCodes, a.code)) &&
		(len(m.Levels) == 0 || slices.Contains(m.Levels, level))
}

// checkReminders checks that no reminder went out for an alarm while a
// silence or a maintenance window matching it was active.
func (w *world) checkReminders(bad func(inv, id, format string, args ...any), byID map[string]*alarm) {
	for _, r := range w.reminders {
		a := byID[r.origin]
		if a == nil {
			continue
		}
		if r.ongoing >= 0 {
			// When it was decided, to the minute its text rounds to.
			if decided := a.occurred.Add(r.ongoing + 30*time.Second); decided.Before(r.at) {
				r.at = decided
			}
		}
		for _, s := range w.silences {
			// A reminder decided before the silence began, or before the
			// alarm's level changed into the silence's, may wait its turn at
			// the channel (its pace, a Retry-After) a while after: one tick
			// is allowed.
			decided := r.at.Add(-manage.TickEvery)
			if s.matchesAt(a, a.levelAt(r.at)) && s.matchesAt(a, a.levelAt(decided)) &&
				r.at.After(s.start.Add(manage.TickEvery)) && r.at.Before(s.end) {
				bad(invReminder, r.id, "reminder of %s at %s, silence %s from %s to %s", a.id, r.at.Format(time.TimeOnly),
					s.id, s.start.Format(time.TimeOnly), s.end.Format(time.TimeOnly))
			}
		}
		for _, m := range w.windows {
			if m.station == a.station && r.at.After(m.start.Add(manage.TickEvery)) && r.at.Before(m.end) {
				bad(invReminder, r.id, "reminder of %s at %s, window on %s from %s to %s", a.id, r.at.Format(time.TimeOnly),
					m.station, m.start.Format(time.TimeOnly), m.end.Format(time.TimeOnly))
			}
		}
	}
}

// checkChatter checks that a device and event code whose starts are
// withheld as chattering had one of its starts announced as chattering,
// unless one of them was withheld for another reason, joined a digest (the
// announcement may have gone there) or was dead-lettered (the announcement
// is then parked with its reason).
func (w *world) checkChatter(bad func(inv, id, format string, args ...any), l ledger, byID map[string]*alarm, digested func(string) bool) {
	type key struct{ device, code string }
	excused := map[key]bool{}
	for _, a := range w.alarms {
		start := event.ID(a.id, event.Start)
		k := key{a.device, a.code}
		if w.announced[a.id] || digested(start) || w.deadLettered(destPager, start) ||
			(l.suppressed[start] != "" && l.suppressed[start] != manage.ReasonChattering) {
			excused[k] = true
		}
	}
	var ids []string
	for id, reason := range l.suppressed {
		if reason == manage.ReasonChattering && strings.HasSuffix(id, ":start") {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		a := byID[originOf(id)]
		if a == nil || excused[key{a.device, a.code}] {
			continue
		}
		bad(invChatter, id, "%s withheld as chattering, no start of %s %s announced", id, a.device, a.code)
		excused[key{a.device, a.code}] = true
	}
}

// escalationViolations checks, from the escalation steps the store
// recorded, that none was taken while its alarm was acknowledged; it
// notes when each alarm was first escalated (escalatedAt).
func (w *world) escalationViolations() ([]violation, error) {
	var out []violation
	w.escalatedAt = map[string]time.Time{}
	for _, a := range w.alarms {
		raw, err := w.run.store.Get("escalate", a.id)
		if err != nil || raw == nil {
			if err != nil {
				return nil, err
			}
			continue
		}
		var es struct {
			Done map[string]time.Time `json:"done"`
		}
		if err := json.Unmarshal(raw, &es); err != nil {
			return nil, fmt.Errorf("escalation state of %s: %w", a.id, err)
		}
		for _, at := range es.Done {
			if t, ok := w.escalatedAt[a.id]; !ok || at.Before(t) {
				w.escalatedAt[a.id] = at
			}
		}
		if len(a.acked) == 0 {
			continue
		}
		for step, at := range es.Done {
			for _, sp := range a.acked {
				if at.After(sp.from) && (sp.to.IsZero() || at.Before(sp.to)) {
					out = append(out, violation{inv: invEscalatedAcked, dest: destHook, origin: a.id,
						detail: fmt.Sprintf("step %s at %s, acknowledged from %s", step, at.Format(time.TimeOnly), sp.from.Format(time.TimeOnly))})
				}
			}
		}
	}
	return out, nil
}
