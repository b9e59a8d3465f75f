package poller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/store"
)

// levelRewriter is a transport that writes another event level into the
// getAlarmList records of chosen alarms, as an upstream that later changes
// an alarm's level would have served it before the change.
type levelRewriter struct {
	base http.RoundTripper

	mu     sync.Mutex
	levels map[string]int // originId to the level written into answers
}

func (r *levelRewriter) set(id string, level int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.levels[id] = level
}

func (r *levelRewriter) clear(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.levels, id)
}

func (r *levelRewriter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, "/getAlarmList") {
		return resp, err
	}
	r.mu.Lock()
	levels := make(map[string]int, len(r.levels))
	for id, l := range r.levels {
		levels[id] = l
	}
	r.mu.Unlock()
	if len(levels) == 0 {
		return resp, nil
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var env map[string]any
	if err := dec.Decode(&env); err != nil {
		return nil, fmt.Errorf("level rewriter: answer: %w", err)
	}
	if data, ok := env["data"].(map[string]any); ok {
		list, _ := data["dataList"].([]any)
		for _, item := range list {
			rec, _ := item.(map[string]any)
			if l, ok := levels[fmt.Sprint(rec["originId"])]; ok {
				rec["eventLevel"] = l
			}
		}
	}
	out, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("level rewriter: answer: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
	return resp, nil
}

// noInferred fails if any event so far is an inferred end.
func (h *harness) noInferred() {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.events {
		if e.Data.Inferred {
			h.t.Fatalf("inferred end %s for an alarm the upstream still has ongoing or ended for real", e.ID)
		}
	}
}

// ended reports whether an end (real or inferred) of id was produced.
func (h *harness) ended(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.events {
		if e.Data.OriginID == id && e.Data.Transition == event.End {
			return true
		}
	}
	return false
}

// TestKnownAlarmChangingLevelIsNotEnded: an ongoing alarm first served as
// level 2 moves to level 1 and a storm switches the poller to level-by-level
// snapshots. The alarm is then absent from every level-2 snapshot, its
// recovered record does not exist, and the confirm timeout is one slot: it
// must be tracked at its new level, never vanish, and never get an end.
func TestKnownAlarmChangingLevelIsNotEnded(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.confirm = 6 * time.Second // one slot: a single false vanish is inferred at once
	rw := &levelRewriter{base: http.DefaultTransport, levels: map[string]int{}}
	h.tap.base = rw
	h.open(store.BootstrapNotify)
	h.step()

	id := h.start(1, 0)
	rw.set(id, 2)
	h.step()
	h.expect(start(id))
	if l := h.p.knownAs(id).level; l != 2 {
		t.Fatalf("alarm tracked at level %d; want 2 as first served", l)
	}
	rw.clear(id) // the upstream now serves it as level 1
	storm := h.sim.Storm(700)
	h.until("a start for every alarm of the storm", 40, func() bool { return h.count() >= len(storm)+1 })
	level2 := 0
	for i := 0; level2 < 2; i++ {
		if i == 40 {
			t.Fatalf("fewer than two level-2 snapshots in 40 slots of level-by-level mode")
		}
		h.step()
		if h.p.vanished[id] != nil {
			t.Fatalf("the alarm vanished (last request: levels %v); it is ongoing at level 1", h.tap.last().Levels)
		}
		if isCurrentLevel(h.tap.last(), 2) {
			level2++
		}
	}
	if !h.p.levelMode {
		t.Fatalf("the poller left level-by-level mode with %d ongoing alarms", len(storm)+1)
	}
	if l := h.p.knownAs(id).level; l != 1 {
		t.Fatalf("alarm tracked at level %d; want 1, the level the upstream serves now", l)
	}
	h.noInferred()

	want := map[int]int{}
	for _, a := range h.sim.Ongoing() {
		want[a.Level]++
	}
	for l := range maxLevel + 1 {
		t.Run(fmt.Sprintf("ongoing gauge level %d", l), func(t *testing.T) {
			if got := testutil.ToFloat64(h.metrics.ongoing.WithLabelValues(strconv.Itoa(l))); got != float64(want[l]) {
				t.Fatalf("relay_alarms_ongoing{level=%d} = %v; want %d as the upstream has", l, got, want[l])
			}
		})
	}
}

// TestAlarmSlidingAcrossPageBoundaryIsNotEnded: between the two pages of a
// level snapshot one alarm of the first page ends and an older one starts,
// so total and the unique originIds stay equal while the record at the page
// boundary slides onto the page already read. That complete snapshot misses
// it: one miss, even confirmed and past the confirm timeout, infers nothing,
// and the next snapshot sees it again.
func TestAlarmSlidingAcrossPageBoundaryIsNotEnded(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.confirm = 6 * time.Second
	h.open(store.BootstrapNotify)
	h.step()

	const n = pageSize + 100
	devices := len(h.sim.Fleet().Devices)
	now := h.clk.Now()
	for i := range n {
		if _, err := h.sim.StartAlarm(sim.AlarmSpec{DeviceSN: h.device(i % devices), Level: 3,
			OccurredAt: now.Add(-time.Duration(i+1) * time.Minute)}); err != nil {
			t.Fatalf("start alarm: %v", err)
		}
	}
	h.until("a start for every alarm, level by level", 20, func() bool { return h.count() == n && h.p.levelMode })
	h.until("the first page of a level-3 snapshot", 20, func() bool {
		return h.p.cur != nil && h.p.cur.level == 3 && h.p.cur.read == 1
	})

	ongoing := h.sim.Ongoing() // newest first, the order of the pages
	first, boundary := ongoing[0].OriginID, ongoing[pageSize].OriginID
	h.end(first, h.clk.Now())
	late, err := h.sim.StartAlarm(sim.AlarmSpec{DeviceSN: h.device(0), Level: 3,
		OccurredAt: now.Add(-time.Duration(n+60) * time.Minute)})
	if err != nil {
		t.Fatalf("start alarm: %v", err)
	}
	h.step()
	v := h.p.vanished[boundary]
	if v == nil || v.misses != 1 {
		t.Fatalf("vanish of the slid record %+v; want one miss from the complete snapshot", v)
	}
	vanishedAt := v.at

	// Confirms of the slid alarm, retried every slot at so short a confirm
	// timeout, take most slots until the next level-3 snapshot.
	oneMissDue := false // a confirm answered in full and the timeout passed
	for i := 0; h.p.vanished[boundary] != nil; i++ {
		if i == 40 {
			t.Fatalf("the slid alarm was not seen again within 40 slots")
		}
		h.noInferred()
		v := h.p.vanished[boundary]
		oneMissDue = oneMissDue || v.looked && h.clk.Now().Sub(vanishedAt) >= h.confirm
		h.step()
	}
	if !oneMissDue {
		t.Fatalf("no confirm was answered past the confirm timeout while the slid alarm had one miss")
	}
	for i := 0; !h.ended(first); i++ {
		if i == 20 {
			t.Fatalf("no end for the alarm that ended within 20 slots")
		}
		h.step()
	}
	h.noInferred()
	if !h.p.known.has(boundary) {
		t.Fatalf("the slid alarm is no longer tracked as ongoing")
	}
	if !h.p.known.has(late) {
		t.Fatalf("the late alarm is not tracked as ongoing")
	}
}
