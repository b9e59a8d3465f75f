package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/plant"
	"github.com/relay-energy/relay/internal/tracing"
)

// Apply records one poll result: new alarm records, the events their
// originId/status pairs produce (an end or invalid with no start yet produces
// the start first), the outbox entries route names for each event, and the
// batch's watermarks, all in one transaction.
//
// A pair produces its event the first time it is seen and never again. The
// first terminal status of an alarm wins: a later end, invalid or start of
// it is recorded and produces nothing, and a real end after an inferred one
// only corrects the recovery time. An end or invalid of an alarm the store
// has never seen is history and produces nothing when its batch is the
// FirstContact, or when it recovered longer than the retention ago (it may
// have been known, then pruned); otherwise it is new, whatever its stamps,
// and produces its start and end. With BootstrapRecord, the starts of the
// alarms of FirstListing batches are recorded without events until a
// CompleteCurrent batch has been applied (that batch included).
//
// Observed records are applied in order, then the inferred ends. A nil route
// sends events to no sink. A batch that changes nothing writes nothing. On an
// error, or a panic in route, nothing of the batch is written; the same batch
// can be applied again. A zero b.DetectedAt means now.
func (s *Store) Apply(ctx context.Context, b Batch, route Router) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("dedupe: apply: %w", err)
	}
	a := &applier{s: s, ctx: ctx, batch: &b, route: route, now: s.clock.Now(), detectedAt: b.DetectedAt}
	if a.detectedAt.IsZero() {
		a.detectedAt = a.now
	}
	a.historyBefore = a.now.Add(-s.retention)
	if b.HistoryBefore.After(a.historyBefore) {
		a.historyBefore = b.HistoryBefore
	}
	a.detected = toMs(a.detectedAt)
	a.traces = s.tracer.Transitions(ctx)
	err := s.update(a.run)
	a.traces.End(err)
	if err != nil {
		return Result{}, fmt.Errorf("dedupe: apply: %w", err)
	}
	if a.completesBootstrap {
		s.bootstrapped.Store(true)
	}
	for k, n := range a.dropped {
		s.countDropped(k[0], k[1], n)
	}
	for i := range a.result.Events {
		s.events.add(&a.result.Events[i], a.bodies[i], a.refs[i])
	}
	for sink := range a.sinks {
		s.signal(sink)
	}
	return a.result, nil
}

// applier is the work of one Apply inside its transaction.
type applier struct {
	s     *Store
	ctx   context.Context
	batch *Batch
	route Router
	// traces are the traces of the batch's transitions; nil when tracing
	// is off.
	traces     *tracing.Transitions
	now        time.Time
	detectedAt time.Time
	detected   int64 // detectedAt in ms
	// historyBefore is now less the retention, or the batch's
	// HistoryBefore if later: an unknown alarm that recovered before it may
	// have been known and pruned, and is history.
	historyBefore time.Time

	// silentStarts is set in record mode until the bootstrap is complete.
	silentStarts       bool
	completesBootstrap bool

	tx                             *txn
	alarms, ongoing, ended, outbox *bucket
	// log is the record log, holding the records of ongoing alarms.
	log *logTx
	// journal is the journal's bucket, got at its first use (journalBucket).
	journal *bucket
	// jpend are the journal entries of the batch's starts, written in key
	// order at its end (flushJournal).
	jpend []journalPut
	// lookOngoing and lookAlarms are cursors over ongoing and alarms
	// reused for every record, the second made at its first use: a Get
	// makes a new cursor each time.
	lookOngoing, lookAlarms *cursor
	sinks                   map[string]*bucket // outbox buckets written to
	// sets are the ledger's sink sets; current the sinks of the rules last
	// adopted (nil: every sink counts as current).
	sets    *sinkSets
	current map[string]bool
	// dropped counts the entries recorded as dropped, by sink and kind.
	dropped map[[2]string]int
	delta   map[string]int
	changed bool
	key     []byte // lookup buffer, never stored
	result  Result
	// refs counts the outbox entries of each event of result.Events, and
	// bodies holds its bytes.
	refs   []int
	bodies [][]byte
}

