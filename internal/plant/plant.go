// Package plant names the faults that the whole-relay simulation plants in
// relay's own code, one at a time, to show that each of its invariants
// catches the fault it exists for (docs/design.md §13): an invariant nobody
// has seen fail is unproven. A package that can break a promise takes a Set
// in its options and asks it at the one place the fault would be; the
// service never sets one, so every fault is off in production.
package plant

// Fault is one planted fault: a promise of relay broken at one place of its
// code, as a careless change would break it.
type Fault string

// The faults, each named for what it breaks.
const (
	// EscalationTrustsTheSet: escalation counts every sink of the alarm's
	// ledger set as one that has the alarm, its start withheld, held down,
	// dead or dropped there included (issue 36, sequence 1).
	EscalationTrustsTheSet Fault = "escalation treats a start not delivered at a step's sink as delivered"
	// LedgerNotUpgraded: alarms recorded before the delivery ledger keep
	// no sink set after an upgrade, so that their ends follow the rules of
	// the moment, and an escalation's join gives them a set of the joined
	// sinks alone (sequence 2).
	LedgerNotUpgraded Fault = "alarms recorded before the delivery ledger keep no sink set after an upgrade"
	// ShelveEveryLevel: a shelving silences its alarm's point at every
	// level, whoever made it, so that a person ack_by allows at a low level
	// keeps the urgent alarm from its sinks (sequence 3).
	ShelveEveryLevel Fault = "a shelving holds its alarm at levels whose routes' ack_by does not name who shelved it"
	// AckIgnoresADeadStart: an acknowledgement enqueued while its start
	// was still tried is sent after that start became a dead letter
	// (sequence 4).
	AckIgnoresADeadStart Fault = "an acknowledgement is sent where its start is a dead letter"
	// RefusalsEvictApplied: refused clicks push applied actions out of an
	// alarm's history, so that a click handed over again is applied again
	// (sequence 6).
	RefusalsEvictApplied Fault = "refused clicks evict the actions applied from an alarm's history"
	// ResolvedIgnored: a sink whose rules say send_resolved: false gets
	// ends.
	ResolvedIgnored Fault = "a sink that says send_resolved: false gets ends"
	// ResolvedOffEverywhere: one sink saying send_resolved: false keeps
	// ends from every sink.
	ResolvedOffEverywhere Fault = "one sink's send_resolved: false keeps ends from every sink"

	// The faults of the promises made before (docs/operate.md, "Delivery
	// guarantees"; docs/rules.md, "Alarm management").

	// DeadStartKeepsNothing: an end goes out while its start is a dead
	// letter.
	DeadStartKeepsNothing Fault = "an end is sent where its start is a dead letter"
	// EndsByTheRulesOfTheMoment: an end is routed by the rules in force,
	// not to where its start went (issue 23).
	EndsByTheRulesOfTheMoment Fault = "an end goes where the rules send it now, not where its start went"
	// EscalationIgnoresTheSet: escalation announces an alarm again where
	// its start was delivered.
	EscalationIgnoresTheSet Fault = "escalation sends the start again to a step's sink that has it"
	// EndIgnoresAWithheldStart: the end of a start alarm management
	// withheld is sent.
	EndIgnoresAWithheldStart Fault = "the end of a withheld start is sent"
	// WithheldUnrecorded: an entry alarm management withholds leaves the
	// outbox without a record.
	WithheldUnrecorded Fault = "a withheld entry leaves no record"
	// RenameLeavesTheOutbox: a renamed sink's waiting entries stay under
	// its old name.
	RenameLeavesTheOutbox Fault = "a renamed sink's waiting entries stay under its old name"
	// HoldNeverEnds: a start held down is held for ever.
	HoldNeverEnds Fault = "a held start is never decided"
	// SilencesIgnored: silences withhold nothing.
	SilencesIgnored Fault = "silences withhold nothing"
	// MaintenanceIgnored: maintenance windows withhold nothing.
	MaintenanceIgnored Fault = "maintenance windows withhold nothing"
	// RemindersIgnoreShelving: reminders go out under a silence or a
	// maintenance window.
	RemindersIgnoreShelving Fault = "reminders go out under a silence or a maintenance window"
	// ChatterUnannounced: the start that would announce chattering is
	// withheld too.
	ChatterUnannounced Fault = "chattering is never announced"
	// AckAppliedTwice: an acknowledgement of an acknowledged alarm
	// applies again.
	AckAppliedTwice Fault = "an acknowledgement of an acknowledged alarm applies again"
	// AckByIgnored: anyone may act, whatever the route's ack_by.
	AckByIgnored Fault = "ack_by is not checked"
	// EscalationIgnoresAck: escalation steps are taken while the alarm is
	// acknowledged.
	EscalationIgnoresAck Fault = "escalation goes on while the alarm is acknowledged"
	// FenceBypassed: the sinks' HTTP client is not fenced (a wiring that
	// forgets notify.FencedTransport).
	FenceBypassed Fault = "the sinks' requests do not pass the fence"
	// EscalationEarly: a step is taken before its after has passed.
	EscalationEarly Fault = "an escalation step is taken before its after"
	// EscalationIgnoresShelving: steps are taken while the alarm is
	// shelved.
	EscalationIgnoresShelving Fault = "escalation goes on while the alarm is shelved"
	// EscalationStalls: the escalation pass takes no step.
	EscalationStalls Fault = "escalation takes no step"
	// RemindersIgnoreAck: reminders go on after an acknowledgement.
	RemindersIgnoreAck Fault = "reminders go on after an acknowledgement"
	// DeadLetterLimitSplitsAnAlarm: the bound on a sink's dead letters
	// (store.Options.DeadLetterLimit) discards the oldest dead letter
	// alone, a start without the ends parked beside it, and leaves the
	// ledger saying the start is dead (issue 37).
	DeadLetterLimitSplitsAnAlarm Fault = "the bound on a sink's dead letters discards a start and keeps its parked ends"
	// PageRefusesALargeEntry: a page of an outbox bounded by bytes
	// (store.PendingPage) does not take its first entry when that entry
	// alone is larger than the bound, which then never leaves.
	PageRefusesALargeEntry Fault = "a page bounded by bytes refuses an entry larger than its bound"
)

// All lists every fault, for the test that plants each in turn.
var All = []Fault{EscalationTrustsTheSet, LedgerNotUpgraded, ShelveEveryLevel, AckIgnoresADeadStart,
	RefusalsEvictApplied, ResolvedIgnored, ResolvedOffEverywhere, DeadStartKeepsNothing, EndsByTheRulesOfTheMoment,
	EscalationIgnoresTheSet, EndIgnoresAWithheldStart, WithheldUnrecorded, RenameLeavesTheOutbox, HoldNeverEnds,
	SilencesIgnored, MaintenanceIgnored, RemindersIgnoreShelving, ChatterUnannounced, AckAppliedTwice, AckByIgnored,
	EscalationIgnoresAck, FenceBypassed, EscalationEarly, EscalationIgnoresShelving, EscalationStalls, RemindersIgnoreAck,
	DeadLetterLimitSplitsAnAlarm, PageRefusesALargeEntry}

// Set is the faults switched on; nil switches none.
type Set map[Fault]bool

// On reports whether f is switched on.
func (s Set) On(f Fault) bool { return s[f] }
