package slack_test

import (
	"strings"
	"testing"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/notify/slack"
)

const appToken = "xapp-1-A0FAKE-0123456789-abcdefabcdef"

// buildSink builds the sink "oncall" as the service does, from its options
// and relay's settings, with or without the app-level token.
func buildSink(t *testing.T, clk *clock.Fake, api *notifytest.Slack, options, app string) notify.Sink {
	t.Helper()
	deps := sinktype.Deps{Clock: clk, Env: sinktype.Env{SlackToken: token, SlackAPIURL: api.APIURL(), SlackAppToken: app}}
	return sinktest.Build(t, slack.Type, "oncall", options, nil, deps)
}

// actionsOf returns the action ids of the buttons in the attachments after
// the first, and the text of their context lines.
func actionsOf(t *testing.T, atts []slackapi.Attachment) (ids []string, lines []string, buttons []*slackapi.ButtonBlockElement) {
	t.Helper()
	for _, a := range atts[1:] {
		for _, b := range a.Blocks.BlockSet {
			switch b := b.(type) {
			case *slackapi.ActionBlock:
				if b.BlockID != "relay/oncall" {
					t.Errorf("actions block_id %q, want relay/oncall (the sink's name, for the listener)", b.BlockID)
				}
				for _, e := range b.Elements.ElementSet {
					btn, ok := e.(*slackapi.ButtonBlockElement)
					if !ok {
						t.Fatalf("element %T, want buttons", e)
					}
					ids, buttons = append(ids, btn.ActionID), append(buttons, btn)
				}
			case *slackapi.ContextBlock:
				for _, e := range b.ContextElements.Elements {
					if txt, ok := e.(*slackapi.TextBlockObject); ok {
						lines = append(lines, txt.Text)
					}
				}
			default:
				t.Fatalf("block %T, want actions or context", b)
			}
		}
	}
	return ids, lines, buttons
}

func TestStartCarriesButtonsOnlyWithTheAppToken(t *testing.T) {
	start := sinktest.Event("a1", 0, event.Start)
	var plain []slackapi.Attachment
	for _, tc := range []struct {
		name, options, app string
		want               string
	}{
		{"bot token without app token", "channel: C0ALERTS\n", "", ""},
		{"bot token with app token", "channel: C0ALERTS\n", appToken, "relay.ack relay.shelve.1h relay.shelve.cleared"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(sinktest.Epoch)
			api := newAPI(t, clk)
			s := buildSink(t, clk, api, tc.options, tc.app)
			if _, err := sinktest.SendEvent(t, clk, s, start, nil); err != nil {
				t.Fatal(err)
			}
			c := api.Calls()[0]
			ids, _, buttons := actionsOf(t, c.Attachments)
			if got := strings.Join(ids, " "); got != tc.want {
				t.Fatalf("buttons %q, want %q", got, tc.want)
			}
			if tc.app == "" {
				if len(c.Attachments) != 1 {
					t.Fatalf("%d attachments without the app token, want the alarm's alone", len(c.Attachments))
				}
				plain = c.Attachments
				return
			}
			if a, b := attachments(notifytest.SlackCall{Attachments: c.Attachments[:1]}), attachments(notifytest.SlackCall{Attachments: plain}); plain != nil && a != b {
				t.Fatalf("the alarm's attachment changed with the app token:\n%s\n%s", a, b)
			}
			for _, b := range buttons {
				if b.Value != notify.AlarmRef("a1") {
					t.Errorf("button %s value %q, want the alarm's ref", b.ActionID, b.Value)
				}
			}
			if buttons[0].Style != slackapi.StylePrimary || buttons[0].Text.Text != "Acknowledge" {
				t.Errorf("first button %q style %q, want Acknowledge, primary", buttons[0].Text.Text, buttons[0].Style)
			}
			if ls, ok := s.(notify.Listener); !ok || !strings.HasPrefix(ls.ListenKey(), "slack-app:") || strings.Contains(ls.ListenKey(), appToken) {
				t.Fatalf("listen key %q, want slack-app: and a hash, never the token", ls.ListenKey())
			}
		})
	}
}

