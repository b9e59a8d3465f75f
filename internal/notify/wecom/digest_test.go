package wecom_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/wecom"
)

// TestADigestListOfLongNamesKeepsWithin4096BytesAndNamesEachDevice: 25
// alarms whose names are 255 bytes are one list message within WeCom's 4096
// bytes of markdown, each device still named by its start; the mentions go
// with the digest's first message only.
func TestADigestListOfLongNamesKeepsWithin4096BytesAndNamesEachDevice(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	robot := notifytest.NewWeCom(t, key, clk.Now)
	d := build(t, "ops", clk, notify.NewLimits(clk), robot.URL(), "mention_user_ids: [zhangsan]\n", nil).(notify.Digester)
	dg := sinktest.DigestOf("long", 25, 3)
	long := strings.Repeat("北", 85)
	for i := range dg.Items {
		it := &dg.Items[i]
		it.EventDesc, it.StationName, it.DeviceName = long, long, fmt.Sprintf("D%02d %s", i, long)
	}
	mem, _, err := sinktest.PostDigest(t, clk, d, dg)
	if err != nil {
		t.Fatalf("PostDigest: %v", err)
	}
	if _, err := sinktest.ListDigest(t, clk, d, dg, mem, dg.Items); err != nil {
		t.Fatalf("ListDigest: %v", err)
	}
	got := robot.Accepted()
	if len(got) != 2 {
		t.Fatalf("%d messages, want the digest and one list", len(got))
	}
	first, list := got[0].Content, got[1].Content
	if !strings.HasSuffix(first, "<@zhangsan>") || strings.Contains(list, "<@zhangsan>") {
		t.Errorf("the mentions are not on the digest's first message alone:\n%s\n---\n%s", first, list)
	}
	if len(list) > wecom.MaxContent {
		t.Errorf("the list is %d bytes", len(list))
	}
	for i := range dg.Items {
		if !strings.Contains(list, fmt.Sprintf("D%02d ", i)) {
			t.Errorf("the list does not name device D%02d:\n%s", i, list)
		}
	}
}
