package mqtt

import (
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/urlpath/urlpathtest"
)

func TestTopicTemplates(t *testing.T) {
	for _, bad := range []string{"", "$SYS/x", "a/+/b", "a/#", "/a", "a/", "a//b", "a/{nope}", "a/{tenant", "a/}"} {
		if _, err := CompileTopic(bad); err == nil {
			t.Errorf("CompileTopic(%q) accepted it", bad)
		}
	}
	top, err := CompileTopic(DefaultTopic)
	if err != nil {
		t.Fatal(err)
	}
	ev := event.Samples()[0]
	got, err := top.Render(&ev)
	if err != nil {
		t.Fatal(err)
	}
	if want := "energy/alarms/" + ev.Data.TenantID + "/" + ev.Data.StationID + "/" + "1" + "/" + string(ev.Data.Transition); ev.Data.Level == 1 && got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
	if strings.Count(got, "/") != strings.Count(DefaultTopic, "/") {
		t.Errorf("Render = %q: not as many levels as %s", got, DefaultTopic)
	}
}

// Every hostile identifier is one topic level, and different identifiers
// are different levels.
func TestEveryValueIsOneLevel(t *testing.T) {
	seen := map[string]string{}
	for _, id := range append(urlpathtest.Shapes(), "", "-", "%2D", "a\x00b", "+", "#", "a\nb", "$SYS", "x\u0085", "\ufffe") {
		l := Level(id)
		if strings.ContainsAny(l, "/+#\x00\n\u0085\ufffe") || strings.HasPrefix(l, "$") || l == "" {
			t.Errorf("Level(%q) = %q: not one topic level", id, l)
		}
		if other, dup := seen[l]; dup {
			t.Errorf("Level(%q) = Level(%q) = %q", id, other, l)
		}
		seen[l] = id
	}
}