func TestIncomingWebhookHasNoButtonsAndListensToNothing(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	deps := sinktype.Deps{Clock: clk, Env: sinktype.Env{SlackAppToken: appToken}}
	s := sinktest.Build(t, slack.Type, "oncall", "webhook_url_env: HOOK\n", map[string]string{"HOOK": api.WebhookURL("HookSecret42")}, deps)
	if _, err := sinktest.SendEvent(t, clk, s, sinktest.Event("a1", 0, event.Start), nil); err != nil {
		t.Fatal(err)
	}
	if c := api.Calls()[0]; len(c.Attachments) != 1 || len(c.Attachments[0].Blocks.BlockSet) != 0 {
		t.Fatalf("webhook message %+v, want no buttons", c.Attachments)
	}
	if key := s.(notify.Listener).ListenKey(); key != "" {
		t.Fatalf("webhook sink listens to %q, want nothing", key)
	}
	if s.(notify.AckCarrier).CarriesAcks() {
		t.Fatal("a webhook sink cannot edit its messages, so it must not take acks")
	}
}

// ackEvent is the n-th ack or unack of alarm a1 by U1 at hh:mm.
func ackEvent(tr event.Transition, n int, hhmm, comment string) event.Event {
	at := "2026-11-21T" + hhmm + ":00.000Z"
	a := event.Alarm{OriginID: "a1", Status: event.StatusOngoing, Level: 0, EventCode: "E1023",
		EventDesc: "Grid overvoltage", StationID: "5001", DeviceSN: "SN0001", OccurredAt: sinktest.Epoch.Add(-17 * time.Minute)}
	return event.NewAck(a, tr, n, event.AckInfo{By: "U1", Name: "ana", Via: "slack", At: at, Comment: comment}, sinktest.Epoch)
}

func TestAckAndUnackEditTheStartAndTheEndKeepsTheAcknowledgement(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	s := buildSink(t, clk, api, "channel: C0ALERTS\n", appToken)
	if !s.(notify.AckCarrier).CarriesAcks() {
		t.Fatal("a bot-token sink must carry acks")
	}
	res, err := sinktest.SendEvent(t, clk, s, sinktest.Event("a1", 0, event.Start), nil)
	if err != nil {
		t.Fatal(err)
	}
	mem := res.Memory
	mem["relay.digest"] = "kept" // alarm management's marks live beside the sink's

	step := func(ev event.Event, wantLine, wantButtons string) {
		t.Helper()
		n := len(api.Calls())
		res, err := sinktest.SendEvent(t, clk, s, ev, mem)
		if err != nil {
			t.Fatal(err)
		}
		calls := api.Calls()[n:]
		if len(calls) != 1 || calls[0].Method != notifytest.MethodUpdate || calls[0].TS != mem[slack.MemoryTS] {
			t.Fatalf("%s: calls %+v, want one chat.update of the start", ev.ID, calls)
		}
		msg, _ := api.Message(mem[slack.MemoryChannel], mem[slack.MemoryTS])
		ids, lines, _ := actionsOf(t, msg.Attachments)
		if len(lines) != 1 || lines[0] != wantLine {
			t.Fatalf("%s: lines %q, want %q", ev.ID, lines, wantLine)
		}
		if got := strings.Join(ids, " "); got != wantButtons {
			t.Fatalf("%s: buttons %q, want %q", ev.ID, got, wantButtons)
		}
		if msg.Attachments[0].Title != "E1023 Grid overvoltage" || msg.Attachments[0].Color != "#d40e0d" {
			t.Fatalf("%s: the alarm's attachment became %+v, want the start's", ev.ID, msg.Attachments[0])
		}
		if res.Memory[slack.MemoryAck] != wantLine || res.Memory[slack.MemoryTS] != mem[slack.MemoryTS] || res.Memory["relay.digest"] != "kept" {
			t.Fatalf("%s: memory %v, want the line beside what was kept", ev.ID, res.Memory)
		}
		mem = res.Memory
	}
	step(ackEvent(event.Ack, 1, "08:02", "on it"), "Acknowledged by <@U1> at 08:02 UTC — on it", "relay.unack")
	step(ackEvent(event.Unack, 1, "08:05", ""), "Acknowledgement withdrawn by <@U1> at 08:05 UTC", "relay.ack relay.shelve.1h relay.shelve.cleared")
	step(ackEvent(event.Ack, 2, "08:07", "<b>mine</b>"), "Acknowledged by <@U1> at 08:07 UTC — &lt;b&gt;mine&lt;/b&gt;", "relay.unack")

	n := len(api.Calls())
	if _, err := sinktest.SendEvent(t, clk, s, sinktest.Event("a1", 0, event.End), mem); err != nil {
		t.Fatal(err)
	}
	calls := api.Calls()[n:]
	if len(calls) != 2 || calls[0].Method != notifytest.MethodUpdate || calls[1].ThreadTS != mem[slack.MemoryTS] {
		t.Fatalf("end: calls %+v, want the start updated and a reply in its thread", calls)
	}
	msg, _ := api.Message(mem[slack.MemoryChannel], mem[slack.MemoryTS])
	ids, lines, _ := actionsOf(t, msg.Attachments)
	if !strings.HasPrefix(msg.Attachments[0].Title, "Resolved: ") || len(ids) != 0 ||
		len(lines) != 1 || lines[0] != "Acknowledged by <@U1> at 08:07 UTC — &lt;b&gt;mine&lt;/b&gt;" {
		t.Fatalf("resolved start: title %q, buttons %q, lines %q; want resolved, no buttons, the acknowledgement kept",
			msg.Attachments[0].Title, ids, lines)
	}
}