func (a *applier) run(tx *txn, delta map[string]int) error {
	a.delta = delta
	a.tx = tx
	a.alarms = tx.Bucket(bucketAlarms)
	a.ongoing = tx.Bucket(bucketOngoing)
	a.lookOngoing = a.ongoing.Cursor()
	a.ended = tx.Bucket(bucketEnded)
	a.outbox = tx.Bucket(bucketOutbox)
	a.sinks = make(map[string]*bucket)
	a.sets = newSinkSets(tx)
	a.current = a.s.currentSinks()
	a.dropped = nil

	meta := tx.Bucket(bucketMeta)
	bootstrapped := meta.Get(metaBootstrapped) != nil
	a.silentStarts = a.s.bootstrap == BootstrapRecord && !bootstrapped
	lt, release, err := a.s.txLog(tx)
	if err != nil {
		return err
	}
	defer release()
	a.log = lt

	for i := range a.batch.Observed {
		if i%256 == 0 {
			if err := a.ctx.Err(); err != nil {
				return err
			}
		}
		if err := a.observe(&a.batch.Observed[i]); err != nil {
			return err
		}
	}
	for _, inf := range a.batch.Inferred {
		if err := a.infer(inf); err != nil {
			return err
		}
	}
	if err := a.flushJournal(); err != nil {
		return err
	}
	if err := a.marks(tx.Bucket(bucketMarks)); err != nil {
		return err
	}
	if a.batch.CompleteCurrent && !bootstrapped {
		if err := meta.Put(metaBootstrapped, binary.BigEndian.AppendUint64(nil, uint64(toNs(a.detectedAt)))); err != nil {
			return err
		}
		a.completesBootstrap = true
		a.changed = true
	}
	if !a.changed {
		return errUnchanged
	}
	// The frames the states reference are durable before they commit.
	return commitLog(tx, a.log)
}

func (a *applier) ignore(format string, args ...any) {
	a.result.Ignored = append(a.result.Ignored, fmt.Sprintf(format, args...))
}

