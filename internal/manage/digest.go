package manage

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

// nsDigest holds, per destination, its flood window (key dest + "\x00") and
// its digests (key dest + "\x00" + digest id). A destination is where a
// sink's messages land ("slack:C0123"), so that sinks posting to one channel
// share its threshold and its digest; a sink whose destination says nothing
// ("") is its own ("sink:" + name).
const nsDigest = "digest"

// window is a destination's recent top-level messages and its open digest.
type window struct {
	// Posts are the starts posted on their own within the window.
	Posts []post `json:"posts,omitempty"`
	// Open is the id of the digest collecting starts until Until.
	Open  string    `json:"open,omitempty"`
	Until time.Time `json:"until,omitzero"`
	// Seq numbers the destination's digests.
	Seq int `json:"seq"`
}

// post is one start posted on its own.
type post struct {
	At     time.Time `json:"at"`
	Origin string    `json:"origin"`
}

// stored is a digest as kept: the digest, the sink's memory of its message,
// and how far its list went.
type stored struct {
	Digest notify.Digest     `json:"digest"`
	Memory map[string]string `json:"memory,omitempty"`
	// Listed counts the items at the head of Digest.Items already listed.
	Listed int `json:"listed"`
	// EndsListed holds the alarms whose end was listed.
	EndsListed map[string]bool `json:"ends_listed,omitempty"`
}

func windowKey(dest string) string     { return dest + "\x00" }
func digestKey(dest, id string) string { return dest + "\x00" + id }

// destination returns the destination of sink under rules.
func destination(rules *route.Rules, sink string) string {
	if s, ok := rules.Sink(sink); ok && s.Destination() != "" {
		return s.Destination()
	}
	return "sink:" + sink
}

// loadWindow reads a destination's window; one that does not decode is
// logged and started again, so that it never stops a sink.
func (m *Manager) loadWindow(dest string) (window, error) {
	var w window
	raw, err := m.o.Store.Get(nsDigest, windowKey(dest))
	if err != nil || raw == nil {
		return w, err
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		m.log.Warn("the flood window of a destination does not decode; starting it again", "destination", dest, "err", err)
		return window{}, nil
	}
	return w, nil
}

// loadDigest reads a digest; nil when it is gone or does not decode (logged).
func (m *Manager) loadDigest(dest, id string) (*stored, error) {
	if id == "" {
		return nil, nil
	}
	raw, err := m.o.Store.Get(nsDigest, digestKey(dest, id))
	if err != nil || raw == nil {
		return nil, err
	}
	var s stored
	if err := json.Unmarshal(raw, &s); err != nil {
		m.log.Warn("a digest does not decode; it is shown no more", "destination", dest, "digest", id, "err", err)
		return nil, nil
	}
	return &s, nil
}

func kvJSON(key string, v any) (store.KV, error) {
	b, err := json.Marshal(v)
	return store.KV{NS: nsDigest, Key: key, Value: b}, err
}

// digestVerdict decides whether a start goes out on its own or joins the
// destination's digest: it joins while a digest is open, and opens one when
// the starts posted on their own within the window plus the starts due at
// the head of the sink's outbox (their hold over) reach the threshold, so
// that at most threshold top-level messages go out per window. A start that
// goes out on its own is counted at once (once per alarm, however often it
// is decided on), under the destination's lock.
func (m *Manager) digestVerdict(rules *route.Rules, sink string, ev *event.Event, opt route.Digest, now time.Time) (deliver.Verdict, error) {
	if opt.Off || opt.Threshold <= 0 {
		return deliver.Verdict{}, nil
	}
	dg, ok := m.sink(sink).(notify.Digester)
	if !ok || !dg.CanDigest() {
		return deliver.Verdict{}, nil
	}
	dest := destination(rules, sink)
	unlock := m.lockDest(dest)
	defer unlock()
	w, err := m.loadWindow(dest)
	if err != nil {
		return deliver.Verdict{}, err
	}
	if w.Open != "" && now.Before(w.Until) {
		return deliver.Verdict{Digest: true}, nil
	}
	w.Posts = slices.DeleteFunc(w.Posts, func(p post) bool { return now.Sub(p.At) >= opt.Window })
	if slices.ContainsFunc(w.Posts, func(p post) bool { return p.Origin == ev.Data.OriginID }) {
		return deliver.Verdict{}, nil // decided before: it goes on its own
	}
	due, err := m.dueStarts(rules, sink, opt.Threshold*4, now)
	if err != nil {
		return deliver.Verdict{}, err
	}
	if len(w.Posts)+max(due, 1) >= opt.Threshold {
		return deliver.Verdict{Digest: true}, nil
	}
	w.Posts = append(w.Posts, post{At: now, Origin: ev.Data.OriginID})
	kv, err := kvJSON(windowKey(dest), w)
	if err != nil {
		return deliver.Verdict{}, err
	}
	return deliver.Verdict{}, m.o.Store.Put(kv)
}

