package slack_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/event"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/sinktype"
	"github.com/relay-energy/relay/internal/notify/slack"
)

const token = "xoxb-conformance-token-123"

// newAPI starts a fake Slack API that takes token and stamps its calls
// with clk.
func newAPI(t *testing.T, clk *clock.Fake) *notifytest.Slack {
	api := notifytest.NewSlack(t, token)
	api.Stamp(clk.Now)
	return api
}

// received is one text per message posted or updated, with its
// attachments, which name the alarm.
func received(api *notifytest.Slack) func() []string {
	return func() []string {
		var out []string
		for _, c := range api.Calls() {
			if c.Status != 200 || c.Error != "" || c.ThreadTS != "" {
				continue
			}
			out = append(out, c.Method+" "+c.Text+" "+attachments(c))
		}
		return out
	}
}

// all is one text per call the API took: messages, thread replies and
// updates, with their attachments.
func all(api *notifytest.Slack) func() []string {
	return func() []string {
		var out []string
		for _, c := range api.Calls() {
			if c.Status == 200 && c.Error == "" {
				out = append(out, c.Method+" "+c.Text+" "+attachments(c))
			}
		}
		return out
	}
}

func TestConformanceBotToken(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Type: slack.Type,
		Start: func(t *testing.T, clk *clock.Fake) sinktest.Vendor {
			api := newAPI(t, clk)
			base, _, _ := strings.Cut(strings.TrimSuffix(api.APIURL(), "/api/"), "/api")
			return sinktest.Vendor{
				URL:      base,
				Options:  func(string) (string, map[string]string) { return "channel: C0ALERTS\n", nil },
				Received: received(api),
				All:      all(api),
				Deps: func(d *sinktype.Deps, base string) {
					d.Env.SlackToken = token
					d.Env.SlackAPIURL = base + "/api/"
				},
				CheckPair: func(t *testing.T, start, end *event.Event) {
					var startTS string
					var updated, replied bool
					for _, c := range api.Calls() {
						switch {
						case c.Method == notifytest.MethodPostMessage && c.ThreadTS == "" && strings.Contains(attachments(c), start.Data.OriginID) && startTS == "":
							startTS = c.TS
						case c.Method == notifytest.MethodUpdate && c.TS == startTS && startTS != "":
							updated = true
						case c.Method == notifytest.MethodPostMessage && c.ThreadTS == startTS && startTS != "":
							replied = true
						}
					}
					if startTS == "" || !updated || !replied {
						t.Errorf("start ts %q, start updated %v, end replied in its thread %v", startTS, updated, replied)
					}
				},
			}
		},
	})
}

func attachments(c notifytest.SlackCall) string {
	b, _ := json.Marshal(c.Attachments)
	return string(b)
}

func TestConformanceIncomingWebhook(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		Type: slack.Type,
		Start: func(t *testing.T, clk *clock.Fake) sinktest.Vendor {
			api := newAPI(t, clk)
			hook := api.WebhookURL("HookSecretPath42")
			base := hook[:strings.Index(hook, "/services/")]
			return sinktest.Vendor{
				URL: base,
				Options: func(base string) (string, map[string]string) {
					return "webhook_url_env: SLACK_HOOK\n", map[string]string{"SLACK_HOOK": base + "/services/T000/B000/HookSecretPath42"}
				},
				Received: received(api),
			}
		},
	})
}
