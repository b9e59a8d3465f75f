package deliver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
)

// mixGate decides on alarm a<n> by its number: the starts of every fifth
// are held until holdUntil, every seventh goes to the digest (which records
// its deliveries in sink), every eleventh is withheld.
type mixGate struct {
	mu        sync.Mutex
	holdUntil time.Time
	sink      *pipeSink
	run       bool
	suppr     []string
}

// num is the number of alarm a<n>.
func num(d *notify.Delivery) int { n, _ := strconv.Atoi(strings.TrimPrefix(d.OriginID, "a")); return n }

func (g *mixGate) Manages(string) bool { return true }
func (g *mixGate) of(d *notify.Delivery) deliver.Verdict {
	n := num(d)
	switch {
	case n%11 == 0:
		return deliver.Verdict{Suppress: "silence"}
	case n%5 == 0 && d.Event.Data.Transition == event.Start:
		return deliver.Verdict{Until: g.holdUntil}
	case n%7 == 0:
		return deliver.Verdict{Digest: true}
	}
	return deliver.Verdict{}
}
func (g *mixGate) Decide(_ context.Context, _ string, d *notify.Delivery) (deliver.Verdict, error) {
	return g.of(d), nil
}
func (g *mixGate) Digest(_ context.Context, _ notify.Sink, ds []notify.Delivery) (deliver.DigestOutcome, notify.Result, error) {
	s := g.sink
	s.mu.Lock()
	defer s.mu.Unlock()
	out := deliver.DigestOutcome{Memory: make([]map[string]string, len(ds))}
	for k, d := range ds {
		if s.seen[d.EventID] == nil {
			s.got = append(s.got, d.EventID)
		}
		s.seen[d.EventID] = d.Memory
		if d.Event.Data.Transition == event.Start {
			out.Memory[k] = map[string]string{"message": "msg-" + d.EventID}
		}
	}
	return out, notify.Result{}, nil
}

// mixRunGate is mixGate deciding on a run at once (a deliver.RunGate), up
// to its first entry that is not sent as it is.
type mixRunGate struct{ *mixGate }

func (g mixRunGate) DecideRun(_ context.Context, _ string, ds []*notify.Delivery) ([]deliver.Verdict, error) {
	var out []deliver.Verdict
	for _, d := range ds {
		v := g.of(d)
		out = append(out, v)
		if !v.Until.IsZero() || v.Suppress != "" || v.Digest {
			break
		}
	}
	return out, nil
}

// Pages bounded by bytes, with events of 100 KiB among small ones (a third
// of the alarms and a quarter of the rest), starts and ends interleaved in batches,
// starts held, digested and withheld, attempts failing, by a gate deciding
// one entry or a run at a time: every start and end that is not withheld
// goes out, each end after its start and with the memory its start left,
// and no run holds two entries of one alarm. Pages of 64 KiB take a single
// 100 KiB event alone; the unbounded case is the same work without the
// bound.
func TestPagesBoundedByBytesKeepEachAlarmsOrderAndMemory(t *testing.T) {
	const pageBytes = 64 << 10
	huge := strings.Repeat("x", 100<<10)
	for _, c := range []struct {
		name    string
		pageB   int
		runGate bool
		fail    float64
	}{
		{"bounded/gate", pageBytes, false, 0},
		{"bounded/rungate", pageBytes, true, 0},
		{"bounded/rungate/fail", pageBytes, true, 0.2},
		{"bounded/gate/fail", pageBytes, false, 0.2},
		{"unbounded/rungate/fail", 1 << 30, true, 0.2},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := delivertest.New(t, "pipe")
			occurred := f.Clock.Now().Add(-time.Minute)
			const n = 80
			rnd := rand.New(rand.NewPCG(7, 9))
			mk := func(i, status int) event.Alarm {
				var rec time.Time
				if status == event.StatusEnded {
					rec = f.Clock.Now()
				}
				a := delivertest.Alarm(fmt.Sprintf("a%02d", i), 1, status, occurred, rec)
				if i%3 == 0 || rnd.IntN(4) == 0 {
					a.Raw = json.RawMessage(`{"originId":"` + a.OriginID + `","pad":"` + huge + `"}`)
				}
				return a
			}
			// Ten starts a batch, each with the ends of the ten before.
			const chunk = 10
			for i := 0; i <= n; i += chunk {
				var batch []event.Alarm
				for j := i; j < min(i+chunk, n); j++ {
					batch = append(batch, mk(j, event.StatusOngoing))
				}
				for j := max(i-chunk, 0); j < i; j++ {
					batch = append(batch, mk(j, event.StatusEnded))
				}
				f.Apply(batch...)
			}
			sink := &pipeSink{seen: map[string]map[string]string{}, fail: c.fail, rnd: rand.New(rand.NewPCG(1, 2))}
			g := &mixGate{holdUntil: f.Clock.Now().Add(2 * time.Minute), sink: sink}
			var gate deliver.Gate = g
			if c.runGate {
				gate = mixRunGate{g}
			}
			_, stop := f.RunDeliverer(deliver.Options{Gate: gate, PageBytes: c.pageB, RunBatch: 8, Batch: 8,
				MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}, deliver.Target{Sink: sink, MaxAge: 24 * time.Hour})
			f.DriveUntil(1, f.Clock.Now().Add(time.Hour), func() bool { return len(f.Pending("pipe")) == 0 })
			stop()
			sink.mu.Lock()
			defer sink.mu.Unlock()
			if sink.err != nil {
				t.Fatal(sink.err)
			}
			at := map[string]int{}
			for k, id := range sink.got {
				at[id] = k
			}
			want := 0
			for i := range n {
				if i%11 == 0 {
					continue
				}
				want += 2
				start, end := fmt.Sprintf("a%02d:start", i), fmt.Sprintf("a%02d:end", i)
				ks, oks := at[start]
				ke, oke := at[end]
				if !oks || !oke {
					t.Errorf("%d: start delivered %v, end %v", i, oks, oke)
					continue
				}
				if ke < ks {
					t.Errorf("%s delivered before %s", end, start)
				}
				if got := sink.seen[end]["message"]; got != "msg-"+start {
					t.Errorf("%s carried memory %q, want msg-%s", end, got, start)
				}
			}
			if len(sink.got) != want {
				t.Errorf("delivered %d, want %d", len(sink.got), want)
			}
			dl := f.DeadLetters("pipe")
			t.Logf("%d delivered in %d runs, longest %d, largest %d bytes, %d dead letters, clock +%s", len(sink.got), sink.runs, sink.longest, sink.largest, len(dl), f.Clock.Now().Sub(delivertest.T0))
		})
	}
}