// dueStarts counts the starts among the first limit entries of sink's
// outbox whose hold is over.
func (m *Manager) dueStarts(rules *route.Rules, sink string, limit int, now time.Time) (int, error) {
	head, err := m.o.Store.Pending(sink, limit)
	if err != nil {
		return 0, err
	}
	due := 0
	for _, e := range head {
		if e.Transition != event.Start {
			continue
		}
		ev, err := event.Unmarshal(e.Body)
		if err != nil {
			continue
		}
		if hold := policyFor(rules, &ev, sink, now).hold; hold > 0 && now.Before(e.EnqueuedAt.Add(hold)) {
			continue
		}
		due++
	}
	return due, nil
}

// Digest is the deliver.Gate's digest: starts join the destination's open
// digest (opening one, a new top-level message, when none is), ends update
// the digest their start joined; each digest touched is edited to show its
// counts, and what joined or ended is listed in its thread. Progress is
// written as it is made, so that a retry after a failure posts nothing
// twice. It holds the destination's lock: sinks posting to one channel take
// turns.
func (m *Manager) Digest(ctx context.Context, sink notify.Sink, ds []notify.Delivery) (deliver.DigestOutcome, notify.Result, error) {
	name := sink.Name()
	dg, ok := sink.(notify.Digester)
	if !ok || !dg.CanDigest() {
		return deliver.DigestOutcome{}, notify.Result{}, fmt.Errorf("manage: sink %q cannot show digests", name)
	}
	now := m.clk.Now()
	rules := m.rules()
	opt := route.Digest{Threshold: route.DefaultDigestThreshold, Window: route.DefaultDigestWindow}
	if s, ok := rules.Sink(name); ok && !s.Digest.Off {
		opt = s.Digest
	}
	dest := destination(rules, name)
	unlock := m.lockDest(dest)
	defer unlock()
	w, err := m.loadWindow(dest)
	if err != nil {
		return deliver.DigestOutcome{}, notify.Result{Retry: true}, err
	}
	out := deliver.DigestOutcome{Memory: make([]map[string]string, len(ds))}
	touched := map[string]*stored{}
	var order []string // the digests changed, to show
	touch := func(id string) {
		if !slices.Contains(order, id) {
			order = append(order, id)
		}
	}
	get := func(id string) (*stored, error) {
		if s := touched[id]; s != nil {
			return s, nil
		}
		s, err := m.loadDigest(dest, id)
		if err != nil || s == nil {
			return nil, err
		}
		touched[id] = s
		return s, nil
	}
	holds := func(s *stored, origin string) bool {
		return s != nil && slices.ContainsFunc(s.Digest.Items, func(it notify.DigestItem) bool { return it.OriginID == origin })
	}
	for k := range ds {
		ev := ds[k].Event
		if ev.Data.Transition != event.Start {
			s, err := get(ds[k].Memory[memDigest])
			if err != nil {
				return deliver.DigestOutcome{}, notify.Result{Retry: true}, err
			}
			if s == nil {
				continue // the digest was pruned: nothing to update
			}
			touch(s.Digest.ID)
			for i := range s.Digest.Items {
				it := &s.Digest.Items[i]
				if it.OriginID == ev.Data.OriginID && it.Outcome == "" {
					ended := notify.NewDigestItem(ev)
					it.Outcome, it.RecoveredAt = ended.Outcome, ended.RecoveredAt
				}
			}
			continue
		}
		id := w.Open
		prev, err := get(w.Open)
		if err != nil {
			return deliver.DigestOutcome{}, notify.Result{Retry: true}, err
		}
		// A start already in the last digest stays there, even when a
		// retry comes after its window.
		if !holds(prev, ev.Data.OriginID) && (w.Open == "" || !now.Before(w.Until) || prev == nil) {
			w.Seq++
			id = fmt.Sprintf("%s-%d", now.UTC().Format("20060102T150405Z"), w.Seq)
			w.Open, w.Until, w.Posts = id, now.Add(opt.Window), nil
			touched[id] = &stored{Digest: notify.Digest{ID: id, Opened: now, Until: w.Until, Threshold: opt.Threshold, Window: opt.Window}}
			m.log.Info("alarm flood: a storm digest opens instead of one message per alarm", "sink", name, "destination", dest,
				"digest", id, "threshold", opt.Threshold, "window", opt.Window)
		}
		s := touched[id]
		touch(id)
		if !holds(s, ev.Data.OriginID) {
			s.Digest.Items = append(s.Digest.Items, notify.NewDigestItem(ev))
		}
		out.Memory[k] = map[string]string{memDigest: id}
	}
	wkv, err := kvJSON(windowKey(dest), w)
	if err != nil {
		return deliver.DigestOutcome{}, notify.Result{}, err
	}
	for _, id := range order {
		s := touched[id]
		if res, err := m.show(ctx, dest, dg, s, wkv); err != nil {
			return deliver.DigestOutcome{}, res, err
		}
		kv, err := kvJSON(digestKey(dest, id), s)
		if err != nil {
			return deliver.DigestOutcome{}, notify.Result{}, err
		}
		out.KV = append(out.KV, kv)
	}
	out.KV = append(out.KV, wkv)
	return out, notify.Result{}, nil
}

