package teams_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/notify/teams"
)

// TestADigestCardListsWhatFitsAndLaterCardsTheRest: a digest of 100 alarms
// with long names is one card within MaxBody listing as many as fit behind
// its button; listing the digest as alarm management does (25 at a time)
// posts the others in later cards, so that each alarm is behind exactly one
// button.
func TestADigestCardListsWhatFitsAndLaterCardsTheRest(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	flow := notifytest.NewTeams(t, sig, clk.Now)
	d := build(t, "ops", clk, notify.NewLimits(clk), flow.URL(), "").(notify.Digester)
	dg := sinktest.DigestOf("big", 100, 5)
	for i := range dg.Items {
		dg.Items[i].StationName = strings.Repeat("Solar Park Nord ", 12)
	}
	mem, _, err := sinktest.PostDigest(t, clk, d, dg)
	if err != nil {
		t.Fatalf("PostDigest: %v", err)
	}
	shown, _ := strconv.Atoi(mem[sinktype.MemoryDigestShown])
	if shown <= 0 || shown >= 100 {
		t.Fatalf("the card lists %d of 100 alarms, want some but not all of these long ones", shown)
	}
	first := flow.Accepted()[0]
	if first.Size > teams.MaxBody || !strings.Contains(first.Text(), fmt.Sprintf("The first %d alarms", shown)) {
		t.Errorf("the card is %d bytes (max %d) and says:\n%s", first.Size, teams.MaxBody, first.Text())
	}
	for i := 0; i < 100; i += sinktype.DigestListSize {
		if _, err := sinktest.ListDigest(t, clk, d, dg, mem, dg.Items[i:i+sinktype.DigestListSize]); err != nil {
			t.Fatalf("ListDigest from %d: %v", i, err)
		}
	}
	cards := flow.Accepted()
	for _, it := range dg.Items {
		n := 0
		for _, c := range cards {
			n += strings.Count(c.Hidden(), it.DeviceName+",")
		}
		if n != 1 {
			t.Errorf("%s is behind %d buttons, want 1", it.DeviceName, n)
		}
	}
	// One later card per call of ListDigest holding an alarm past those the
	// first card lists.
	if want := 1 + 100/sinktype.DigestListSize - shown/sinktype.DigestListSize; len(cards) != want {
		t.Errorf("%d cards for 100 alarms, the first listing %d; want %d", len(cards), shown, want)
	}
}
