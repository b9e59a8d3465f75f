package manage

import (
	"fmt"
	"slices"

	"github.com/relay-energy/relay/internal/event"
)

// Reannounce puts back, at the end of their sinks' outboxes, the starts that
// the silences ids withheld and whose alarms are still ongoing: what a
// silence with notify_on_expire does when it ends. Each goes through alarm
// management again (another silence may hold it), and once it is out, its
// end follows it. It returns how many starts it put back.
func (m *Manager) Reannounce(ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	n := 0
	for _, s := range m.rules().Sinks {
		withheld, err := m.o.Store.Suppressed(s.Name)
		if err != nil {
			return n, err
		}
		done := map[string]bool{}
		for _, e := range withheld {
			if e.Reason != ReasonSilence || e.Transition != event.Start || done[e.OriginID] {
				continue
			}
			mem, err := m.o.Store.Memory(s.Name, e.OriginID)
			if err != nil {
				return n, err
			}
			if mem[memSuppressed] != ReasonSilence || !slices.Contains(ids, mem[memWhy]) {
				continue
			}
			queued, err := m.o.Store.EnqueueIfOngoing(s.Name, e.Entry)
			if err != nil {
				return n, fmt.Errorf("manage: announcing %s again to sink %q: %w", e.EventID, s.Name, err)
			}
			done[e.OriginID] = true
			if queued {
				n++
			}
		}
	}
	return n, nil
}
