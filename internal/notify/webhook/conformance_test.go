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
	sinktest.Run(t, sinktest.Harness{
		Type: webhook.Type,
		Start: func(t *testing.T, clk *clock.Fake) sinktest.Vendor {
			const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
			recv := notifytest.NewReceiver(t, secret)
			recv.CheckTimestamps(clk.Now)
			base, _, _ := strings.Cut(strings.TrimPrefix(recv.URL(), "http://"), "/")
			return sinktest.Vendor{
				URL: "http://" + base,
				Options: func(base string) (string, map[string]string) {
					return "url: " + base + "/hook?token=QueryTokenValue99\n" +
							"secret_env: HOOK_SECRET\nheaders:\n  Authorization: Bearer HeaderTokenValue77\n",
						map[string]string{"HOOK_SECRET": secret}
				},
				Received: func() []string {
					var out []string
					for _, b := range recv.Accepted() {
						out = append(out, string(b))
					}
					return out
				},
			}
		},
	})
}
