package dingtalk_test

import (
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/notify/sinktest"
)

// TestADigestMentionsOnItsFirstMessageOnly: the digest's first message
// carries the sink's mentions, as an alarm's would; its lists, up to 25
// lines under the counts, mention no one.
func TestADigestMentionsOnItsFirstMessageOnly(t *testing.T) {
	r := kit.Rig(t, "at_mobiles: ['13800000000']\n")
	dg := sinktest.DigestOf("at", 30, 2)
	r.Digest(dg, sinktest.InLists(dg.Items)...)
	got := r.Fake.Accepted()
	if len(got) != 3 {
		t.Fatalf("%d messages, want the digest and two lists", len(got))
	}
	if at, _ := got[0].Body["at"].(map[string]any); at == nil || !strings.Contains(got[0].Text(), "@13800000000") {
		t.Errorf("the digest's first message mentions no one:\n%s", got[0].Text())
	}
	for i, m := range got[1:] {
		if _, ok := m.Body["at"]; ok || strings.Contains(m.Text(), "@13800000000") {
			t.Errorf("list %d mentions someone:\n%s", i, m.Text())
		}
		if lines := strings.Count(m.Text(), "\n- "); lines != []int{25, 5}[i] {
			t.Errorf("list %d has %d lines:\n%s", i, lines, m.Text())
		}
	}
}
