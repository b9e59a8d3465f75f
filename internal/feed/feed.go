// Package feed writes relay demo's live feed: one line per alarm transition,
// printed once every sink it is routed to has it (or has given up on it, or
// alarm management withheld it or put it in a digest), naming those sinks,
// and a summary when the demo stops.
//
// The feed hears of transitions from the poller (service.Options.OnEvents)
// and of deliveries from the delivery loop (service.Options.OnReport); the
// rules say which sinks each transition waits for. A start that a route
// holds down (manage.Hold) does not hold its line back: the line marks it
// held, and a second line tells what became of it once the hold is over. A
// start that escalation sends on to more sinks (a route's escalate) gets a
// second line too, and its end waits for those sinks. An acknowledgement, or
// taking one back, gets a line of its own, heard of from its deliveries
// only: alarm management, not the poller, makes it. Every text from the
// upstream and from people is printed through termtext.Escape.
package feed

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/termtext"
)

// DefaultWait is how long a transition's line waits for its deliveries when
// Options.Wait is zero.
const DefaultWait = 10 * time.Second

// AckWait is how long an acknowledgement's line waits, after the first sink
// reported on it, for the other sinks of its alarm: only the sinks that carry
// acknowledgements get one, and the feed cannot tell which those are. Run
// prints it at its first look after that.
const AckWait = time.Second

// Options configure a Feed.
type Options struct {
	// Rules say which sinks each transition goes to, and their types; they
	// must be the rules the service runs with.
	Rules *route.Rules
	// Wait is how long a transition's line waits for its deliveries before
	// it is printed with the sinks that do not have it yet marked pending
	// (default DefaultWait): a sink that is down must not hide the feed.
	Wait time.Duration
	// Clock tells the time (default the wall clock).
	Clock clock.Clock
	// Location is the zone of the times printed (default time.Local).
	Location *time.Location
}

// Feed collects transitions and deliveries and writes one line per
// transition. Its methods may be called from any goroutine.
type Feed struct {
	w    io.Writer
	opts Options

	mu      sync.Mutex
	waiting []*transition               // not printed yet, in the order they were heard of
	byID    map[string]*transition      // the same, by event id
	printed map[string]bool             // event ids whose line is out
	early   map[string][]deliver.Report // reports that came before their event
	// held are the transitions printed while a sink held them down, by
	// event id, until every such sink reported.
	held map[string]*transition
	// heldStarts are, per sink, the alarms whose start it holds down and
	// has not reported on yet, with the hold: their later transitions wait
	// behind the start.
	heldStarts map[string]map[string]time.Duration
	// alarms are the alarms whose start was heard of and whose end was not,
	// by originId: what escalation and acknowledgement lines need.
	alarms map[string]*alarm
	// acks are the acknowledgement lines not printed yet, by event id.
	acks      map[string]*transition
	counts    map[event.Transition]int
	total     int
	escalated int // starts escalation sent on, one per sink
	sinks     map[string]*sinkCount
}

// alarm is what the feed keeps of an ongoing alarm: its start, and every
// sink it went to, those escalation sent it to included.
type alarm struct {
	start event.Event
	sinks []string
	// escalating are the sinks escalation sent its start to that have not
	// said what became of it yet.
	escalating map[string]bool
}

// transition is one event and what its sinks said of it so far.
type transition struct {
	ev    event.Event
	heard time.Time
	sinks []string
	last  map[string]deliver.Report // the latest report of each sink
	// held are the sinks that hold the event down, with the hold, until
	// they report on it.
	held map[string]time.Duration
}

// sinkCount is what the summary says of one sink.
type sinkCount struct {
	routed, delivered, digested, withheld, failed, dead int
}

