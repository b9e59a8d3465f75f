package sim_test

import (
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/opendata/sim"
)

// TestHostLimitsRequestsPerAddressAcrossAccounts: two accounts of one
// upstream host each see their own alarms, and their requests from one
// address count against one limit of 10 a minute, as the spec says.
func TestHostLimitsRequestsPerAddressAcrossAccounts(t *testing.T) {
	clk := clock.NewFake(t0)
	a := sim.New(sim.Options{Seed: 1, AppID: "owner-a", RateLimit: -1, Clock: clk})
	b := sim.New(sim.Options{Seed: 2, AppID: "owner-b", RateLimit: -1, Clock: clk})
	host, err := sim.NewHost(sim.HostOptions{Clock: clk}, a, b)
	if err != nil {
		t.Fatal(err)
	}
	ha := &harness{t: t, srv: a, clk: clk, ip: "10.0.0.1", via: host}
	hb := &harness{t: t, srv: b, clk: clk, ip: "10.0.0.1", via: host}
	ha.token, hb.token = ha.login(), hb.login()
	ida := mustStart(t, a, sim.AlarmSpec{DeviceSN: a.Fleet().Devices[0].SN})
	idb := mustStart(t, b, sim.AlarmSpec{DeviceSN: b.Fleet().Devices[0].SN})
	for _, c := range []struct {
		h    *harness
		want string
	}{{ha, ida}, {hb, idb}} {
		_, recs := c.h.alarms(nil)
		if ids := originIDs(recs); len(ids) != 1 || ids[0] != c.want {
			t.Fatalf("an account lists %v; want only its own alarm %s", ids, c.want)
		}
	}
	// Two logins and two alarm reads so far: six more fit the minute.
	for i := range 6 {
		h := ha
		if i%2 == 1 {
			h = hb
		}
		if r := h.do(sim.EndpointAlarmList, map[string]any{"current": 1, "size": 1, "startTime": 0, "endTime": 1}); r.code() != sim.CodeSuccess {
			t.Fatalf("request %d of 10 in the minute refused: %s", i+5, r.raw)
		}
	}
	if r := hb.do(sim.EndpointAlarmList, map[string]any{"current": 1, "size": 1, "startTime": 0, "endTime": 1}); r.code() != sim.CodeRateLimited {
		t.Fatalf("the 11th request in a minute, of the other account: %s; want %s", r.raw, sim.CodeRateLimited)
	}
	if st := host.Stats(); st.Requests != 11 || st.Violations != 1 || host.MaxArrivals(60e9) != 11 {
		t.Fatalf("host stats %+v; want 11 requests, 1 violation", st)
	}
	if st := a.Stats(); st.Requests != 5 || st.Violations != 0 {
		t.Fatalf("account a counted %+v; want its 5 admitted requests", st)
	}
}

// TestHostRefusesAccountsItCannotTellApart: accounts that share an app id,
// or carry a limit of their own, are refused with the reason.
func TestHostRefusesAccountsItCannotTellApart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		accounts []*sim.Server
		want     string
	}{
		{"none", nil, "at least one account"},
		{"one app id twice", []*sim.Server{sim.New(sim.Options{AppID: "x", RateLimit: -1}), sim.New(sim.Options{AppID: "x", RateLimit: -1})}, `app id "x" names two accounts`},
		{"a limit of its own", []*sim.Server{sim.New(sim.Options{AppID: "x"})}, "has a rate limit of its own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := sim.NewHost(sim.HostOptions{}, tc.accounts...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewHost = %v; want an error saying %q", err, tc.want)
			}
		})
	}
}
