package wecom_test

import (
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/wecom"
)

// TestADigestListOfLongNamesKeepsWithin4096BytesAndNamesEachDevice: 25
// alarms whose names are 255 bytes are one list message within WeCom's 4096
// bytes of markdown, each device still named by its start; the mentions go
// with the digest's first message only.
func TestADigestListOfLongNamesKeepsWithin4096BytesAndNamesEachDevice(t *testing.T) {
	r := kit.Rig(t, "mention_user_ids: [zhangsan]\n")
	dg := sinktest.DigestOf("long", 25, 3)
	sinktest.LongNames(dg, strings.Repeat("北", 85))
	r.Digest(dg, dg.Items)
	got := r.Fake.Accepted()
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
	sinktest.AssertDevices(t, dg, list)
}
