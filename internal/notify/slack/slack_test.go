package slack_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/relay-energy/relay/internal/deliver"
	"github.com/relay-energy/relay/internal/deliver/delivertest"
	"github.com/relay-energy/relay/internal/notify/slack"

	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/store"
	"github.com/relay-energy/relay/internal/testwait"
)

const slackToken = "xoxb-test-token-0123456789"

func newSlack(t *testing.T, f *delivertest.Fixture, api *notifytest.Slack, cfg slack.Config) *slack.Sink {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "oncall"
	}
	if cfg.WebhookURL == "" {
		if cfg.Channel == "" {
			cfg.Channel = "C0123456789"
		}
		if cfg.Token == "" {
			cfg.Token = slackToken
		}
		cfg.APIURL = api.APIURL()
	}
	cfg.Clock = f.Clock
	cfg.Logger = slog.New(slog.DiscardHandler)
	s, err := slack.New(cfg)
	if err != nil {
		t.Fatalf("new slack sink: %v", err)
	}
	return s
}

// onCall makes a relay whose one sink is "oncall", and the fake Slack API
// that sink posts to.
func onCall(t *testing.T) (*delivertest.Fixture, *notifytest.Slack) {
	return delivertest.New(t, "oncall"), notifytest.NewSlack(t, slackToken)
}

// runOnCall runs f's deliverer with the sink "oncall" of newSlack's
// defaults posting to api; stop stops it.
func runOnCall(t *testing.T, f *delivertest.Fixture, api *notifytest.Slack) (stop func()) {
	t.Helper()
	_, stop = f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: newSlack(t, f, api, slack.Config{})})
	return stop
}

func TestSlackEndRepliesInThreadAndUpdatesTheStart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		word   string
		color  string
	}{
		{"end", event.StatusEnded, "Resolved", "#2eb886"},
		{"invalid", event.StatusInvalid, "Cancelled", "#8d8d8d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, api := onCall(t)
			runOnCall(t, f, api)
			start := f.Start("a1", 0)
			testwait.For(t, 5*time.Second, "the start", func() bool { return len(f.Pending("oncall")) == 0 })
			mem, err := f.Store.Memory("oncall", "a1")
			if err != nil || mem["ts"] == "" || mem["channel"] != "C0123456789" {
				t.Fatalf("memory of the start = %v, %v; want its ts and channel", mem, err)
			}

			f.Clock.Advance(65 * time.Minute)
			f.Finish("a1", 0, tc.status, delivertest.Occurred(t, start))
			testwait.For(t, 5*time.Second, "the "+tc.name, func() bool { return len(f.Pending("oncall")) == 0 })

			calls := api.Calls()
			var methods []string
			for _, c := range calls {
				methods = append(methods, c.Method)
			}
			if got := delivertest.Join(methods); got != "chat.postMessage chat.update chat.postMessage" {
				t.Fatalf("calls %q, want post, update, post", got)
			}
			if calls[1].TS != mem["ts"] || calls[1].Channel != mem["channel"] {
				t.Fatalf("update of %s/%s, want the start %s/%s", calls[1].Channel, calls[1].TS, mem["channel"], mem["ts"])
			}
			if calls[2].ThreadTS != mem["ts"] {
				t.Fatalf("%s posted with thread_ts %q, want the start's ts %q", tc.name, calls[2].ThreadTS, mem["ts"])
			}
			if !strings.Contains(calls[2].Text, tc.word) || !strings.Contains(calls[2].Text, "after 1h 6m") {
				t.Fatalf("thread reply %q, want %s and the duration", calls[2].Text, tc.word)
			}
			msg, ok := api.Message(mem["channel"], mem["ts"])
			if !ok || len(msg.Attachments) != 1 {
				t.Fatalf("start message = %+v, %v", msg, ok)
			}
			a := msg.Attachments[0]
			if a.Color != tc.color || !strings.HasPrefix(a.Title, tc.word+": E1023 Grid overvoltage") {
				t.Fatalf("updated start: colour %s title %q; want %s and %q", a.Color, a.Title, tc.color, tc.word)
			}
			if last := a.Fields[len(a.Fields)-1]; last.Title != tc.word || !strings.Contains(last.Value, "after 1h 6m") {
				t.Fatalf("updated start's last field %+v, want %s with the duration", last, tc.word)
			}
		})
	}
}