// observe applies one upstream record.
func (a *applier) observe(rec *event.Alarm) error {
	tr, ok := event.ForStatus(rec.Status)
	if !ok {
		a.ignore("originId %q: unknown status %d", rec.OriginID, rec.Status)
		return nil
	}
	if rec.OriginID == "" {
		a.ignore("a record of device %q with status %d has no originId", rec.DeviceSN, rec.Status)
		return nil
	}
	seen := seenFlag(rec.Status)
	v := a.state(rec.OriginID)
	var st state
	if v != nil {
		h, err := peekState(v)
		if err != nil {
			return fmt.Errorf("alarm %q: %w", rec.OriginID, err)
		}
		if h.flags&seen != 0 && h.level == rec.Level && a.detected-h.lastSeen < LastSeenResolution.Milliseconds() {
			return nil // the common case: a repeat that changes nothing
		}
		if st, err = decodeState(v); err != nil {
			return fmt.Errorf("alarm %q: %w", rec.OriginID, err)
		}
	} else {
		st.firstSeen = a.detected
	}
	repeat := st.flags&seen != 0
	oldLevel := st.level
	key := []byte(rec.OriginID) // stored: bbolt keeps it until the commit
	if occurred := toMs(rec.OccurredAt); v != nil && occurred != st.occurred && st.flags&flagStarted != 0 {
		// The journal entry follows the occurrence the state keeps.
		if err := a.journalMove(key, st.occurred, occurred); err != nil {
			return err
		}
	}
	st.flags |= seen
	st.lastSeen = max(st.lastSeen, a.detected)
	st.level = rec.Level
	st.deviceSN = rec.DeviceSN
	st.stationID = rec.StationID
	st.occurred = toMs(rec.OccurredAt)

	switch {
	case repeat:
		// Only LastSeen, the level and the stored record are refreshed,
		// and a level that rose is announced where new routes match it.
		if rec.Status == event.StatusOngoing && rec.Level != oldLevel && st.flags&flagStarted != 0 && !st.terminal() {
			if err := a.escalate(rec, &st, oldLevel); err != nil {
				return err
			}
		}
	case st.terminal():
		// The first terminal status wins; a real end after an inferred one
		// only corrects the recovery time.
		if rec.Status == event.StatusEnded && st.flags&flagInferred != 0 && !rec.RecoveredAt.IsZero() {
			st.recovered = toMs(rec.RecoveredAt)
			if err := a.journalEnd(&st, key); err != nil {
				return err
			}
		}
	case v == nil && rec.Status != event.StatusOngoing &&
		(a.batch.FirstContact || !rec.RecoveredAt.IsZero() && rec.RecoveredAt.Before(a.historyBefore)):
		// History: the upstream listed it over at relay's first contact
		// (P8), or it ended so long ago that the store may have known and
		// pruned it.
		st.flags |= flagStarted
		if err := a.terminate(&st, key, tr, rec.RecoveredAt); err != nil {
			return err
		}
	case rec.Status == event.StatusOngoing:
		st.flags |= flagStarted
		// Listed by the first snapshot: it was ongoing at the first run,
		// whatever its stamp says.
		silent := a.silentStarts && a.batch.FirstListing
		if silent {
			// Announced nowhere, so its end goes nowhere either.
			st.flags |= flagSilent
			if !a.s.endsByRules {
				var err error
				if st.sinks, err = a.sets.id(nil); err != nil {
					return err
				}
			}
		} else if err := a.emit(rec, event.Start, false, &st); err != nil {
			return err
		}
		if err := a.journalStart(rec, silent); err != nil {
			return err
		}
	default:
		if st.flags&flagStarted == 0 {
			st.flags |= flagStarted
			if err := a.emit(rec, event.Start, false, &st); err != nil {
				return err
			}
			if err := a.journalStart(rec, false); err != nil {
				return err
			}
		}
		if err := a.emit(rec, tr, false, &st); err != nil {
			return err
		}
		if err := a.terminate(&st, key, tr, rec.RecoveredAt); err != nil {
			return err
		}
	}
	if !st.terminal() {
		// The record an inferred end would be built from. A terminal alarm
		// produces no more events: its state is all that is needed, and
		// terminate dropped its record.
		enc := encodeAlarm(rec)
		if h := recordHash(enc); st.rec.n == 0 || st.rec.hash != h {
			a.log.put(&st.rec, enc, h)
		}
	}
	if err := putState(a.ongoing, a.alarms, rec.OriginID, &st); err != nil {
		return err
	}
	a.changed = true
	return nil
}

// state returns the encoded state of alarm id (see findState), nil when the
// store does not know it. A read-write store is in the layout of schema
// version 5 (Open moves an older one).
func (a *applier) state(id string) []byte {
	a.key = appendOngoingKey(a.key[:0], id)
	if k, v := a.lookOngoing.Seek(a.key); bytes.Equal(k, a.key) {
		return v
	}
	if a.lookAlarms == nil {
		a.lookAlarms = a.alarms.Cursor()
	}
	a.key = append(a.key[:0], id...)
	if k, v := a.lookAlarms.Seek(a.key); bytes.Equal(k, a.key) {
		return v
	}
	return nil
}

// infer applies the inferred end of an ongoing alarm, built from its stored
// record.
func (a *applier) infer(inf Inferred) error {
	if inf.OriginID == "" {
		a.ignore("an inferred end has no originId")
		return nil
	}
	key := []byte(inf.OriginID)
	v := a.state(inf.OriginID)
	if v == nil {
		a.ignore("inferred end of %q: the store does not know this alarm", inf.OriginID)
		return nil
	}
	st, err := decodeState(v)
	if err != nil {
		return fmt.Errorf("alarm %q: %w", inf.OriginID, err)
	}
	if st.terminal() {
		return nil
	}
	if st.rec.n == 0 {
		return fmt.Errorf("alarm %q has no stored record: %w", inf.OriginID, errCorrupt)
	}
	rec, err := a.log.record(key, st.rec)
	if err != nil {
		return err
	}
	at := inf.At
	if at.IsZero() {
		at = a.detectedAt
	}
	rec.Status = event.StatusEnded
	rec.RecoveredAt = at
	if err := a.emit(&rec, event.End, true, &st); err != nil {
		return err
	}
	st.flags |= flagInferred
	if err := a.terminate(&st, key, event.End, at); err != nil {
		return err
	}
	if err := putState(a.ongoing, a.alarms, inf.OriginID, &st); err != nil {
		return err
	}
	a.changed = true
	return nil
}

