package manage_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/manage"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/route"
	"github.com/relay-energy/relay/internal/store"
)

// TestDecideRunIsDecideOneAfterTheOther checks that deciding on a run at
// once gives the verdicts that deciding on its entries one by one gives,
// chattering included (the third start of a device and code within the run
// announces it, the later ones are withheld), up to the first entry withheld,
// where it stops; deciding on the rest one by one then leaves the same state.
func TestDecideRunIsDecideOneAfterTheOther(t *testing.T) {
	rules, err := route.Parse("rules.yaml", []byte(`
sinks:
  - name: hook
    type: webhook
    url: http://127.0.0.1:1/hook
routes:
  - name: all
    to: [hook]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	type setup struct {
		store *store.Store
		mgr   *manage.Manager
		ds    []*notify.Delivery
	}
	open := func(name string) setup {
		clk := clock.NewFake(t0)
		st, err := store.Open(filepath.Join(t.TempDir(), name+".db"), store.Options{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		mgr, err := manage.New(manage.Options{Store: st, Rules: func() *route.Rules { return rules }, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		var alarms []event.Alarm
		for i := range 6 {
			device := "INV-7"
			if i == 1 {
				device = "INV-8"
			}
			alarms = append(alarms, event.Alarm{OriginID: fmt.Sprintf("trip-%d", i), Status: event.StatusOngoing, Level: 1,
				EventCode: "E_TRIP", TenantID: "T1", StationID: "S1", DeviceSN: device, OccurredAt: t0.Add(time.Duration(i-10) * time.Minute)})
		}
		if _, err := st.Apply(context.Background(), store.Batch{Observed: alarms}, func(*event.Event) []string { return []string{"hook"} }); err != nil {
			t.Fatal(err)
		}
		es, err := st.Pending("hook", 10)
		if err != nil {
			t.Fatal(err)
		}
		var ds []*notify.Delivery
		for _, e := range es {
			ev, err := st.Event(e)
			if err != nil {
				t.Fatal(err)
			}
			d := deliver.DeliveryOf(e, ev, nil, 1)
			ds = append(ds, &d)
		}
		return setup{store: st, mgr: mgr, ds: ds}
	}

	one := open("one")
	var want []deliver.Verdict
	for _, d := range one.ds {
		v, err := one.mgr.Decide(context.Background(), "hook", d)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, v)
	}
	run := open("run")
	got, err := run.mgr.DecideRun(context.Background(), "hook", run.ds)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want[:5]) {
		t.Fatalf("DecideRun gave\n%+v\none by one\n%+v\nwant those up to the first withheld", got, want)
	}
	if want[3].Note == "" || want[4].Suppress != manage.ReasonChattering || want[1].Suppress != "" {
		t.Fatalf("verdicts %+v: want the 3rd start of INV-7 (entry 3) announced and the 4th withheld", want)
	}
	for _, d := range run.ds[5:] {
		if _, err := run.mgr.Decide(context.Background(), "hook", d); err != nil {
			t.Fatal(err)
		}
	}
	state := func(s setup) map[string]string {
		out := map[string]string{}
		if err := s.store.Scan("chatter", "", func(k string, v []byte) error { out[k] = string(v); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if a, b := state(one), state(run); !reflect.DeepEqual(a, b) || len(a) != 2 {
		t.Fatalf("chatter state after DecideRun\n%v\nafter Decide one by one\n%v\nwant the same, for 2 devices", b, a)
	}
	// Deciding again on the whole run (its delivery was cut) gives the
	// same verdicts, counts included.
	again, err := run.mgr.DecideRun(context.Background(), "hook", run.ds)
	if err != nil || !reflect.DeepEqual(again, want[:5]) {
		t.Fatalf("DecideRun again gave\n%+v, %v\nwant\n%+v", again, err, want[:5])
	}
}
