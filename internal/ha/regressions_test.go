package ha_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/ha"
	"github.com/relay-energy/relay/internal/opendata"
)

// TestAReplicaBeforeBidsStillReadsTheGroupsStarts: while an egress group is
// upgraded (the shipped deployment rolls one pod at a time), a relay from
// before bids reads the budget key as a bare JSON array of epoch
// milliseconds; a value it cannot read fails its every reservation, and it
// then sends on its own budget of 10 a minute beside the group: the
// address exceeds the upstream's limit. So the key must stay that array
// while a request of a new replica waits with its bid, and after it took
// its slot.
func TestAReplicaBeforeBidsStillReadsTheGroupsStarts(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	nc := c.Connect()
	bidder := func(name string) *ha.Budget { return groupBidder(t, nc, name, "https://upstream.example") }
	reserve := func(b *ha.Budget, at time.Time, bid opendata.Bid) time.Duration {
		t.Helper()
		return reserveBid(t, b, at, bid)
	}
	calm, busy := bidder("calm"), bidder("busy")
	// A start long before makes the bucket.
	reserve(calm, epoch.Add(-time.Hour), opendata.Bid{})
	kv, err := newJS(t, nc).KeyValue(t.Context(), "budget")
	if err != nil {
		t.Fatal(err)
	}
	_, key, _ := strings.Cut(calm.String(), "/")
	// What a relay before bids does with the key's value.
	oldRead := func(when string, want int) {
		t.Helper()
		e, err := kv.Get(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		var ms []int64
		if err := json.Unmarshal(e.Value(), &ms); err != nil {
			t.Fatalf("%s, a relay before bids cannot read the group's starts %s: %v", when, e.Value(), err)
		}
		n := 0
		for _, m := range ms {
			if !time.UnixMilli(m).Add(61 * time.Second).Before(epoch.Add(30 * time.Second)) {
				n++
			}
		}
		if n < want {
			t.Fatalf("%s, a relay before bids reads %d starts in the window of %s; want %d", when, n, e.Value(), want)
		}
	}
	for range 10 {
		if w := reserve(calm, epoch, opendata.Bid{}); w != 0 {
			t.Fatalf("one of the first ten starts waits %s", w)
		}
	}
	oldRead("with ten starts", 10)
	if w := reserve(busy, epoch.Add(30*time.Second), opendata.Bid{Backlog: 50}); w == 0 {
		t.Fatal("a request while the budget is full does not wait")
	}
	oldRead("while a request waits with its bid", 10)
	if w := reserve(busy, epoch.Add(61*time.Second), opendata.Bid{Backlog: 50}); w != 0 {
		t.Fatalf("the busy tenant waits %s for the slot it bid for", w)
	}
	oldRead("after the bidder took its slot", 1)
}
