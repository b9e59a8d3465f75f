package feed_test

import (
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/feed"
	"github.com/relay-energy/relay/internal/route"
)

// Every event goes to the bus and to people; urgent and severe ones to ops
// after a 30 s hold.
const manageRulesYAML = `
sinks:
  - {name: bus, type: nats, jetstream: true}
  - {name: ops, type: webhook, url: "http://127.0.0.1:9/alarms"}
  - {name: people, type: console, digest: {threshold: 5, window: 1m}}
routes:
  - {name: all, to: [bus, people], continue: true}
  - {name: urgent, match: {levels: [0, 1]}, to: [ops], hold: 30s}
`

func newManagedFeed(t *testing.T) (*feed.Feed, *syncBuilder) {
	t.Helper()
	rules, err := route.Parse("rules.yaml", []byte(manageRulesYAML), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuilder{}
	return feed.New(out, feed.Options{Rules: rules, Clock: clock.NewFake(t0), Location: time.UTC, Wait: 10 * time.Second}), out
}

func suppressed(sink string, ev event.Event, reason string) deliver.Report {
	r := report(sink, ev, deliver.Suppressed, 0)
	r.Reason = reason
	return r
}

// A start held down does not hold its line back: the line marks it held,
// and so does its end's while the start waits. When the hold withholds both,
// one line says so; a start still ongoing after its hold gets a line saying
// it went out.
func TestHeldStartsGetALineWhenTheHoldIsOver(t *testing.T) {
	f, out := newManagedFeed(t)
	blip, blipEnd, lasting := start("a1", 0), end("a1", 0, 8*time.Second), start("a2", 1)
	f.Events([]event.Event{blip, lasting})
	for _, ev := range []event.Event{blip, lasting} {
		f.Report(report("bus", ev, deliver.Delivered, 1))
		f.Report(report("people", ev, deliver.Delivered, 1))
	}
	f.Events([]event.Event{blipEnd})
	f.Report(report("bus", blipEnd, deliver.Delivered, 1))
	f.Report(report("people", blipEnd, deliver.Delivered, 1))
	lines := []string{
		"08:00:00  START    urgent  Solar Park / INV-1  E1023 Grid overvoltage  → ✓ nats:bus ✓ console:people ⏸ webhook:ops (hold 30s)",
		"08:00:00  START    severe  Solar Park / INV-1  E1023 Grid overvoltage  → ✓ nats:bus ✓ console:people ⏸ webhook:ops (hold 30s)",
		"08:00:08  END      urgent  Solar Park / INV-1  E1023 Grid overvoltage  after 8s  → ✓ nats:bus ✓ console:people ⏸ webhook:ops (hold 30s)",
	}
	if got, want := out.String(), strings.Join(lines, "\n")+"\n"; got != want {
		t.Fatalf("feed before the hold is over\n got:\n%s\nwant:\n%s", got, want)
	}

	f.Report(suppressed("ops", blip, "hold"))
	f.Report(suppressed("ops", blipEnd, "hold"))
	f.Report(report("ops", lasting, deliver.Retrying, 1))
	f.Report(report("ops", lasting, deliver.Delivered, 2))
	lines = append(lines,
		"08:00:00  START    urgent  Solar Park / INV-1  E1023 Grid overvoltage  → ⊘ webhook:ops after its 30s hold: over within it, neither its start nor its end sent (hold)",
		"08:00:00  START    severe  Solar Park / INV-1  E1023 Grid overvoltage  → ✓ webhook:ops after its 30s hold: still ongoing, sent (2 attempts)",
	)
	if got, want := out.String(), strings.Join(lines, "\n")+"\n"; got != want {
		t.Fatalf("feed after the hold\n got:\n%s\nwant:\n%s", got, want)
	}
	f.Close()
	for _, want := range []string{
		"  SINK            DELIVERED  DIGESTED  WITHHELD  FAILED ATTEMPTS  DEAD LETTERS  NOT DELIVERED\n",
		"  webhook:ops             1         0         2                1             0              0\n",
		"  console:people          3         0         0                0             0              0\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

// A transition that alarm management withheld or put in a digest is marked
// so, with the reason it was withheld, and counted apart in the summary.
func TestWithheldAndDigestedAreMarked(t *testing.T) {
	f, out := newManagedFeed(t)
	silenced, digested := start("a1", 2), start("a2", 3)
	f.Events([]event.Event{silenced, digested})
	f.Report(report("bus", silenced, deliver.Delivered, 1))
	f.Report(suppressed("people", silenced, "silence"))
	f.Report(report("bus", digested, deliver.Delivered, 1))
	f.Report(report("people", digested, deliver.Digested, 1))
	f.Close()
	for _, want := range []string{
		"08:00:00  START    major   Solar Park / INV-1  E1023 Grid overvoltage  → ✓ nats:bus ⊘ console:people (silence)\n",
		"08:00:00  START    minor   Solar Park / INV-1  E1023 Grid overvoltage  → ✓ nats:bus ≡ console:people\n",
		"  console:people          0         1         1                0             0              0\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
