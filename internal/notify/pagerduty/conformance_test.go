package pagerduty_test

import (
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/pagerduty"
	"github.com/relay-energy/relay/internal/notify/sinktest"
)

const routingKey = "R0ut1ngK3yOfTheConformanceSuite0"

// checkPair checks that the start and end of one alarm were exactly one
// trigger and then one resolve of its originId, which opened one incident
// and resolved it.
func checkPair(api *notifytest.PagerDuty) func(t *testing.T, start, end *event.Event) {
	return func(t *testing.T, start, end *event.Event) {
		t.Helper()
		key := start.Data.OriginID
		var actions []string
		for _, e := range api.Accepted() {
			if e.DedupKey == key {
				actions = append(actions, e.Action)
			}
		}
		if len(actions) != 2 || actions[0] != "trigger" || actions[1] != "resolve" {
			t.Errorf("events of dedup_key %s: %v, want one trigger then one resolve", key, actions)
		}
		var incidents []notifytest.PagerDutyIncident
		for _, in := range api.Incidents() {
			if in.DedupKey == key {
				incidents = append(incidents, in)
			}
		}
		if len(incidents) != 1 || !incidents[0].Resolved || incidents[0].Triggers != 1 {
			t.Errorf("incidents of %s: %+v, want one, opened once and resolved", key, incidents)
		}
	}
}

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Type: pagerduty.Type,
		Start: func(t *testing.T, clk *clock.Fake) sinktest.Vendor {
			api := notifytest.NewPagerDuty(t, clk.Now, routingKey)
			return sinktest.Vendor{
				URL: api.Base(),
				Options: func(base string) (string, map[string]string) {
					return "routing_key_env: PAGERDUTY_ROUTING_KEY\nurl: " + base + "/v2/enqueue\n",
						map[string]string{"PAGERDUTY_ROUTING_KEY": routingKey}
				},
				// One text per event the fake accepted: its action, key and
				// summary.
				Received:  func() []string { return sinktest.Texts(api.Accepted()) },
				CheckPair: checkPair(api),
			}
		},
	})
}
