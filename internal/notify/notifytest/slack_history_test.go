package notifytest_test

import (
	"testing"

	"github.com/slack-go/slack"

	"github.com/relay-energy/relay/internal/notify/notifytest"
)

// A channel that holds messages an earlier run posted: an update of one of
// them is found, and a message posted now gets a later ts than any of them,
// so that no two messages of the channel share a ts.
func TestSlackChannelKeepsMessagesPostedBeforeItStarted(t *testing.T) {
	fake := notifytest.NewSlack(t, "xoxb-test")
	fake.Posted(
		notifytest.SlackMessage{Channel: "C1", TS: "1700000000.000007", Text: "start A1"},
		notifytest.SlackMessage{Channel: "C1", TS: "1700000000.000003", Text: "start A2"},
	)
	api := slack.New("xoxb-test", slack.OptionAPIURL(fake.APIURL()))
	_, ts, err := api.PostMessage("C1", slack.MsgOptionText("start A3", false))
	if err != nil {
		t.Fatal(err)
	}
	if ts != "1700000000.000008" {
		t.Errorf("a message posted after the earlier ones got ts %s, want 1700000000.000008", ts)
	}
	if _, _, _, err := api.UpdateMessage("C1", "1700000000.000003", slack.MsgOptionText("start A2, updated", false)); err != nil {
		t.Fatalf("updating a message posted before the fake started: %v", err)
	}
	if m, _ := fake.Message("C1", "1700000000.000003"); m.Text != "start A2, updated" {
		t.Errorf("the earlier message reads %q after its update", m.Text)
	}
	if n := len(fake.Calls()); n != 2 {
		t.Errorf("%d calls recorded, want the post and the update only", n)
	}
}