func TestSlackStartIsColouredByLevelAndPacedOnePerSecond(t *testing.T) {
	f, api := onCall(t)
	api.Stamp(f.Clock.Now)
	runOnCall(t, f, api)
	for level, origin := range []string{"a0", "a1", "a2", "a3"} {
		f.Start(origin, level)
	}
	f.DriveUntil(1, delivertest.T0.Add(time.Minute), func() bool { return len(f.Pending("oncall")) == 0 })

	calls := api.Calls()
	wantColors := []string{"#d40e0d", "#ff8c00", "#f2c744", "#2f7bed"}
	if len(calls) != len(wantColors) {
		t.Fatalf("%d calls, want %d", len(calls), len(wantColors))
	}
	for i, c := range calls {
		a := c.Attachments[0]
		if a.Color != wantColors[i] {
			t.Errorf("level %d: colour %s, want %s", i, a.Color, wantColors[i])
		}
		if want := delivertest.T0.Add(time.Duration(i) * time.Second); !c.At.Equal(want) {
			t.Errorf("message %d posted at %s, want %s (one per second)", i, c.At.Format(time.TimeOnly), want.Format(time.TimeOnly))
		}
		if a.Title != "E1023 Grid overvoltage" {
			t.Errorf("title %q, want what happened", a.Title)
		}
		fields := map[string]string{}
		for _, fl := range a.Fields {
			fields[fl.Title] = fl.Value
		}
		for title, want := range map[string]string{
			"Station": "Solar Park North (ST-1)",
			"Device":  "Inverter 42 (INV-0042)",
			"Since":   "2026-11-21 07:59:00 UTC",
			"Level":   event.LevelName(i),
		} {
			if fields[title] != want {
				t.Errorf("message %d field %s = %q, want %q", i, title, fields[title], want)
			}
		}
	}
}

func TestSlackThreadSurvivesARestart(t *testing.T) {
	f, api := onCall(t)
	stop := runOnCall(t, f, api)
	start := f.Start("a1", 1)
	testwait.For(t, 5*time.Second, "the start", func() bool { return len(f.Pending("oncall")) == 0 })
	stop()

	f.Reopen()
	runOnCall(t, f, api)
	f.Clock.Advance(10 * time.Minute)
	f.Finish("a1", 1, event.StatusEnded, delivertest.Occurred(t, start))
	testwait.For(t, 5*time.Second, "the end", func() bool { return len(f.Pending("oncall")) == 0 })

	calls := api.Calls()
	if len(calls) != 3 {
		t.Fatalf("%d calls, want 3", len(calls))
	}
	startTS := calls[0].TS
	if calls[1].Method != notifytest.MethodUpdate || calls[1].TS != startTS {
		t.Fatalf("after the restart: %s of %q, want chat.update of the start %q", calls[1].Method, calls[1].TS, startTS)
	}
	if calls[2].ThreadTS != startTS {
		t.Fatalf("after the restart the end has thread_ts %q, want the start's %q", calls[2].ThreadTS, startTS)
	}
}

func TestSlackRateLimitIsRetriedAfterRetryAfterNotBefore(t *testing.T) {
	f, api := onCall(t)
	api.Fail(notifytest.MethodPostMessage, notifytest.SlackFailure{Status: 429, RetryAfter: "2"})
	runOnCall(t, f, api)
	f.Start("a1", 0)
	testwait.For(t, 5*time.Second, "the rate-limited attempt", func() bool { return len(api.Calls()) == 1 })
	f.Settle(1)
	if next, _ := f.Clock.NextDeadline(); next.Sub(f.Clock.Now()) != 2*time.Second {
		t.Fatalf("next attempt in %s, want Retry-After's 2s", next.Sub(f.Clock.Now()))
	}
	f.Clock.Advance(1999 * time.Millisecond)
	f.Settle(1)
	if n := len(api.Calls()); n != 1 {
		t.Fatalf("%d calls 1.999s after a 429 with Retry-After: 2, want 1", n)
	}
	f.Clock.Advance(time.Millisecond)
	testwait.For(t, 5*time.Second, "the retry", func() bool { return len(f.Pending("oncall")) == 0 })
	if calls := api.Calls(); len(calls) != 2 || calls[1].Status != 200 || calls[1].Error != "" {
		t.Fatalf("calls %+v, want the retry to succeed", calls)
	}
}

