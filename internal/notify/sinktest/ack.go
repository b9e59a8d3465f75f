package sinktest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/sinktype"
)

// AckCommand is the acknowledge command AckRendering puts in its events:
// what alarm management writes, with an alarm id and a placeholder that a
// channel's markup would read as syntax (emphasis, a link, a tag) unless
// the sink escapes them.
const AckCommand = "relay ack 'N_1*[x](y)&z' --by <you>"

// AckRendering renders, for each of cases (a sink's options and their
// environment), a start that people can acknowledge, whose
// event.Data.AckCommand is AckCommand, and its end, which carries the
// command too but must not show it; it compares the whole with
// testdata/ack.golden (go test -args -update-golden rewrites it), and
// checks that the start, and only the start, holds the acknowledge line.
// A sink without buttons shows the command as the last line of the start's
// message, escaped for its markup.
func AckRendering(t *testing.T, typ sinktype.Type, cases ...AckCase) {
	t.Helper()
	var b bytes.Buffer
	for _, c := range cases {
		cfg := Decode(t, typ, c.Options, c.Env)
		for _, tr := range []event.Transition{event.Start, event.End} {
			ev := Event("N_1*[x](y)&z", 1, tr)
			ev.Data.AckCommand = AckCommand
			reqs, err := cfg.Render(&ev)
			if err != nil {
				t.Fatalf("%s: render %s: %v", c.Name, tr, err)
			}
			var all []byte
			fmt.Fprintf(&b, "=== %s: %s\n", c.Name, tr)
			for _, r := range reqs {
				fmt.Fprintf(&b, "--- %s\n%s\n", r.What, bytes.TrimRight(r.Body, "\n"))
				all = append(all, r.Body...)
			}
			shown := bytes.Contains(all, []byte("To acknowledge: relay ack"))
			if shown != (tr == event.Start) {
				t.Errorf("%s: the %s shows the acknowledge line: %v, want %v", c.Name, tr, shown, tr == event.Start)
			}
		}
	}
	checkGolden(t, "ack.golden", b.String())
}

// AckCase is one sink's options for AckRendering.
type AckCase struct {
	Name    string
	Options string
	Env     map[string]string
}
