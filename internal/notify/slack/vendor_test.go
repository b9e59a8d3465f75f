package slack_test

import (
	"testing"

	slackapi "github.com/slack-go/slack"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/notify/slack"
)

// TestDefaultAPIURLIsSlacksWebAPI: without RELAY_SLACK_API_URL a channel
// sink posts to Slack's Web API as slack-go publishes it (slack.APIURL),
// not to a host of our own spelling.
func TestDefaultAPIURLIsSlacksWebAPI(t *testing.T) {
	if slack.DefaultAPIURL != slackapi.APIURL {
		t.Errorf("DefaultAPIURL = %q, want slack-go's APIURL %q", slack.DefaultAPIURL, slackapi.APIURL)
	}
	rec, client := sinktest.NewRecorder(`{"ok":true,"channel":"C0ALERTS","ts":"1700000000.000100"}`)
	clk := clock.NewFake(sinktest.Epoch)
	deps := sinktype.Deps{Clock: clk, HTTP: client, Env: sinktype.Env{SlackToken: token}}
	s := sinktest.Build(t, slack.Type, "oncall", "channel: C0ALERTS\n", nil, deps)
	if _, err := sinktest.SendEvent(t, clk, s, sinktest.Event("a1", 0, event.Start), nil); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.First(t), slackapi.APIURL+"chat.postMessage"; got != want {
		t.Fatalf("the start went to %s, want %s", got, want)
	}
}
