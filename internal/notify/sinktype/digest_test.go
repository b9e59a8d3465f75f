package sinktype_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// TestDigestLinesCutNamesToFitAndKeepTheDevicesApart: a list of 25 alarms
// whose names are 256 bytes each fits a 4096-byte message, the descriptions
// and stations cut first, each device still told apart by its start.
func TestDigestLinesCutNamesToFitAndKeepTheDevicesApart(t *testing.T) {
	dg := sinktest.DigestOf("long", 25, 3)
	long := strings.Repeat("北", 85) // 255 bytes
	for i := range dg.Items {
		it := &dg.Items[i]
		it.EventDesc, it.StationName = long, long
		it.DeviceName = fmt.Sprintf("D%02d %s", i, long)
	}
	budget := func(lines []string) bool { return len(strings.Join(lines, "\n")) <= 4096 }
	lines := sinktype.DigestLines(dg.Items, func(s string) string { return s }, budget)
	if !budget(lines) {
		t.Fatalf("the lines take %d bytes, over 4096", len(strings.Join(lines, "\n")))
	}
	for i, l := range lines {
		if !strings.Contains(l, fmt.Sprintf("D%02d ", i)) {
			t.Errorf("line %d lost its device: %s", i, l)
		}
	}
	if short := sinktype.DigestLines(dg.Items[:1], func(s string) string { return s }, func([]string) bool { return true }); !strings.Contains(short[0], long) {
		t.Errorf("a line that fits was cut: %s", short[0])
	}
}

// TestDigestUnshownSkipsWhatTheFirstMessageShows: the alarms a digest's
// first message listed, still ongoing, are not listed again; those that
// joined after it, and those it listed that have ended since, are.
func TestDigestUnshownSkipsWhatTheFirstMessageShows(t *testing.T) {
	dg := sinktest.DigestOf("shown", 30, 3)
	mem := sinktype.DigestShown(30, map[string]string{"message_id": "42"})
	if mem["message_id"] != "42" || mem[sinktype.MemoryDigestShown] != "30" {
		t.Fatalf("memory %v", mem)
	}
	dg.Items = append(dg.Items, sinktest.DigestItem(30, 3), sinktest.DigestItem(31, 3))
	if got := sinktype.DigestUnshown(dg, mem, dg.Items[:25]); len(got) != 0 {
		t.Errorf("listed again what the first message shows: %v", origins(got))
	}
	if got := origins(sinktype.DigestUnshown(dg, mem, dg.Items[25:])); got != "dg0030 dg0031" {
		t.Errorf("of the alarms 25 to 31 listed %q, want those that joined later", got)
	}
	ended := sinktest.EndDigestItems(dg, 3, 31)
	if got := origins(sinktype.DigestUnshown(dg, mem, ended)); got != "dg0003 dg0031" {
		t.Errorf("of the ended listed %q, want both", got)
	}
	if got := sinktype.DigestUnshown(dg, map[string]string{"message_id": "42"}, dg.Items); len(got) != len(dg.Items) {
		t.Errorf("a first message that shows none: listed %d of %d", len(got), len(dg.Items))
	}
}

func origins(items []notify.DigestItem) string {
	var out []string
	for _, it := range items {
		out = append(out, it.OriginID)
	}
	return strings.Join(out, " ")
}

func TestDigestFitFindsTheMostThatFit(t *testing.T) {
	for _, c := range []struct{ n, limit, want int }{{100, 1000, 100}, {100, 37, 37}, {100, 0, 0}, {1, 1, 1}, {0, 5, 0}} {
		if got := sinktype.DigestFit(c.n, func(k int) bool { return k <= c.limit }); got != c.want {
			t.Errorf("DigestFit(%d) with %d fitting = %d, want %d", c.n, c.limit, got, c.want)
		}
	}
}

func TestDigestListHead(t *testing.T) {
	dg := sinktest.DigestOf("head", 3, 1)
	check := func(items []notify.DigestItem, want string) {
		t.Helper()
		if got := sinktype.DigestListHead(dg, items); got != want {
			t.Errorf("DigestListHead = %q, want %q", got, want)
		}
	}
	check(dg.Items, "3 alarms of this storm, ongoing")
	check(dg.Items[:1], "1 alarm of this storm, ongoing")
	check(sinktest.EndDigestItems(dg, 0, 1), "2 alarms of this storm ended")
	check(dg.Items, "3 alarms of this storm: 1 ongoing, 2 ended")
	dg.Title = "Daily summary: 3 alarms ongoing for more than 24 h (stale)"
	check(dg.Items, "3 alarms: 1 ongoing, 2 ended")
}

// TestADigestThatIsNoStormSaysNothingOfStorms: the daily summary, a digest
// with a title and no threshold, has its own headline, mark, and no word
// of per-alarm messages resuming.
func TestADigestThatIsNoStormSaysNothingOfStorms(t *testing.T) {
	dg := sinktest.DigestOf("storm", 3, 1)
	if sinktype.DigestIcon(dg) != "🚨" || !strings.Contains(sinktype.DigestResume(dg), "fewer than 10 alarms start in 10m") {
		t.Errorf("a storm: %q, %q", sinktype.DigestIcon(dg), sinktype.DigestResume(dg))
	}
	dg.Title, dg.Threshold, dg.Window = "Daily summary: 3 alarms ongoing for more than 24 h (stale)", 0, 0
	if sinktype.DigestTitle(dg) != dg.Title || sinktype.DigestIcon(dg) == "🚨" || sinktype.DigestResume(dg) != "" {
		t.Errorf("a summary: %q, %q, %q", sinktype.DigestTitle(dg), sinktype.DigestIcon(dg), sinktype.DigestResume(dg))
	}
}
