package manage

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/relay-energy/relay/internal/dedupe"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/route"
)

// nsDigest holds, per sink, its flood window (key sink + "\x00") and its
// digests (key sink + "\x00" + digest id).
const nsDigest = "digest"

// window is a sink's recent top-level messages and its open digest.
type window struct {
	// Posts are when the starts posted on their own within the window went.
	Posts []time.Time `json:"posts,omitempty"`
	// Open is the id of the digest collecting starts until Until.
	Open  string    `json:"open,omitempty"`
	Until time.Time `json:"until,omitzero"`
	// Seq numbers the sink's digests.
	Seq int `json:"seq"`
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

func windowKey(sink string) string     { return sink + "\x00" }
func digestKey(sink, id string) string { return sink + "\x00" + id }

func (m *Manager) loadWindow(sink string) (window, error) {
	var w window
	raw, err := m.o.Store.Get(nsDigest, windowKey(sink))
	if err != nil || raw == nil {
		return w, err
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return window{}, fmt.Errorf("manage: flood window of sink %q does not decode: %w", sink, err)
	}
	return w, nil
}

func (m *Manager) loadDigest(sink, id string) (*stored, error) {
	raw, err := m.o.Store.Get(nsDigest, digestKey(sink, id))
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, nil
	}
	var s stored
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("manage: digest %s of sink %q does not decode: %w", id, sink, err)
	}
	return &s, nil
}

func kvJSON(key string, v any) (dedupe.KV, error) {
	b, err := json.Marshal(v)
	return dedupe.KV{NS: nsDigest, Key: key, Value: b}, err
}

// digestVerdict decides whether a start goes out on its own or joins the
// sink's digest: it joins while a digest is open, and opens one when the
// starts posted on their own within the window plus the entries waiting in
// the outbox reach the threshold, so that at most threshold top-level
// messages go out per window.
func (m *Manager) digestVerdict(sink string, opt route.Digest, now time.Time) (notify.Verdict, error) {
	if opt.Off || opt.Threshold <= 0 {
		return notify.Verdict{}, nil
	}
	dg, ok := m.sink(sink).(notify.Digester)
	if !ok || !dg.CanDigest() {
		return notify.Verdict{}, nil
	}
	w, err := m.loadWindow(sink)
	if err != nil {
		return notify.Verdict{}, err
	}
	if w.Open != "" && now.Before(w.Until) {
		return notify.Verdict{Digest: true}, nil
	}
	w.Posts = slices.DeleteFunc(w.Posts, func(t time.Time) bool { return now.Sub(t) >= opt.Window })
	// The starts due: those at the head of the outbox, this one included,
	// as many as can matter.
	head, err := m.o.Store.Pending(sink, opt.Threshold)
	if err != nil {
		return notify.Verdict{}, err
	}
	due := 0
	for _, e := range head {
		if e.Transition == event.Start {
			due++
		}
	}
	if len(w.Posts)+due >= opt.Threshold {
		return notify.Verdict{Digest: true}, nil
	}
	w.Posts = append(w.Posts, now)
	kv, err := kvJSON(windowKey(sink), w)
	return notify.Verdict{KV: []dedupe.KV{kv}}, err
}

// Digest is the notify.Gate's digest: starts join the sink's open digest
// (opening one, a new top-level message, when none is), ends update the
// digest their start joined; each digest touched is edited to show its
// counts, and what joined or ended is listed in its thread. Progress is
// written as it is made, so that a retry after a failure posts nothing
// twice.
func (m *Manager) Digest(ctx context.Context, sink notify.Sink, ds []notify.Delivery) (notify.DigestOutcome, notify.Result, error) {
	name := sink.Name()
	dg, ok := sink.(notify.Digester)
	if !ok || !dg.CanDigest() {
		return notify.DigestOutcome{}, notify.Result{}, fmt.Errorf("manage: sink %q cannot show digests", name)
	}
	now := m.clk.Now()
	opt := route.Digest{Threshold: route.DefaultDigestThreshold, Window: route.DefaultDigestWindow}
	if s, ok := m.o.Rules().Sink(name); ok && !s.Digest.Off {
		opt = s.Digest
	}
	w, err := m.loadWindow(name)
	if err != nil {
		return notify.DigestOutcome{}, notify.Result{Retry: true}, err
	}
	out := notify.DigestOutcome{Memory: make([]map[string]string, len(ds))}
	touched := map[string]*stored{}
	var order []string
	get := func(id string) (*stored, error) {
		if s := touched[id]; s != nil {
			return s, nil
		}
		s, err := m.loadDigest(name, id)
		if err != nil || s == nil {
			return nil, err
		}
		touched[id] = s
		order = append(order, id)
		return s, nil
	}
	for k := range ds {
		ev := ds[k].Event
		if ev.Data.Transition != event.Start {
			s, err := get(ds[k].Memory[memDigest])
			if err != nil {
				return notify.DigestOutcome{}, notify.Result{Retry: true}, err
			}
			if s == nil {
				continue // the digest was pruned: nothing to update
			}
			for i := range s.Digest.Items {
				it := &s.Digest.Items[i]
				if it.OriginID == ev.Data.OriginID && it.Outcome == "" {
					ended := notify.NewDigestItem(ev)
					it.Outcome, it.RecoveredAt = ended.Outcome, ended.RecoveredAt
				}
			}
			continue
		}
		if w.Open == "" || !now.Before(w.Until) {
			w.Seq++
			id := fmt.Sprintf("%s-%d", now.UTC().Format("20060102T150405Z"), w.Seq)
			w.Open, w.Until, w.Posts = id, now.Add(opt.Window), nil
			s := &stored{Digest: notify.Digest{ID: id, Opened: now, Until: w.Until, Threshold: opt.Threshold, Window: opt.Window}}
			touched[id] = s
			order = append(order, id)
			m.log.Info("alarm flood: a storm digest opens instead of one message per alarm", "sink", name, "digest", id,
				"threshold", opt.Threshold, "window", opt.Window)
		}
		s, err := get(w.Open)
		if err != nil || s == nil {
			return notify.DigestOutcome{}, notify.Result{Retry: true}, fmt.Errorf("manage: open digest %s of sink %q is missing: %v", w.Open, name, err)
		}
		if !slices.ContainsFunc(s.Digest.Items, func(it notify.DigestItem) bool { return it.OriginID == ev.Data.OriginID }) {
			s.Digest.Items = append(s.Digest.Items, notify.NewDigestItem(ev))
		}
		out.Memory[k] = map[string]string{memDigest: w.Open}
	}
	wkv, err := kvJSON(windowKey(name), w)
	if err != nil {
		return notify.DigestOutcome{}, notify.Result{}, err
	}
	for _, id := range order {
		s := touched[id]
		if res, err := m.show(ctx, name, dg, s, wkv); err != nil {
			return notify.DigestOutcome{}, res, err
		}
		kv, err := kvJSON(digestKey(name, id), s)
		if err != nil {
			return notify.DigestOutcome{}, notify.Result{}, err
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
func (m *Manager) show(ctx context.Context, sink string, dg notify.Digester, s *stored, wkv dedupe.KV) (notify.Result, error) {
	save := func(more ...dedupe.KV) error {
		kv, err := kvJSON(digestKey(sink, s.Digest.ID), s)
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
