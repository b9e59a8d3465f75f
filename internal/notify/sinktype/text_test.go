package sinktype_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/rulefile"
	"gopkg.in/yaml.v3"
)

// TestHugeUpstreamValuesCannotCrowdOutTheAlarmsFacts: a description or name
// of many kilobytes is cut in the default texts, so that a message a vendor
// limits to a few kilobytes still ends with the alarm's id and outcome.
func TestHugeUpstreamValuesCannotCrowdOutTheAlarmsFacts(t *testing.T) {
	ev := event.Samples()[1]
	huge := strings.Repeat("描述", 10000)
	ev.Data.EventDesc, ev.Data.StationName, ev.Data.DeviceName = huge, huge, huge
	headline := sinktype.Headline(&ev)
	if len(headline) > 4*sinktype.MaxValue {
		t.Errorf("headline of %d bytes", len(headline))
	}
	total := 0
	for _, f := range sinktype.Fields(&ev) {
		total += len(f[0]) + len(f[1])
	}
	if total > 8*sinktype.MaxValue {
		t.Errorf("facts of %d bytes", total)
	}
	fields := sinktype.Fields(&ev)
	if fields[4] != [2]string{"Alarm", ev.Data.OriginID} || fields[5][0] != "Resolved" {
		t.Errorf("facts = %q", fields)
	}
}

// A note of alarm management leads a templated title, as it leads the
// default one.
func TestNoteLeadsATemplatedTitle(t *testing.T) {
	r := rulefile.NewReader("rules.yaml", nil, 1000)
	var root yaml.Node
	if err := yaml.Unmarshal([]byte("title: \"{{.EventCode}} at {{.StationID}}\"\n"), &root); err != nil {
		t.Fatal(err)
	}
	pairs, ok := r.Mapping(root.Content[0], "sinks[0]", []string{"title"})
	if !ok {
		t.Fatal(r.Err())
	}
	m := sinktype.NewDecoder(r, "sinks[0]", 1, pairs).Message(strings.ToUpper)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	ev := event.Samples()[0]
	ev.Data.Note = "Reminder, ongoing for 4h"
	txt, err := m.Render(&ev, sinktype.Text{Title: "default", Body: "body"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "REMINDER, ONGOING FOR 4H: "; !strings.HasPrefix(txt.Title, want) || !strings.Contains(txt.Title, ev.Data.EventCode) {
		t.Errorf("title %q, want the escaped note first, then the template's text", txt.Title)
	}
}

// TestFitTextCutsAsLittleAsTheBodyAllows: a text whose JSON is twice its
// length (quotes) is cut to the most that keeps the body within the limit;
// a text that fits is left whole.
func TestFitTextCutsAsLittleAsTheBodyAllows(t *testing.T) {
	for _, c := range []struct {
		text  string
		limit int
		want  string
	}{
		{"short", 100, "short"},
		{strings.Repeat(`"`, 100), 60, strings.Repeat(`"`, 27) + "…"},
	} {
		text := c.text
		sinktype.FitText(&text, c.limit, func() ([]byte, error) { return json.Marshal(text) })
		if text != c.want {
			t.Errorf("FitText(%d bytes, %d) = %q, want %q", len(c.text), c.limit, text, c.want)
		}
	}
}
