package manage

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/relay-energy/relay/internal/dedupe"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
)

// nsChatter holds chatterState by chatterKey.
const nsChatter = "chatter"

func chatterKey(sink string, d *event.Data) string {
	return sink + "\x00" + d.TenantID + "\x00" + d.DeviceSN + "\x00" + d.EventCode
}

// chatter decides on a start by the sink's history of its device and event
// code: the ChatterCount-th start within ChatterWindow goes out once,
// announced as chattering with its count; later starts are withheld until
// the device has been quiet for ChatterQuiet. A start without a device or
// code is never chattering.
func (m *Manager) chatter(sink string, ev *event.Event) (notify.Verdict, error) {
	d := &ev.Data
	if d.DeviceSN == "" || d.EventCode == "" {
		return notify.Verdict{}, nil
	}
	at, err := time.Parse(time.RFC3339Nano, d.OccurredAt)
	if err != nil {
		return notify.Verdict{}, nil
	}
	key := chatterKey(sink, d)
	raw, err := m.o.Store.Get(nsChatter, key)
	if err != nil {
		return notify.Verdict{}, err
	}
	var st chatterState
	if raw != nil {
		if err := json.Unmarshal(raw, &st); err != nil {
			m.log.Warn("a chatter history does not decode; starting it again", "sink", sink, "device", d.DeviceSN, "err", err)
			st = chatterState{}
		}
	}
	if n := len(st.Starts); n > 0 && !st.Since.IsZero() && at.Sub(st.Starts[n-1]) >= m.o.ChatterQuiet {
		st = chatterState{} // quiet long enough: back to normal
	}
	kept := st.Starts[:0]
	for _, t := range st.Starts {
		if at.Sub(t) < m.o.ChatterWindow {
			kept = append(kept, t)
		}
	}
	st.Starts = append(kept, at)
	if len(st.Starts) > 2*m.o.ChatterCount {
		st.Starts = st.Starts[len(st.Starts)-2*m.o.ChatterCount:]
	}
	var v notify.Verdict
	switch {
	case !st.Since.IsZero():
		st.Count++
		v = suppress(ReasonChattering, fmt.Sprintf("%d starts since %s", st.Count, st.Since.UTC().Format(time.RFC3339)))
	case len(st.Starts) >= m.o.ChatterCount:
		st.Since, st.Count = st.Starts[0], len(st.Starts)
		v.Note = fmt.Sprintf("Chattering, %d starts in %s", st.Count, humanWindow(at.Sub(st.Since)))
		m.log.Info("an alarm is chattering: announced once, further starts withheld until it is quiet",
			"sink", sink, "device", d.DeviceSN, "event_code", d.EventCode, "starts", st.Count, "quiet", m.o.ChatterQuiet)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return notify.Verdict{}, err
	}
	v.KV = []dedupe.KV{{NS: nsChatter, Key: key, Value: b}}
	return v, nil
}

// humanWindow words a short duration in whole minutes, or seconds under one.
func humanWindow(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	return fmt.Sprintf("%d min", int(d.Round(time.Minute)/time.Minute))
}
