package ha_test

import (
	"sync"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/ha"
)

// TestReplicasStartedTogetherAllJoin: three replicas that start at once on a
// fresh cluster all create the lease and members buckets with the same
// configuration; the servers answer only one of such equal creations, and
// every replica must still open both buckets (rather than wait for an answer
// until its deadline and join seconds late).
func TestReplicasStartedTogetherAllJoin(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	ids := []string{"a", "b", "c"}
	errs := make([]error, len(ids))
	took := make([]time.Duration, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		js := newJS(t, c.Connect())
		wg.Go(func() {
			start := time.Now()
			ctx := ctxTimeout(t, 10*time.Second)
			if _, errs[i] = ha.OpenLeases(ctx, js, ha.LeaseConfig{Replicas: 3, TTL: assignTTL, Holder: id}); errs[i] != nil {
				return
			}
			m, err := ha.JoinMembers(ctx, js, ha.MembersConfig{Replicas: 3, TTL: assignTTL, ID: id})
			if errs[i] = err; err == nil {
				took[i] = time.Since(start)
				t.Cleanup(func() { _ = m.Leave(ctxTimeout(t, 2*time.Second)) })
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %s cannot join: %v", ids[i], err)
		}
	}
	t.Logf("joined after %v", took)
}