// terminate makes st end with tr at recoveredAt: its state leaves bucket
// ongoing (putState writes it into alarms) and it enters the ended index,
// which Prune reads, its upstream record, kept
// to build an inferred end, is dropped, and its journal entry records the
// end. The prune time is the later of the recovery and now, so an alarm is
// kept at least the retention after the store learnt of its end.
func (a *applier) terminate(st *state, key []byte, tr event.Transition, recoveredAt time.Time) error {
	if tr == event.End {
		st.flags |= flagEnded
	} else {
		st.flags |= flagInvalid
	}
	st.recovered = toMs(recoveredAt)
	st.pruneAt = max(st.recovered, toMs(a.now))
	if err := a.journalEnd(st, key); err != nil {
		return err
	}
	if err := a.ongoing.Delete(ongoingKey(string(key))); err != nil {
		return err
	}
	a.log.drop(&st.rec)
	return a.ended.Put(endedKey(st.pruneAt, string(key)), []byte{})
}

// emit produces the event of transition tr of alarm a, whose state is st,
// and writes one outbox entry per sink it goes to. A start goes to the sinks
// route names, and the delivery ledger records them in st; an end or invalid
// goes to the sinks the ledger holds for the start (route names them only
// for an alarm started before the ledger), where it follows what became of
// the start (follow).
func (a *applier) emit(alarm *event.Alarm, tr event.Transition, inferred bool, st *state) error {
	ev := event.New(*alarm, tr, a.detectedAt, inferred)
	a.trace(&ev)
	body, err := ev.Marshal()
	if err != nil {
		return err
	}
	var sinks []string
	if a.route != nil {
		// Called for every event, ends too: the router may watch them.
		sinks = a.route(&ev)
	}
	if sinks, err = uniqueSinks(sinks); err != nil {
		return fmt.Errorf("route gave event %s: %w", ev.ID, err)
	}
	switch {
	case a.s.endsByRules, tr != event.Start && a.s.plant.On(plant.EndsByTheRulesOfTheMoment):
	case tr == event.Start:
		if st.sinks, err = a.sets.id(sinks); err != nil {
			return err
		}
	case st.sinks != 0:
		joined, err := a.sets.names(st.setID())
		if err != nil {
			return err
		}
		if st.ledgered() {
			sinks = joined
		} else if sinks, err = uniqueSinks(append(slices.Clone(sinks), joined...)); err != nil {
			return err
		}
	}
	refs := 0
	for _, sink := range sinks {
		if tr != event.Start && !a.s.endsByRules {
			took, err := a.follow(sink, &ev, body)
			if err != nil {
				return err
			}
			if took {
				continue
			}
		}
		if err := a.enqueue(sink, &ev, body); err != nil {
			return err
		}
		refs++
	}
	a.result.Events = append(a.result.Events, ev)
	a.refs = append(a.refs, refs)
	a.bodies = append(a.bodies, body)
	a.changed = true
	return nil
}

// trace starts the trace of ev's transition, when tracing is on, and
// writes its trace context into ev.
func (a *applier) trace(ev *event.Event) {
	if a.traces == nil {
		return
	}
	d := &ev.Data
	p := a.traces.Start("alarm "+string(d.Transition),
		tracing.AttrEventID.String(ev.ID), tracing.AttrOrigin.String(d.OriginID), tracing.AttrTransition.String(string(d.Transition)),
		tracing.AttrTenant.String(d.TenantID), tracing.AttrStation.String(d.StationID), tracing.AttrLevel.Int(d.Level),
		tracing.AttrInferred.Bool(d.Inferred))
	ev.TraceParent, ev.TraceState = p.TraceParent, p.TraceState
}

