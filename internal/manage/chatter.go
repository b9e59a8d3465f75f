package manage

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/plant"
	"github.com/relay-energy/relay/internal/store"
)

// nsChatter holds chatterState by chatterKey.
const nsChatter = "chatter"

// chatterState is a sink's history of the starts of one device and event
// code.
type chatterState struct {
	// Starts are its latest starts within the window.
	Starts []chatterStart `json:"starts"`
	// Since is when it began chattering (zero: it is not), Count counts its
	// starts since, and Announcer is the alarm whose start announced it.
	Since     time.Time `json:"since,omitzero"`
	Count     int       `json:"count,omitempty"`
	Announcer string    `json:"announcer,omitempty"`
	// Note is the announcement as it was decided, so that deciding on its
	// start again announces the same count.
	Note string `json:"note,omitempty"`
}

// chatterStart is one start: when it occurred, its alarm, and what was
// decided: Sent, it goes out (before chattering began, or announcing it);
// else, while chattering, it was withheld as the N-th start since (N is 0
// in a history written by an earlier version: Count then stands for it).
type chatterStart struct {
	At     time.Time `json:"at"`
	Origin string    `json:"origin"`
	Sent   bool      `json:"sent,omitempty"`
	N      int       `json:"n,omitempty"`
}

func chatterKey(sink string, d *event.Data) string {
	return sink + "\x00" + d.TenantID + "\x00" + d.DeviceSN + "\x00" + d.EventCode
}

// chatter decides on a start by the sink's history of its device and event
// code: the ChatterCount-th start within ChatterWindow goes out once,
// announced as chattering with its count; later starts are withheld until
// the device has been quiet for ChatterQuiet. A start without a device or
// code is never chattering. The history is written at once, and a start
// decided on again (after a failed attempt, a run cut short or a restart
// before its entry was settled) counts once and gets the same verdict: sent
// as it was, announced with the same note, or withheld. The history keeps the
// latest 4×ChatterCount starts, which is enough: a delivery loop decides on
// no start past the first it withholds before that one is settled
// (DecideRun stops there), so the starts it may decide on again are among
// the latest few.
func (m *Manager) chatter(sink string, ev *event.Event, w *writes) (deliver.Verdict, error) {
	d := &ev.Data
	if d.DeviceSN == "" || d.EventCode == "" {
		return deliver.Verdict{}, nil
	}
	at, err := time.Parse(time.RFC3339Nano, d.OccurredAt)
	if err != nil {
		return deliver.Verdict{}, nil
	}
	key := chatterKey(sink, d)
	raw, err := w.get(m.o.Store, nsChatter, key)
	if err != nil {
		return deliver.Verdict{}, err
	}
	var st chatterState
	if raw != nil {
		if st, err = decodeChatter(raw); err != nil {
			m.log.Warn("a chatter history does not decode; starting it again", "sink", sink, "device", d.DeviceSN, "err", err)
			st = chatterState{}
		}
	}
	origin := d.OriginID
	if i := slices.IndexFunc(st.Starts, func(s chatterStart) bool { return s.Origin == origin }); i >= 0 {
		switch {
		case st.Announcer == origin:
			return m.announce(sink, d, &st, false), nil
		case st.Starts[i].Sent || st.Since.IsZero():
			return deliver.Verdict{}, nil
		default:
			return chattering(&st, cmp.Or(st.Starts[i].N, st.Count)), nil
		}
	}
	if n := len(st.Starts); n > 0 && !st.Since.IsZero() && at.Sub(st.Starts[n-1].At) >= m.o.ChatterQuiet {
		st = chatterState{} // quiet long enough: back to normal
	}
	kept := st.Starts[:0]
	for _, s := range st.Starts {
		if at.Sub(s.At) < m.o.ChatterWindow || !st.Since.IsZero() {
			kept = append(kept, s)
		}
	}
	st.Starts = append(kept, chatterStart{At: at, Origin: origin, Sent: true})
	var v deliver.Verdict
	switch {
	case !st.Since.IsZero():
		st.Count++
		st.Starts[len(st.Starts)-1].Sent, st.Starts[len(st.Starts)-1].N = false, st.Count
		v = chattering(&st, st.Count)
	case len(st.Starts) >= m.o.ChatterCount:
		st.Since, st.Count, st.Announcer = st.Starts[0].At, len(st.Starts), origin
		v = m.announce(sink, d, &st, true)
		if m.o.Plant.On(plant.ChatterUnannounced) {
			st.Announcer = ""
			st.Starts[len(st.Starts)-1].Sent, st.Starts[len(st.Starts)-1].N = false, st.Count
			v = chattering(&st, st.Count)
		}
	}
	if len(st.Starts) > 4*m.o.ChatterCount {
		st.Starts = st.Starts[len(st.Starts)-4*m.o.ChatterCount:]
	}
	return v, w.put(m.o.Store, store.KV{NS: nsChatter, Key: key, Value: encodeChatter(&st)})
}

// writes gathers what the decisions on the entries of a run write of their
// own (Manager.DecideRun), to write it once: each decision reads what the
// earlier ones wrote. A nil *writes writes at once.
type writes struct {
	kvs   []store.KV
	index map[[2]string]int
}

func (w *writes) get(s *store.Store, ns, key string) ([]byte, error) {
	if w != nil {
		if i, ok := w.index[[2]string{ns, key}]; ok {
			return w.kvs[i].Value, nil
		}
	}
	return s.Get(ns, key)
}

func (w *writes) put(s *store.Store, kv store.KV) error {
	if w == nil {
		return s.Put(kv)
	}
	if w.index == nil {
		w.index = make(map[[2]string]int)
	}
	k := [2]string{kv.NS, kv.Key}
	if i, ok := w.index[k]; ok {
		w.kvs[i] = kv
		return nil
	}
	w.index[k] = len(w.kvs)
	w.kvs = append(w.kvs, kv)
	return nil
}

// announce is the verdict of the start that announces chattering: on its
// first decision, the note is made from the starts so far and kept in st.
func (m *Manager) announce(sink string, d *event.Data, st *chatterState, first bool) deliver.Verdict {
	if !first && st.Note != "" {
		return deliver.Verdict{Note: st.Note}
	}
	last := st.Starts[len(st.Starts)-1].At
	for _, s := range st.Starts {
		if s.Origin == st.Announcer {
			last = s.At
		}
	}
	if first {
		m.log.Info("an alarm is chattering: announced once, further starts withheld until it is quiet",
			"sink", sink, "device", d.DeviceSN, "event_code", d.EventCode, "starts", st.Count, "quiet", m.o.ChatterQuiet)
	}
	st.Note = fmt.Sprintf("Chattering, %d starts in %s", st.Count, humanWindow(last.Sub(st.Since)))
	return deliver.Verdict{Note: st.Note}
}

// chattering is the verdict of the n-th start since its device began
// chattering, withheld.
func chattering(st *chatterState, n int) deliver.Verdict {
	return suppress(ReasonChattering, fmt.Sprintf("%d starts since %s", n, st.Since.UTC().Format(time.RFC3339)))
}

// humanWindow words a short duration in whole minutes, or seconds under one.
func humanWindow(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	return fmt.Sprintf("%d min", int(d.Round(time.Minute)/time.Minute))
}
