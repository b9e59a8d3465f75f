package manage_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/notify/notifytest"
)

// TestAChatteringDeviceIsAnnouncedOnceWhenARestartCutsTheRunThatAnnouncedIt:
// twenty starts of one device and event code within a few minutes reach a
// webhook as one run; the webhook fails it and relay restarts before it is
// retried, so the starts are decided on again. The first three go out once
// each (the third is the announcement: a webhook gets the event's bytes, so
// TestDecideRunIsDecideOneAfterTheOther checks its note), the other
// seventeen are withheld once each, and the counts alarm management keeps
// are exact: the last withheld start is the twentieth, not the fortieth.
func TestAChatteringDeviceIsAnnouncedOnceWhenARestartCutsTheRunThatAnnouncedIt(t *testing.T) {
	hook := notifytest.NewReceiver(t, "")
	s := newScenarioRules(t, rulesHead+"  - name: hook\n    type: webhook\n    url: "+hook.URL()+"\n"+`
routes:`+busRoute+`
  - name: programs
    to: [hook]
`)
	hook.Down(notifytest.Answer{Status: http.StatusServiceUnavailable})
	var recs []record
	for i := 1; i <= 20; i++ {
		recs = append(recs, s.starts(fmt.Sprintf("trip-%02d", i), "S1", "INV-7", "E_TRIP", 1))
		s.clk.Set(s.clk.Now().Add(6 * time.Second))
	}
	s.apply(recs...)
	s.settle() // the run failed; its retry waits on the clock
	if len(hook.Requests()) == 0 || len(hook.Accepted()) != 0 {
		t.Fatalf("the webhook answered %d requests, accepted %d; want the run refused", len(hook.Requests()), len(hook.Accepted()))
	}
	s.restart()
	hook.Up()
	s.advance(time.Minute)

	var got []string
	for _, b := range hook.Accepted() {
		for i := 1; i <= 20; i++ {
			if id := fmt.Sprintf("trip-%02d:start", i); strings.Contains(string(b), `"id":"`+id+`"`) {
				got = append(got, id)
			}
		}
	}
	slices.Sort(got) // the webhook sends a run's requests side by side
	if want := []string{"trip-01:start", "trip-02:start", "trip-03:start"}; !slices.Equal(got, want) {
		t.Errorf("the webhook accepted %v, want %v: the first three once each", got, want)
	}
	var withheld []string
	for i := 4; i <= 20; i++ {
		withheld = append(withheld, fmt.Sprintf("trip-%02d:start: chattering", i))
	}
	if got := s.suppressed("hook"); !slices.Equal(got, withheld) {
		t.Errorf("withheld from the webhook: %v, want %v", got, withheld)
	}
	for _, c := range []struct {
		origin string
		count  int
	}{{"trip-04", 4}, {"trip-20", 20}} {
		mem, err := s.store.Memory("hook", c.origin)
		if err != nil {
			t.Fatal(err)
		}
		if why := mem["relay.why"]; !strings.HasPrefix(why, fmt.Sprintf("%d starts since ", c.count)) {
			t.Errorf("%s was withheld as %q, want %d starts since the first", c.origin, why, c.count)
		}
	}
}