// enqueue appends ev, marshalled as body, to sink's outbox.
func (a *applier) enqueue(sink string, ev *event.Event, body []byte) error {
	b, err := a.outboxOf(sink)
	if err != nil {
		return err
	}
	seq, err := b.NextSequence()
	if err != nil {
		return fmt.Errorf("outbox of sink %q: %w", sink, err)
	}
	e := Entry{
		EventID:    ev.ID,
		OriginID:   ev.Data.OriginID,
		Transition: ev.Data.Transition,
		Level:      ev.Data.Level,
		Body:       body,
		EnqueuedAt: a.now,
	}
	if err := b.Put(seqKey(seq), encodeEntry(&e)); err != nil {
		return fmt.Errorf("outbox of sink %q: %w", sink, err)
	}
	a.delta[sink]++
	a.result.Enqueued++
	return nil
}

// outboxOf returns sink's outbox bucket, kept for the batch.
func (a *applier) outboxOf(sink string) (*bucket, error) {
	b := a.sinks[sink]
	if b == nil {
		var err error
		if b, err = a.outbox.CreateBucketIfNotExists([]byte(sink)); err != nil {
			return nil, fmt.Errorf("outbox of sink %q: %w", sink, err)
		}
		// Entries are only appended: full pages halve what a commit writes.
		b.b.FillPercent = 0.9
		a.sinks[sink] = b
	}
	return b, nil
}

// follow decides on the end or invalid ev of an alarm whose start went to
// sink by what the delivery ledger says of that start (follow): parked
// beside a start that is a dead letter, or recorded as dropped. It reports
// whether it took the event; if not, the event is enqueued.
func (a *applier) follow(sink string, ev *event.Event, body []byte) (bool, error) {
	e := Entry{Sink: sink, EventID: ev.ID, OriginID: ev.Data.OriginID, Transition: ev.Data.Transition,
		Level: ev.Data.Level, Body: body, EnqueuedAt: a.now}
	took, kind, err := follow(a.tx, &e, a.current, a.s.noResolvedSinks(), a.now, a.s.plant)
	if kind != "" && err == nil {
		if a.dropped == nil {
			a.dropped = map[[2]string]int{}
		}
		a.dropped[[2]string{sink, kind}]++
	}
	return took, err
}

// escalate announces an ongoing alarm whose level changed from oldLevel at
// the sinks that the rules now route its start to and that did not get it:
// a start at its new level there, recorded in the ledger, so that its end
// follows. A level that falls sends nothing new. An alarm recorded silently
// is announced only where its old level would not have gone.
func (a *applier) escalate(rec *event.Alarm, st *state, oldLevel int) error {
	if a.route == nil || a.s.endsByRules || !st.ledgered() {
		return nil
	}
	var before []string
	if st.flags&flagSilent != 0 {
		old := *rec
		old.Level = oldLevel
		oev := event.New(old, event.Start, a.detectedAt, false)
		before = a.route(&oev)
	}
	ev := event.New(*rec, event.Start, a.detectedAt, false)
	routed, err := uniqueSinks(a.route(&ev))
	if err != nil {
		return fmt.Errorf("route gave event %s: %w", ev.ID, err)
	}
	have, err := a.sets.names(st.sinks)
	if err != nil {
		return err
	}
	var added []string
	for _, sink := range routed {
		if !slices.Contains(have, sink) && !slices.Contains(before, sink) {
			added = append(added, sink)
		}
	}
	if len(added) == 0 {
		return nil
	}
	a.trace(&ev)
	body, err := ev.Marshal()
	if err != nil {
		return err
	}
	for _, sink := range added {
		if err := a.enqueue(sink, &ev, body); err != nil {
			return err
		}
	}
	st.sinks, err = a.sets.id(append(slices.Clone(have), added...))
	return err
}

