package ha_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/ha"
	"github.com/relay-energy/relay/internal/natstest"
	"github.com/relay-energy/relay/internal/testwait"
)

// The System page shows the live replicas and who holds which tenant's
// lease: each tenant by the one replica that serves it.
func TestViewShowsTheLiveReplicasAndTheLeaseHolders(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 1)
	tenants := []string{"t1", "t2", "t3", "t4"}
	assigners := map[string]*ha.Assigner{}
	for _, id := range []string{"relay-a", "relay-b"} {
		a, err := ha.NewAssigner(newJS(t, c.Connect()), ha.AssignerConfig{
			ReplicaID: id, TTL: assignTTL, Tenants: tenants, Logger: testLogger(t),
			Start: func(*ha.Lease) error { return nil }, Stop: func(*ha.Lease) {},
		})
		if err != nil {
			t.Fatal(err)
		}
		if v, err := a.View(t.Context()); err != nil || v.Joined || len(v.Live) != 0 {
			t.Fatalf("View before Run: %+v, %v; want not joined", v, err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		assigners[id] = a
	}
	var v ha.View
	testwait.For(t, 4*assignTTL, "every tenant held", func() bool {
		var err error
		v, err = assigners["relay-a"].View(t.Context())
		return err == nil && len(v.Holders) == len(tenants) && len(v.Live) == 2
	})
	if !v.Joined || !slices.Equal(v.Live, []string{"relay-a", "relay-b"}) {
		t.Fatalf("View: %+v, want both replicas live", v)
	}
	for i, h := range v.Holders {
		if h.Tenant != tenants[i] || h.Since.IsZero() || time.Since(h.Since) > time.Minute {
			t.Errorf("holder %d: %+v, want tenant %s with the time it was acquired", i, h, tenants[i])
		}
		if held := assigners[h.Replica]; held == nil || !slices.Contains(held.Held(), h.Tenant) {
			t.Errorf("the bucket says %s holds %s, but that replica does not serve it", h.Replica, h.Tenant)
		}
	}
}
