package sinktype_test

import (
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/sinktype"
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