// New returns a Feed writing to w.
func New(w io.Writer, opts Options) *Feed {
	if opts.Wait <= 0 {
		opts.Wait = DefaultWait
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Location == nil {
		opts.Location = time.Local
	}
	f := &Feed{
		w: w, opts: opts,
		byID: map[string]*transition{}, printed: map[string]bool{}, early: map[string][]deliver.Report{},
		held: map[string]*transition{}, heldStarts: map[string]map[string]time.Duration{},
		alarms: map[string]*alarm{}, acks: map[string]*transition{},
		counts: map[event.Transition]int{}, sinks: map[string]*sinkCount{},
	}
	for _, s := range opts.Rules.Sinks {
		f.sinks[s.Name] = &sinkCount{}
	}
	return f
}

// Legend writes what the columns and marks of the feed's lines mean.
func (f *Feed) Legend() {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(f.w, `Each line is one alarm transition, printed once every sink it goes to has it: when it
started or ended upstream, START, END or INVALID (cancelled upstream), level, station / device,
alarm, how long it lasted, then → each sink as type:name, marked
  ✓ delivered   ✗ dead-lettered (the log says why)   … not delivered within %s, still retried
  ≡ sent in the sink's storm digest   ⊘ withheld by alarm management, with the reason (hold,
  silence, maintenance, muted, inhibited, chattering)   ⏸ held down: the start waits out its
  route's hold; a second line, "after its hold", tells what became of it
A start that nobody acknowledged in time gets a second line, "escalated", for each sink its
route's escalation sends it to; ACK and UNACK lines say who acknowledged an alarm (relay ack,
a chat's button), or took that back, and which sinks have it.
Control characters in the upstream's text are shown escaped (\x1b, \r, \u202e).
Stopping (Ctrl-C, or the end of --for) prints a summary.

`, termtext.Duration(f.opts.Wait))
}

// Events takes transitions as the poller produced them (fits
// service.Options.OnEvents).
func (f *Feed) Events(evs []event.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.opts.Clock.Now()
	for i := range evs {
		ev := evs[i]
		f.total++
		f.counts[ev.Data.Transition]++
		tr := &transition{ev: ev, heard: now, sinks: f.opts.Rules.SinksFor(&ev), last: map[string]deliver.Report{},
			held: map[string]time.Duration{}}
		f.track(tr)
		for _, s := range tr.sinks {
			f.sink(s).routed++
		}
		for _, r := range f.early[ev.ID] {
			tr.last[r.Sink] = r
		}
		delete(f.early, ev.ID)
		for _, s := range tr.sinks {
			if r, ok := tr.last[s]; ok && r.Fate != deliver.Retrying {
				continue
			}
			origin := ev.Data.OriginID
			if ev.Data.Transition == event.Start {
				if hold := manage.Hold(f.opts.Rules, &ev, s, now); hold > 0 {
					tr.held[s] = hold
					if f.heldStarts[s] == nil {
						f.heldStarts[s] = map[string]time.Duration{}
					}
					f.heldStarts[s][origin] = hold
				}
			} else if hold, ok := f.heldStarts[s][origin]; ok {
				tr.held[s] = hold
			}
		}
		if tr.settled() {
			f.print(tr)
			continue
		}
		f.waiting = append(f.waiting, tr)
		f.byID[ev.ID] = tr
	}
}

// track keeps what tr's alarm's later lines need: a start's sinks, until
// its end, which also waits for the sinks escalation sent the start to.
func (f *Feed) track(tr *transition) {
	origin := tr.ev.Data.OriginID
	a := f.alarms[origin]
	if tr.ev.Data.Transition == event.Start {
		if a == nil {
			a = &alarm{escalating: map[string]bool{}}
			f.alarms[origin] = a
		}
		a.start = tr.ev
		for _, s := range tr.sinks {
			if !slices.Contains(a.sinks, s) {
				a.sinks = append(a.sinks, s)
			}
		}
		return
	}
	if a == nil {
		return
	}
	for _, s := range a.sinks {
		if !slices.Contains(tr.sinks, s) {
			tr.sinks = append(tr.sinks, s)
		}
	}
	delete(f.alarms, origin)
}

// Report takes what became of one outbox entry (fits
// service.Options.OnReport).
func (f *Feed) Report(r deliver.Report) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := r.Entry.Transition; t == event.Ack || t == event.Unack {
		f.ackReport(r)
		return
	}
	if f.escalation(r) {
		return
	}
	f.count(r)
	if r.Fate != deliver.Retrying && r.Entry.Transition == event.Start {
		delete(f.heldStarts[r.Sink], r.Entry.OriginID)
	}
	id := r.Entry.EventID
	if tr, ok := f.held[id]; ok {
		if _, held := tr.held[r.Sink]; held && r.Fate != deliver.Retrying {
			f.afterHold(tr, r)
			return
		}
	}
	tr, ok := f.byID[id]
	switch {
	case ok:
		if !slices.Contains(tr.sinks, r.Sink) {
			// Escalation sent the start on before its line was out.
			tr.sinks = append(tr.sinks, r.Sink)
			f.sink(r.Sink).routed++
			if a := f.alarms[r.Entry.OriginID]; a != nil && r.Entry.Transition == event.Start {
				a.sinks = append(a.sinks, r.Sink)
			}
		}
		tr.last[r.Sink] = r
		if tr.settled() {
			f.print(tr)
			f.forget(tr)
		}
	case !f.printed[id]:
		// The delivery loop can be quicker than the poller's callback.
		f.early[id] = append(f.early[id], r)
	}
}

