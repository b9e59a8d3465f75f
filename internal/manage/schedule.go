package manage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/isa"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/plant"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

// Namespaces of the scheduled messages' progress.
const (
	// nsRemind holds, by sink + "\x00" + originId, when the alarm was last
	// reminded of (RFC 3339).
	nsRemind = "remind"
	// nsDaily holds, by sink, when its last daily summary was due.
	nsDaily = "daily"
)

// TickEvery is how often the service calls Tick.
const TickEvery = time.Minute

// Tick sends what is due by the clock: reminders of alarms still ongoing
// (route option repeat) and daily summaries of stale alarms (sink option
// daily_summary). They go straight to the sinks, not through the outboxes: a
// reminder or a summary that fails is tried again at the next tick, and one
// whose success could not be recorded may be sent twice.
func (m *Manager) Tick(ctx context.Context) error {
	rules := m.rules()
	now := m.clk.Now()
	var errs []error
	if err := m.remind(ctx, rules, now); err != nil {
		errs = append(errs, err)
	}
	if err := m.summaries(ctx, rules, now); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ongoingStarts returns a start event of every ongoing alarm.
func (m *Manager) ongoingStarts(now time.Time) ([]event.Event, error) {
	var out []event.Event
	err := m.o.Store.OngoingRecords(func(a *event.Alarm) error {
		out = append(out, event.New(*a, event.Start, now, false))
		return nil
	})
	return out, err
}

// managedRoutes returns the routes sending ev to sink under alarm
// management, or nil when one of them leaves the sink unmanaged.
func managedRoutes(r *route.Rules, ev *event.Event, sink string) []*route.Route {
	if !policyFor(r, ev, sink, time.Time{}).managed {
		return nil
	}
	return r.RoutesTo(ev, sink)
}

// remind reminds, in each Reminder sink, of the alarms ongoing for longer
// than the shortest repeat of the routes sending them there, once per
// repeat, counting from the alarm's first sight. An alarm whose start the
// sink never got, was withheld from or saw in a digest is not reminded of.
func (m *Manager) remind(ctx context.Context, rules *route.Rules, now time.Time) error {
	any := false
	for _, rt := range rules.Routes {
		any = any || rt.Repeat > 0
	}
	if !any {
		return nil
	}
	starts, err := m.ongoingStarts(now)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range rules.Sinks {
		rem, ok := m.sink(s.Name).(notify.Reminder)
		if !ok {
			continue
		}
		for i := range starts {
			ev := &starts[i]
			repeat, untilCleared := time.Duration(0), false
			for _, rt := range managedRoutes(rules, ev, s.Name) {
				if rt.Repeat > 0 && (repeat == 0 || rt.Repeat < repeat) {
					repeat = rt.Repeat
				}
				untilCleared = untilCleared || rt.Repeat > 0 && rt.RepeatUntilCleared
			}
			if repeat == 0 {
				continue
			}
			// Reminders stop at acknowledgement unless a route says
			// repeat_until: cleared.
			if !untilCleared && !m.o.Plant.On(plant.RemindersIgnoreAck) {
				if acked, err := m.acknowledged(ev.Data.OriginID); err != nil {
					errs = append(errs, err)
					continue
				} else if acked {
					continue
				}
			}
			if err := m.remindOne(ctx, rules, rem, ev, repeat, Hold(rules, ev, s.Name, now), now); err != nil {
				errs = append(errs, err)
				if ctx.Err() != nil {
					return errors.Join(errs...)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// remindOne reminds rem of ev's alarm when repeat has passed since the last
// reminder, or since its first sight. A sink that keeps memory of its starts
// is reminded only of an alarm it has memory of; one that keeps none
// (notify.MemorylessReminder) of any alarm whose start was not withheld or
// digested, its first reminder counted from the end of hold, when its start
// went out. An alarm shelved now (see shelved) is not reminded of: its
// reminder is due again at the first tick after the shelving ends.
func (m *Manager) remindOne(ctx context.Context, rules *route.Rules, rem notify.Reminder, ev *event.Event, repeat, hold time.Duration, now time.Time) error {
	sink, origin := rem.Name(), ev.Data.OriginID
	a, found, err := m.o.Store.Alarm(origin)
	if err != nil || !found || a.Status != event.StatusOngoing {
		return err
	}
	mem, err := m.o.Store.Memory(sink, origin)
	if err != nil || mem[memSuppressed] != "" || mem[memDigest] != "" {
		return err
	}
	last := a.FirstSeen
	if len(mem) == 0 {
		if ml, ok := rem.(notify.MemorylessReminder); !ok || !ml.KeepsNoMemory() {
			return nil
		}
		last = last.Add(hold)
	}
	key := sink + "\x00" + origin
	if raw, err := m.o.Store.Get(nsRemind, key); err != nil {
		return err
	} else if raw != nil {
		if t, err := time.Parse(time.RFC3339Nano, string(raw)); err == nil {
			last = t
		}
	}
	if now.Sub(last) < repeat || m.shelved(rules, ev, sink, now) && !m.o.Plant.On(plant.RemindersIgnoreShelving) {
		return nil
	}
	ev.Data.Note = "Reminder, ongoing for " + sinktype.HumanDuration(now.Sub(a.OccurredAt).Round(time.Minute))
	if err := m.o.Fence.Check(); err != nil {
		return fmt.Errorf("manage: reminder of %s in sink %q not sent: %w", origin, sink, err)
	}
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	_, err = rem.Remind(actx, ev, mem)
	cancel()
	if err != nil {
		return fmt.Errorf("manage: reminder of %s in sink %q (tried again at the next tick): %w", origin, sink, err)
	}
	return m.o.Store.Put(store.KV{NS: nsRemind, Key: key, Value: []byte(now.UTC().Format(time.RFC3339Nano))})
}

// summaries sends each daily summary that is due: the alarms ongoing for
// more than isa.StaleAfter that the sink got and that are not shelved now
// (see shelved), as a digest titled as a summary.
// A sink's first summary is due at the first daily_summary time after it
// was first seen with the option; a day without stale alarms sends nothing.
func (m *Manager) summaries(ctx context.Context, rules *route.Rules, now time.Time) error {
	var errs []error
	var starts []event.Event
	loaded := false
	for _, s := range rules.Sinks {
		if s.DailySummary == nil {
			continue
		}
		dg, ok := m.sink(s.Name).(notify.Digester)
		if !ok || !dg.CanDigest() {
			continue
		}
		raw, err := m.o.Store.Get(nsDaily, s.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		last, err := time.Parse(time.RFC3339Nano, string(raw))
		if raw == nil || err != nil {
			// From now on.
			if err := m.o.Store.Put(store.KV{NS: nsDaily, Key: s.Name, Value: []byte(now.UTC().Format(time.RFC3339Nano))}); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		due := s.DailySummary.Next(last)
		if now.Before(due) {
			continue
		}
		if !loaded {
			if starts, err = m.ongoingStarts(now); err != nil {
				return errors.Join(append(errs, err)...)
			}
			loaded = true
		}
		if err := m.summary(ctx, dg, rules, starts, due, now); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := m.o.Store.Put(store.KV{NS: nsDaily, Key: s.Name, Value: []byte(due.UTC().Format(time.RFC3339Nano))}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) summary(ctx context.Context, dg notify.Digester, rules *route.Rules, starts []event.Event, due, now time.Time) error {
	sink := dg.Name()
	d := notify.Digest{ID: "daily-" + due.UTC().Format("20060102T1504Z"), Opened: now, Until: now}
	for i := range starts {
		ev := &starts[i]
		occurred, err := time.Parse(time.RFC3339Nano, ev.Data.OccurredAt)
		if err != nil || now.Sub(occurred) <= isa.StaleAfter || len(managedRoutes(rules, ev, sink)) == 0 {
			continue
		}
		mem, err := m.o.Store.Memory(sink, ev.Data.OriginID)
		if err != nil {
			return err
		}
		if mem[memSuppressed] != "" || m.shelved(rules, ev, sink, now) {
			continue
		}
		d.Items = append(d.Items, notify.NewDigestItem(ev))
	}
	if len(d.Items) == 0 {
		return nil
	}
	d.Title = fmt.Sprintf("Daily summary: %d alarm%s ongoing for more than 24 h (stale)", len(d.Items), plural(len(d.Items)))
	if err := m.o.Fence.Check(); err != nil {
		return fmt.Errorf("manage: daily summary of sink %q not sent: %w", sink, err)
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	mem, _, err := dg.PostDigest(actx, &d)
	for i := 0; err == nil && i < len(d.Items); i += sinktype.DigestListSize {
		_, err = dg.ListDigest(actx, &d, mem, d.Items[i:min(i+sinktype.DigestListSize, len(d.Items))])
	}
	if err != nil {
		return fmt.Errorf("manage: daily summary of sink %q (tried again at the next tick): %w", sink, err)
	}
	m.log.Info("daily summary of stale alarms sent", "sink", sink, "alarms", len(d.Items))
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// PruneState drops what alarm management no longer needs: the reminder
// marks of alarms no longer ongoing, chatter histories without a start for a
// day, and digests over for a day (an end of one of their alarms arriving
// later is then shown nowhere; it still reaches the bus).
func (m *Manager) PruneState() error {
	now := m.clk.Now()
	// Chatter histories and digests are written by the delivery loops:
	// each is judged and deleted in one transaction.
	_, err := m.o.Store.DeleteIf(nsChatter, func(_ string, v []byte) bool {
		st, err := decodeChatter(v)
		return err != nil || len(st.Starts) == 0 || now.Sub(st.Starts[len(st.Starts)-1].At) > 24*time.Hour
	})
	if err != nil {
		return err
	}
	_, err = m.o.Store.DeleteIf(nsDigest, func(key string, v []byte) bool {
		if strings.HasSuffix(key, "\x00") {
			return false // a window
		}
		var s stored
		return json.Unmarshal(v, &s) != nil || now.Sub(s.Digest.Until) > 24*time.Hour &&
			(s.Digest.Ongoing() == 0 || now.Sub(s.Digest.Until) > 30*24*time.Hour)
	})
	if err != nil {
		return err
	}
	// Escalation steps of alarms no longer ongoing, and acknowledgements of
	// alarms the store forgot (relay report reads them until then).
	for _, ns := range []string{nsEscalate, nsAck} {
		var drop []store.KV
		err = m.o.Store.Scan(ns, "", func(key string, _ []byte) error {
			a, found, err := m.o.Store.Alarm(key)
			if err != nil {
				return err
			}
			if !found || ns == nsEscalate && a.Status != event.StatusOngoing {
				drop = append(drop, store.KV{NS: ns, Key: key})
			}
			return nil
		})
		if err == nil && len(drop) > 0 {
			err = m.o.Store.Put(drop...)
		}
		if err != nil {
			return err
		}
	}
	// Reminder marks are written by Tick, on the goroutine that calls this,
	// what escalation did at each sink by the escalation pass.
	var drop []store.KV
	for _, ns := range []string{nsRemind, nsEscalated} {
		err = m.o.Store.Scan(ns, "", func(key string, _ []byte) error {
			_, origin, _ := strings.Cut(key, "\x00")
			a, found, err := m.o.Store.Alarm(origin)
			if err != nil {
				return err
			}
			if !found || a.Status != event.StatusOngoing {
				drop = append(drop, store.KV{NS: ns, Key: key})
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if len(drop) == 0 {
		return nil
	}
	return m.o.Store.Put(drop...)
}
