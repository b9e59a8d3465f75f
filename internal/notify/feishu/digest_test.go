package feishu_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/feishu"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// TestADigestCardListsWhatFitsAndLaterCardsTheRest: a digest of 100 alarms
// with long names is one signed card under the 20 KB cap listing as many as
// fit in its panel; listing the digest as alarm management does (25 at a
// time) posts the others in later cards, so that each alarm is in exactly
// one panel.
func TestADigestCardListsWhatFitsAndLaterCardsTheRest(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	bot := notifytest.NewFeishu(t, token, secret, clk.Now)
	text, env := botOptions(bot.URL(), secret, "")
	d := build(t, "ops", clk, notify.NewLimits(clk), text, env).(notify.Digester)
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
	first := bot.Accepted()[0]
	if first.Size > feishu.MaxBody || !strings.Contains(first.Text(), fmt.Sprintf("The first %d alarms", shown)) {
		t.Errorf("the card is %d bytes (max %d) and says:\n%s", first.Size, feishu.MaxBody, first.Text())
	}
	for i := 0; i < 100; i += sinktype.DigestListSize {
		if _, err := sinktest.ListDigest(t, clk, d, dg, mem, dg.Items[i:i+sinktype.DigestListSize]); err != nil {
			t.Fatalf("ListDigest from %d: %v", i, err)
		}
	}
	cards := bot.Accepted()
	for _, it := range dg.Items {
		n := 0
		for _, c := range cards {
			n += strings.Count(c.Panels(), it.DeviceName+",")
		}
		if n != 1 {
			t.Errorf("%s is in %d panels, want 1", it.DeviceName, n)
		}
	}
	if want := 1 + 100/sinktype.DigestListSize - shown/sinktype.DigestListSize; len(cards) != want {
		t.Errorf("%d cards for 100 alarms, the first listing %d; want %d", len(cards), shown, want)
	}
}