// count adds r's fate to its sink's row of the summary.
func (f *Feed) count(r deliver.Report) {
	c := f.sink(r.Sink)
	switch r.Fate {
	case deliver.Delivered:
		c.delivered++
	case deliver.Digested:
		c.digested++
	case deliver.Suppressed:
		c.withheld++
	case deliver.Retrying:
		c.failed++
	case deliver.DeadLettered:
		c.dead++
	}
}

// escalation takes r when it is about a start that escalation sent on to
// r's sink, after the start's line was out, and writes what became of it
// there once that is settled. It reports whether r was such a report.
func (f *Feed) escalation(r deliver.Report) bool {
	if r.Entry.Transition != event.Start {
		return false
	}
	if _, waiting := f.byID[r.Entry.EventID]; waiting || !f.printed[r.Entry.EventID] {
		return false
	}
	a, ok := f.alarms[r.Entry.OriginID]
	if !ok || (slices.Contains(a.sinks, r.Sink) && !a.escalating[r.Sink]) {
		return false
	}
	if !slices.Contains(a.sinks, r.Sink) {
		a.sinks = append(a.sinks, r.Sink)
		a.escalating[r.Sink] = true
		f.sink(r.Sink).routed++
	}
	f.count(r)
	if r.Fate == deliver.Retrying {
		return true
	}
	delete(a.escalating, r.Sink)
	f.escalated++
	var b strings.Builder
	fmt.Fprintf(&b, "%s  → %s %s", f.head(&transition{ev: a.start}), symbol(r, false, false), f.typed(r.Sink))
	if after, ok := manage.EscalationAfter(f.opts.Rules, &a.start, r.Sink); ok {
		fmt.Fprintf(&b, " escalated: unacknowledged for %s", termtext.Duration(after))
	} else {
		b.WriteString(" announced later")
	}
	switch r.Fate {
	case deliver.Suppressed:
		fmt.Fprintf(&b, " (%s)", termtext.Escape(r.Reason))
	case deliver.Digested:
		b.WriteString(" (digest)")
	}
	if r.Attempts > 1 {
		fmt.Fprintf(&b, " (%d attempts)", r.Attempts)
	}
	io.WriteString(f.w, b.String()+"\n")
	return true
}

// ackReport takes r, about an acknowledgement or taking one back: its line
// goes out once every sink of its alarm reported on it, or AckWait after
// the first did. A report after the line is only counted.
func (f *Feed) ackReport(r deliver.Report) {
	id := r.Entry.EventID
	tr, ok := f.acks[id]
	if !ok && !f.printed[id] {
		var ev event.Event
		if err := json.Unmarshal(r.Entry.Body, &ev); err != nil {
			ev.ID, ev.Data.OriginID, ev.Data.Transition = id, r.Entry.OriginID, r.Entry.Transition
		}
		tr = &transition{ev: ev, heard: f.opts.Clock.Now(), last: map[string]deliver.Report{}, held: map[string]time.Duration{}}
		f.acks[id] = tr
		f.counts[r.Entry.Transition]++
	}
	f.count(r)
	if tr == nil {
		// Its line is out: the sink's row of the summary counts it.
		f.sink(r.Sink).routed++
		return
	}
	if !slices.Contains(tr.sinks, r.Sink) {
		tr.sinks = append(tr.sinks, r.Sink)
		f.sink(r.Sink).routed++
	}
	tr.last[r.Sink] = r
	a, ok := f.alarms[tr.ev.Data.OriginID]
	if ok && tr.settled() && !slices.ContainsFunc(a.sinks, func(s string) bool { return !slices.Contains(tr.sinks, s) }) {
		f.printAck(tr)
	}
}

// printAck writes an acknowledgement's line and forgets it.
func (f *Feed) printAck(tr *transition) {
	delete(f.acks, tr.ev.ID)
	f.printed[tr.ev.ID] = true
	io.WriteString(f.w, f.line(tr)+"\n")
}

