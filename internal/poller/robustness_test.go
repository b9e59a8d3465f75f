package poller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/store"
)

// oddRows is a transport under the harness's tap that edits every
// getAlarmList answer the way a faulty upstream could: it appends extra
// records, or lists the first record twice, with total raised to match, or
// raises total alone so that no snapshot can be complete.
type oddRows struct {
	base http.RoundTripper

	mu sync.Mutex
	// extra records are appended to every answer.
	extra []map[string]any
	// duplicate lists the answer's first record twice.
	duplicate bool
	// phantom raises total by one with no record to match.
	phantom bool
	// status, when set, replaces the status of these originIds in
	// isRecovery=false answers.
	status map[string]any
}

func (o *oddRows) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.base.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, "/getAlarmList") {
		return resp, err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	out, err := o.edit(raw)
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Length", fmt.Sprint(len(out)))
	return resp, nil
}

func (o *oddRows) edit(raw []byte) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var env map[string]any
	if err := dec.Decode(&env); err != nil {
		return nil, fmt.Errorf("oddRows: answer: %w", err)
	}
	data, ok := env["data"].(map[string]any)
	if !ok {
		return raw, nil // an error answer
	}
	list, _ := data["dataList"].([]any)
	total, err := data["total"].(json.Number).Int64()
	if err != nil {
		return nil, fmt.Errorf("oddRows: total: %w", err)
	}
	for _, item := range list {
		rec := item.(map[string]any)
		if s, ok := o.status[fmt.Sprint(rec["originId"])]; ok && fmt.Sprint(rec["status"]) == "1" {
			rec["status"] = s
		}
	}
	if o.duplicate && len(list) > 0 {
		list = append(list, list[0])
		total++
	}
	for _, x := range o.extra {
		list = append(list, x)
		total++
	}
	if o.phantom {
		total++
	}
	data["dataList"], data["total"] = list, total
	return json.Marshal(env)
}

// TestUnusableRowsDoNotStopSnapshotsOrSweeps checks that an alarm still ends,
// with its real recovery, and the sweep watermark still moves on, while the
// upstream lists records relay cannot use or the same alarm twice.
func TestUnusableRowsDoNotStopSnapshotsOrSweeps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		extra     map[string]any
		duplicate bool
	}{
		{name: "no originId", extra: map[string]any{"status": 1, "eventLevel": 0}},
		{name: "status outside 1, 0, -1", extra: map[string]any{"originId": "odd-1", "status": 7}},
		{name: "originId too long for the store", extra: map[string]any{"originId": strings.Repeat("x", 33<<10), "status": 1}},
		{name: "the same alarm listed twice", duplicate: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			odd := &oddRows{base: http.DefaultTransport, duplicate: tc.duplicate}
			if tc.extra != nil {
				odd.extra = []map[string]any{tc.extra}
			}
			h.tap.base = odd
			h.open(store.BootstrapNotify)
			h.step()
			id := h.start(0, 0)
			h.until("the start", 3, func() bool { return h.count() == 1 })
			recovered := h.clk.Now().Add(-time.Second)
			h.end(id, recovered)
			h.until("the end", 6, func() bool { return h.count() == 2 })
			h.expect(start(id), end(id))
			h.steps(8) // two sweeps
			if mark := h.p.sweepMark; !mark.After(t0) {
				t.Fatalf("sweep watermark %s: it did not move on from the first run %s", mark, t0)
			}
			h.expect(start(id), end(id))
		})
	}
}

// TestAlarmListedWithAnOddStatusDoesNotVanish checks that a known alarm whose
// record turns up with a status outside 1, 0 and -1 is still listed, so it
// gets no inferred end.
func TestAlarmListedWithAnOddStatusDoesNotVanish(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	odd := &oddRows{base: http.DefaultTransport}
	h.tap.base = odd
	h.open(store.BootstrapNotify)
	h.step()
	id := h.start(0, 0)
	h.until("the start", 3, func() bool { return h.count() == 1 })
	odd.mu.Lock()
	odd.status = map[string]any{id: 9}
	odd.mu.Unlock()
	h.steps(20) // twice the confirm timeout
	h.expect(start(id))
}

// TestRecordModeNotifiesNewAlarmsBeforeACompleteSnapshot checks that, while
// the bootstrap cannot complete, record mode stays silent only about the
// alarms of the first listing, which were ongoing when relay first looked.
func TestRecordModeNotifiesNewAlarmsBeforeACompleteSnapshot(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.tap.base = &oddRows{base: http.DefaultTransport, phantom: true}
	if _, err := h.sim.StartAlarm(sim.AlarmSpec{DeviceSN: h.device(0), OccurredAt: t0.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	h.open(store.BootstrapRecord)
	h.until("the first listing", 6, func() bool { return h.p.listed })
	h.expect()
	id := h.start(1, 1)
	h.until("the new alarm's start", 3, func() bool { return h.count() == 1 })
	h.expect(start(id))
	if h.store.Bootstrapped() {
		t.Fatalf("bootstrapped, though no snapshot could be complete")
	}
	h.steps(8)
	h.expect(start(id))
}

// TestAgedLookupAppliesOnlyTheAlarmsItAskedFor checks that the hourly lookup
// of an alarm older than the lookback, whose window reaches far back, does
// not announce other alarms of the same device.
func TestAgedLookupAppliesOnlyTheAlarmsItAskedFor(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.lookback = time.Minute
	h.open(store.BootstrapNotify)
	h.p.agedEvery = 2 * time.Minute
	h.step()
	id := h.start(0, 0)
	h.until("the start", 3, func() bool { return h.count() == 1 })
	occurred := time.UnixMilli(h.p.knownAs(id).occ)
	h.steps(15) // the alarm leaves the window
	if !h.p.loggedOutside(id) {
		t.Fatalf("the alarm should be known as outside the window")
	}
	// Another alarm of the same device, in the lookup's window but in no
	// current snapshot's or sweep's.
	other, err := h.sim.StartAlarm(sim.AlarmSpec{DeviceSN: h.device(0), OccurredAt: occurred.Add(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	h.end(other, h.clk.Now())
	h.end(id, h.clk.Now())
	h.until("the aged check finds the end", 25, func() bool { return h.count() >= 2 })
	h.steps(4)
	h.expect(start(id), end(id))
}