// marks stores the batch's watermarks that changed.
func (a *applier) marks(b *bucket) error {
	for name, t := range a.batch.Marks {
		if name == "" {
			return fmt.Errorf("a watermark has no name")
		}
		v, err := t.MarshalBinary()
		if err != nil {
			return fmt.Errorf("watermark %q: %w", name, err)
		}
		if bytes.Equal(b.Get([]byte(name)), v) {
			continue
		}
		if err := b.Put([]byte(name), v); err != nil {
			return fmt.Errorf("watermark %q: %w", name, err)
		}
		a.changed = true
	}
	return nil
}

// Prune drops alarms that ended longer than the retention ago, with their
// dedupe keys, journal entries and sink memory, and dead letters and
// suppressed entries older than the retention, returning how many alarms it
// dropped. An alarm's end counts from the later of its recovery time and
// when the store recorded it. Then, when the record log holds more garbage
// (records of alarms that ended, records replaced) than live records, and
// more than Options.CompactFloor, Prune compacts it: the live records are
// copied to a new log, and Apply waits only for the transaction that
// switches to it.
func (s *Store) Prune(ctx context.Context) (int, error) {
	cutoff := s.clock.Now().Add(-s.retention)
	var n int
	err := s.update(func(tx *txn, _ map[string]int) error {
		ended := tx.Bucket(bucketEnded)
		var keys [][]byte
		c := ended.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if len(k) < 8 {
				return fmt.Errorf("ended index key %x: %w", k, errCorrupt)
			}
			if int64(binary.BigEndian.Uint64(k)) >= toMs(cutoff) {
				break
			}
			keys = append(keys, bytes.Clone(k))
			if len(keys)%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
		}
		alarms, journal := tx.Bucket(bucketAlarms), tx.Bucket(bucketJournal)
		lt, release, err := s.txLog(tx)
		if err != nil {
			return err
		}
		defer release()
		memory := tx.Bucket(bucketMemory)
		var memories []*bucket
		if err := memory.ForEachBucket(func(sink []byte) error {
			memories = append(memories, memory.Bucket(sink))
			return nil
		}); err != nil {
			return err
		}
		// A pruned alarm is over: its state is in alarms.
		targets := append([]*bucket{alarms}, memories...)
		for _, k := range keys {
			id := k[8:]
			if err := pruneJournal(journal, lt, id, alarms.Get(id)); err != nil {
				return err
			}
			for _, b := range targets {
				if err := b.Delete(id); err != nil {
					return fmt.Errorf("alarm %q: %w", id, err)
				}
			}
			if err := ended.Delete(k); err != nil {
				return fmt.Errorf("alarm %q: %w", id, err)
			}
		}
		n = len(keys)
		dropped, err := pruneDead(tx.Bucket(bucketDead), toNs(cutoff))
		if err != nil {
			return err
		}
		quiet, err := pruneDead(tx.Bucket(bucketSuppressed), toNs(cutoff))
		if err != nil {
			return err
		}
		dropped += quiet
		if n == 0 && dropped == 0 {
			return errUnchanged
		}
		return commitLog(tx, lt)
	})
	if err != nil {
		return 0, fmt.Errorf("dedupe: prune: %w", err)
	}
	if _, err := s.compactRecords(ctx); err != nil {
		return n, fmt.Errorf("dedupe: prune: compacting the record log: %w", err)
	}
	return n, nil
}

// pruneDead deletes the dead letters given up on before cutoff (Unix ns).
func pruneDead(dead *bucket, cutoff int64) (int, error) {
	var sinks [][]byte
	if err := dead.ForEachBucket(func(sink []byte) error {
		sinks = append(sinks, bytes.Clone(sink))
		return nil
	}); err != nil {
		return 0, err
	}
	dropped := 0
	for _, sink := range sinks {
		b := dead.Bucket(sink)
		var keys [][]byte
		err := b.ForEach(func(k, v []byte) error {
			at, err := peekDeadAt(v)
			if err != nil {
				return fmt.Errorf("dead letter %s/%x: %w", sink, k, err)
			}
			if at < cutoff {
				keys = append(keys, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return 0, err
			}
		}
		dropped += len(keys)
	}
	return dropped, nil
}