// afterHold writes what became of tr at a sink that held it down, once the
// hold is over, and forgets tr when no sink holds it any longer. The end of
// an alarm withheld by its hold gets no line: its start's says so.
func (f *Feed) afterHold(tr *transition, r deliver.Report) {
	hold := tr.held[r.Sink]
	delete(tr.held, r.Sink)
	tr.last[r.Sink] = r
	if len(tr.held) == 0 {
		delete(f.held, tr.ev.ID)
	}
	if r.Fate == deliver.Suppressed && r.Reason == manage.ReasonHold && tr.ev.Data.Transition != event.Start {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s  → %s %s after its %s hold", f.head(tr), symbol(r, false, false), f.typed(r.Sink), termtext.Duration(hold))
	switch {
	case r.Fate == deliver.Delivered:
		b.WriteString(": still ongoing, sent")
	case r.Fate == deliver.Suppressed && r.Reason == manage.ReasonHold:
		b.WriteString(": over within it, neither its start nor its end sent (hold)")
	case r.Fate == deliver.Suppressed:
		fmt.Fprintf(&b, " (%s)", termtext.Escape(r.Reason))
	case r.Fate == deliver.Digested:
		b.WriteString(" (digest)")
	}
	if r.Attempts > 1 {
		fmt.Fprintf(&b, " (%d attempts)", r.Attempts)
	}
	io.WriteString(f.w, b.String()+"\n")
}

// Run prints the lines that waited Options.Wait for their deliveries, and
// the acknowledgements that waited AckWait, until ctx is done.
func (f *Feed) Run(ctx context.Context) {
	every := max(f.opts.Wait/4, 10*time.Millisecond)
	t := f.opts.Clock.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			f.printOverdue(f.opts.Clock.Now().Add(-f.opts.Wait))
			t.Reset(every)
		}
	}
}

// printOverdue prints the lines of the transitions heard of before cutoff,
// and of the acknowledgements whose AckWait is over.
func (f *Feed) printOverdue(cutoff time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.printAcksBefore(f.opts.Clock.Now().Add(-AckWait))
	for len(f.waiting) > 0 && !f.waiting[0].heard.After(cutoff) {
		tr := f.waiting[0]
		f.print(tr)
		f.forget(tr)
	}
}

// printAcksBefore prints the acknowledgement lines whose first report came
// before cutoff, in that order.
func (f *Feed) printAcksBefore(cutoff time.Time) {
	var due []*transition
	for _, tr := range f.acks {
		if !tr.heard.After(cutoff) {
			due = append(due, tr)
		}
	}
	slices.SortFunc(due, func(a, b *transition) int { return a.heard.Compare(b.heard) })
	for _, tr := range due {
		f.printAck(tr)
	}
}

// Close prints the lines still waiting, as they stand, then the summary:
// transitions by kind and, per sink, deliveries, failed attempts, dead
// letters and the events left undelivered, and the escalations and
// acknowledgements when there were some. Call it once the service has
// stopped.
func (f *Feed) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.waiting) > 0 {
		tr := f.waiting[0]
		f.print(tr)
		f.forget(tr)
	}
	f.printAcksBefore(f.opts.Clock.Now())
	fmt.Fprintf(f.w, "\nsummary: %d transition%s (%d start, %d end, %d invalid)\n", f.total, termtext.Plural(f.total),
		f.counts[event.Start], f.counts[event.End], f.counts[event.Invalid])
	names := make([]string, len(f.opts.Rules.Sinks))
	width := len("SINK")
	for i, s := range f.opts.Rules.Sinks {
		names[i] = s.Type + ":" + s.Name
		width = max(width, len(names[i]))
	}
	fmt.Fprintf(f.w, "  %-*s  DELIVERED  DIGESTED  WITHHELD  FAILED ATTEMPTS  DEAD LETTERS  NOT DELIVERED\n", width, "SINK")
	for i, s := range f.opts.Rules.Sinks {
		c := f.sinks[s.Name]
		fmt.Fprintf(f.w, "  %-*s  %9d  %8d  %8d  %15d  %12d  %13d\n", width, names[i], c.delivered, c.digested, c.withheld,
			c.failed, c.dead, max(c.routed-c.delivered-c.digested-c.withheld-c.dead, 0))
	}
	if acks, unacks := f.counts[event.Ack], f.counts[event.Unack]; f.escalated+acks+unacks > 0 {
		fmt.Fprintf(f.w, "  %d start%s escalated to a sink, %d acknowledgement%s, %d taken back\n", f.escalated,
			termtext.Plural(f.escalated), acks, termtext.Plural(acks), unacks)
	}
}

func (f *Feed) sink(name string) *sinkCount {
	c, ok := f.sinks[name]
	if !ok {
		c = &sinkCount{}
		f.sinks[name] = c
	}
	return c
}

