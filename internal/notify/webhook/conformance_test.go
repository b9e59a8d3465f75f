package webhook_test

import (
	"strings"
	"testing"

	"github.com/relay-energy/relay/internal/clock"
	"github.com/relay-energy/relay/internal/notify/notifytest"
	"github.com/relay-energy/relay/internal/notify/sinktest"
	"github.com/relay-energy/relay/internal/notify/webhook"
)

func TestConformance(t *testing.T) {
	sinktest.Run(t, harness("/hook?token=QueryTokenValue99", nil))
}

// pathToken is the credential of a webhook URL that carries it in its
// path, as Discord's do: https://discord.com/api/webhooks/<id>/<token>.
const pathToken = "Zk3QmP0xVt9aLw2HcRn8YbUe5sJdK7fG"

// TestConformanceOfAURLWhosePathIsTheSecret runs the suite with a webhook
// URL whose path holds its credential: no error, log line or dead letter
// may show it. (On e932ec2 the sink named its target with the path in
// every error, and did not count the path as a secret.)
func TestConformanceOfAURLWhosePathIsTheSecret(t *testing.T) {
	sinktest.Run(t, harness("/api/webhooks/1187/"+pathToken, []string{pathToken}))
}

// harness is the suite's harness for a webhook posting to path (with its
// query) at the suite's base URL, secrets the values no text may show
// beyond those the sink declares.
func harness(path string, secrets []string) sinktest.Harness {
	return sinktest.Harness{
		Type: webhook.Type,
		Start: func(t *testing.T, clk *clock.Fake) sinktest.Vendor {
			const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
			recv := notifytest.NewReceiver(t, secret)
			recv.CheckTimestamps(clk.Now)
			base, _, _ := strings.Cut(strings.TrimPrefix(recv.URL(), "http://"), "/")
			return sinktest.Vendor{
				URL: "http://" + base,
				Options: func(base string) (string, map[string]string) {
					return "url: " + base + path + "\n" +
							"secret_env: HOOK_SECRET\nheaders:\n  Authorization: Bearer HeaderTokenValue77\n",
						map[string]string{"HOOK_SECRET": secret}
				},
				Secrets: secrets,
				Received: func() []string {
					var out []string
					for _, b := range recv.Accepted() {
						out = append(out, string(b))
					}
					return out
				},
			}
		},
	}
}