func TestSlackErrorsAreClassified(t *testing.T) {
	for _, tc := range []struct {
		name    string
		failure notifytest.SlackFailure
		retried bool
	}{
		{"invalid_auth", notifytest.SlackFailure{Error: "invalid_auth"}, false},
		{"channel_not_found", notifytest.SlackFailure{Error: "channel_not_found"}, false},
		{"not_in_channel", notifytest.SlackFailure{Error: "not_in_channel"}, false},
		{"internal_error", notifytest.SlackFailure{Error: "internal_error"}, true},
		{"HTTP 503", notifytest.SlackFailure{Status: 503}, true},
		{"HTTP 429 without Retry-After", notifytest.SlackFailure{Status: 429}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, api := onCall(t)
			api.Fail(notifytest.MethodPostMessage, tc.failure)
			runOnCall(t, f, api)
			f.Start("a1", 0)
			f.DriveUntil(1, delivertest.T0.Add(time.Minute), func() bool { return len(f.Pending("oncall")) == 0 })
			dl := f.DeadLetters("oncall")
			if tc.retried {
				if len(dl) != 0 || len(api.Calls()) != 2 {
					t.Fatalf("dead letters %+v, %d calls; want a retry that succeeds", dl, len(api.Calls()))
				}
				return
			}
			if len(dl) != 1 || len(api.Calls()) != 1 {
				t.Fatalf("dead letters %+v, %d calls; want a dead letter after one call", dl, len(api.Calls()))
			}
			if !strings.Contains(dl[0].Reason, tc.failure.Error) {
				t.Fatalf("reason %q does not say %s", dl[0].Reason, tc.failure.Error)
			}
		})
	}
}

// TestADeadStartKeepsItsEndAndAReplaySendsThePairInOrder is sequence 1 of
// the delivery ledger's issue: a start refused for good becomes a dead
// letter; its alarm's end, which comes later, is parked beside it instead of
// being posted alone ("Resolved" of an alarm the channel never saw); a
// replay once the cause is fixed posts the start, then the end in its
// thread. A replay of the start alone is never possible.
func TestADeadStartKeepsItsEndAndAReplaySendsThePairInOrder(t *testing.T) {
	f, api := onCall(t)
	api.Fail(notifytest.MethodPostMessage, notifytest.SlackFailure{Error: "msg_too_long"})
	runOnCall(t, f, api)
	start := f.Start("a1", 2)
	f.DriveUntil(1, delivertest.T0.Add(time.Hour), func() bool { return len(f.DeadLetters("oncall")) == 1 })
	f.Clock.Advance(time.Minute)
	f.Finish("a1", 2, event.StatusEnded, delivertest.Occurred(t, start))
	f.DriveUntil(1, delivertest.T0.Add(time.Hour), func() bool { return len(f.DeadLetters("oncall")) == 2 })
	if calls := api.Calls(); len(calls) != 1 {
		t.Fatalf("%d calls, want only the refused start: the end must wait beside it", len(calls))
	}
	if dl := f.DeadLetters("oncall"); dl[1].EventID != "a1:end" || !strings.HasPrefix(dl[1].Reason, store.ParkedPrefix) {
		t.Fatalf("dead letters %+v, want a1's end parked beside its start", dl)
	}

	replayed, refused, err := f.Store.ReplayDeadLetters(store.DeadLetterFilter{EventID: "a1:start"})
	if err != nil || len(replayed) != 2 || len(refused) != 0 {
		t.Fatalf("replay of the start: %d replayed, refused %+v, %v; want the start with its end", len(replayed), refused, err)
	}
	f.DriveUntil(1, delivertest.T0.Add(2*time.Hour), func() bool { return len(f.Pending("oncall")) == 0 && len(api.Calls()) >= 4 })
	calls := api.Calls()
	if len(calls) != 4 {
		t.Fatalf("%d calls, want the refused start, then the start, its update and the end's reply", len(calls))
	}
	if calls[1].Method != notifytest.MethodPostMessage || calls[1].ThreadTS != "" {
		t.Fatalf("second call %+v, want the start posted", calls[1])
	}
	if up := calls[2]; up.Method != notifytest.MethodUpdate || up.TS == "" {
		t.Fatalf("third call %+v, want the start's message updated as resolved", up)
	}
	if reply := calls[3]; reply.Method != notifytest.MethodPostMessage || reply.ThreadTS == "" || !strings.Contains(reply.Text, "Resolved") {
		t.Fatalf("fourth call %+v, want the end as a reply in the start's thread", reply)
	}
}