// show brings the digest's message and list up to date: posts it when it
// has no message yet (saving the message, and the window wkv that names it,
// at once), else edits it; then lists what joined and what ended since the
// last list, in replies of sinktype.DigestListSize lines.
func (m *Manager) show(ctx context.Context, dest string, dg notify.Digester, s *stored, wkv store.KV) (notify.Result, error) {
	save := func(more ...store.KV) error {
		kv, err := kvJSON(digestKey(dest, s.Digest.ID), s)
		if err != nil {
			return err
		}
		return m.o.Store.Put(append(more, kv)...)
	}
	if s.Memory == nil {
		mem, res, err := dg.PostDigest(ctx, &s.Digest)
		if err != nil {
			return res, err
		}
		s.Memory = mem
		if err := save(wkv); err != nil {
			return notify.Result{Retry: true}, err
		}
	} else if res, err := dg.UpdateDigest(ctx, &s.Digest, s.Memory); err != nil {
		return res, err
	}
	for s.Listed < len(s.Digest.Items) {
		n := min(len(s.Digest.Items)-s.Listed, sinktype.DigestListSize)
		if res, err := dg.ListDigest(ctx, &s.Digest, s.Memory, s.Digest.Items[s.Listed:s.Listed+n]); err != nil {
			return res, err
		}
		s.Listed += n
		if err := save(); err != nil {
			return notify.Result{Retry: true}, err
		}
	}
	var ended []notify.DigestItem
	for _, it := range s.Digest.Items[:s.Listed] {
		if it.Outcome != "" && !s.EndsListed[it.OriginID] {
			ended = append(ended, it)
		}
	}
	for len(ended) > 0 {
		n := min(len(ended), sinktype.DigestListSize)
		if res, err := dg.ListDigest(ctx, &s.Digest, s.Memory, ended[:n]); err != nil {
			return res, err
		}
		if s.EndsListed == nil {
			s.EndsListed = map[string]bool{}
		}
		for _, it := range ended[:n] {
			s.EndsListed[it.OriginID] = true
		}
		ended = ended[n:]
		if err := save(); err != nil {
			return notify.Result{Retry: true}, err
		}
	}
	return notify.Result{}, nil
}
