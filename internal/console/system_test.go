package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/console"
	"github.com/relay-energy/relay/internal/learn"
	"github.com/relay-energy/relay/internal/poller"
)

// system is a System with upstream and user text in every field a hostile
// upstream, rules file or sink answer could fill.
func system(hostile string) console.System {
	at := time.Now().Add(-5 * time.Minute)
	return console.System{
		Tenant:  "north",
		Tenants: []string{"north", "south" + hostile},
		Replicas: console.Replicas{Replicated: true, ID: "relay-0", Joined: true, Live: []string{"relay-0", "relay-1"},
			Leases: []console.Lease{{Tenant: "north", Replica: "relay-0", Since: at}, {Tenant: "south" + hostile, Replica: "relay-1", Since: at}}},
		Upstream: console.Upstream{Limit: 10, Effective: 5, InUse: 4, ByQuery: []poller.QueryCount{{Query: "current", Requests: 3}, {Query: "sweep", Requests: 1}},
			LastSuccess: at, LastFailure: at, LastError: "current query: opendata: HTTP 503 " + hostile},
		Learned: learn.Facts{
			OccurrenceOrder: learn.Fact{Name: learn.FactOccurrenceOrder, State: learn.Holds, Evidence: 21, Changed: at},
			RecoveryOrder:   learn.Fact{Name: learn.FactRecoveryOrder, State: learn.Refuted, Contradictions: 1, Changed: at},
			PageCapped:      learn.Fact{Name: learn.FactPageCapped, State: learn.Holds, Evidence: 1, Value: 100, Changed: at},
			Lateness:        learn.Lateness{Samples: 40, P50: 3 * time.Minute, P99: 6 * time.Minute, Max: 7 * time.Minute},
			Rates:           learn.Rates{StartsPerHour: 27.4, EndsPerHour: 25.04, Starts: 40, Ends: 36, Over: 90 * time.Minute},
		},
		Shared: console.SharedBudget{Tenants: 20, Schedule: "latency", Floor: 488 * time.Second, ReadBound: 854 * time.Second},
		Sinks: []console.Sink{
			{Name: "ops", Type: "webhook", Target: "https://hooks.example/ops?…", Depth: 2, DeadLetters: 1, Discarded: 7, LastDelivered: at,
				LastFailure: at, LastError: "HTTP 500: " + hostile},
			{Name: "bus", Type: "nats", Target: "alarms"},
		},
		Rules: console.Rules{Path: "/etc/relay/rules.yaml", Digest: "ab12cd", LoadedAt: at, ReloadError: "rules.yaml:3: " + hostile,
			ReloadFailedAt: at, Routes: 1, Sinks: 2, Silences: 0, Maintenance: 1,
			Table: []console.Route{{Name: "urgent", Match: "levels: [0] " + hostile, To: []string{"ops", "bus"}, Options: []string{"hold 30s"}}}},
	}
}

func TestSystemPageShowsTheProcessAndTheTenantToAViewer(t *testing.T) {
	const hostile = `<script>alert(1)</script>`
	s := newSite(t, console.Options{ViewToken: viewToken, AdminToken: adminToken,
		System: func(context.Context) console.System { return system(hostile) }}, false)
	for _, tc := range []struct{ name, token string }{{"viewer", viewToken}, {"admin", adminToken}} {
		t.Run(tc.name, func(t *testing.T) {
			c := s.browser()
			s.login(c, tc.token, "")
			resp, page := s.do(c, "GET", "/console/system", nil, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /console/system: %s\n%s", resp.Status, page)
			}
			if strings.Contains(page, "<script>") {
				t.Errorf("hostile text reached the page unescaped:\n%s", page)
			}
			for _, want := range []string{
				`<a href="/console/system" aria-current="page">System</a>`,
				`<a href="/tenants/north/console/" aria-current="page">north</a> (this console)`,
				`<a href="/tenants/south%3cscript%3ealert%281%29%3c/script%3e/console/">south&lt;script&gt;`,
				"Live replicas: relay-0, relay-1.",
				"relay-0 (this replica)",
				"4 of 5 requests used in the last minute (limit 10 a minute, lowered",
				"<td>current</td><td>3</td>",
				"<th scope=\"row\">" + learn.FactOccurrenceOrder + "</th><td>holds</td><td>21</td><td>0</td>",
				"<th scope=\"row\">" + learn.FactRecoveryOrder + "</th><td>refuted</td><td>0</td><td>1</td>",
				"<th scope=\"row\">" + learn.FactPageCapped + "</th><td>holds</td><td>1</td><td>0</td><td>100</td>",
				"3m0s after they occurred at the median, 6m0s at the 99th percentile, 7m0s at most (40 alarms)",
				"This account's alarms start about 27.4 times an hour and end 25.0 times an hour (40 starts and 36 ends detected over the last 1h30m0s",
				"shares the budget with 20 tenants of the same upstream host",
				"a tenant unread for 8m8s goes first: every tenant is read at least every 14m14s.",
				"HTTP 503 &lt;script&gt;",
				`<tr id="sink-ops" class="failing">`,
				"HTTP 500: &lt;script&gt;",
				"https://hooks.example/ops?…",
				"7 discarded at the limit since start",
				`<tr id="sink-bus">`,
				"<code>/etc/relay/rules.yaml</code>",
				`<code id="sys-digest">ab12cd</code>`,
				"<strong>refused</strong>",
				"rules.yaml:3: &lt;script&gt;",
				"1 route, 2 sinks, 0 active silences, 1 maintenance window",
				"<td>urgent</td><td><code>levels: [0] &lt;script&gt;",
				"<td>ops, bus</td><td>no</td><td>hold 30s</td>",
			} {
				if !strings.Contains(page, want) {
					t.Errorf("the page lacks %q:\n%s", want, page)
				}
			}
			// The page is read only: the only form is the logout.
			if n := strings.Count(page, "<form"); n != 1 || strings.Count(page, "<button") != 1 {
				t.Errorf("%d forms on the System page, want only the logout:\n%s", n, page)
			}
		})
	}
}

func TestSystemPageSaysStandaloneAndOneTenant(t *testing.T) {
	sys := system("")
	sys.Tenants, sys.Replicas, sys.Shared = nil, console.Replicas{}, console.SharedBudget{}
	s := newSite(t, console.Options{ViewToken: viewToken, System: func(context.Context) console.System { return sys }}, false)
	c := s.browser()
	s.login(c, viewToken, "")
	_, page := s.do(c, "GET", "/console/system", nil, nil)
	for _, want := range []string{"This process serves one tenant, <strong>north</strong>", `<p id="sys-standalone">Standalone`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "sys-leases") || strings.Contains(page, "/tenants/") || strings.Contains(page, "sys-shared") {
		t.Errorf("a standalone single-tenant page shows leases, tenant links or a shared budget:\n%s", page)
	}
	resp, _ := s.do(s.browser(), "GET", "/console/system", nil, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("GET /console/system without a session: %s, want 303 to the login form", resp.Status)
	}
}