func TestSlackStartThatCannotBeUpdatedStillGetsTheReply(t *testing.T) {
	f, api := onCall(t)
	api.Fail(notifytest.MethodUpdate, notifytest.SlackFailure{Error: "message_not_found"})
	runOnCall(t, f, api)
	start := f.Start("a1", 0)
	f.Clock.Advance(time.Minute)
	f.Finish("a1", 0, event.StatusEnded, delivertest.Occurred(t, start))
	f.DriveUntil(1, delivertest.T0.Add(time.Hour), func() bool { return len(f.Pending("oncall")) == 0 })
	calls := api.Calls()
	if len(calls) != 3 || calls[2].ThreadTS != calls[0].TS {
		t.Fatalf("calls %+v, want the reply in the thread after the failed update", calls)
	}
	if dl := f.DeadLetters("oncall"); len(dl) != 0 {
		t.Fatalf("dead letters %+v, want none", dl)
	}
}

func TestSlackReplyFailureRetriesWithoutPostingTwice(t *testing.T) {
	f, api := onCall(t)
	runOnCall(t, f, api)
	start := f.Start("a1", 0)
	testwait.For(t, 5*time.Second, "the start", func() bool { return len(f.Pending("oncall")) == 0 })
	api.Fail(notifytest.MethodPostMessage, notifytest.SlackFailure{Status: 500})
	f.Clock.Advance(time.Minute)
	f.Finish("a1", 0, event.StatusEnded, delivertest.Occurred(t, start))
	f.DriveUntil(1, delivertest.T0.Add(time.Hour), func() bool { return len(f.Pending("oncall")) == 0 })
	var replies int
	for _, c := range api.Calls() {
		if c.ThreadTS != "" && c.Status == 200 {
			replies++
		}
	}
	if replies != 1 {
		t.Fatalf("%d thread replies posted, want exactly 1", replies)
	}
}

func TestSlackIncomingWebhookPostsEachEventOnItsOwn(t *testing.T) {
	f := delivertest.New(t, "chat")
	api := notifytest.NewSlack(t, slackToken)
	api.Fail(notifytest.MethodWebhook, notifytest.SlackFailure{Status: 429, RetryAfter: "3"})
	api.Stamp(f.Clock.Now)
	sink := newSlack(t, f, api, slack.Config{Name: "chat", WebhookURL: api.WebhookURL("XXXXSECRETXXXX")})
	f.RunDeliverer(deliver.Options{}, deliver.Target{Sink: sink})
	start := f.Start("a1", 3)
	f.Finish("a1", 3, event.StatusEnded, delivertest.Occurred(t, start))
	f.DriveUntil(1, delivertest.T0.Add(time.Hour), func() bool { return len(f.Pending("chat")) == 0 })

	calls := api.Calls()
	if len(calls) != 3 {
		t.Fatalf("%d webhook calls, want 3 (429, start, end)", len(calls))
	}
	if !calls[1].At.Equal(delivertest.T0.Add(3 * time.Second)) {
		t.Fatalf("retry at %s, want after Retry-After: 3", calls[1].At)
	}
	if !strings.Contains(calls[1].Text, "MINOR alarm") || calls[1].Attachments[0].Color != "#2f7bed" {
		t.Fatalf("start %q, want a minor alarm in blue", calls[1].Text)
	}
	if !strings.Contains(calls[2].Text, "Resolved") {
		t.Fatalf("end %q, want it resolved", calls[2].Text)
	}
}

func TestNewSlackRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  slack.Config
		want string
	}{
		{"no channel", slack.Config{Name: "oncall", Token: slackToken}, "no channel and no webhook_url"},
		{"no token", slack.Config{Name: "oncall", Channel: "C1"}, "no bot token"},
		{"webhook not a URL", slack.Config{Name: "oncall", WebhookURL: "hooks.slack.com/services/x"}, "not an http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := slack.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
