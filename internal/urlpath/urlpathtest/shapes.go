// Package urlpathtest holds the identifier shapes that the tests of every
// path naming an alarm, a station, a device, a sink or a silence are run
// with: the console's links and forms, the ops API and the CLI.
package urlpathtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/store"
)

// Plain is an ordinary id; several shapes are Plain with a suffix, so that
// an action that lands on the wrong alarm lands on Plain's.
const Plain = "A2"

// Shapes returns the hostile identifier shapes, each distinct, Plain
// first: what an upstream may send as an alarm's originId (up to 256
// bytes), a station's or device's id, and what a rule may name a sink.
func Shapes() []string {
	long := Plain + "/ack?x="
	long += strings.Repeat("z", 256-len(long))
	return []string{
		Plain,
		Plain + "/ack",           // another alarm's id with a suffix, and a slash
		Plain + "/ack?x=",        // the suffix retargets a form: ?x= swallows the rest
		Plain + "/shelve?",       // another action of another alarm
		Plain + "#frag",          // a fragment ends the path
		Plain + ":start",         // another alarm's event id: <originId>:<transition>
		"a?b=c&d=e",              // a query
		"../deadletters/x/1",     // climbs out of /alarms/
		"x/../" + Plain,          // climbs back to another id
		".",                      // exactly a dot: a ServeMux cleans it away
		"..",                     // exactly two dots
		"...",                    // three dots are a name
		"%2E",                    // what a path writes for "." to a ServeMux, as text
		"~.",                     // the console's Link marker before a dot, as text
		"~",                      // the marker alone
		"%2F",                    // an escape as text
		Plain + "%2Fack",         // an escaped slash as text
		"100%",                   // a lone percent sign
		"%zz",                    // a percent sign and no hex
		"with two  spaces",       // spaces
		" " + Plain + " ",        // spaces around Plain, which a trim makes Plain
		Plain + ",A3",            // a comma, which a list splits into Plain and A3
		Plain + "\\ack",          // a backslash, which browsers read as a slash
		"\u202e" + Plain + "kca", // bidi override (U+202E)
		"A\u200b2",               // zero-width space (U+200B), looks like Plain
		"<script>alert(1)</script>",
		`"quoted' &amp; <b>`,
		long, // 256 bytes, the upstream's longest
	}
}

// DeadAtOwnSinks applies alarms to st at now, each routed to the sink
// named by its own id, and makes each start a dead letter there: a store
// whose alarm ids, sink names and dead letters all carry the shapes.
func DeadAtOwnSinks(t testing.TB, st *store.Store, alarms []event.Alarm, now time.Time) {
	t.Helper()
	toOwnSink := func(ev *event.Event) []string { return []string{ev.Data.OriginID} }
	if _, err := st.Apply(context.Background(), store.Batch{Observed: alarms, DetectedAt: now}, toOwnSink); err != nil {
		t.Fatal(err)
	}
	for _, a := range alarms {
		es, err := st.Pending(a.OriginID, 10)
		if err != nil || len(es) != 1 {
			t.Fatalf("sink %q holds %d entries (%v), want its alarm's start", a.OriginID, len(es), err)
		}
		if err := st.DeadLetter(es[0], "refused for good: "+a.OriginID); err != nil {
			t.Fatal(err)
		}
	}
}
