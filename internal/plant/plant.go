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
	// JoinForgetsTheLedger: escalating an alarm recorded before the
	// delivery ledger gives it a set of the escalated sinks alone, and its
	// end reaches none of the sinks its start went to (sequence 2).
	JoinForgetsTheLedger Fault = "an escalation's join forgets where the start of an alarm from before the ledger went"
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
)

// All lists every fault, for the test that plants each in turn.
var All = []Fault{EscalationTrustsTheSet, JoinForgetsTheLedger, ShelveEveryLevel, AckIgnoresADeadStart,
	RefusalsEvictApplied, ResolvedIgnored}

// Set is the faults switched on; nil switches none.
type Set map[Fault]bool

// On reports whether f is switched on.
func (s Set) On(f Fault) bool { return s[f] }