func TestAckWithoutTheStartsMessageChangesNothing(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	s := buildSink(t, clk, api, "channel: C0ALERTS\n", appToken)
	res, err := sinktest.SendEvent(t, clk, s, ackEvent(event.Ack, 1, "08:02", ""), map[string]string{"relay.digest": "d1"})
	if err != nil || res.Memory != nil || len(api.Calls()) != 0 {
		t.Fatalf("ack of a digested alarm: %+v, %v, %d calls; want success doing nothing", res, err, len(api.Calls()))
	}
}

func TestAckOfAMessageGoneIsNotRetried(t *testing.T) {
	clk := clock.NewFake(sinktest.Epoch)
	api := newAPI(t, clk)
	s := buildSink(t, clk, api, "channel: C0ALERTS\n", appToken)
	api.Fail(notifytest.MethodUpdate, notifytest.SlackFailure{Error: "message_not_found"})
	mem := map[string]string{slack.MemoryTS: "1700000000.000001", slack.MemoryChannel: "C0ALERTS"}
	if _, err := sinktest.SendEvent(t, clk, s, ackEvent(event.Ack, 1, "08:02", ""), mem); err != nil {
		t.Fatalf("ack of a deleted message: %v, want it delivered (nothing left to edit)", err)
	}
	api.Fail(notifytest.MethodUpdate, notifytest.SlackFailure{Status: 503})
	res, err := sinktest.SendEvent(t, clk, s, ackEvent(event.Ack, 1, "08:02", ""), mem)
	if err == nil || !res.Retry {
		t.Fatalf("ack against a 503: %+v, %v; want a retry", res, err)
	}
}

func TestDigestCarriesAcknowledgeAll(t *testing.T) {
	for _, app := range []string{"", appToken} {
		clk := clock.NewFake(sinktest.Epoch)
		api := newAPI(t, clk)
		s := buildSink(t, clk, api, "channel: C0ALERTS\n", app)
		dg := sinktest.DigestOf("dg-7", 12, 3)
		if _, _, err := sinktest.PostDigest(t, clk, s.(notify.Digester), dg); err != nil {
			t.Fatal(err)
		}
		c := api.Calls()[0]
		ids, _, buttons := actionsOf(t, c.Attachments)
		if app == "" {
			if len(c.Attachments) != 1 {
				t.Fatalf("digest without the app token has %d attachments, want 1", len(c.Attachments))
			}
			continue
		}
		if len(ids) != 1 || ids[0] != slack.ActionAckDigest || buttons[0].Value != "dg-7" || buttons[0].Text.Text != "Acknowledge all" {
			t.Fatalf("digest buttons %q, want one Acknowledge all naming the digest", ids)
		}
	}
}

// Without buttons (no app token), a start people can acknowledge ends with
// the command that does it; with buttons it does not.
func TestStartWithoutButtonsSaysHowToAcknowledge(t *testing.T) {
	start := sinktest.Event("a1", 0, event.Start)
	start.Data.AckCommand = "relay ack a1 --by <you>"
	for _, app := range []string{"", appToken} {
		clk := clock.NewFake(sinktest.Epoch)
		api := newAPI(t, clk)
		s := buildSink(t, clk, api, "channel: C0ALERTS\n", app)
		if _, err := sinktest.SendEvent(t, clk, s, start, nil); err != nil {
			t.Fatal(err)
		}
		text := api.Calls()[0].Text
		if got := strings.HasSuffix(text, "To acknowledge: relay ack a1 --by &lt;you&gt;"); got != (app == "") {
			t.Fatalf("app token %v: text %q; want the command last only without buttons", app != "", text)
		}
	}
}