// forget drops tr from the waiting transitions once its line is out.
func (f *Feed) forget(tr *transition) {
	delete(f.byID, tr.ev.ID)
	for i, w := range f.waiting {
		if w == tr {
			f.waiting = append(f.waiting[:i], f.waiting[i+1:]...)
			break
		}
	}
}

// settled reports whether every sink of tr is done with it (delivered it,
// gave up on it, withheld it or put it in its digest) or holds it down.
func (tr *transition) settled() bool {
	for _, s := range tr.sinks {
		if r, ok := tr.last[s]; !ok || r.Fate == deliver.Retrying {
			if _, held := tr.held[s]; !held {
				return false
			}
		}
	}
	return true
}

// print writes tr's line and remembers that it is out, and, while sinks
// still hold it down, that their reports are awaited.
func (f *Feed) print(tr *transition) {
	f.printed[tr.ev.ID] = true
	for s := range tr.held {
		if r, ok := tr.last[s]; ok && r.Fate != deliver.Retrying {
			delete(tr.held, s)
		}
	}
	if len(tr.held) > 0 {
		f.held[tr.ev.ID] = tr
	}
	io.WriteString(f.w, f.line(tr)+"\n")
}

// line is tr's line, such as
//
//	08:00:00  START    urgent  North Field / INV-0042  E1023 Grid overvoltage  → ✓ nats:bus ✓ webhook:ops
func (f *Feed) line(tr *transition) string {
	var b strings.Builder
	b.WriteString(f.head(tr))
	b.WriteString("  →")
	if len(tr.sinks) == 0 {
		b.WriteString(" no sink (no route matches)")
	}
	for _, name := range tr.sinks {
		r, ok := tr.last[name]
		pending := !ok || r.Fate == deliver.Retrying
		hold, held := tr.held[name]
		fmt.Fprintf(&b, " %s %s", symbol(r, pending, held), f.typed(name))
		switch {
		case pending && held:
			fmt.Fprintf(&b, " (hold %s)", termtext.Duration(hold))
		case pending:
		case r.Fate == deliver.Suppressed:
			fmt.Fprintf(&b, " (%s)", termtext.Escape(r.Reason))
		}
		if !pending && r.Attempts > 1 {
			fmt.Fprintf(&b, " (%d attempts)", r.Attempts)
		}
	}
	return b.String()
}

// head is the part of tr's line before its sinks: when, what, where.
func (f *Feed) head(tr *transition) string {
	d := &tr.ev.Data
	at := tr.ev.Time
	if t, err := time.Parse(time.RFC3339Nano, tr.ev.Time); err == nil {
		at = t.In(f.opts.Location).Format(time.TimeOnly)
	}
	station := d.StationName
	if strings.TrimSpace(station) == "" {
		station = d.StationID
	}
	alarm := strings.TrimSpace(d.EventCode + " " + d.EventDesc)
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-7s  %-6s  %s / %s  %s", termtext.Escape(at), strings.ToUpper(string(d.Transition)), d.LevelName,
		termtext.Escape(station), termtext.Escape(d.DeviceSN), termtext.Escape(alarm))
	if d.Transition != event.Start && d.DurationMs > 0 {
		fmt.Fprintf(&b, "  after %s", termtext.Duration(time.Duration(d.DurationMs)*time.Millisecond))
	}
	if d.Inferred {
		b.WriteString("  inferred")
	}
	if a := d.Ack; a != nil && (d.Transition == event.Ack || d.Transition == event.Unack) {
		who := a.By
		if a.Name != "" && a.Name != a.By {
			who = a.Name + " (" + a.By + ")"
		}
		fmt.Fprintf(&b, "  by %s via %s", termtext.Escape(who), termtext.Escape(a.Via))
		if a.Comment != "" {
			fmt.Fprintf(&b, ": %s", termtext.Escape(a.Comment))
		}
	}
	return b.String()
}

// typed names a sink as type:name.
func (f *Feed) typed(name string) string {
	typ := "?"
	if s, ok := f.opts.Rules.Sink(name); ok {
		typ = s.Type
	}
	return typ + ":" + name
}

// symbol marks what a sink did with a transition: r's fate, or, while it is
// pending, ⏸ when the sink holds it down and … otherwise.
func symbol(r deliver.Report, pending, held bool) string {
	switch {
	case pending && held:
		return "⏸"
	case pending:
		return "…"
	case r.Fate == deliver.Delivered:
		return "✓"
	case r.Fate == deliver.DeadLettered:
		return "✗"
	case r.Fate == deliver.Digested:
		return "≡"
	case r.Fate == deliver.Suppressed:
		return "⊘"
	}
	return "…"
}
