package ha_test

import (
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relay-energy/relay/internal/ha"
	"github.com/relay-energy/relay/internal/testwait"
)

const membersTTL = 2 * time.Second

func join(t *testing.T, nc *nats.Conn, id string) *ha.Members {
	t.Helper()
	m, err := ha.JoinMembers(ctxTimeout(t, 10*time.Second), newJS(t, nc), ha.MembersConfig{
		Bucket: "members", Replicas: 3, TTL: membersTTL, ID: id, Version: "test", Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Leave(ctxTimeout(t, time.Second)) })
	return m
}

func sees(m *ha.Members, want ...string) func() bool {
	return func() bool { return slices.Equal(m.Live(), want) }
}

// TestMembersSeeEachOtherJoinLeaveAndDie: every replica sees the others
// join; one that leaves is gone at once; one that dies without leaving is
// gone after its TTL, not before its last refresh is a TTL old.
func TestMembersSeeEachOtherJoinLeaveAndDie(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	a := join(t, c.Connect(), "a")
	b := join(t, c.Connect(), "b")
	cc := c.Connect()
	m3 := join(t, cc, "c")
	for _, m := range []*ha.Members{a, b, m3} {
		testwait.For(t, membersTTL, m.ID()+" does not see all three", sees(m, "a", "b", "c"))
	}

	left := time.Now()
	if err := b.Leave(ctxTimeout(t, 2*time.Second)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, membersTTL/2, "a replica that left is still counted half a TTL later", sees(a, "a", "c"))
	select {
	case <-a.Changed():
	default:
		t.Fatal("Changed did not signal the leave")
	}
	t.Logf("a leave was seen after %v", time.Since(left).Round(time.Millisecond))

	died := time.Now()
	cc.Close()
	testwait.For(t, 2*membersTTL, "a replica that died is still counted 2 × TTL later", sees(a, "a"))
	gone := time.Since(died)
	// Its last refresh came at most TTL/6 before it died.
	if gone < membersTTL-membersTTL/6-100*time.Millisecond {
		t.Fatalf("a replica that died was dropped %v after, before its last refresh was a TTL old", gone)
	}
	t.Logf("TTL %v: a death was seen after %v", membersTTL, gone.Round(time.Millisecond))
}

// TestMembersFollowTheBucketAfterAPartitionHeals: a replica cut off from NATS
// counts only itself once the others' refreshes stop reaching it; when the
// partition heals, it reconnects, refreshes its key again, and follows the
// bucket anew (a watcher may not resume after a reconnect): it sees a replica
// that joined meanwhile, and the others see it.
func TestMembersFollowTheBucketAfterAPartitionHeals(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	p := c.StartProxy(0)
	a := join(t, connectVia(t, p), "a")
	b := join(t, c.Connect(), "b")
	testwait.For(t, membersTTL, "a does not see b", sees(a, "a", "b"))

	p.Blackhole()
	testwait.For(t, 2*membersTTL, "a cut-off replica still counts the others 2 × TTL later", sees(a, "a"))
	testwait.For(t, 2*membersTTL, "the others still count a cut-off replica 2 × TTL later", sees(b, "b"))
	m3 := join(t, c.Connect(), "c")
	p.Heal()
	healed := time.Now()
	testwait.For(t, 3*membersTTL, "after the partition healed, a does not see b and c", sees(a, "a", "b", "c"))
	testwait.For(t, 3*membersTTL, "after the partition healed, the others do not see a", func() bool {
		return sees(b, "a", "b", "c")() && sees(m3, "a", "b", "c")()
	})
	t.Logf("TTL %v: every replica saw every other %v after the partition healed", membersTTL, time.Since(healed).Round(time.Millisecond))
}

// TestMembersFollowTheBucketWhenTheirWatcherIsLost: a watcher whose consumer
// vanished on the servers (as an ephemeral consumer does when its server
// restarts) stops delivering without an error; a replica notices that its own
// refreshes no longer come back and follows the bucket anew, so it sees a
// replica that joins afterwards within a TTL.
func TestMembersFollowTheBucketWhenTheirWatcherIsLost(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	nc := c.Connect()
	a := join(t, nc, "a")
	js := newJS(t, nc)
	stream, err := js.Stream(ctxTimeout(t, 5*time.Second), "KV_members")
	if err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for name := range stream.ListConsumers(ctxTimeout(t, 5*time.Second)).Info() {
		if err := stream.DeleteConsumer(ctxTimeout(t, 5*time.Second), name.Name); err != nil {
			t.Fatal(err)
		}
		deleted++
	}
	if deleted != 1 {
		t.Fatalf("deleted %d consumers, want the watcher's one", deleted)
	}
	joined := time.Now()
	join(t, c.Connect(), "b")
	testwait.For(t, membersTTL, "a replica whose watcher was lost does not see a new one a TTL later", sees(a, "a", "b"))
	t.Logf("TTL %v: seen %v after it joined", membersTTL, time.Since(joined).Round(time.Millisecond))
}
