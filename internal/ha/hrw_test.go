package ha_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/relay-energy/relay/internal/ha"
)

func tenantIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("tenant-%04d", i)
	}
	return out
}

// TestOwnerIsTheSameForEveryReplicaAndEvenlySpread: the owner does not depend
// on the order a replica lists the members in, and 3,000 tenants spread over
// three replicas with ids alike give each about a third.
func TestOwnerIsTheSameForEveryReplicaAndEvenlySpread(t *testing.T) {
	t.Parallel()
	members := []string{"relay-0", "relay-1", "relay-2"}
	reversed := slices.Clone(members)
	slices.Reverse(reversed)
	count := map[string]int{}
	for _, tenant := range tenantIDs(3000) {
		o := ha.Owner(tenant, members)
		if o2 := ha.Owner(tenant, reversed); o2 != o {
			t.Fatalf("owner of %s is %s or %s depending on the order of the members", tenant, o, o2)
		}
		count[o]++
	}
	// A fair spread has a standard deviation of about 26 per member; 150 is
	// far outside chance.
	for _, m := range members {
		if count[m] < 850 || count[m] > 1150 {
			t.Fatalf("spread %v: want about 1,000 each", count)
		}
	}
	if got := ha.Owner("tenant", nil); got != "" {
		t.Fatalf("owner among no members = %q, want empty", got)
	}
}

// TestAMemberJoiningOrLeavingMovesOnlyItsTenants: when a replica joins, the
// only tenants that move go to it; when one leaves, only its tenants move.
func TestAMemberJoiningOrLeavingMovesOnlyItsTenants(t *testing.T) {
	t.Parallel()
	before := []string{"relay-a", "relay-b", "relay-c"}
	joined := append(slices.Clone(before), "relay-d")
	left := []string{"relay-a", "relay-c"}
	moved := 0
	for _, tenant := range tenantIDs(2000) {
		o := ha.Owner(tenant, before)
		if n := ha.Owner(tenant, joined); n != o {
			moved++
			if n != "relay-d" {
				t.Fatalf("%s moved from %s to %s when relay-d joined", tenant, o, n)
			}
		}
		if n := ha.Owner(tenant, left); n != o && o != "relay-b" {
			t.Fatalf("%s moved from %s to %s when relay-b left", tenant, o, n)
		}
	}
	if moved < 400 || moved > 600 {
		t.Fatalf("%d of 2,000 tenants moved to a fourth replica; want about 500", moved)
	}
}
