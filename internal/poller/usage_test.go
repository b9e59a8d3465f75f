package poller

import (
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/opendata/sim"
	"github.com/relay-energy/relay/internal/store"
)

// The System page reads how much of the upstream budget the poller used in
// the last minute, by query, and the last failure without the app secret.
func TestUsageCountsTheLastMinuteByQueryAndKeepsTheLastFailure(t *testing.T) {
	h := newHarness(t)
	h.open(store.BootstrapNotify)
	if u := h.p.Usage(); u.Limit != h.rate || len(u.ByQuery) != 0 || !u.LastSuccess.IsZero() || u.LastError != "" {
		t.Fatalf("usage before the first slot: %+v, want the limit %d and nothing used", u, h.rate)
	}
	h.steps(4)
	u := h.p.Usage()
	total := 0
	for _, q := range u.ByQuery {
		total += q.Requests
	}
	// A slot sends one request, or two when a query follows its current
	// read (pairing).
	if total < 4 || total > 8 || u.InUse < total || u.InUse > total+1 || u.LastSuccess.IsZero() {
		t.Fatalf("usage after 4 slots: %+v, want 4 to 8 queries by kind, as many requests in use (and the login), a last success", u)
	}
	if err := h.sim.InjectFault(sim.EndpointAlarmList, sim.Fault{Kind: sim.FaultServerError}); err != nil {
		t.Fatal(err)
	}
	h.step()
	u = h.p.Usage()
	_, secret := h.sim.Credentials()
	if u.LastFailure.IsZero() || !strings.Contains(u.LastError, "HTTP 503") || strings.Contains(u.LastError, secret) {
		t.Fatalf("usage after a 503: %+v, want the failure saying HTTP 503, without the app secret", u)
	}
	// A minute of slots later, the first four queries are no longer counted.
	h.steps(h.rate)
	total = 0
	for _, q := range h.p.Usage().ByQuery {
		total += q.Requests
	}
	if total > h.rate {
		t.Errorf("%d queries counted, want at most the last minute's %d", total, h.rate)
	}
}
