package registry

import (
	"reflect"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/console"
	"github.com/relay-energy/relay/internal/notify/email"
	"github.com/relay-energy/relay/internal/notify/kafka"
	"github.com/relay-energy/relay/internal/notify/mqtt"
	"github.com/relay-energy/relay/internal/notify/nats"
	"github.com/relay-energy/relay/internal/notify/robot"
	"github.com/relay-energy/relay/internal/notify/slack"
	"github.com/relay-energy/relay/internal/notify/telegram"
	"github.com/relay-energy/relay/internal/notify/webhook"
)

// sinks are the Go types of the sinks each type builds.
var sinks = map[string]reflect.Type{
	nats.Type.Name:    reflect.TypeFor[*nats.Sink](),
	mqtt.Type.Name:    reflect.TypeFor[*mqtt.Sink](),
	kafka.Type.Name:   reflect.TypeFor[*kafka.Sink](),
	slack.Type.Name:   reflect.TypeFor[*slack.Sink](),
	webhook.Type.Name: reflect.TypeFor[*webhook.Sink](),
	console.Type.Name: reflect.TypeFor[*console.Sink](),
	// The sink types on internal/notify/robot build its Chat, or its Sink
	// for a vendor whose robot shows no digests and sends no reminders.
	"dingtalk":         reflect.TypeFor[*robot.Chat](),
	"feishu":           reflect.TypeFor[*robot.Chat](),
	"wecom":            reflect.TypeFor[*robot.Chat](),
	"teams":            reflect.TypeFor[*robot.Chat](),
	"pagerduty":        reflect.TypeFor[*robot.Sink](),
	telegram.Type.Name: reflect.TypeFor[*telegram.Sink](),
	email.Type.Name:    reflect.TypeFor[*email.Sink](),
}

// TestTheReadmeSaysWhichSinksShowStormDigests: docs/rules.md's table of how
// each sink shows a storm digest has a row per type, saying "no digest"
// exactly for the types whose sinks are no notify.Digester.
func TestTheReadmeSaysWhichSinksShowStormDigests(t *testing.T) {
	checkReadmeTable(t, "How each sink shows a storm digest:", "storm digests", "no digest", reflect.TypeFor[notify.Digester]())
}

// TestTheReadmeSaysWhichSinksSendReminders: docs/rules.md's table of where each
// sink puts a reminder has a row per type, saying "no reminder" exactly for
// the types whose sinks are no notify.Reminder.
func TestTheReadmeSaysWhichSinksSendReminders(t *testing.T) {
	checkReadmeTable(t, "Where each sink puts a reminder:", "reminders", "no reminder", reflect.TypeFor[notify.Reminder]())
}

// checkReadmeTable checks docs/rules.md's table after heading: a row per sink
// type, whose second cell starts with none exactly for the types whose sinks
// do not implement iface; what names the table in errors.
func checkReadmeTable(t *testing.T, heading, what, none string, iface reflect.Type) {
	t.Helper()
	readme := read(t, "../../../docs/rules.md")
	_, after, ok := strings.Cut(readme, heading)
	if !ok {
		t.Fatalf("docs/rules.md has no table after %q", heading)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(strings.TrimLeft(after, "\n "), "\n")[2:] {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) < 3 {
			break
		}
		rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(cells[2])
	}
	for _, typ := range Types() {
		goType, ok := sinks[typ.Name]
		if !ok {
			t.Errorf("sink type %s: add the Go type of its sink to sinks in this test", typ.Name)
			continue
		}
		row, ok := rows[typ.Name]
		if !ok {
			t.Errorf("docs/rules.md's table of %s has no row for %s", what, typ.Name)
			continue
		}
		if says, is := !strings.HasPrefix(row, none), goType.Implements(iface); says != is {
			t.Errorf("docs/rules.md's table of %s says %s has them: %v; its sink is a %s: %v", what, typ.Name, says, iface, is)
		}
	}
	if len(rows) != len(Types()) {
		t.Errorf("docs/rules.md's table of %s has %d rows for %d sink types: %v", what, len(rows), len(Types()), rows)
	}
}
