package relaysim

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The destinations of the simulation: a Slack channel (a sink type that
// can be renamed: its destination is the channel), and two webhook
// receivers (which cannot: a new name is a new sink).
const (
	destPager = "pager" // Slack channel C1
	destHook  = "hook"  // webhook receiver A
	destAudit = "audit" // webhook receiver B
)

var dests = []string{destPager, destHook, destAudit}

// pagerNames are the names the Slack sink takes through renames.
var pagerNames = []string{"pager", "oncall", "duty"}

// destOf returns the destination a sink name delivers to.
func destOf(sink string) string {
	if slices.Contains(pagerNames, sink) {
		return destPager
	}
	return sink
}

// namesOf returns every name a destination's sink may take.
func namesOf(dest string) []string {
	if dest == destPager {
		return pagerNames
	}
	return []string{dest}
}

// window is a maintenance window on station, from start to end (UTC, within
// one day).
type window struct {
	station    string
	start, end time.Time
}

// ruleSet is what a simulation's rules file says: which sinks exist under
// which names, which levels each route sends where, holds and maintenance.
type ruleSet struct {
	// names holds the name of each destination's sink; "" when the rules
	// have no sink for it.
	names map[string]string
	// urgent are the levels routed to the Slack sink; rest those routed to
	// the hook; audit gets everything.
	urgent, rest []int
	// hold is the urgent route's hold-down (0: none).
	hold time.Duration
	// digest turns the Slack sink's storm digest on (default threshold).
	digest bool
	// maint is a maintenance window, when set.
	maint *window
	// escalate makes the urgent route escalate to the hook after
	// escalateAfter, when the hook exists.
	escalate bool
	// hookUrgent routes the urgent levels to the hook directly as well,
	// under alarm management (suppress: true), so that escalation's step
	// sink may hold a start withheld there: hookHeld holds it down for
	// hookHold, hookMuted mutes it in the first hour of every day's
	// 08:00 UTC (each run starts then).
	hookUrgent string
	// auditNoResolved makes the audit sink say send_resolved: false.
	auditNoResolved bool
}

// The ways the hook may get the urgent levels directly (ruleSet.hookUrgent).
const (
	hookHeld  = "held"
	hookMuted = "muted"
	// hookHold is the direct route's hold: longer than escalateAfter, so
	// that a step finds the start still held.
	hookHold = 15 * time.Minute
)

// escalateAfter is the urgent route's one escalation step; ackBy the one
// person its ack_by names.
const (
	escalateAfter = 10 * time.Minute
	ackBy         = "U1"
)

func defaultRules() ruleSet {
	return ruleSet{
		names:    map[string]string{destPager: "pager", destHook: destHook, destAudit: destAudit},
		urgent:   []int{0, 1},
		rest:     []int{2, 3},
		digest:   true,
		escalate: true,
	}
}

func (r ruleSet) clone() ruleSet {
	c := r
	c.names = make(map[string]string, len(r.names))
	for k, v := range r.names {
		c.names[k] = v
	}
	c.urgent, c.rest = slices.Clone(r.urgent), slices.Clone(r.rest)
	if r.maint != nil {
		m := *r.maint
		c.maint = &m
	}
	return c
}

// maxAge is every sink's max_age: short, so that an outage dead-letters
// within a run.
const maxAge = 20 * time.Minute

// yaml renders the rules file; hookURL and auditURL are the receivers'.
func (r ruleSet) yaml(hookURL, auditURL string) string {
	var b strings.Builder
	b.WriteString("sinks:\n")
	if n := r.names[destPager]; n != "" {
		fmt.Fprintf(&b, "  - name: %s\n    type: slack\n    channel: C1\n    max_age: %s\n    text: \"{{.Transition}} {{.OriginID}}\"\n", n, maxAge)
		if !r.digest {
			b.WriteString("    digest: false\n")
		}
	}
	if n := r.names[destHook]; n != "" {
		fmt.Fprintf(&b, "  - name: %s\n    type: webhook\n    url: %s\n    secret_env: SIM_HOOK_SECRET\n    max_age: %s\n", n, hookURL, maxAge)
	}
	if n := r.names[destAudit]; n != "" {
		fmt.Fprintf(&b, "  - name: %s\n    type: webhook\n    url: %s\n    secret_env: SIM_HOOK_SECRET\n    max_age: %s\n    concurrency: 1\n", n, auditURL, maxAge)
		if r.auditNoResolved {
			b.WriteString("    send_resolved: false\n")
		}
	}
	if r.hookUrgent == hookMuted {
		b.WriteString("time_intervals:\n  - name: first-hour\n    time_intervals:\n      - times: [{start_time: '08:00', end_time: '09:00'}]\n")
	}
	if w := r.maint; w != nil {
		if r.hookUrgent != hookMuted {
			b.WriteString("time_intervals:\n")
		}
		fmt.Fprintf(&b, "  - name: works\n    time_intervals:\n      - times: [{start_time: '%s', end_time: '%s'}]\n        days_of_month: [%d]\n        months: ['%s']\n        years: ['%d']\n",
			w.start.Format("15:04"), w.end.Format("15:04"), w.start.Day(), strings.ToLower(w.start.Month().String()), w.start.Year())
		fmt.Fprintf(&b, "maintenance:\n  - name: works\n    when: [works]\n    match: { station_ids: [\"%s\"] }\n", w.station)
	}
	// The audit sink is never removed: a rules file needs a route.
	fmt.Fprintf(&b, "routes:\n  - name: everything\n    to: [%s]\n    continue: true\n", r.names[destAudit])
	if n := r.names[destPager]; n != "" && len(r.urgent) > 0 {
		fmt.Fprintf(&b, "  - name: urgent\n    match: { levels: %s }\n    to: [%s]\n    continue: true\n", levels(r.urgent), n)
		b.WriteString("    repeat: 10m\n    ack_by: [slack:" + ackBy + "]\n")
		if h := r.names[destHook]; h != "" && r.escalate {
			fmt.Fprintf(&b, "    escalate:\n      - {after: %s, to: [%s]}\n", escalateAfter, h)
		}
		if r.hold > 0 {
			fmt.Fprintf(&b, "    hold: %s\n", r.hold)
		}
	}
	if n := r.names[destHook]; n != "" && r.hookUrgent != "" && len(r.urgent) > 0 {
		fmt.Fprintf(&b, "  - name: hook-urgent\n    match: { levels: %s }\n    to: [%s]\n    suppress: true\n    continue: true\n", levels(r.urgent), n)
		switch r.hookUrgent {
		case hookHeld:
			fmt.Fprintf(&b, "    hold: %s\n", hookHold)
		case hookMuted:
			b.WriteString("    mute_when: [first-hour]\n")
		}
	}
	if n := r.names[destHook]; n != "" && len(r.rest) > 0 {
		fmt.Fprintf(&b, "  - name: rest\n    match: { levels: %s }\n    to: [%s]\n", levels(r.rest), n)
	}
	return b.String()
}

func levels(ls []int) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = fmt.Sprint(l)
	}
	return "[" + strings.Join(s, ", ") + "]"
}
